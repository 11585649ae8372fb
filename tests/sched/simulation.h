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
  uint64_t reports = 0;     // SourceFailed reports the registry judged
  uint64_t confirmed = 0;   // copies judged failed (by reports or silence)
  uint64_t judged_alive = 0;  // reporters told their reported sources still stand (kTransport)
  uint64_t moved_on = 0;    // relative requests asked again after their version was lost
};

// Runs one seeded schedule: `steps` workload actions, then a quiet phase in which every
// outstanding request must be answered.
SimResult run_simulation(uint64_t seed, int steps = 200);

}  // namespace thub::sched::sim
