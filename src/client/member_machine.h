// The client's decisions for one member (this process's shard of one replica of one model),
// as a pure state machine like sched/: events in, actions out. No I/O, no clocks, no threads:
// what to ask the registry, what to do with a grant, a finished or failed transfer, a lost
// registry, a re-publish after failover, a retention order. src/client/model_core.cc carries out
// the actions (registry messages, transfers, the holding's counter, copies) and feeds back
// what happened; the deterministic simulation (tests/sched/) runs this same machine against
// the real registry core.
//
// Operations (THUB_Open/Publish/Replicate/Update/Unpublish/Close) come one at a time per
// member and end with exactly one CompleteOp. Registry requests carry request ids the
// machine chooses (unique per machine; the driver maps them to the connection).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "sched/types.h"
#include "src/common/status.h"

namespace thub::client {

struct MemberIdentity {
  std::string model, replica;
  int shard = 0, num_shards = 1;
  int retain = 0;
  bool spot = false;
  // A seed buffer of offload seeding (issue 22 item 3): its replicates are seed-only
  // (sched::Replicate::seed_only).
  bool seed = false;
};

// ---- events (in) ------------------------------------------------------------------------

// `generation`: the registry connection's generation when the open is made (requests carry
// it, so that none with this registry's member id reaches a later one).
struct OpOpen {
  uint64_t op;
  uint64_t generation = 0;
  bool gone = false;         // every registry is gone (the connection's kGone, no kBack since)
  std::string gone_detail{};  // why
};
struct OpPublish { uint64_t op; int64_t version; };
// THUB_Replicate (update=false) or THUB_Update (update=true).
struct OpReplicate { uint64_t op; int64_t spec; bool update; };
// The driver's answer to PrepareHolding / PrepareFill: how peers will read us (for a fill:
// the descriptor promising fill `fill`, under which we serve as a partial source).
struct Prepared { uint64_t op; uint64_t layout_hash; std::string descriptor; uint32_t fill; };
struct PrepareFailed { uint64_t op; Code code; std::string detail; };
struct OpUnpublish { uint64_t op; };
struct OpClose { uint64_t op; };
// THUB_Cancel: the operation ends as THUB_ERR_CANCELED if it has not taken effect yet.
struct OpCancel { uint64_t op; };

struct RegistryReply { uint64_t req; sched::Reply reply; };
// A request got no reply: the connection was lost (kRegistry), a deadline passed (kTimeout)
// or the request was refused before it left (kArg).
struct RegistryNoReply { uint64_t req; Code code; std::string detail; };
struct RegistryLost {};                          // reconnection under way
struct RegistryBack { uint64_t generation; };    // a registry answers again (it knows nothing of us)
struct RegistryGone { std::string detail; };     // reconnection gave up
// The transfer started by BeginTransfer ended. `held`: bytes of the stream now held and
// checked (resume point). source_failed: the source (not our data) is at fault.
struct TransferEnded {
  uint64_t transfer;
  Code code;  // kSuccess or the failure
  bool source_failed = false;
  uint64_t held = 0;
  std::string error;
};
// The transfer started by BeginTransfer holds `held` checked bytes now (sent now and then while
// it advances): told to the registry, whose lease_progress_timeout ends reads that make none.
struct TransferProgressed {
  uint64_t transfer;
  uint64_t held;
  std::string path;  // the read path of the latest read (transport::read_path_name), told to the registry
};
struct OffloadOrdered { sched::MemberId member; int64_t version; };
struct DiscardOrdered { sched::MemberId member; int64_t version; };
struct HostCopyMade { int64_t version; bool ok; std::string descriptor; std::string error; };

using MachineEvent = std::variant<OpOpen, OpPublish, OpReplicate, Prepared, PrepareFailed, OpUnpublish, OpClose,
                                  OpCancel, RegistryReply, RegistryNoReply, RegistryLost, RegistryBack, RegistryGone,
                                  TransferEnded, OffloadOrdered, DiscardOrdered, HostCopyMade, TransferProgressed>;

// ---- actions (out) ----------------------------------------------------------------------

// A registry request (the client id in it is left 0: the connection's).
// `generation`: the registry (connection generation) it is meant for; the connection refuses
// it (RegistryNoReply kRegistry) when another registry answers by the time it would go out.
// `deadline`: the context's timeout_ms applies (a REPLICATE past it is withdrawn: CANCEL,
// then UNPUBLISH for a grant that crossed it); false: it has none (a step that cannot be
// withdrawn: TRANSFER_DONE, SOURCE_FAILED, UNPUBLISH, CANCEL, an update in place, a resume).
struct SendRequest { uint64_t req; sched::Event event; uint64_t generation = 0; bool deadline = true; };
// Publish: make the buffers ready to serve `version` (a new fill: counter, packing and
// checksums behind), then answer Prepared (or PrepareFailed).
struct PrepareHolding { uint64_t op; int64_t version; };
// Replicate/update: choose the fill a transfer would make and answer Prepared with the
// descriptor promising it. Nothing changes in the buffers yet.
struct PrepareFill { uint64_t op; };
// Our buffers are about to change: invalidate the counter first (progress_counter.h).
struct InvalidateHolding {};
// A transfer into our buffers begins with fill `fill`: the counter shows (fill, 0).
struct BeginFill { uint32_t fill; };
struct BeginTransfer {
  uint64_t transfer;
  std::string source_descriptor;
  bool source_partial;
  int64_t version;
  uint64_t start;  // resume point
  uint32_t fill;
};
struct MakeHostCopy { int64_t version; };  // retention: copy the buffers to host memory
struct DropHostCopy { int64_t version; };  // -1: every one
// The operation ended; `version`: the version held afterwards (-1: none).
struct CompleteOp { uint64_t op; Code code; int64_t version; std::string detail; };

using MachineAction = std::variant<SendRequest, PrepareHolding, PrepareFill, InvalidateHolding, BeginFill, BeginTransfer,
                                   MakeHostCopy, DropHostCopy, CompleteOp>;

// One line describing an event or an action (member_machine_trace.cc): THUB_DEBUG_MACHINE=1
// logs every step of every member machine of the process to stderr with them.
[[nodiscard]] std::string describe(const MachineEvent& ev);
[[nodiscard]] std::string describe(const MachineAction& a);

// What the context's engine hands registry events (orders, connection changes) to.
struct RegistryListener {
  virtual ~RegistryListener() = default;
  virtual void on_registry(const MachineEvent& ev) = 0;
};

class MemberMachine {
 public:
  explicit MemberMachine(MemberIdentity id);

  // Taken by value: an event's large parts (a descriptor) move into the machine, not copied.
  [[nodiscard]] std::vector<MachineAction> step(MachineEvent ev);

  // ---- views (stats, the driver's checks, the simulation's invariants)
  enum class Phase {
    kNew,           // not opened yet
    kIdle,          // open, holding nothing
    kHolding,       // the registry counts us as a holder of held()
    kReceiving,     // a transfer fills our buffers
    kClosed,
  };
  [[nodiscard]] Phase phase() const { return phase_; }
  [[nodiscard]] sched::MemberId member() const { return member_; }
  [[nodiscard]] int64_t held() const { return phase_ == Phase::kHolding ? version_ : -1; }
  [[nodiscard]] int64_t receiving() const { return phase_ == Phase::kReceiving ? version_ : -1; }
  [[nodiscard]] bool busy() const { return op_.has_value(); }
  [[nodiscard]] bool registry_up() const { return up_; }
  [[nodiscard]] uint64_t lease() const { return lease_; }
  [[nodiscard]] const std::set<int64_t>& host_copies() const { return host_; }
  struct Counters {
    uint64_t replications = 0, partial_sources = 0, source_failures = 0, offloads = 0, republished = 0;
    uint64_t moved_on = 0;  // relative requests asked again after their version was lost
  };
  [[nodiscard]] const Counters& counters() const { return counters_; }
  [[nodiscard]] const MemberIdentity& identity() const { return id_; }

 private:
  enum class Kind { kOpen, kPublish, kReplicate, kUnpublish, kClose };
  // Where the current operation is.
  enum class Stage {
    kPreparing,     // PrepareHolding / PrepareFill asked of the driver
    kAsked,         // its request is at the registry
    kTransfer,      // a granted transfer runs
    kDoneSent,      // TRANSFER_DONE sent after a good transfer
    kRecovering,    // SOURCE_FAILED (or a fresh REPLICATE at a new registry) sent
    kGivingUp,      // the transfer failed: UNPUBLISH sent, then the error
    kWithdrawing,   // the REPLICATE passed its deadline: CANCEL sent, then UNPUBLISH if a
                    // grant crossed it, then THUB_ERR_TIMEOUT
    kClosing,       // CLOSE sent
    kWaitRegistry,  // the registry is gone: waits for another to answer
  };
  struct Op {
    uint64_t id = 0;
    Kind kind = Kind::kOpen;
    Stage stage = Stage::kAsked;
    int64_t spec = -1, newer_than = -1;
    uint64_t round = 0;       // replicate: the user's n-th replicate or update of this handle
    bool asked = false;       // ... its REPLICATE went to the registry of `asked_generation`
    uint64_t asked_generation = 0;
    uint64_t layout_hash = 0;
    std::string descriptor;
    uint32_t fill = 0;
    bool retried = false;     // resent once after the registry came back
    bool prepared = false;    // publish: PrepareHolding made the counter vouch for a new fill
    bool fill_promised = false;  // replicate: a registry may have granted under its descriptor
                                 // (the answer was lost): asking again needs a new fill
    bool cancel = false;      // THUB_Cancel asked
    bool moved_on = false;    // its version was lost and the spec resolved once more
    bool round_moved = false; // the registry moved its round to another version: ask again
    Code error = Code::kSuccess;  // kGivingUp: the error to end with
    std::string detail;
  };
  enum class Purpose { kOp, kReopen, kRepublish, kOffloadDone, kCleanup };

  void on(const OpOpen& e);
  void on(const OpPublish& e);
  void on(const OpReplicate& e);
  void on(Prepared& e);
  void on(const PrepareFailed& e);
  void on(const OpUnpublish& e);
  void on(const OpClose& e);
  void on(const OpCancel& e);
  bool move_on(Code code, const std::string& detail);
  bool round_moved(const sched::Reply& r) const;
  void on(const RegistryReply& e);
  void on(const RegistryNoReply& e);
  void on(const RegistryLost& e);
  void on(const RegistryBack& e);
  void on(const RegistryGone& e);
  void on(const TransferProgressed& e);
  void on(const TransferEnded& e);
  void on(const OffloadOrdered& e);
  void on(const DiscardOrdered& e);
  void on(const HostCopyMade& e);

  bool start(uint64_t id, Kind kind);  // false (and the op answered) when one is running
  void send(Purpose p, sched::Event ev);
  void send_op_request();              // the current op's request, with the current member id
  void on_op_reply(const sched::Reply& r);
  void on_grant(const sched::Reply& r);
  void finish(Code code, std::string detail = {});
  void give_up(Code code, const std::string& detail);
  void lost_op_request(Code code, const std::string& detail, bool back_already);
  void reopen();
  // The Open of a re-open, with what this shard reports of its latest round (sched::Open).
  [[nodiscard]] sched::Open reopen_request() const;
  // The current op cannot reach the registry now: waits for another to answer, or ends.
  void wait_registry();
  // The registry cannot take the operation's request yet: not connected, not open there, or
  // our holding's re-publish not yet answered.
  [[nodiscard]] bool unsettled() const { return !up_ || member_ == 0 || republish_pending_; }
  void republish();
  // Tells the registry the latest round this shard is done with (a CANCEL with that round):
  // a transaction of it that another shard opens there does not wait for this one.
  void tell_round_done();
  void resume_op();  // after a re-open or re-publish: a waiting operation sends its request
  // The current operation is a replicate or update of a round of a replica of several shards
  // (one outcome on every shard: its answer is the round's commit).
  [[nodiscard]] bool in_round() const {
    return op_ && op_->kind == Kind::kReplicate && op_->round > 0 && id_.num_shards > 1;
  }

  MemberIdentity id_;
  std::vector<MachineAction> out_;
  Phase phase_ = Phase::kNew;
  bool up_ = true;                  // the registry answers
  bool gone_ = false;               // reconnecting gave up: no registry for good
  std::string gone_detail_;
  sched::MemberId member_ = 0;      // in the current registry (0: not open there yet)
  bool open_pending_ = false;       // OPEN sent to the current registry
  // ... and it reported a round in progress (round_open): if that round ends here before the
  // OPEN is answered (a local failure of its transfer), the registry is told once it is.
  bool reopen_told_open_ = false;
  uint64_t generation_ = 0;         // the registry (connection generation) member_ belongs to
  int64_t version_ = -1;            // held (kHolding) or being received (kReceiving)
  std::string descriptor_;          // how to read what we hold (re-publish after failover)
  uint64_t layout_hash_ = 0;
  bool needs_publish_ = false;      // holding, but the current registry does not know it yet
  bool republish_pending_ = false;  // that PUBLISH is at the registry: operations' requests wait
                                    // for its answer (else it may land after them, on a member
                                    // that has moved on)
  uint64_t lease_ = 0;              // kReceiving: the lease we read with
  uint64_t grant_generation_ = 0;   // kReceiving: the registry that granted it
  uint64_t have_ = 0;               // kReceiving: bytes held and checked
  uint64_t transfer_ = 0;           // the transfer running (BeginTransfer.transfer)
  std::optional<Op> op_;
  uint64_t next_req_ = 1;
  // THUB_Replicate/THUB_Update calls so far: the shards of a replica call them in lockstep,
  // so the n-th call of every shard is one round, one transaction at the registry
  // (sched::Replicate::round).
  uint64_t rounds_ = 0;
  // The round of the last grant and its version: what a re-open tells a new registry.
  uint64_t granted_round_ = 0;
  int64_t granted_version_ = -1;
  // The last round that ended here and the outcome a sibling must share (kOk and the version
  // held; a round error; kOk and -1: its own, e.g. canceled): what a re-open reports.
  uint64_t last_round_ = 0;
  sched::Status last_status_ = sched::Status::kOk;
  int64_t last_version_ = -1;
  // kReceiving in a round whose commit was lost with its registry: the buffers hold version_
  // whole, and the round's resume at the next registry reads nothing (Replicate::whole).
  bool whole_ = false;
  struct Pending {
    Purpose purpose = Purpose::kOp;
    uint64_t generation = 0;  // of the connection it was sent on
  };
  std::map<uint64_t, Pending> pending_;  // requests at the registry
  std::set<int64_t> host_;          // retention copies
  std::map<uint64_t, int64_t> offload_reqs_;  // OFFLOAD_DONE requests: the version each names
  Counters counters_;
};

}  // namespace thub::client
