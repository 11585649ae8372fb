// The deterministic simulation as a test: many seeds, invariants after every event, and
// the same seed giving the same trace. A failure prints its seed; replay it with
// thub_sched_soak --first SEED --seeds 1.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/sched/simulation.h"

namespace thub::sched::sim {
namespace {

TEST(SimulationTest, SameSeedSameTrace) {
  for (uint64_t seed : {1ull, 42ull, 977ull}) {
    SimResult a = run_simulation(seed), b = run_simulation(seed);
    ASSERT_TRUE(a.ok) << a.error;
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed;
    EXPECT_EQ(a.events, b.events) << "seed " << seed;
  }
  EXPECT_NE(run_simulation(1).trace_hash, run_simulation(2).trace_hash);
}

TEST(SimulationTest, TenThousandSeeds) {
  uint64_t seeds = 10000;
  if (const char* e = std::getenv("THUB_SIM_SEEDS")) seeds = std::strtoull(e, nullptr, 10);
  uint64_t events = 0, grants = 0, offloads = 0, restarts = 0, crashes = 0, reports = 0, confirmed = 0,
           judged_alive = 0, moved_on = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimResult r = run_simulation(seed);
    ASSERT_TRUE(r.ok) << r.error;
    events += r.events;
    grants += r.grants;
    offloads += r.offloads;
    restarts += r.restarts;
    crashes += r.crashes;
    reports += r.reports;
    confirmed += r.confirmed;
    judged_alive += r.judged_alive;
    moved_on += r.moved_on;
  }
  // the workload must actually exercise the policies
  EXPECT_GT(grants, seeds);
  EXPECT_GT(offloads, 0u);
  EXPECT_GT(restarts, 0u);
  EXPECT_GT(crashes, 0u);
  if (seeds >= 1000) {  // failure judgment and lost versions are exercised too
    EXPECT_GT(confirmed, 0u);
    EXPECT_GT(reports, confirmed);
    EXPECT_GT(judged_alive, 0u);
    EXPECT_GT(moved_on, 0u);
  }
  std::printf("%llu seeds: %llu events, %llu grants, %llu offloads, %llu restarts, %llu crashes, %llu failure "
              "reports, %llu confirmed, %llu reporters told the source stands, %llu latest requests moved on\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(grants), static_cast<unsigned long long>(offloads),
              static_cast<unsigned long long>(restarts), static_cast<unsigned long long>(crashes),
              static_cast<unsigned long long>(reports), static_cast<unsigned long long>(confirmed),
              static_cast<unsigned long long>(judged_alive), static_cast<unsigned long long>(moved_on));
}

}  // namespace
}  // namespace thub::sched::sim
