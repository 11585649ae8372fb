// The registry's decisions as a pure state machine: step(event, now) -> actions.
// Everything the registry decides (which version, which source, when a drain is done,
// what a failure means) happens here, so that it runs in a deterministic simulation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sched/snapshot.h"
#include "sched/types.h"

namespace thub::sched {

class Registry {
 public:
  explicit Registry(Config cfg = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  Registry(Registry&&) noexcept;
  Registry& operator=(Registry&&) noexcept;  // a registry that stops leading starts afresh

  // Apply one event at time `now` (non-decreasing between calls) and return what to do.
  [[nodiscard]] std::vector<Action> step(const Event& ev, Time now);

  // The earliest time at which time alone (a Tick, nothing else arriving) may change
  // anything: a client's heartbeat deadline, a lease's progress deadline or an orphaned
  // lease's end, a round's or a drain's hold, the takeover grace. A server may sleep until
  // then. kNever when nothing waits on time; no later than the last step's time while a
  // request is deferred, a failure report awaits its judgment, or an Open or a Replicate is
  // held (those are retried at every tick). check_invariants() reports a step whose
  // deadlines changed something before the time this promised at the step before.
  static constexpr Time kNever = INT64_MAX;
  [[nodiscard]] Time quiet_until() const;

  // A human-readable dump of models, versions and holders (tensorhub-info, debugging).
  [[nodiscard]] std::string describe() const;

  // Models, versions, holders, transfers in flight and retention as values (snapshot.h), at
  // most `limits` of each; changes nothing (tensorhub-info --registry, the INFO request).
  [[nodiscard]] Snapshot snapshot(const SnapshotLimits& limits = {}) const;

  // Checks the registry's internal invariants (leases, loads, lost wake-ups); returns ""
  // when consistent, else one line per violation. For the simulation and debugging.
  [[nodiscard]] std::string check_invariants() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace thub::sched
