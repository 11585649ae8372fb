// The deterministic simulation as a test: the real client machine against the real registry
// core, many seeds, invariants after every event, and the same seed giving the same trace. A
// failure prints its seed; replay it with thub_sched_soak --first SEED --seeds 1
// (THUB_SIM_TRACE=1 prints every decision).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/sched/simulation.h"

namespace thub::sched::sim {
namespace {

TEST(SimulationTest, SameSeedSameTrace) {
  for (uint64_t seed : {1ull, 42ull, 977ull}) {
    SimResult a = run_simulation(seed), b = run_simulation(seed);
    ASSERT_TRUE(a.ok) << a.error;
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed;
    EXPECT_EQ(a.events, b.events) << "seed " << seed;
    EXPECT_EQ(a.ops, b.ops) << "seed " << seed;
    EXPECT_EQ(a.transfers, b.transfers) << "seed " << seed;
  }
  EXPECT_NE(run_simulation(1).trace_hash, run_simulation(2).trace_hash);
}

// Adds the counts of `r` to `sum`.
void accumulate(SimResult& sum, const SimResult& r) {
  sum.events += r.events;
  sum.grants += r.grants;
  sum.offloads += r.offloads;
  sum.restarts += r.restarts;
  sum.crashes += r.crashes;
  sum.ops += r.ops;
  sum.ops_ok += r.ops_ok;
  sum.transfers += r.transfers;
  sum.source_failures += r.source_failures;
  sum.reconnects += r.reconnects;
  sum.gone += r.gone;
  sum.partitions += r.partitions;
  sum.stalls += r.stalls;
  sum.cancels += r.cancels;
  sum.reports += r.reports;
  sum.confirmed += r.confirmed;
  sum.judged_alive += r.judged_alive;
  sum.moved_on += r.moved_on;
  sum.copy_failures += r.copy_failures;
  sum.rounds += r.rounds;
  sum.rounds_moved += r.rounds_moved;
  sum.rounds_disagreeing_failover += r.rounds_disagreeing_failover;
  sum.rounds_failover += r.rounds_failover;
  sum.relative_checked += r.relative_checked;
  sum.seeds += r.seeds;
  sum.seeds_beside += r.seeds_beside;
  sum.skipped_updates += r.skipped_updates;
  sum.offload_seeds += r.offload_seeds;
  sum.relative_skipped += r.relative_skipped;
  sum.relative_longest_us = std::max(sum.relative_longest_us, r.relative_longest_us);
}

// Seeds are independent schedules: they are run on one thread per core (THUB_SIM_THREADS
// sets how many), each seed exactly as alone, and summed; the smallest failing seed is kept.
struct SeedRun {
  SimResult sum;
  uint64_t skewed_seeds = 0;
  uint64_t failed_seed = 0;  // 0: none
  std::string error;
};

SeedRun run_seeds(uint64_t seeds) {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char* e = std::getenv("THUB_SIM_THREADS")) threads = std::max(1ul, std::strtoul(e, nullptr, 10));
  threads = static_cast<unsigned>(std::min<uint64_t>(threads, std::max<uint64_t>(seeds, 1)));
  std::vector<SeedRun> parts(threads);
  std::atomic<uint64_t> next{1};
  std::atomic<uint64_t> first_failure{UINT64_MAX};
  auto work = [&](SeedRun& p) {
    for (;;) {
      const uint64_t seed = next.fetch_add(1);
      if (seed > seeds || seed > first_failure.load()) return;
      SimResult r = run_simulation(seed);
      if (!r.ok) {
        if (p.failed_seed == 0 || seed < p.failed_seed) {
          p.failed_seed = seed;
          p.error = r.error;
        }
        uint64_t f = first_failure.load();
        while (seed < f && !first_failure.compare_exchange_weak(f, seed)) {
        }
        continue;
      }
      accumulate(p.sum, r);
      p.skewed_seeds += r.skewed > 0;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, std::ref(parts[t]));
  work(parts[0]);
  for (auto& t : pool) t.join();
  // The smallest failing seed, whichever thread ran it (seeds below it all ran and passed).
  SeedRun all;
  for (const SeedRun& p : parts) {
    if (p.failed_seed != 0 && (all.failed_seed == 0 || p.failed_seed < all.failed_seed)) {
      all.failed_seed = p.failed_seed;
      all.error = p.error;
    }
    accumulate(all.sum, p.sum);
    all.skewed_seeds += p.skewed_seeds;
  }
  return all;
}

TEST(SimulationTest, TenThousandSeeds) {
  uint64_t seeds = 10000;
  if (const char* e = std::getenv("THUB_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  const SeedRun run = run_seeds(seeds);
  ASSERT_EQ(run.failed_seed, 0u) << run.error;
  const SimResult& sum = run.sum;
  const uint64_t skewed_seeds = run.skewed_seeds;
  // The workload must actually exercise the policies and the client's paths.
  EXPECT_GT(sum.grants, seeds);
  EXPECT_GT(sum.offloads, 0u);
  EXPECT_GT(sum.restarts, 0u);
  EXPECT_GT(sum.crashes, 0u);
  EXPECT_GT(sum.ops_ok, sum.ops / 2);
  EXPECT_GT(sum.source_failures, 0u);
  EXPECT_GT(sum.reconnects, 0u);
  EXPECT_GT(sum.partitions, 0u);
  EXPECT_GT(sum.stalls, 0u);
  EXPECT_GT(sum.cancels, 0u);
  if (seeds >= 1000) {
    EXPECT_GT(sum.gone, 0u);
    // failure judgment and lost versions are exercised too
    EXPECT_GT(sum.confirmed, 0u);
    EXPECT_GT(sum.reports, sum.confirmed);
    EXPECT_GT(sum.judged_alive, 0u);
    EXPECT_GT(sum.moved_on, 0u);
    EXPECT_GT(sum.copy_failures, 0u);
    // rounds of several shards are compared on every seed (a split fails the seed), and some
    // of them move to a newer version as a whole
    EXPECT_GT(sum.rounds, seeds);
    EXPECT_GT(sum.rounds_moved, 0u);
    // offload seeding: seed buffers cross as their datacenter's seeders, and updates are
    // answered not updated while something is on its way in (each checked at the answer)
    EXPECT_GT(sum.offload_seeds, 0u);
    EXPECT_GT(sum.skipped_updates, 0u);
  }
  if (seeds >= 1000) {
    EXPECT_GT(sum.rounds_failover, 0u);  // rounds across a failover are compared too
  }
  std::printf("%llu multi-shard rounds compared (every shard the same outcome; %llu of them across a registry "
              "failover), %llu shards told their round moved\n",
              static_cast<unsigned long long>(sum.rounds), static_cast<unsigned long long>(sum.rounds_failover),
              static_cast<unsigned long long>(sum.rounds_moved));
  // Sessions with the stale-transaction finding have some checks off (docs/sched.md; about a
  // quarter of the seeds have one): they must not become the rule, or the simulation would
  // quietly check less.
  EXPECT_LT(skewed_seeds * 2, seeds);
  std::printf(
      "%llu seeds: %llu events, %llu grants, %llu offloads, %llu restarts, %llu crashes; client: %llu operations "
      "(%llu ok), %llu transfers (%llu source failures), %llu reconnects, %llu gone, %llu partitions, %llu stalls, "
      "%llu cancels, %llu moved on after a lost version; %llu failure reports, %llu confirmed, %llu reporters told "
      "the source stands; %llu host copies failed; %llu seeds with a skewed session\n",
      static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(sum.events),
      static_cast<unsigned long long>(sum.grants), static_cast<unsigned long long>(sum.offloads),
      static_cast<unsigned long long>(sum.restarts), static_cast<unsigned long long>(sum.crashes),
      static_cast<unsigned long long>(sum.ops), static_cast<unsigned long long>(sum.ops_ok),
      static_cast<unsigned long long>(sum.transfers), static_cast<unsigned long long>(sum.source_failures),
      static_cast<unsigned long long>(sum.reconnects), static_cast<unsigned long long>(sum.gone),
      static_cast<unsigned long long>(sum.partitions), static_cast<unsigned long long>(sum.stalls),
      static_cast<unsigned long long>(sum.cancels), static_cast<unsigned long long>(sum.moved_on),
      static_cast<unsigned long long>(sum.reports), static_cast<unsigned long long>(sum.confirmed),
      static_cast<unsigned long long>(sum.judged_alive), static_cast<unsigned long long>(sum.copy_failures),
      static_cast<unsigned long long>(skewed_seeds));
}

// Issue 18: the seeds on which a round's shards got different outcomes across a registry
// failover, or a shard asked its round at the next registry before its sibling's re-open
// (docs/sched.md, "Across a registry failover": seeds 245; 1, 298; 612, 705, 926; 2517, then
// 1999 with timeouts; those found while the fix was built: 160, 202, 604, 881, 46, 1405, 1737,
// 3349), with every check on: the round check of a session that asks after a failover
// (THUB_SIM_STRICT) and the agreement of rounds across one (THUB_SIM_AGREE_FAILOVER). The
// schedules differ from the ones that failed (every decision changed them), the seeds stay.
TEST(SimulationTest, FoundSeedsOfRoundsAcrossAFailover) {
  struct Found {
    uint64_t seed;
    bool timeouts;
  };
  const Found kFound[] = {{245, false},  {1, false},     {298, false},  {612, false},  {705, false},  {926, false},
                          {2517, true},  {1999, true},   {160, false},  {202, false},  {604, false},  {881, false},
                          {46, false},   {1405, false},  {1737, false}, {3349, true}};
  const bool was_set = std::getenv("THUB_SIM_TIMEOUTS") != nullptr;
  uint64_t failover_rounds = 0;
  for (const Found& f : kFound) {
    if (f.timeouts)
      setenv("THUB_SIM_TIMEOUTS", "1", 1);
    else
      unsetenv("THUB_SIM_TIMEOUTS");
    SimResult r = run_simulation(f.seed);
    EXPECT_TRUE(r.ok) << "seed " << f.seed << ": " << r.error;
    EXPECT_EQ(r.rounds_disagreeing, 0u) << "seed " << f.seed << ": " << r.first_disagreement;
    failover_rounds += r.rounds_failover;
  }
  if (was_set)
    setenv("THUB_SIM_TIMEOUTS", "1", 1);
  else
    unsetenv("THUB_SIM_TIMEOUTS");
  EXPECT_GT(failover_rounds, 0u);
}

// The planned source without pipelining (docs/sched.md, seed 15629 there: "shards of replica
// roll-6 got different source replicas roll-8 and roll-2"): a round plans only a replica whose
// every shard can be read now (choose_replica: pick_in), and a late shard reads the source the
// round kept for it, also while it drains (round_hold), so no shard of a round goes elsewhere
// while its planned source serves. Seed 15629 and 300 more with pipelining forced off, with
// the source check on every session.
TEST(SimulationTest, PlannedSourceWithoutPipelining) {
  const char* was = std::getenv("THUB_SIM_PIPELINE");
  const std::string saved = was ? was : "";
  setenv("THUB_SIM_PIPELINE", "0", 1);
  uint64_t rounds = 0;
  for (uint64_t seed : {uint64_t{15629}}) {
    SimResult r = run_simulation(seed);
    EXPECT_TRUE(r.ok) << r.error;
    rounds += r.rounds;
  }
  const SeedRun run = run_seeds(300);
  if (was)
    setenv("THUB_SIM_PIPELINE", saved.c_str(), 1);
  else
    unsetenv("THUB_SIM_PIPELINE");
  ASSERT_EQ(run.failed_seed, 0u) << run.error;
  EXPECT_GT(rounds + run.sum.rounds, 300u);
}

// Contexts with timeout_ms (THUB_SIM_TIMEOUTS=1): a REPLICATE past its deadline is withdrawn
// (CANCEL, then UNPUBLISH for a grant that crossed it), and what cannot be withdrawn (a
// transfer's TRANSFER_DONE or SOURCE_FAILED, an UNPUBLISH, an update in place) has no
// deadline. Before, a replicate past its deadline stayed pending at the registry and its
// later grant, taken by nobody, held its source's drain for ever; a TRANSFER_DONE past it
// failed an operation whose member held the version (41 of seeds 1-2,000 failed).
TEST(SimulationTest, DeadlinesOnOperations) {
  uint64_t seeds = 2000;
  if (const char* e = std::getenv("THUB_SIM_SEEDS")) seeds = std::min<uint64_t>(seeds, std::strtoull(e, nullptr, 10));
  const bool was_set = std::getenv("THUB_SIM_TIMEOUTS") != nullptr;
  setenv("THUB_SIM_TIMEOUTS", "1", 1);
  uint64_t timeouts = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimResult r = run_simulation(seed);
    if (!r.ok) {
      if (!was_set) unsetenv("THUB_SIM_TIMEOUTS");
      FAIL() << r.error;
    }
    timeouts += r.timeouts;
  }
  if (!was_set) unsetenv("THUB_SIM_TIMEOUTS");
  EXPECT_GT(timeouts, 0u);  // requests did pass their deadlines
  std::printf("%llu seeds with timeout_ms: %llu requests past their deadline\n", static_cast<unsigned long long>(seeds),
              static_cast<unsigned long long>(timeouts));
}

// Liveness of relative requests (issue 18 item 3), in worlds without faults
// (THUB_SIM_FAULTLESS: simulation_world.h; models of 1-16 shards): every THUB_LATEST request
// made while a version of its model stayed published kRelativeStaysPublishedUs after it
// succeeds (an update, when that version is newer than what it held), within
// kRelativeServedWithinUs of its round's first shard. The check failed on seeds of this test
// while it compared a later shard's start, not its round's (the round's outcome is decided
// from its first shard on).
TEST(SimulationTest, LatestRequestsAreServedWhileAVersionStaysPublished) {
  uint64_t seeds = 300;  // each is heavier than a seed with faults: up to 12 replicas of 16 shards
  if (const char* e = std::getenv("THUB_SIM_SEEDS")) seeds = std::min<uint64_t>(seeds, std::strtoull(e, nullptr, 10) / 10);
  const bool was_set = std::getenv("THUB_SIM_FAULTLESS") != nullptr;
  setenv("THUB_SIM_FAULTLESS", "1", 1);
  const SeedRun run = run_seeds(seeds);
  if (!was_set) unsetenv("THUB_SIM_FAULTLESS");
  ASSERT_EQ(run.failed_seed, 0u) << run.error;
  EXPECT_GT(run.sum.relative_checked, seeds * 10);  // the property is exercised, not vacuous
  EXPECT_EQ(run.sum.crashes + run.sum.restarts + run.sum.partitions + run.sum.stalls + run.sum.cancels, 0u);
  EXPECT_GT(run.sum.rounds, seeds);
  std::printf("%llu faultless seeds: %llu latest requests made while a version stayed published %lld ms after them, "
              "every one served; the longest took %.1f ms (bound %lld ms)\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(run.sum.relative_checked),
              static_cast<long long>(kRelativeStaysPublishedUs / 1000), run.sum.relative_longest_us / 1000.0,
              static_cast<long long>(kRelativeServedWithinUs / 1000));
}

}  // namespace
}  // namespace thub::sched::sim
