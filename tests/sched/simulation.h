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
  // failure judgment (sched/transaction.cc: report_failure) and lost versions
  uint64_t reports = 0;       // SourceFailed reports the registry judged
  uint64_t confirmed = 0;     // copies judged failed (by reports or silence)
  uint64_t judged_alive = 0;  // reporters told their reported sources still stand (kTransport)
  uint64_t moved_on = 0;      // relative requests asked again after their version was lost
  uint64_t copy_failures = 0; // host copies that could not be made (OffloadDone without one)
  // agreement (issue 18): rounds of multi-shard replicas whose every shard completed its
  // replicate or update: compared, of them with different outcomes (code, or version held),
  // and excused (a shard canceled, or past its own deadline: an outcome of that shard alone).
  uint64_t rounds = 0, rounds_disagreeing = 0, rounds_excused = 0;
  uint64_t rounds_disagreeing_failover = 0;  // of them, rounds that spanned a registry failover
  uint64_t rounds_failover = 0;  // rounds compared that spanned a registry failover
  uint64_t rounds_moved = 0;
  uint64_t rounds_failed_apart = 0;  // every shard failed, not all with the same error
  uint64_t rounds_unheld = 0, rounds_unheld_disagreeing = 0;  // with Config::round_hold 0  // shards told their round moved to a newer version
  std::string first_disagreement;  // the first disagreeing round, for the report
  // liveness of relative requests (THUB_SIM_FAULTLESS): THUB_LATEST requests made while a
  // version stayed published kStaysPublished after them (each must succeed), and the longest
  // any of them took (virtual us)
  uint64_t relative_checked = 0;
  int64_t relative_longest_us = 0;
  // ... of those, updates answered THUB_NOT_UPDATED by smart skipping (checked at the answer:
  // a newer version was on its way into the updater's datacenter), excused
  uint64_t relative_skipped = 0;
  // seeding (issue 22): grants that crossed datacenters (seeds), and of them those made while
  // another replica of the reader's datacenter was reading the same shard of that version
  // across (excused only when the reader had reported that one, or its chain was broken:
  // any other is a violation)
  uint64_t seeds = 0, seeds_beside = 0;
  uint64_t skipped_updates = 0;  // updates answered THUB_NOT_UPDATED by smart skipping
  uint64_t offload_seeds = 0;    // grants across to seed buffers (offload seeding)
};

// THUB_SIM_FAULTLESS: a THUB_LATEST replicate or update made while some version of its model
// stays published this long after it (virtual us) must succeed, within the second bound. The
// first bound covers a request's wait for a reader slot on the version's holders (at 20 ms,
// seeds 42, 74, 115 of 300 failed: the version went while the request waited for a slot, and
// a latest request that finds nothing is answered NOT_FOUND).
constexpr int64_t kRelativeStaysPublishedUs = 250'000;
constexpr int64_t kRelativeServedWithinUs = 3'000'000;

// Runs one seeded schedule: `steps` workload steps of 10 ms with faults, then a quiet phase
// in which every outstanding request and operation must end.
SimResult run_simulation(uint64_t seed, int steps = 200);

}  // namespace thub::sched::sim
