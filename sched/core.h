// The registry's state (members, holdings, leases, transactions, pending requests) and the
// operations on it. Registry (registry.h) is the thin public face; the operations live in
// one .cc file per concept: membership.cc, model_state.cc, source_chooser.cc,
// transaction.cc, failures.cc, round.cc, update.cc, deferred.cc, retention.cc. Ordered
// containers wherever one is iterated, so every decision is deterministic (the unordered
// ones are only looked up).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/snapshot.h"
#include "sched/types.h"

namespace thub::sched::detail {

// What a member's registered (GPU) buffers hold.
enum class Buf {
  kEmpty,      // nothing: may publish or replicate
  kReceiving,  // granted a version, transfer in progress (a partial holder when pipelining)
  kHolding,    // holds `version` completely and serves it
  kOffloading, // unpublish asked; waiting for OffloadDone (retention) before draining
  kDraining,   // hidden from new choices; waiting for the readers of the buffers to finish
};
const char* buf_name(Buf b);

struct OffloadCopy {          // a retained version served from host memory
  std::string descriptor;
  bool dropping = false;      // fell out of the retained window; Discard once drained
  std::set<ClientId> reports; // reader clients that reported it failed (not yet confirmed)
};

struct Replica;

struct Member {
  MemberId id = 0;
  ClientId client = 0;
  std::string model, replica;
  int shard = 0, num_shards = 1, retain = 0;
  bool spot = false;
  // the registered buffers
  Buf buf = Buf::kEmpty;
  Version version = -1;
  std::string descriptor;
  LeaseId own_lease = 0;      // kReceiving: the lease this member reads with
  bool unpublish_pending = false;  // kOffloading/kDraining: an Unpublish reply is owed
  bool intact = false;        // kDraining: the buffers still hold `version` completely (a
                              // holding given up by Unpublish or an update, not a failed or
                              // partial one): retention may still offload it
  bool offload_failed = false;  // its host copy of `version` could not be made (OffloadDone
                                // with no descriptor): retention asks it no more until emptied
  RequestId unpublish_req = 0;
  // kReceiving: the bytes the reader held when it last said so (0 at a first grant, a
  // SourceFailed's resume point since) and when. For introspection only; decides nothing.
  uint64_t bytes_reported = 0;
  Time reported_at = 0;
  std::map<Version, OffloadCopy> offloaded;
  // Offload seeding: the version a seed-only update in place of this member was decided for,
  // while its old holding drains (will_hold counts it, so that the datacenter waits for it).
  Version seeding = -1;
  bool leaving = false;       // being forgotten (Close, client removal): never indexed again
  // Its replica (models_[model].replicas[replica]): set by Open; a replica (and its model)
  // is erased only once it has no member, so this stays valid while the member exists.
  Replica* rep = nullptr;
  // Failure judgment (failures.cc). As a source: the reader clients that reported the
  // current fill of its buffers failed, until confirmed, a reader completes a read of it, or
  // the buffers are emptied. As a reader: the sources it reported during its current
  // transfer (and when), which its regrants never pick again.
  std::set<ClientId> reports;
  std::map<MemberId, Time> shunned;
  // The splice (membership.cc): the source whose reader slot is held for this reader's
  // regrant, because the member between them in a chain went away. 0 when none.
  MemberId held_slot = 0;
  // The committing round (Transaction::commit) its current transfer, regrant or update in
  // place belongs to: its TransferDone waits for the round's commit. 0: none.
  uint64_t round = 0;
};

struct Lease {
  LeaseId id = 0;
  MemberId reader = 0, source = 0;
  ClientId reader_client = 0;
  Version version = -1;
  bool from_offload = false;  // reads the source's host copy, not its buffers
  // A seed that holds no reader slot of its source (load()): its reader is in another
  // datacenter than its source, with Config::seeding and !Config::seed_takes_slot.
  bool seed = false;
  Time orphan_until = 0;      // > 0: the reader was removed for silence; ends then
  Time granted_at = 0;        // introspection only
  Time progress_at = 0;       // the grant, or the last report of more bytes (lease_progress_timeout)
  uint64_t progress_bytes = 0;
  std::string path;           // the read path the reader last reported (introspection only)
};

// A TransferDone whose answer waits for its round's commit.
struct HeldDone {
  ClientId client = 0;
  RequestId req = 0;
  MemberId member = 0;
};

// A replica-level Replicate (paper, Figure 6): the first shard fixes version and source
// replica; the others join. `reserved` holds the source slot of each shard not yet joined.
struct Transaction {
  uint64_t round = 0;                   // Replicate::round of the shard that opened it
  Status status = Status::kOk;          // an error answer is shared by all shards too
  std::string detail;
  Version version = -1;
  std::string source_replica;
  std::set<int> joined;                 // shards that got their answer (or left)
  std::map<int, MemberId> reserved;     // shard -> source member slot kept for it
  // The reserved slots whose source's buffers hold `version`: that source's drain waits for
  // them until hold_until (Config::round_hold after the round opened; retention.cc).
  std::set<int> holding;
  Time hold_until = 0;
  // A round of a replica of several shards (Replicate::round > 0) has one outcome on every
  // shard (round.cc, settle()): a shard's TransferDone is answered once every shard
  // joined (or hold_until passed) and none is still in the round's transfer; a loss in any
  // shard moves the whole round to the newest version (a relative spec) or fails it on all.
  bool commit = false;
  bool committed = false;               // the held answers went out (hold_until passed)
  Version spec = -1, newer_than = -1;   // the opening request's: what a move resolves again
  int moves = 0;
  std::set<int> active;                 // shards in the round's transfer: granted, regranting,
                                        // or draining their old holding for an update in place
  std::map<int, HeldDone> done;         // shards whose TransferDone waits for the commit
  std::set<int> returning;              // told the round moved: they ask it again (no commit
                                        // without them, whatever hold_until says)
  // Shards a grant of this round overwrote (what they held before is gone): when the round
  // fails, a shard whose update in place still holds its old version gives it up too, so
  // that the replica's shards hold the same after the round (fail_replicate, Reply::released).
  std::set<int> overwritten;
  // Where its outcome comes from: a request here, or a shard's report of an earlier
  // registry's (still in the round, or done with it: an answer its user has seen, which no
  // other report overrides; take_round_report()).
  enum class From { kRequest, kOpenReport, kDoneReport } from = From::kRequest;
};

struct Replica {
  int num_shards = 1;
  std::map<int, MemberId> shards;       // open members
  // Open transactions by round (Replicate::round): the shards of a replica are in lockstep,
  // but one may ask a round alone (again after a failover) or be done with one without
  // asking it (canceled, refused, asked the registry before a failover), so a round's
  // transaction never hands its answer to another round's request.
  std::map<uint64_t, Transaction> txns;
  // Shard -> the latest round it is done with without a transaction of it to leave (it asked
  // a later round, or was refused, buffers busy, or canceled): a transaction of that round or
  // an earlier one, opened later by another shard, does not wait for it. 0 from a request
  // without a round: the next transaction, whatever it is (and cleared by it).
  std::map<int, uint64_t> refused;
  // wake(): whether the replica holds nothing and has no transaction, remembered while
  // Core::wake_gen_ equals model_only_gen (no try has run since it was computed).
  mutable uint64_t model_only_gen = 0;
  mutable bool model_only = false;
  // waits_for_model_only: the members of `shards`, found while Core::member_changes_ equalled
  // shard_ptrs_gen (no member was opened or erased since).
  mutable std::vector<const Member*> shard_ptrs;
  mutable uint64_t shard_ptrs_gen = 0;
};

struct Model {
  std::map<std::string, Replica> replicas;
  std::map<int, uint64_t> layout;       // shard -> layout hash recorded at first publish
  std::set<Version> published;          // every version ever published (this registry epoch)
  std::map<Version, std::set<MemberId>> holders;  // index: members that may serve v now
  // The same by (version, num_shards, shard): a source choice looks at its shard's only.
  std::map<std::tuple<Version, int, int>, std::set<MemberId>> shard_holders;
  // Those of shard_holders with a free reader slot (load() < max_readers_per_source): a
  // busy holder is refused whoever asks, so choose_replica scans these (same order) and not
  // the shard's N holders, most of them busy in a fan-out. Kept by index(), unindex() and
  // add_load().
  std::map<std::tuple<Version, int, int>, std::set<MemberId>> shard_free;
  std::multiset<int> retains;           // Open.retain of every open member
};

struct Client {
  std::string datacenter;
  Time last_seen = 0;
  std::set<MemberId> members;
  uint64_t stored_bytes = 0;            // its members' descriptors (Config's budgets)
  std::map<RequestId, Reply> recent;    // reply cache: retries and duplicates get the same
  // The cache is kept per member (kRecentPerMember replies each; kRecentPerClient for the
  // requests of no member, as Open): a member's retry comes while its operation waits for
  // the lost answer, so its own later replies are few, whatever its siblings do (a process
  // of 16 shards answered a few hundred times in one retry interval). `asked`: the member
  // of each request not answered yet (at most kAskedPerClient, oldest dropped first).
  std::map<MemberId, std::deque<RequestId>> recent_by_member;
  std::map<RequestId, MemberId> asked;
};
inline constexpr size_t kRecentPerMember = 16, kRecentPerClient = 64, kAskedPerClient = 4096;

// The deferred Replicates that share one (model, num_shards, spec, newer_than), by arrival.
// While a replica holds nothing and has no transaction, its request's answer depends on that
// key alone (waits_for_model_only): once one has to wait, wake() skips the others of the key
// until some request is answered, without visiting them (deferred.cc).
struct DeferredKey {
  std::set<uint64_t> seqs;       // Pending::seq
  uint64_t blocked_wake = 0;     // one waited in wake() number blocked_wake ...
  uint64_t blocked_at = 0;       // ... after blocked_at answers of that wake()
};
// (model, num_shards, spec, newer_than, the requester's datacenter: seeding makes a request
// wait for a holder of its own datacenter; seed-only: answered otherwise)
using DeferredKeys = std::map<std::tuple<std::string, int, Version, Version, std::string, bool>, DeferredKey>;

// A request whose reply is deferred.
struct Pending {
  enum class Kind { kReplicate, kRegrant } kind = Kind::kReplicate;
  ClientId client = 0;
  RequestId req = 0;
  MemberId member = 0;
  Version spec = -1, newer_than = -1;
  Version version = -1;                 // kRegrant: the version being resumed
  uint64_t round = 0;                   // kReplicate: Replicate::round
  bool whole = false;                   // Replicate::whole: a resume of `spec` held whole
  bool seed_only = false;               // Replicate::seed_only (part of its key)
  bool in_place = false;                // an update in place: the member held `held`
  Version asked = 0;                    // ... and the spec it asked (negative: relative)
  bool restorable = false;              // ... and its buffers still hold it unharmed
  Version held = -1;
  // wake(): the member, found while Core::member_changes_ equalled member_gen (no member was
  // erased since, so the map node is still there).
  const Member* member_ptr = nullptr;
  uint64_t member_gen = 0;
  uint64_t seq = 0;               // its place in Core::pending_ (set by defer())
  bool keyed = false;             // a Replicate that is not an update in place ...
  DeferredKeys::iterator key{};   // ... and its key (set by defer())
};

// One candidate source (a member and which of its copies to read).
struct SourcePick {
  MemberId member = 0;
  bool from_offload = false;
  bool partial = false;
};

inline Reply make_reply(ClientId c, RequestId req) {
  Reply r{};
  r.client = c;
  r.req = req;
  return r;
}

class Core {
 public:
  explicit Core(Config cfg) : cfg_(cfg) {}

  std::vector<Action> step(const Event& ev, Time now);
  std::string describe() const;
  std::string check_invariants() const;
  Time quiet_until() const;  // Registry::quiet_until()
  Snapshot snapshot(const SnapshotLimits& limits) const;  // snapshot.cc

  // ---- membership.cc
  void on(const Connect& e);
  void on(const Disconnect& e);
  void on(const Open& e);
  // An Open of a shard that another session holds waits (wait) up to heartbeat_timeout for
  // that session to go: a process that reconnected opens again before the registry dropped
  // its session before (silent, or its socket's close still on the way); then it is refused.
  void open(const Open& e, bool wait);
  bool release_opens();  // the waiting Opens whose shard is free, or whose wait ended; true if one went on
  bool shard_taken(const Open& e) const;
  void on(const Close& e);
  void on(const Publish& e);
  void on(const Unpublish& e);
  void touch(ClientId c);
  bool expire();  // true if a client was removed or an orphan read ended
  // A client removed for silence may still be reading: its reads become orphans, which hold
  // off their sources' drains until heartbeat_timeout has passed (it learns of the removal by
  // then) but no longer take a reader slot (load); a Disconnect or a Close ends them at once.
  void remove_client(ClientId c, bool orphan_reads = false);
  void forget_member(MemberId m, bool orphan_reads = false);  // holdings go, leases on it stay
  void forget_recent(ClientId client, MemberId id);           // its cached answers: the client's
  void hide_leaving(Member& m);  // unindexed for good: no longer a holder for any decision
  bool expire_orphans();
  // The splice: when a partial member M that reads from P and is read by R goes away, P's
  // freed slot is held for R (counted in load(P)) until R's own lease ends, R or P goes, so
  // that R's regrant continues from P, which is ahead of it, instead of a newcomer taking
  // the slot first and R being handed a source that holds less than itself.
  // (reader R, source P) to splice around `gone`, asked before its own lease ends.
  std::optional<std::pair<MemberId, MemberId>> splice_candidate(const Member& gone) const;
  void hold_slot(Member& reader, MemberId source);
  void release_held(Member& reader);
  void release_held_on(MemberId source);      // the source goes: its held slots go too
  bool known_client(ClientId c, RequestId req);
  Member* owned(ClientId c, RequestId req, MemberId m);
  // Member m's active lease `lease` as its reader (not orphaned, with `active_only`), or null
  // with the request answered kState (TransferDone, SourceFailed, TransferProgress).
  Lease* reading(ClientId c, RequestId req, const Member& m, LeaseId lease, bool active_only = false);

  // ---- model_state.cc: holdings and versions
  // Every change of a member's buf/version/offloaded goes between unindex() and index().
  void unindex(const Member& m);
  void index(const Member& m);
  void reserve(Transaction& t, int shard, MemberId source);
  void unreserve(Transaction& t, int shard);
  // The round holds off m's drain: a reserved slot on m's intact buffers within its hold.
  bool drain_held(const Member& m) const;
  bool expire_holds();        // true if a hold ended (its source's drain is checked again)
  bool recheck_drains();      // true if one was checked
  bool serves_live(const Member& m, Version v) const;        // may be chosen as a source
  bool serves_offload(const Member& m, Version v) const;
  bool holds(const Member& m, Version v) const { return serves_live(m, v) || serves_offload(m, v); }
  // Serves v and will hold it completely without anyone's help: complete, a host copy, or a
  // partial whose chain is grounded (a partial whose source died is not).
  bool lasting(const Member& m, Version v) const;
  // Versions some replica with num_shards serves in every shard, lasting (not lost).
  std::vector<Version> available(const std::string& model, int num_shards) const;
  // Resolves a spec to an absolute version or an error reply status. Relative specs count
  // only available versions: a lost version is skipped, so "latest" moves on.
  Status resolve(const Member& m, Version spec, Version* out, std::string* detail) const;
  // For a relative spec whose resolved version v no other replica will serve whole (its
  // holders drain, or the only complete one is the requester's own replica, e.g. its host
  // copy: a replica is never its own source): the newest older version, newer than
  // newer_than, that one will; -1 if none (then v is lost for this request).
  Version older_servable(const Member& m, Version v, Version newer_than) const;
  int live_leases(MemberId m) const;
  int load(MemberId m) const;       // leases (orphans not) + reserved transaction slots
  void add_load(MemberId m, int d);  // keeps load_ and Model::shard_free (model_state.cc)
  // The shard_holders keys m is indexed under now (its live version, its host copies).
  template <class F> void for_each_index_key(const Member& m, F f) const;

  // ---- source_chooser.cc
  // A partial source is picked only if its chain is grounded (not through the requester).
  std::optional<SourcePick> pick_in(const Member& source, Version v, MemberId requester) const;
  // What pick_in needs besides a grounded chain (cheap: no chain is walked).
  bool may_pick(const Member& source, Version v, MemberId requester) const;
  std::optional<std::string> choose_replica(const Member& req, Version v) const;
  std::optional<SourcePick> choose_member(const Member& req, Version v) const;
  // Seeding (Config::seeding): does a member of req's datacenter, of another replica, hold
  // (or will it: will_hold) shard req.shard of v? Then no holder elsewhere is chosen for req.
  // seeded_replica_here: the same for every shard of one replica (a round's source is a
  // replica); whole_only: held whole now, not on its way.
  bool seeded_here(const Member& req, Version v) const;
  bool seeded_replica_here(const Member& req, Version v, bool whole_only = false) const;
  // Smart skipping (Config::skipping): the version a relative request of req that resolved
  // to v takes instead (v itself when nothing is skipped; -1: none, an update in place that
  // must wait for its datacenter: THUB_NOT_UPDATED).
  Version skip_to_local(const Member& req, Version v, Version newer_than, bool in_place) const;
  bool will_hold(const Replica& r, const Member& h, Version v, MemberId requester) const;
  // Offload seeding: why a seed-only request of req for v gets nothing ("" when req is to
  // seed v into its datacenter).
  std::string nothing_to_seed(const Member& req, Version v, Version newer_than) const;
  const std::string& dc_of(const Member& m) const { return clients_.at(m.client).datacenter; }

  // ---- transaction.cc
  void on(const Replicate& e);
  void on(const TransferDone& e);
  void on(const SourceFailed& e);
  void on(const Cancel& e);
  void on(const TransferProgress& e);
  bool expire_stalled_leases();  // readers silent about their progress: dropped
  bool try_replicate(const Pending& p);   // true: answered (grant or error); false: defer
  // A Replicate of a round whose transaction has another version than it asks: alone.
  void answer_alone(const Pending& p, Member& m);
  // Taking over: a shard of a round (t, or none) whose version v has no holder here waits.
  bool waits_for_takeover(const Member& m, const Transaction* t, Version v) const;
  // The Replicate after its checks (on(Replicate) holds it first while its replica is not
  // assembled here: assembling_).
  void replicate(const Replicate& e);
  // A resume by a shard that holds the round's version whole: it holds it here now, and its
  // answer is the round's commit.
  void complete_whole(const Pending& p, Member& m, Transaction& t);
  // A shard's report of its latest round at an earlier registry (Open's round fields, or a
  // CANCEL with a version): the round's outcome here is rebuilt from it (round.cc).
  void take_round_report(Member& m, uint64_t round, bool open, Status status, Version version,
                         Version spec, Version newer_than);
  // A Replicate of a round no transaction here knows yet, by a shard of a replica of several
  // shards whose every shard is not open here yet: it waits (at most round_hold) until they
  // are, so that their round reports come before it decides the round alone.
  bool holds_for_assembly(const Replicate& e, const Member& m);
  // Lets the held ones whose replica is assembled (or whose hold ended, or whose member
  // went) go on; true if one did.
  bool release_assembled();
  bool try_regrant(const Pending& p);
  void fail_replicate(const Pending& p, Member& m, Status s, std::string detail);
  bool grounded(MemberId partial, MemberId requester) const;
  bool grounded_walk(MemberId partial, MemberId requester) const;  // uncached
  // Every change of what grounded() reads (a member's buf, intact or own_lease, a lease, a
  // member forgotten) calls this: the cached answers are dropped.
  void chains_changed() { ++chain_gen_; }
  bool will_serve(const Member& h, Version v, MemberId requester) const;
  // will_serve without the chain walk: yes, no, or only if grounded (a partial holder).
  enum class Serves { kNo, kYes, kIfGrounded };
  Serves will_serve_unwalked(const Member& h, Version v, MemberId requester) const;
  // One that may serve req (not one that req reported during its current transfer).
  bool has_holder(const Member& req, Version v, int shard) const;
  bool replica_will_serve(const Member& req, Version v) const;     // every shard of one replica
  void grant(const Pending& p, Member& m, Version v, const SourcePick& s);
  void end_lease(LeaseId id);
  void cancel_own_lease(Member& m);
  void leave_transaction(const Member& m);  // every open one it has not joined
  // The shard is done with `round` without joining a transaction of it (refused, canceled).
  void leave_round(const Member& m, uint64_t round);
  // A request of `round`: the shard is done with every earlier round (true: it left one).
  bool enter_round(const Member& m, uint64_t round);
  Transaction* transaction(Replica& r, uint64_t round);
  void start_transaction(Replica& r, Transaction t);
  void finish_shard(Replica& r, uint64_t round, int shard, bool keep_slot = false);
  // Commit: answers the held TransferDones once every shard joined (or the hold passed) and
  // none is in the round's transfer; forgets the round once nothing more is owed.
  void settle(Replica& r, uint64_t round);
  Transaction* round_of(const Member& m);   // m's committing round, if any
  bool round_overwritten(const Member& m, uint64_t round);  // update.cc
  // A shard of a committing round cannot get the round's version: the round moves to the
  // newest version (a relative spec, VERSION_LOST) or fails on every shard. `p`: m's request
  // that is answered here (nullptr: m's TransferDone or SourceFailed, answered by the caller
  // with `answer`).
  void lose_round(Member& m, const Pending* p, Status s, const std::string& detail, Reply* answer = nullptr);
  // m stops taking part in its committing round (its transfer abandoned or canceled, or m
  // is forgotten): the others commit without it.
  void leave_active(Member& m);
  // The answer to a shard whose transfer was for a version its round no longer has: the
  // round moved (VERSION_LOST with the new version: ask the round again) or failed.
  void answer_stale(Member& m, const Transaction& t, Reply& r);
  void reply_stale(Member& m, Transaction& t, Reply r);  // answers it so and takes it out
  // A failure report is judged (failure_reports distinct reader clients, or the source's
  // client silent for failure_silence) before the copy is hidden from everybody (mark_failed).
  void report_failure(const Lease& l, ClientId reporter);
  bool judge_silent();              // reported copies whose client fell silent meanwhile
  void clear_reports(MemberId source, bool from_offload, Version v);
  bool silent(ClientId c) const;
  Time failure_silence() const;
  void mark_failed(MemberId source, bool from_offload, Version v);
  bool waits_for_model_only(const Pending& p, const Member& m) const;
  void wake();

  // ---- deferred.cc: the deferred requests, indexed so that wake() and the per-request
  // checks need not visit all of them
  using PendingIt = std::map<uint64_t, Pending>::iterator;
  void defer(Pending p);               // appended: retried after those deferred before it
  PendingIt undefer(PendingIt it);     // forgotten (answered or discarded); the next one
  void undefer_member(MemberId m);     // all of m's
  bool has_pending(MemberId m) const;
  PendingIt first_pending(MemberId m);  // pending_.end() when none
  bool has_pending(ClientId c, RequestId req) const;
  // r's shards may no longer wait for the model alone (a transaction started, a shard holds
  // something): wake() must visit their requests again, not skip them with their key's.
  void expose(const Replica& r);
  std::string check_deferred() const;  // check_invariants()
  // Built with THUB_SCHED_CHECK_WAKE: wake() aborts unless every request it does not visit
  // between two it visits is one that a visit of each would have skipped.
  void check_skipped(uint64_t from, uint64_t to, uint64_t answered) const;

  // ---- update.cc: THUB_Update in place (a holder of h asks for something newer than h)
  void begin_update(const Replicate& e, Member& m);
  bool try_grant_update(const Pending& p, Member& m);
  // (version, source) to take instead of v, whose source pick is not in m's datacenter
  std::optional<std::pair<Version, SourcePick>> newer_inside(const Pending& p, const Member& m, Version v,
                                                             const std::optional<SourcePick>& pick) const;

  // ---- retention.cc
  void on(const OffloadDone& e);
  int retain_of(const std::string& model) const;
  bool retained(const std::string& model, Version v) const;
  bool needs_offload(const Member& m) const;
  void begin_drain(Member& m);
  void check_drain(Member& m);
  void drop_reservations_on(const Member& m);  // its buffers were freed: slots kept there go
  void sweep_retention(const std::string& model);

  // ---- descriptors stored, against Config's budgets (registry.cc)
  // Why storing `new_size` bytes where `old_size` were for client `c` would pass a budget, or "".
  std::string over_budget(ClientId c, size_t old_size, size_t new_size) const;
  // Why a member's own descriptor `d` (a publish's, replicate's or update's, in place of
  // `old`) is refused: empty (nothing to read the member by when it is handed out as a
  // source), or over a budget; "" when taken.
  std::string refused_descriptor(ClientId c, const std::string& old, const std::string& d) const;
  void store(ClientId c, std::string& slot, const std::string& d);  // slot = d, counted
  void unstore(ClientId c, uint64_t bytes);                          // freed with its holder
  [[nodiscard]] static uint64_t stored_by(const Member& m);         // its descriptor and host copies'

  // ---- helpers (registry.cc)
  void reply(Reply r);
  void reply_err(ClientId c, RequestId req, Status s, std::string detail);
  Model* model_of(const Member& m);
  const Model* model_of(const Member& m) const;
  void maybe_erase_model(const std::string& model);

  Config cfg_;
  uint64_t stored_bytes_ = 0;  // every member's descriptors
  Time now_ = 0;
  Time first_open_ = -1;     // when the first Open came (takeover_grace counts from it)
  bool grace_over_ = false;  // takeover_grace has passed (its end woke the deferred requests)
  [[nodiscard]] bool in_takeover_grace() const {
    return cfg_.takeover_grace > 0 && first_open_ >= 0 && now_ < first_open_ + cfg_.takeover_grace;
  }
  bool expire_grace();  // true once, at the step where takeover_grace ends
  // quiet_until() after the last step, and the first step whose deadlines broke it
  // (check_invariants()).
  Time promised_quiet_ = 0;
  std::string broken_quiet_;
  std::vector<Action> out_;
  std::unordered_map<ClientId, Client> clients_;  // looked up only, never iterated
  std::set<std::pair<Time, ClientId>> deadlines_;  // (last_seen, client)
  std::map<MemberId, Member> members_;
  std::map<std::string, Model> models_;
  std::map<LeaseId, Lease> leases_;
  std::map<MemberId, std::set<LeaseId>> leases_by_source_;
  std::map<MemberId, int> reserved_;               // reserved transaction slots per source
  // Per source: the hold_until of every reserved slot that holds off its drain (a multiset:
  // one per slot); and by time, to re-check a drain when its hold ends (expire_holds()).
  std::map<MemberId, std::multiset<Time>> drain_holds_;
  std::set<std::pair<Time, MemberId>> hold_ends_;
  // Sources whose drain may end now that a hold was released: checked at the end of the
  // step's event, not where the slot is released (a join takes the slot's source just after).
  std::set<MemberId> drain_recheck_;
  // Committing rounds by hold_until: one that has not heard every shard by then commits
  // what it has (expire_holds()).
  std::set<std::tuple<Time, MemberId, uint64_t>> round_ends_;  // (hold_until, a member of the replica, round)
  // TransferDones whose answers wait for their round's commit: a retry of one is ignored.
  // (Also the Replicates held in assembling_.)
  std::set<std::pair<ClientId, RequestId>> held_reqs_;
  // Replicates held until their replica is assembled here (holds_for_assembly()), in arrival
  // order, each with the time its hold ends.
  struct Assembling {
    Replicate e;
    Time until = 0;
  };
  std::vector<Assembling> assembling_;
  // Opens of a shard that another session holds, in arrival order, each with the time its
  // wait ends (open(), release_opens()). (Also in held_reqs_.)
  struct Opening {
    Open e;
    Time until = 0;
  };
  std::vector<Opening> opening_;
  static constexpr long kMaxWaitingOpens = 1024;  // per client; more are refused at once
  std::unordered_map<MemberId, int> load_;         // load() per source, when not 0
  std::map<MemberId, std::set<MemberId>> held_slots_;  // source -> readers it holds a slot for
  std::set<std::pair<Time, LeaseId>> orphans_;     // (orphan_until, lease)
  std::set<std::pair<Time, LeaseId>> progress_;    // (progress_at, lease), leases not orphaned
  // Copies reported failed and not yet judged: (source member, host copy, version).
  std::set<std::tuple<MemberId, bool, Version>> suspects_;
  // By Pending::seq (arrival order: wake() retries them in it).
  std::map<uint64_t, Pending> pending_;
  uint64_t next_seq_ = 1;
  DeferredKeys deferred_keys_;
  // The requests wake() visits whatever their key's state: every one that does not wait for
  // the model alone (a superset: one found waiting for it at a visit leaves).
  std::set<uint64_t> exposed_;
  std::unordered_map<MemberId, std::set<uint64_t>> pending_by_member_;
  std::multiset<std::pair<ClientId, RequestId>> pending_reqs_;  // (a regrant may briefly share one)
  uint64_t wakes_ = 0;                              // wake() calls (DeferredKey::blocked_wake)
  // The step changed nothing a deferred request waits for (a heartbeat, a tick, a request
  // that was itself deferred): wake() would answer none, so it is not run (step()).
  bool quiet_ = false;
  // Bumped by wake() before each try of a deferred request: Replica::model_only is valid
  // only within one stretch of skipped requests, where nothing changes (transaction.cc).
  uint64_t wake_gen_ = 0;
  // Bumped when a member is opened or erased (Pending::member_ptr, Replica::shard_ptrs).
  uint64_t member_changes_ = 1;
  MemberId next_member_ = 1;
  LeaseId next_lease_ = 1;
  // grounded(m, 0) for members walked since the last chains_changed() (transaction.cc).
  uint64_t chain_gen_ = 0;
  mutable uint64_t ground_cache_gen_ = 0;
  mutable std::unordered_map<MemberId, bool> ground_cache_;
  mutable std::vector<MemberId> ground_path_;
};

}  // namespace thub::sched::detail
