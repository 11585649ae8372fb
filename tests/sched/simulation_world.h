// The simulated world: the real client machine (thub::client::MemberMachine, one per shard)
// against the real registry core (sched::Registry). Replicas of two models (trainers and
// rollouts, 1-4 shards, spot or not, two datacenters) run a user program that opens,
// publishes, replicates, updates, unpublishes, closes and cancels; the world carries out
// what the machines ask (the part of src/client/model.cc that is not a decision): a
// connection per process (client ids, request ids, retries with the same id, deadlines,
// lost / back / gone, heartbeats), buffers with a seqlock progress counter, transfers that
// read sources as they are in the world, and host copies. Faults: lost, duplicated and
// reordered messages, slow and stalling links, crashes (also of a source mid-transfer),
// partitions, registry stalls and restarts. One event queue in virtual time, one RNG.
//
// One class, split by concept: simulation.cc (event queue, registry deliveries, faults),
// simulation_connection.cc (the connection), simulation_driver.cc (the driver: actions of
// the machines, buffers, host copies), simulation_transfer.cc (transfers),
// simulation_program.cc (the user program, joining), simulation_checks.cc (the registry as
// seen from outside and its invariants) and simulation_promises.cc (the client's promises).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/registry.h"
#include "src/client/member_machine.h"
#include "src/client/transfer_machine.h"
#include "tests/sched/simulation.h"

namespace thub::sched::sim::detail {

using client::MachineAction;
using client::MachineEvent;
using client::MemberMachine;

constexpr Time kMs = 1000;

// ---- the registry as seen from outside (what it was told and what it decided) -----------

enum class Op { kOpen, kPublish, kReplicate, kDone, kFailed, kUnpublish, kOffloadDone, kClose, kCancel };

struct Out {             // one request as the registry sees it
  int shard = 0;
  Op op = Op::kOpen;
  Event ev;
  int round = 0;           // the program's round when it was sent
  bool decided = false;    // the registry answered it once (later answers repeat the cache)
  bool delivered = false;  // the registry has seen it (so it is deferred until decided)
  Status status = Status::kOk;
  bool in_place = false;   // a Replicate the registry took as an update in place
};

struct ShardView {       // one member of a session, as the registry sees it
  MemberId id = 0;
  Version reg_v = -1;          // complete holding in the registry's view
  Version unpub_v = -1;        // reg_v when its Unpublish was first delivered
  std::set<Version> host_reg;  // host copies (OffloadDone accepted)
  Version offload_ordered = -1;  // Offload ordered, OffloadDone not yet taken
  Version copy_failed = -1;      // its host copy of this version could not be made (OffloadDone
                                 // without a descriptor): its unpublish may lose the version
  bool round_decided = true;   // its Replicate of the session's transaction round was answered
};

struct Session {         // one client id the registry knows (Connect .. Disconnect/Drop)
  int actor = -1;
  std::vector<ShardView> sh;
  std::map<RequestId, Out> out;
  // The requests of `out` delivered and not yet decided: what check_no_idle_wait looks at
  // after every event (`out` keeps every request of the session: walking it was 40 % of a
  // simulation's time).
  std::set<RequestId> waiting;
  // A multi-shard replica sent a Replicate for an operation that began before this session
  // (asked again after a failover, or resuming there) while another shard had its answer
  // from the registry before: this registry cannot know that answer (a round's answer lost
  // with a registry may differ from the one its siblings got), and a resuming shard's source
  // is chosen for it alone. The round's "same version, same source replica" check is off for
  // the session unless THUB_SIM_STRICT is set (docs/sched.md, "Known open findings").
  bool skewed = false;
  // the transaction of the current round: the first grant fixes version and source replica
  int txn_round = -1;
  bool has_first = false, in_place_round = false;
  // A shard told this registry the version an older one granted it in this round (a CANCEL
  // with a version): the round's transaction has no planned source; each shard's is its own.
  int told_round = -1;
  int moved_round = -1;  // a round the registry moved (its sources were chosen anew)
  Version first_v = -1;
  ClientId first_src = 0;
  std::vector<std::pair<MemberId, uint64_t>> first_plan;  // source members, times hidden
  std::set<ClientId> plan_unwhole;  // other replicas of its datacenter not whole at the plan (note_plan)
};

// ---- the data plane ---------------------------------------------------------------------

// What a chunk of a buffer holds: (model << 32 | version), or garbage.
using Tag = int64_t;
constexpr Tag kGarbage = -1;
constexpr Tag kScribble = -2;  // the user's own writes to buffers it was told are its own
inline Tag tag_of(int model, Version v) { return (static_cast<int64_t>(model) << 32) | v; }

struct Counter {         // the seqlock progress counter (progress_counter.h), in chunks
  uint32_t epoch = 0;    // 0: invalid
  int chunks = 0;
};

struct Source {          // a parsed descriptor: whose registered memory, which fill
  bool host = false;
  int actor = -1;
  uint64_t reg = 0;      // registration (a new model handle or process registers anew)
  int shard = 0;
  uint32_t epoch = 0;
  Version v = -1;        // host copies
  bool staged = false;   // the publisher's counter leads its staging
};

struct HostCopy {
  std::vector<Tag> chunks;
  uint32_t epoch = 0;
};

struct Job {             // BeginTransfer .. TransferEnded: the real transfer machine, its I/O here
  uint64_t id = 0;       // the machine's transfer id
  uint64_t serial = 0;   // world-unique: timers of an ended job die
  Source src;
  Version v = -1;
  uint32_t fill = 0;
  bool may_lag = false;  // granted as a partial source (the patience watchdog)
  std::shared_ptr<client::TransferMachine> m;  // null: the descriptor did not decode
  Time per_chunk = kMs;
  Time link_free = 0;    // reads queue on the link: the next one lands after this
  Time stall_at = -1;    // a link stall fault: nothing lands from then on
  Time started = 0;      // the grant arrived (a watchdog on partial sources)
  int false_report = -1; // a reader-side failure: at this many chunks held, the reader's
                         // own link breaks and it reports its healthy source failed
  bool watched = false;  // chunk reads park at the source and bring its counter (the sockets'
                         // parked reads, plan.watched): on odd serials, THUB_SIM_PARKED=0|1 forces
  std::deque<uint64_t> order;  // watched reads not landed yet, as asked: one connection answers in order
  std::map<uint64_t, client::ReadChunk> behind;  // their link time passed, an earlier one not landed
};

struct OpRecord {        // an operation the program started and the machine has not completed
  enum class Kind { kOpen, kPublish, kReplicate, kUpdate, kUnpublish, kClose } kind = Kind::kOpen;
  Time started = 0;
  Version arg = -1;      // publish: the version; replicate: the spec
  Version before = -1;   // held when it started
  Version granted = -1;  // the last version the registry granted it
  int round = 0;
  bool cancel = false;   // the program cancels it (THUB_Cancel) a little after it starts
  uint64_t gen = 0;      // the connection's generation when it started (a failover changes it)
};

struct Shard {           // one shard of a process: the machine and what the driver keeps for it
  std::unique_ptr<MemberMachine> m;
  uint64_t reg = 0;
  std::vector<Tag> chunks;
  Counter counter;
  bool staged = false;     // the last publish stages behind (its counter leads)
  std::map<Version, HostCopy> host;
  std::optional<Job> job;
  std::map<uint64_t, OpRecord> ops;
  Version user_held = -1;  // what the program was told (the last CompleteOp.version)
  bool starting = false;   // an operation start is scheduled
  bool thinking = false;   // an unsynchronised trainer's shard: its next step is scheduled
  size_t next_pub = 0;     // ... and the index of the next version it publishes
};

struct Conn {            // the process's registry connection (src/registry/connection.cc)
  enum class St { kDown, kUp, kLost, kGone } st = St::kDown;
  uint64_t serial = 0;   // world-unique per connection: timers of an old one die
  ClientId cid = 0;
  uint64_t gen = 0;      // RegistryBack generations
  Time lost_at = 0, backoff = 0, last_rx = 0;
  Time up_since = 0;     // this session's start
  Time last_arrival = 0; // of the last request on the stream (in order)
  struct Pending {
    int shard = 0;
    uint64_t mreq = 0;   // the machine's request id
    uint64_t reg = 0;    // of that machine's model handle (a closed one's answers go nowhere)
    Event ev;
  };
  std::map<RequestId, Pending> pending;
};

struct Actor {           // one replica (all its shards in one process)
  bool trainer = false, spot = false, alive = false;
  // A seed buffer of offload seeding (issue 22 item 3): every replicate and update of its
  // shards is seed-only (MemberIdentity::seed); it asks only for the latest version.
  bool seed = false;
  bool long_steps = false;  // faultless worlds: a trainer that keeps each version 300-800 ms
  // A trainer whose shards step on their own, with no barrier between them (each publishes
  // the replica's next version, waits 0-3 ms, unpublishes, rewrites): a sibling may already
  // publish v+1 while another still holds v, as an unsynchronised optimizer step does.
  bool unsync = false;
  std::vector<Version> unsync_versions;  // the versions its shards publish, in order
  int retain = 0, n = 1, model = 0;
  std::string name, replica, dc;
  Time timeout = 0;      // the context's timeout_ms: a deadline on every request (0: none)
  uint64_t proc = 0;     // process incarnation
  uint32_t next_epoch = 0;
  Time cut_until = 0;    // partition: nothing passes to or from the registry until then
  Conn conn;
  std::vector<Shard> sh;
  int round = 0;
  bool thinking = false;
  uint64_t next_op = 1;
};

class World {
 public:
  World(uint64_t seed, int steps);
  SimResult run();

 private:
  // ---- infrastructure (simulation.cc)
  uint64_t r(uint64_t n) { return rng_() % n; }
  bool chance(int per_mille) { return static_cast<int>(r(1000)) < per_mille; }
  void at(Time dt, std::function<void()> fn) { q_.emplace(std::make_pair(now_ + dt, seq_++), std::move(fn)); }
  void run_until(Time t);
  void fail(const std::string& what);
  void mix(const std::string& s) {
    for (unsigned char c : s) hash_ = (hash_ ^ c) * 1099511628211ull;
  }
  Time lat() { return (1 + static_cast<Time>(r(5))) * kMs; }
  void trace(const std::string& line) const;

  // ---- the registry: deliveries and its actions (simulation.cc)
  void deliver(const Event& ev, uint64_t epoch);
  void view_before(const Event& ev);
  void act(const Action& action);

  // ---- faults (simulation.cc)
  void crash(int i);
  void restart_registry();
  void chaos();

  // ---- the connection (simulation_connection.cc)
  void connect(int i, uint64_t proc);
  void hello(ClientId cid, uint64_t epoch, std::function<void()> up, std::function<void()> again);
  bool reachable(int i) const { return now_ >= reg_down_until_ && now_ >= reg_busy_until_ && !cut(i); }
  void send(int i, int s, const client::SendRequest& a);
  void transmit(int i, uint64_t serial, const Event& ev);
  void retry_later(int i, uint64_t serial, RequestId q);
  void expire_request(int i, uint64_t serial, RequestId q);
  void reply_to(int i, const Reply& rep);
  void on_reply(int i, uint64_t serial, const Reply& rep);
  void order_to(ClientId c, MemberId m, const MachineEvent& ev);
  void lose(int i, const std::string& why, bool tell_registry);
  void reconnect(int i, uint64_t serial);
  void heartbeat(int i, uint64_t serial);
  void echo(ClientId c);
  bool cut(int i) const { return actors_[i].cut_until > now_; }

  // ---- the driver: the machines' actions (simulation_driver.cc)
  void feed(int i, int s, const MachineEvent& ev);
  void execute(int i, int s, std::vector<MachineAction> actions);
  void act(int i, int s, const MachineAction& a);
  std::string describe(int i, int s, uint32_t epoch, bool staged) const;
  void stage(int i, int s, uint64_t reg, uint32_t epoch, int upto);
  void new_registration(int i, int s);

  // ---- transfers (simulation_transfer.cc)
  void begin_transfer(int i, int s, const client::BeginTransfer& a);
  bool parse(const std::string& d, Source* src) const;
  // The source as it is now: its chunks and counter; nullptr when its memory is gone.
  const std::vector<Tag>* source_now(const Source& src, Counter* c) const;
  Job* job(int i, int s, uint64_t serial);
  void run_transfer(int i, int s, uint64_t serial, std::vector<client::TransferStep> steps);
  void land(int i, int s, uint64_t serial, client::ReadChunk c);
  void land_hashes(int i, int s, uint64_t serial, uint64_t upto, bool watch);
  void land_counter(int i, int s, uint64_t serial);
  bool stalled(const Job& j) const { return j.stall_at >= 0 && now_ >= j.stall_at; }
  void watchdog(int i, int s, uint64_t serial);
  void end_transfer(int i, int s, Code code, bool source_failed, uint64_t held, const std::string& why);

  // ---- the user program and joining (simulation_program.cc)
  void add_actor();
  int model_shards(int model);
  void join(int i);
  void start_process(int i);
  void progress(int i);
  void progress_shard(int i, int s);  // an unsynchronised trainer's shard: its next step
  void next_phase(int i);
  void start_op(int i, int s, OpRecord::Kind k, Version arg, bool update, Time delay, bool cancel);
  bool idle(const Actor& a) const;
  void scribble_later(int i, int s);

  // ---- the client's promises (simulation_promises.cc)
  void on_complete(int i, int s, const client::CompleteOp& c);
  void on_grant_seen(int i, int s, const Reply& rep);
  void client_liveness();
  void check_relative_liveness();
  void mark_skewed(ClientId c, const std::string& why);

  // ---- the registry seen from outside, and its invariants (simulation_checks.cc)
  void on_decided(ClientId c, Out& out, const Reply& rep);
  bool retained_now(const std::string& model, Version v) const;
  // The largest `retain` of the model's open members (without those opened in this step:
  // before_opens).
  int model_retain(const std::string& model, bool before_opens = false) const;
  void sweep_host_copies();
  void forget_models();
  std::set<MemberId> members_of(ClientId c) const;
  void release_reads(const std::set<MemberId>& readers, Time until);
  void splice_view(const std::set<MemberId>& gone);  // before release_reads of a removal
  std::map<MemberId, int> outside_load(bool with_reservations);
  void check_reader_limit();
  bool complete_holder(const ShardView& t, Version v) const;
  void check_no_idle_wait();
  // Seeding (Config::seeding): may a replica of a's datacenter other than a's hold or be
  // receiving shard s (-1: any shard) of v, in the registry's eyes? (An upper bound.)
  bool seeded_view(const Actor& a, Version v, int s) const;
  bool may_hold_view(const Session& cs, int k, Version v) const;
  // At a grant across datacenters: no other replica of the reader's datacenter reads that
  // shard of the version across at the same time (unless the reader reported it, or its
  // chain is broken).
  void check_seeding(ClientId c, int s, const Out& out, const Reply& rep);
  bool whole_in_view(const Session& xss, Version v, bool reserved = false);
  void note_plan(ClientId c, Version v);
  bool undecided(ClientId c, RequestId req) const;
  bool first_delivery(ClientId c, RequestId req) const;
  void mark_delivered(ClientId c, RequestId req);
  ShardView* reg_view(MemberId m);
  void hide(MemberId m);
  void forget_client(ClientId c);
  void check_transaction(ClientId c, int s, const Reply& rep);
  bool read_by_lease(MemberId src, bool host, Version v);
  void check_unpublish_ack(ClientId c, int s);
  void check_version_lost(ClientId c, int s, const Out& out, const Reply& rep);
  bool grounded_view(MemberId m, Version v);
  // Failure judgment as the registry does it (sched/transaction.cc: report_failure,
  // judge_silent), from what was delivered and decided:
  ClientId session_of(MemberId m) const;  // the registry-known session holding member m, or 0
  bool silent_view(ClientId c) const;
  void judge_silent_view(const Event& ev);  // before each step: touch, then judge silence
  void reported(const SourceFailed& e);     // a SourceFailed the registry takes
  void confirm(MemberId m, bool host, Version v);
  void forget_reports(MemberId m, bool host, Version v);
  void new_fill(MemberId m);                // the member's buffers start a new fill
  void liveness();
  const Actor& actor_of(const Session& ss) const { return actors_[ss.actor]; }

  uint64_t seed_;
  int steps_;
  std::mt19937_64 rng_;
  bool trace_ = false;
  bool strict_ = true;  // THUB_SIM_STRICT (=0: off): the transaction check is not exempted for a skewed session
  // Off by default (its draws would change every seed's schedule, and with it the trace
  // hashes other work compares); SimulationTest.DeadlinesOnOperations turns it on:
  bool timeouts_ = false;          // THUB_SIM_TIMEOUTS: some contexts set timeout_ms
  // THUB_SIM_FAULTLESS: no injected fault at all (no crash, partition, registry stall or
  // restart, no lost, duplicated or replayed message, no slow, stalling or failing read, no
  // failed host copy, no cancel), models of 1-16 shards; the liveness of relative requests is
  // checked then (check_relative_liveness). Off by default, for the same reason as timeouts_.
  bool faultless_ = false;
  int parked_ = -1;                 // THUB_SIM_PARKED: -1 half the transfers watch (odd serials), 0 none, 1 all
  bool calm() const { return quiet_ || faultless_; }  // no fault is injected now
  std::set<ClientId> skewed_;  // every skewed session ever (answers may arrive after its end)
  bool skewed(ClientId c) const { return !strict_ && skewed_.count(c); }
  Config cfg_;
  std::unique_ptr<Registry> reg_;
  uint64_t epoch_ = 0;     // registry incarnation
  Time reg_down_until_ = 0;   // restarting: nobody can connect
  Time reg_busy_until_ = 0;   // stalled: deliveries wait
  Time now_ = 0;
  uint64_t seq_ = 0;
  RequestId req_ = 0;
  uint64_t serial_ = 0;    // connections, registrations, jobs, processes
  bool quiet_ = false;
  Time quiet_since_ = 0;
  std::map<std::pair<Time, uint64_t>, std::function<void()>> q_;
  std::vector<Actor> actors_;
  std::map<ClientId, Session> sessions_;
  std::map<ClientId, int> cid_actor_;  // every client id ever given out: its actor
  std::map<ClientId, std::function<void()>> hello_;  // connections waiting for the HELLO answer
  ClientId next_cid_ = 1;
  std::map<int, int> chunks_;  // per model: chunks of a shard (every replica has the layout)
  std::map<MemberId, std::pair<ClientId, int>> owner_;
  std::map<std::string, std::set<Version>> published_;
  std::map<int, Version> next_version_;
  std::map<int, int> shards_;
  std::set<MemberId> suspect_;
  std::map<MemberId, uint64_t> hidden_;  // how often a member was hidden (never reset)
  std::set<MemberId> failed_;  // live buffers confirmed failed (until their next fill)
  std::set<std::pair<MemberId, Version>> failed_host_;  // host copies confirmed failed
  std::map<ClientId, Time> last_seen_;  // the registry's deadline clock of each client
  // Reader clients that reported a copy failed, not yet judged: (source, host copy, version).
  std::map<std::tuple<MemberId, bool, Version>, std::set<ClientId>> reports_;
  // Sources each reader member reported during its current transfer (and when).
  std::map<MemberId, std::map<MemberId, Time>> shunned_;
  MemberId updating_now_ = 0;  // the holder whose update in place this step delivers
  struct LeaseView {
    MemberId src = 0;
    Version v = -1;
    bool host = false;  // reads a host copy
  };
  std::map<LeaseId, LeaseView> lease_src_;
  struct Held {             // a lease as the clients see it: granted, not yet reported
    MemberId src = 0, reader = 0;
    Time orphan_until = 0;  // its reader was dropped for silence: counted until then
    // Its source is gone and the registry may hold a slot on this member for the reader's
    // regrant (the splice: sched/membership.cc). An upper bound: marked for every reader of
    // a gone member that read from it, counted as busy by the idle check only.
    MemberId splice_src = 0;
    bool seed = false;      // its reader is in another datacenter (!Config::seed_takes_slot): no slot
  };
  std::map<LeaseId, Held> held_;
  std::vector<std::pair<ClientId, int>> acks_;  // unpublish acks of the current step
  std::set<MemberId> opened_now_;               // members the current step's Opens made
  // Copies that the current step's Closes and client removals took away, as they stood: the
  // registry decided the step's deadlines (a drain that ended) before its event (seed 31617).
  struct Left {
    std::string model;
    int n = 0, shard = 0;
    bool spot = false, suspect = false;
    Version reg_v = -1;
    std::set<Version> host;
    std::set<MemberId> reading;  // the sources it read from: its leaving ends those reads
  };
  std::vector<Left> left_now_;
  void note_left(const Session& ss, int k);
  std::map<std::string, int> retain_before_;    // per model, before the current step
  SimResult res_;
  // Agreement: the outcomes of a round's shards so far, by (actor, process, round).
  struct RoundOutcome { Code code; Version version; bool excused; bool failover; };
  std::map<std::tuple<int, uint64_t, int>, std::map<int, RoundOutcome>> round_outcomes_;
  bool agree_ = true;            // THUB_SIM_AGREE=0: a disagreeing round does not fail the seed
  bool agree_failover_ = true;  // THUB_SIM_AGREE_FAILOVER (=0: off): nor one across a failover
  void record_round(int i, int s, const OpRecord& o, const client::CompleteOp& c);
  // Rounds by (actor, process, program round): when the registry decided its first shard, and
  // those where a shard was decided more than round_hold later (the registry no longer waits
  // for such a shard: Config::round_hold; the round is not compared).
  std::map<std::tuple<int, uint64_t, int>, Time> round_opened_;
  // Liveness of relative requests (faultless worlds): when each trainer replica's versions
  // were published (every shard's publish completed) and until when (its first shard began
  // to unpublish or close), and every THUB_LATEST replicate or update that ended.
  struct Publication { int model = 0; int actor = 0; uint64_t proc = 0; Version v = -1; int shards = 0; Time from = -1, to = -1; };
  std::vector<Publication> publications_;
  struct RelativeOp {
    int actor = 0; uint64_t proc = 0; int round = 0; int model = 0; int shard = 0; bool update = false;
    Time started = 0, ended = 0; Code code = Code::kSuccess;
    Version before = -1;  // held when it started
    bool skipped = false; // answered not updated by smart skipping (checked then)
  };
  std::vector<RelativeOp> relative_ops_;
  std::set<std::pair<int, int>> skipped_;  // (actor, shard): its last answer was a skip
  std::set<std::pair<ClientId, int>> skip_rounds_;  // (session, round): a skip answer checked
  std::set<std::tuple<int, uint64_t, int>> late_rounds_;
  uint64_t hash_ = 1469598103934665603ull;
};

// Timing of the simulated client and registry (virtual microseconds).
constexpr Time kHeartbeatEvery = 100 * kMs;
constexpr Time kRegistryTimeout = 300 * kMs;  // the client's registry_timeout_ms
constexpr Time kRequestTimeout = 1000 * kMs;  // registry_request_timeout_ms
constexpr Time kReconnectFor = 1500 * kMs;    // reconnect_ms: then RegistryGone
constexpr Time kRetryEvery = 150 * kMs;       // a request without an answer is sent again
constexpr Time kConnectTimeout = 200 * kMs;   // registry_connect_timeout_ms
constexpr Time kStallTimeout = 200 * kMs;     // stall_timeout_ms of a transfer
constexpr Time kPartialPatience = 600 * kMs;  // a reader gives up on a partial source then
constexpr int kMaxChunks = 8;
// Relative requests in a faultless world (simulation.h): one made while some version of its
// model stays published for kStaysPublished after it succeeds, within kServedWithin.
constexpr Time kStaysPublished = kRelativeStaysPublishedUs;
constexpr Time kServedWithin = kRelativeServedWithinUs;

}  // namespace thub::sched::sim::detail
