// Pipeline scenarios shared by the host multi-process tests (pipeline_test.cc) and the GPU
// ones (tests/gpu/gpu_processes_test.cc, the same scenarios with CUDA tensors): the Cluster
// says where the peers' tensors live.
#pragma once

#include <signal.h>

#include <string>

#include "tests/multiproc/cluster.h"

namespace thub::test {

// 2 x 32 MiB, a 0-byte and a tiny tensor (compacted): long enough to catch mid-transfer.
inline const std::string kPipelineLayout = "33554432,33554432,0,4096";
// 64 KiB gets, one at a time: slow enough that a source serves one reader at a time.
inline const std::map<std::string, std::string> kPipelineSlow = {{"TENSORHUB_CHUNK_SIZE", "65536"},
                                                                 {"TENSORHUB_MAX_INFLIGHT", "1"}};

// `n` rollouts replicate the trainer's version (filled with `seed`) at once; each must end
// byte-exact. Returns their partial_sources, summed (reads of replicas still receiving).
inline int64_t replicate_all_at_once(Cluster& c, int n, int seed) {
  for (int i = 0; i < n; ++i) c.add_rollout("r" + std::to_string(i), kPipelineLayout);
  for (auto& r : c.rollouts) r->send("ireplicate latest");
  for (auto& r : c.rollouts) EXPECT_TRUE(ok(r->reply()));
  int64_t partial = 0;
  for (auto& r : c.rollouts) {
    std::string w = r->cmd("wait");
    EXPECT_TRUE(ok(w)) << w;
    EXPECT_TRUE(ok(r->cmd("check " + std::to_string(seed))));
    partial += stat(*r, "partial_sources");
  }
  return partial;
}

// Two rollouts: the victim receives slowly (4 KiB gets, one at a time), the reader at full
// speed, so the reader catches up with the victim's counter and follows it as a partial
// source; then the victim is stopped (SIGSTOP) mid-transfer.
inline void stop_source_of_a_reader(Cluster& c, PeerProcess** victim_out, PeerProcess** reader_out) {
  PeerProcess& victim = c.add_rollout("victim", kPipelineLayout, "", "chunk_size=4096 max_inflight=1");
  PeerProcess& reader = c.add_rollout("reader", kPipelineLayout);
  ASSERT_TRUE(ok(victim.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(victim, "bytes_held", [](int64_t b) { return b > 0; })) << "the victim got no bytes";
  ASSERT_TRUE(ok(reader.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(reader, "bytes_held", [](int64_t b) { return b > 0; }))
      << "the reader got no bytes; victim holds " << victim.cmd("stat bytes_held") << ", reader "
      << reader.cmd("stat partial_sources") << " partial, " << reader.cmd("stat counter_reads") << " counter reads";
  victim.signal(SIGSTOP);
  *victim_out = &victim;
  *reader_out = &reader;
}

// Over TCP (a process stopped or killed in the middle of a shared-memory send can wedge its
// peer's receives: pipeline_test.cc): the stopped partial source is killed once the reader
// has stopped growing below the total, and the reader resumes from what it holds at the
// trainer (filled with `seed`), byte-exact.
inline void kill_partial_source_and_resume(Cluster& c, int seed) {
  PeerProcess *victim_p = nullptr, *reader_p = nullptr;
  ASSERT_NO_FATAL_FAILURE(stop_source_of_a_reader(c, &victim_p, &reader_p));
  PeerProcess &victim = *victim_p, &reader = *reader_p;
  // The reader stops growing below the total: its only source holds just a prefix.
  int64_t total = stat(reader, "total_bytes"), last = -1, now = 0;
  for (int i = 0; i < 200 && now != last; ++i) {
    last = now;
    now = stat(reader, "bytes_held");
    if (now != last) i = 0;
  }
  ASSERT_LT(now, total) << "the victim finished before it could be stopped";
  victim.signal(SIGKILL);
  std::string w = reader.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  EXPECT_TRUE(ok(reader.cmd("check " + std::to_string(seed))));
  EXPECT_EQ(stat(reader, "partial_sources"), 1);
  EXPECT_GE(stat(reader, "source_failures"), 1);
}

}  // namespace thub::test
