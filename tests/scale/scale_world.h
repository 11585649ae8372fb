// The at-scale world (scale_sim.h): one event queue in virtual time, the registry behind a
// single-server queue, one MemberMachine per member, one TransferMachine per transfer, the
// fluid network. Its member functions are defined by concept: scale_world.cc (events, the
// registry's channel, the script of the fan-out, joins and deaths), member_driver.cc (carrying
// out a member machine's actions, as src/client/model.cc does over UCX) and
// transfer_driver.cc (a transfer machine's reads over the fluid network, as
// src/client/transfer.cc does over UCX).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sched/registry.h"
#include "src/client/member_machine.h"
#include "src/client/transfer_machine.h"
#include "tests/scale/fluid_network.h"
#include "tests/scale/scale_sim.h"
#include "tests/scale/topology.h"

namespace thub::scale::detail {

// A transfer into a member: the real transfer machine, and its I/O here (transfer_driver.cc).
struct SimTransfer {
  uint64_t id = 0;                // BeginTransfer's transfer
  uint64_t serial = 0;            // unique in the world: events of an ended transfer are dropped
  int src = -1;
  uint32_t src_fill = 0;          // the fill the source's descriptor promised
  std::unique_ptr<client::TransferMachine> m;
  bool active = false;            // started (one data round trip after the grant) ...
  Ns started = 0;                 // ... at (its watchdog ticks from then)
  Ns last_landed = 0;             // a read last landed (or it started)
  std::deque<client::ReadChunk> reads;  // issued, not landed yet (in stream order)
  bool counter_asked = false;     // a ReadCounter not answered yet
  bool hashes_asked = false;      // a ReadHashes not answered yet
  uint64_t hashes_upto = 0;
  bool parked = false;            // a ReadCounterAfter waits ...
  Ns due = 0;                     // ... for its time
  bool changed = false;           // ... and something it could see to change since it was asked
  bool soon = false;              // a look at once is queued (note_change)
  Ns wake_at = -1;                // the wake event queued for (retry's time, failures)
  uint64_t wake_gen = 0;
  FlowId land_flow = 0;           // the landing event queued: for this flow, read end, rate
  uint64_t land_end = 0;
  double land_rate = -1;
  uint64_t land_gen = 0;
  bool failing = false;           // the source was killed: its reads fail at `fails_at`
  Ns fails_at = 0;
};

struct SimMember {
  int idx = 0, replica = 0, shard = 0;
  Topology::Place place;
  int node = 0;                   // in the fluid network
  sched::ClientId client = 0;     // one client (process) per member, as one rank per GPU
  std::unique_ptr<client::MemberMachine> m;
  bool alive = true;
  uint64_t next_op = 1;
  uint64_t replicate_op = 0;      // the THUB_Replicate of the version, once issued
  uint32_t fill = 0;              // the epoch its descriptor promises (progress_counter.h)
  uint64_t shown = 0;             // the bytes its progress counter shows (with `fill`)
  Ns died = -1;                   // killed or vanished at
  // the transfer running
  std::unique_ptr<SimTransfer> x;
  FlowId flow = 0;                // its bytes in the fluid network (while they move)
  double chunk = 0;               // the client's read unit from its source (the fluid's gap)
  int depth = 0;
  std::set<int> readers;          // members whose transfer reads from this one
  // outcome
  Ns asked = -1, done = -1;
  int64_t version = -1;
  bool failed = false;
  int retries = 0;                // THUB_Replicate called again after an error
};

struct SimReplica {
  bool joiner = false, killed = false;
  Ns joined = 0, killed_at = 0;
  int members_done = 0;
  Ns done = -1;
  bool failed = false;
};

class World {
 public:
  explicit World(const ScaleConfig& cfg);
  ScaleResult run();

  // ---- scale_world.cc
  void at(Ns t, std::function<void()> fn);
  void fail(const std::string& what);
  int add_replica(bool joiner);
  void connect_and_open(int replica);
  void start_fanout();
  void replicate(int mi);
  void kill_replica(int replica);
  void heartbeat(int mi);
  void tick();
  void to_registry(int mi, sched::Event ev);
  void registry_arrival(sched::Event ev);
  void serve_registry();
  void deliver(const sched::Action& a, Ns at);
  void on_complete(int mi, const client::CompleteOp& c);
  bool finished() const;
  void hash(uint64_t x);
  void collect(ScaleResult& r) const;

  // ---- member_driver.cc
  void feed(int mi, const client::MachineEvent& ev);
  void act(int mi, const client::MachineAction& a);
  void begin_transfer(int mi, const client::BeginTransfer& a);
  void source_changed(int src);
  void source_died(int src);
  void network_due();
  void settle_network();

  // ---- transfer_driver.cc
  void activate(int mi, uint64_t serial);
  void drive(int mi, std::vector<client::TransferStep> steps);
  bool answer(int mi, std::deque<client::TransferStep>& todo);
  [[nodiscard]] uint64_t counter_of(const SimMember& s) const;
  void note_change(int mi);
  void schedule(int mi);
  void watchdog(int mi, uint64_t serial);
  void end_transfer(int mi, const client::TransferFinish& f);
  void drop_transfer(int mi);
  [[nodiscard]] SimTransfer* transfer_of(int mi, uint64_t serial);

  const ScaleConfig cfg_;
  std::mt19937_64 rng_;
  FluidNetwork net_;
  Topology topo_;
  double shard_bytes_ = 0;
  double ideal_ns_ = 0;

  // events: (time, sequence) order
  struct Ev {
    Ns t;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Ev& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q_;
  uint64_t seq_ = 0;
  Ns now_ = 0;
  Ns t0_ = -1;                    // the fan-out starts (setup done)
  uint64_t net_gen_ = 0;
  uint64_t next_serial_ = 1;

  sched::Registry reg_;
  std::vector<sched::Event> inbox_;  // FIFO (consumed from inbox_head_)
  size_t inbox_head_ = 0;
  bool serving_ = false;
  Ns busy_until_ = 0;
  Ns busy_ns_ = 0;                // the registry's modelled busy time during the version

  std::vector<std::unique_ptr<SimMember>> members_;
  std::vector<SimReplica> replicas_;
  std::map<FlowId, int> flow_member_;
  std::map<sched::MemberId, int> by_registry_id_;
  uint32_t next_fill_ = 1;
  int setup_left_ = 0;            // opens and the publish still running before t0
  int outstanding_ = 0;           // version replicates still running (live members)
  int faults_left_ = 0;           // joins and deaths still to come

  ScaleResult res_;
  std::map<int, int> readers_granted_;  // member -> readers granted during the version
  uint64_t hash_ = 1469598103934665603ull;
  bool failed_ = false;
};

}  // namespace thub::scale::detail
