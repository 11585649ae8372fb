// The simulated world: trainer and rollout replicas (1-4 shards, spot or not, two
// datacenters) that behave like the real client (one outstanding request per operation,
// retries with the same request id, leases held while reading, TransferDone/SourceFailed),
// a lossy network that also duplicates, crashes (disconnect or silent), slow reads and
// registry restarts. Everything runs on one event queue in virtual time with one RNG.
// This header declares the world (one class: its state is shared by all of its parts); its
// member functions are defined by concept in simulation.cc (the world: event queue, network,
// faults), simulation_client.cc (the simulated client) and simulation_checks.cc (the view of
// the registry from outside, and the invariants checked against it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sched/registry.h"
#include "tests/sched/simulation.h"

namespace thub::sched::sim::detail {

constexpr Time kMs = 1000;

enum class Op { kOpen, kPublish, kReplicate, kDone, kFailed, kUnpublish, kOffloadDone, kClose };
enum class St { kNone, kEmpty, kHolding, kReceiving };

struct Xfer {
  bool active = false, reading = false, host = false;
  LeaseId lease = 0;
  MemberId src = 0;
  uint64_t src_gen = 0;
  Version v = -1;
  Time started = 0;          // the grant arrived (a stall watchdog on partial sources)
};

struct Out {
  Op op;
  Event ev;
  int round = 0;
  bool decided = false;  // the registry answered it once (later answers repeat the cache)
  bool delivered = false;  // the registry has seen it (so it is deferred until decided)
  Status status = Status::kOk;  // the decision, once decided
  bool in_place = false;  // a Replicate the registry took as an update in place
};

struct Shard {
  MemberId id = 0;
  St st = St::kNone;
  Version v = -1;
  uint64_t gen = 0;          // bumps when new data starts to overwrite the buffers
  Xfer x;
  std::map<RequestId, Out> out;
  std::set<Version> host;    // host copies (client view)
  std::set<Version> host_reg;  // host copies (registry view: OffloadDone accepted)
  Version offload_ordered = -1;  // registry view: Offload ordered, OffloadDone not yet taken
  Version reg_v = -1;        // complete holding in the registry's view
  Version keep = -1;         // re-publish after reconnect
  bool round_done = true;
  bool sending = false;      // a Replicate of this round is scheduled but not yet sent
  bool round_decided = false;  // its Replicate of the current round was answered
  Version spec = -1;         // the spec of this round's Replicate
  bool reasked = false;      // a relative spec's version was lost and asked again (once)
  bool reask_after_unpublish = false;  // ... once the partial buffers are given up
};

struct Actor {
  ClientId cid = 0;
  bool trainer = false, spot = false, alive = true, registered = false;
  int retain = 0, n = 1;
  std::string model, replica, dc;
  uint64_t session = 0;
  std::vector<Shard> sh;
  Version held = -1, update_from = -1;
  int round = 0;
  bool busy = false;         // a scheduled next phase is pending
  bool pending_update = false;  // unpublished for THUB_Update: replicate newer than `held`
  // transaction check for the current round
  bool has_first = false;
  bool in_place_round = false;  // an update in place: sources are chosen per shard
  Version first_v = -1;
  int first_src = -1;
  std::vector<std::pair<MemberId, uint64_t>> first_plan;  // source shards and their hidden_ count
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

  // ---- the network to the registry (simulation.cc)
  void send(int i, int s, Op op, Event ev, RequestId req);
  void transmit(int i, uint64_t session, const Event& ev);
  void retry_later(int i, int s, RequestId req, uint64_t session);
  RequestId next_req() { return ++req_; }
  void deliver(const Event& ev, uint64_t epoch);

  // ---- faults: crashes and registry restarts (simulation.cc)
  void crash(int i);
  void restart_registry();
  void chaos();

  // ---- what the registry decided (simulation.cc dispatches, simulation_checks.cc checks)
  void act(const Action& action);

  // ---- the registry as seen from outside, and the checks on it (simulation_checks.cc)
  bool retained_now(const std::string& model, Version v) const;
  void sweep_host_copies();
  void mark_delivered(ClientId c, RequestId req);
  std::set<MemberId> members_of(ClientId c) const;
  void release_reads(const std::set<MemberId>& readers, Time until);
  std::map<MemberId, int> outside_load(bool with_reservations);
  void check_reader_limit();
  bool complete_holder(const Shard& t, Version v) const;
  void check_no_idle_wait();
  // The actor whose current session is client `c` (-1: unknown, or an older session of an
  // actor that has rejoined since: what happens to that one must not touch the new one).
  int current(ClientId c) const {
    auto it = by_client_.find(c);
    return it == by_client_.end() || actors_[it->second].cid != c ? -1 : it->second;
  }
  bool undecided(ClientId c, RequestId req) const;
  bool first_delivery(ClientId c, RequestId req) const;
  Shard* reg_view(MemberId m);
  void hide(MemberId m);
  void forget_client(ClientId c);
  void zombie_decided(Actor& z, const Reply& rep);
  void on_decided(int i, int s, const Out& out, const Reply& rep);
  void check_transaction(int i, int s, const Reply& rep);
  void check_version_lost(int i, int s, const Out& out, const Reply& rep);
  bool grounded_view(const Shard& t, Version v);
  // Failure judgment as the registry does it (from what was delivered and decided):
  ClientId session_of(MemberId m) const;  // the registry-known session holding member m, or 0
  bool silent_view(ClientId c) const;
  void judge_silent_view(const Event& ev);  // before each step: touch, then judge silence
  void reported(const SourceFailed& e);     // a SourceFailed the registry processes
  void confirm(MemberId m, bool host, Version v);
  void forget_reports(MemberId m, bool host, Version v);
  void new_fill(MemberId m);                // the member's buffers start a new fill
  void done_read(LeaseId lease, const Reply& rep);  // a TransferDone decided
  // Every session the registry still knows: current ones, and those of actors that crashed
  // silently and came back as a new client before the registry removed the old one.
  template <class F>
  void for_each_registered(F fn) const {
    for (const Actor& b : actors_)
      if (b.registered) fn(b);
    for (const auto& [cid, b] : zombies_) fn(b);
  }
  void check_unpublish_ack(int i, int s);
  void liveness();

  // ---- the client side, joining (simulation_client.cc)
  void reply(int i, uint64_t session, const Reply& rep);
  void cleanup(int i, int s);
  void start_transfer(int i, int s, const Reply& rep);
  int source_state(const Xfer& x);
  void finish_transfer(int i, int s, uint64_t session, LeaseId lease);
  void publish(int i, int s, Version v);
  void open(int i, int s);
  bool idle(const Actor& a) const;
  void progress(int i);
  void next_phase(int i);
  void update_in_place(int i);
  bool reask_lost(int i, int s, Op op, const Reply& rep);
  void reask(int i, int s, Version newer_than);
  void add_actor();
  int model_shards(const std::string& model);
  void join(int i, bool keep);
  void rejoin(int i) { join(i, true); }
  void heartbeat(int i, uint64_t session);

  uint64_t seed_;
  int steps_;
  std::mt19937_64 rng_;
  Config cfg_;
  std::unique_ptr<Registry> reg_;
  uint64_t epoch_ = 0;
  Time now_ = 0;
  uint64_t seq_ = 0;
  RequestId req_ = 0;
  bool quiet_ = false;
  std::map<std::pair<Time, uint64_t>, std::function<void()>> q_;
  std::vector<Actor> actors_;
  std::map<ClientId, Actor> zombies_;  // old sessions the registry has not removed yet
  std::map<ClientId, int> by_client_;
  ClientId next_cid_ = 1;
  std::map<MemberId, std::pair<int, int>> owner_;
  std::map<std::string, std::set<Version>> published_;
  std::map<std::string, Version> next_version_;
  std::map<std::string, int> shards_;
  std::set<MemberId> suspect_;
  std::map<MemberId, uint64_t> hidden_;  // how often a member was hidden (never reset)
  std::set<MemberId> failed_;  // live buffers confirmed failed (until their next fill)
  std::set<std::pair<MemberId, Version>> failed_host_;  // host copies confirmed failed
  std::map<ClientId, Time> last_seen_;  // the registry's deadline clock of each client
  // Reader clients that reported a copy failed, not yet judged: (source, host copy, version).
  std::map<std::tuple<MemberId, bool, Version>, std::set<ClientId>> reports_;
  // Sources each reader member reported during its current transfer (and when).
  std::map<MemberId, std::map<MemberId, Time>> shunned_;
  struct LeaseView {
    MemberId src = 0;
    Version v = -1;
    bool host = false;  // reads a host copy
  };
  std::map<LeaseId, LeaseView> lease_src_;
  struct Held {             // a lease as the clients see it: granted, not yet reported
    MemberId src = 0, reader = 0;
    Time orphan_until = 0;  // its reader was dropped for silence: counted until then
  };
  std::map<LeaseId, Held> held_;
  std::vector<std::pair<int, int>> acks_;  // unpublish acks of the current step
  MemberId updating_now_ = 0;  // the holder whose update in place this step delivers
  std::map<std::string, int> retain_before_;  // per model, before the current step
  SimResult res_;
  uint64_t hash_ = 1469598103934665603ull;
};

}  // namespace thub::sched::sim::detail
