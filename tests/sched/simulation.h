// Deterministic simulation of the registry (FoundationDB style): many simulated clients,
// virtual time, one seeded RNG, injected faults, invariants checked after every event.
#pragma once

#include <cstdint>
#include <string>

namespace thub::sched::sim {

struct SimResult {
  bool ok = true;
  std::string error;        // the first violation, with seed and virtual time
  uint64_t trace_hash = 0;  // FNV-1a over every delivered event and every action
  uint64_t events = 0;      // events stepped through the registry
  uint64_t grants = 0, offloads = 0, restarts = 0, crashes = 0, lost = 0;
};

// Runs one seeded schedule: `steps` workload actions, then a quiet phase in which every
// outstanding request must be answered.
SimResult run_simulation(uint64_t seed, int steps = 200);

}  // namespace thub::sched::sim
