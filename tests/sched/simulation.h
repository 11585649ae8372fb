// Deterministic simulation of the registry and the client (FoundationDB style): the real
// client machine of every simulated shard against the real registry core, virtual time, one
// seeded RNG, injected faults, invariants checked after every event.
#pragma once

#include <cstdint>
#include <string>

namespace thub::sched::sim {

struct SimResult {
  bool ok = true;
  std::string error;        // the first violation, with seed and virtual time
  uint64_t trace_hash = 0;  // FNV-1a over every delivered event, action and completed operation
  uint64_t events = 0;      // events stepped through the registry
  uint64_t grants = 0, offloads = 0, restarts = 0, crashes = 0, lost = 0;
  // the client side
  uint64_t ops = 0, ops_ok = 0;          // operations completed (CompleteOp), of them THUB_SUCCESS
  uint64_t transfers = 0, source_failures = 0;  // transfers ended, of them with source_failed
  uint64_t reconnects = 0, gone = 0, timeouts = 0, partitions = 0, stalls = 0, cancels = 0;
  uint64_t skewed = 0;  // sessions whose transaction checks were off (see Session::skewed)
};

// Runs one seeded schedule: `steps` workload steps of 10 ms with faults, then a quiet phase
// in which every outstanding request and operation must end.
SimResult run_simulation(uint64_t seed, int steps = 200);

}  // namespace thub::sched::sim
