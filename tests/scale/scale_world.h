// The at-scale world (scale_sim.h): one event queue in virtual time, the registry behind a
// single-server queue, one MemberMachine per member, the fluid network. Its member functions
// are defined by concept: scale_world.cc (events, the registry's channel, the script of the
// fan-out, joins and deaths) and member_driver.cc (carrying out a machine's actions: the
// transfers over the network, as src/client/model.cc does over UCX).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "sched/registry.h"
#include "src/client/member_machine.h"
#include "tests/scale/fluid_network.h"
#include "tests/scale/scale_sim.h"
#include "tests/scale/topology.h"

namespace thub::scale::detail {

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
  // the transfer running
  uint64_t transfer = 0;
  FlowId flow = 0;
  int source = -1;
  double chunk = 0;               // the unit this transfer reads in
  int depth = 0;
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
  void activate(int mi, uint64_t transfer, int src, uint32_t src_fill, uint64_t start);
  void fail_transfer(int mi, Ns after, uint64_t held);
  void fail_readers(int node_member, Ns after);
  void network_due();
  void watch_stall(FlowId f);
  void settle_network();

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
