// thub_sched_soak --seeds N [--first S] [--steps K]: runs the simulation for long; prints
// each failing seed (with its trace) and a summary; exit status 1 when any seed failed.
// Environment: THUB_SIM_TRACE=1 (every decision), THUB_SIM_STRICT=0 (the round check is
// exempted for a shard that asks a registry alone after a failover), THUB_SIM_AGREE_FAILOVER=0
// (rounds across a registry failover are not compared), THUB_SIM_TIMEOUTS=1 (some contexts set
// timeout_ms), THUB_SIM_FAULTLESS=1 (no faults; liveness of latest requests; docs/sched.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/sched/simulation.h"

int main(int argc, char** argv) {
  uint64_t seeds = 1000, first = 1;
  int steps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seeds")) seeds = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--first")) first = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s --seeds N [--first S] [--steps K]\n", argv[0]);
      return 2;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  uint64_t failed = 0, events = 0, ops = 0, skewed = 0, rounds = 0, disagreeing = 0, excused = 0, seeds_disagreeing = 0, over_failover = 0, failover_rounds = 0, moved = 0, unheld = 0, unheld_dis = 0, apart = 0;
  uint64_t relative = 0;
  int64_t relative_longest = 0;
  uint64_t seeded = 0, beside = 0, skipped = 0, offload_seeds = 0, relative_skipped = 0;
  std::string first_disagreement;
  for (uint64_t s = first; s < first + seeds; ++s) {
    auto r = thub::sched::sim::run_simulation(s, steps);
    events += r.events;
    ops += r.ops;
    skewed += r.skewed > 0;
    rounds += r.rounds;
    disagreeing += r.rounds_disagreeing;
    excused += r.rounds_excused;
    over_failover += r.rounds_disagreeing_failover;
    failover_rounds += r.rounds_failover;
    moved += r.rounds_moved;
    unheld += r.rounds_unheld;
    apart += r.rounds_failed_apart;
    unheld_dis += r.rounds_unheld_disagreeing;
    seeds_disagreeing += r.rounds_disagreeing > 0;
    relative += r.relative_checked;
    seeded += r.seeds;
    beside += r.seeds_beside;
    skipped += r.skipped_updates;
    offload_seeds += r.offload_seeds;
    relative_skipped += r.relative_skipped;
    relative_longest = std::max(relative_longest, r.relative_longest_us);
    if (first_disagreement.empty() && !r.first_disagreement.empty())
      first_disagreement = "seed " + std::to_string(s) + ": " + r.first_disagreement;
    if (!r.ok) {
      ++failed;
      std::printf("FAIL %s\n", r.error.c_str());
    } else if (seeds == 1) {
      std::printf("seed %llu ok: trace %016llx, %llu events\n", static_cast<unsigned long long>(s),
                  static_cast<unsigned long long>(r.trace_hash), static_cast<unsigned long long>(r.events));
    }
  }
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%llu seeds from %llu, %d steps: %llu failed, %llu events, %llu client operations, %llu seeds with a "
              "skewed session, %.1f s (%.0f seeds/s)\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(first), steps,
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(ops), static_cast<unsigned long long>(skewed), sec,
              sec > 0 ? static_cast<double>(seeds) / sec : 0.0);
  std::printf("multi-shard rounds: %llu compared (%llu across a registry failover), %llu disagreeing (in %llu seeds; %llu "
              "across a registry failover), %llu excused (a shard's own cancel or deadline, or a shard decided later than round_hold), %llu shards told their round moved, %llu failed on every shard with "
              "different errors; with round_hold 0: %llu rounds, %llu disagreeing%s%s\n",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(failover_rounds),
              static_cast<unsigned long long>(disagreeing), static_cast<unsigned long long>(seeds_disagreeing), static_cast<unsigned long long>(over_failover),
              static_cast<unsigned long long>(excused), static_cast<unsigned long long>(moved),
              static_cast<unsigned long long>(apart), static_cast<unsigned long long>(unheld),
              static_cast<unsigned long long>(unheld_dis),
              first_disagreement.empty() ? "" : "; first: ", first_disagreement.c_str());
  std::printf("grants across datacenters: %llu; of them beside another replica of the reader's datacenter reading "
              "that shard across: %llu (each excused: the reader had reported that one, its chain was broken, or (a round) that "
              "replica did not read every shard, now or when the round was planned), %llu of them by seed buffers (offload seeding); updates answered "
              "not-updated by smart skipping: %llu\n",
              static_cast<unsigned long long>(seeded), static_cast<unsigned long long>(beside),
              static_cast<unsigned long long>(offload_seeds), static_cast<unsigned long long>(skipped));
  if (relative > 0)  // THUB_SIM_FAULTLESS
    std::printf("latest requests made while a version stayed published %lld ms after them: %llu, every one served "
                "but %llu updates answered not updated while a newer version was on its way into their datacenter "
                "(bound %lld ms); the longest took %.1f ms from its round's start\n",
                static_cast<long long>(thub::sched::sim::kRelativeStaysPublishedUs / 1000), static_cast<unsigned long long>(relative),
                static_cast<unsigned long long>(relative_skipped),
                static_cast<long long>(thub::sched::sim::kRelativeServedWithinUs / 1000), static_cast<double>(relative_longest) / 1000.0);
  return failed ? 1 : 0;
}
