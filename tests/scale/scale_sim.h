// The simulation at scale: the real registry (sched::Registry) and one real client machine
// (client::MemberMachine) per member, over a fluid model of the network
// (fluid_network.h, topology.h), in virtual time. One trainer replica publishes a version;
// `replicas` rollout replicas replicate it at t0; some join or die meanwhile. It answers how
// long the fan-out takes against the ideal, what trees the registry builds, and how many
// decisions and messages a version costs. Deterministic: one seeded RNG, no wall clock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sched/types.h"
#include "tests/scale/scale_config.h"

namespace thub::scale {

// One event the registry stepped, for replaying a version's work in a benchmark.
struct RegistryStep {
  sched::Event event;
  sched::Time now = 0;
  bool in_version = false;  // at or after t0 (else: setup: connects, opens, the publish)
};

struct ScaleResult {
  bool ok = true;
  std::string error;  // the first thing that went wrong (with virtual time)

  // ---- the fan-out; seconds of virtual time after t0 (the rollouts' THUB_Replicate)
  double ideal_s = 0;          // see ideal_seconds()
  double completion_s = 0;     // the last rollout replica of those at t0 (not killed) done
  double ratio = 0;            // completion / ideal
  double p50_s = 0, p99_s = 0; // over those replicas
  double joiner_worst_ratio = 0;  // max over joiners of (done - join) / ideal
  int replicas_done = 0, replicas_failed = 0, replicas_killed = 0, replicas_joined = 0;
  int64_t wrong_version = 0;   // members that completed with a version other than published

  // ---- trees: a member's depth = its source's depth + 1 when its last transfer began
  // (the trainer is 0); fan-out = readers a member was granted to during the version
  int depth_max = 0;
  double depth_mean = 0;
  std::map<int, int> fanout;   // readers granted -> members with that many
  uint64_t grants = 0, partial_grants = 0, deferred = 0, source_failures = 0, errors = 0;
  uint64_t cross_grants = 0;    // grants whose source is in another datacenter than its reader
  uint64_t stall_timeouts = 0;  // transfers whose stall watchdog fired (their source reported)
  uint64_t retries = 0;         // THUB_Replicate calls that failed and were made again

  // ---- the control plane during the version (t0 .. end)
  std::map<std::string, uint64_t> requests;  // client -> registry, by kind
  uint64_t replies = 0;                      // registry -> client
  uint64_t heartbeats = 0;                   // counted apart from requests
  uint64_t registry_events = 0;              // stepped, heartbeats and ticks included
  double registry_busy_s = 0;                // the modelled service times, summed

  // ---- the simulation itself
  uint64_t net_recomputes = 0, sim_events = 0;
  uint64_t machine_gets = 0, machine_counter_reads = 0;  // the transfer machines' reads, summed
  uint64_t trace_hash = 0;     // FNV-1a of every registry step and reply, and every transfer end
  std::vector<RegistryStep> trace;  // when cfg.record_registry_trace
};

// ideal = max(shard bytes / one member's NIC share, and with several datacenters the model
// bytes / the DC uplink) + two control round trips (Replicate -> grant, TransferDone -> ok)
// to the farthest rollout DC + one data round trip: no fan-out can finish sooner.
double ideal_seconds(const ScaleConfig& cfg);

ScaleResult run_scale(const ScaleConfig& cfg);

// One JSON object (one line) with the configuration and the result; a human summary.
std::string to_json(const ScaleConfig& cfg, const ScaleResult& r);
std::string to_text(const ScaleConfig& cfg, const ScaleResult& r);

}  // namespace thub::scale
