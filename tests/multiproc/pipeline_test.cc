// Pipeline replication: a replica that holds only part of a version already serves that
// part through its progress counter, and a reader of a partial source that dies resumes
// from another source.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

// 2 x 32 MiB in 64 KiB chunks with one get in flight: long enough to catch mid-transfer.
const std::map<std::string, std::string> kSlow = {{"TENSORHUB_CHUNK_SIZE", "65536"},
                                                  {"TENSORHUB_MAX_INFLIGHT", "1"}};
const std::string kBig = "33554432,33554432,0,4096";

// CPU seconds (user + system, all threads) that process `pid` has used so far.
double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  // Fields after the command name (which may hold spaces, inside parentheses): state is
  // field 3, utime and stime are fields 14 and 15.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Two rollouts: the victim receives slowly (4 KiB gets, one at a time), the reader at full
// speed, so the reader catches up with the victim's counter and follows it as a partial
// source; then the victim is stopped (SIGSTOP) mid-transfer.
void stop_source_of_a_reader(Cluster& c, PeerProcess** victim_out, PeerProcess** reader_out) {
  PeerProcess& victim = c.add_rollout("victim", kBig, "", "chunk_size=4096 max_inflight=1");
  PeerProcess& reader = c.add_rollout("reader", kBig);
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

TEST(PipelineTest, FourReplicatorsAtOnceAndOneReadsAPartialSource) {
  Cluster c(kSlow);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 31, 1));
  for (int i = 0; i < 4; ++i) c.add_rollout("r" + std::to_string(i), kBig);
  for (auto& r : c.rollouts) r->send("ireplicate latest");
  for (auto& r : c.rollouts) ASSERT_TRUE(ok(r->reply()));
  int64_t partial = 0;
  for (auto& r : c.rollouts) {
    std::string w = r->cmd("wait");
    ASSERT_TRUE(ok(w)) << w;
    EXPECT_TRUE(ok(r->cmd("check 31")));
    partial += stat(*r, "partial_sources");
  }
  // One source serves one reader at a time, so three of the four chain off replicas
  // that are still receiving.
  EXPECT_GE(partial, 1);
}

TEST(PipelineTest, ReaderOfAPartialSourceFollowsItsCounter) {
  Cluster c(kSlow);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 41, 1));
  PeerProcess& first = c.add_rollout("first", kBig);
  PeerProcess& second = c.add_rollout("second", kBig);
  ASSERT_TRUE(ok(first.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(first, "bytes_held", [](int64_t b) { return b > 0; }));
  // The trainer is busy with `first`; `second` is sent to `first`, which holds a prefix.
  ASSERT_TRUE(ok(second.cmd("ireplicate latest")));
  std::string w = second.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  ASSERT_TRUE(ok(first.cmd("wait")));
  EXPECT_TRUE(ok(second.cmd("check 41")));
  EXPECT_EQ(stat(second, "partial_sources"), 1);
  EXPECT_GT(stat(second, "counter_reads"), 0);
}

// A reader of a partial source asks for pipeline_chunk_size pieces (default 256 KiB), not
// chunk_size (default 4 MiB): every hop of a chain then lags its source by less.
TEST(PipelineTest, ReaderOfAPartialSourceUsesThePipelineChunkSize) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 43, 1));
  PeerProcess& first = c.add_rollout("first", kBig, "", "chunk_size=4096 max_inflight=1");
  PeerProcess& second = c.add_rollout("second", kBig, "", "pipeline_chunk_size=65536");
  ASSERT_TRUE(ok(first.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(first, "bytes_held", [](int64_t b) { return b > 0; }));
  ASSERT_TRUE(ok(second.cmd("ireplicate latest")));
  std::string w = second.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  ASSERT_TRUE(ok(first.cmd("wait")));
  EXPECT_TRUE(ok(second.cmd("check 43")));
  ASSERT_EQ(stat(second, "partial_sources"), 1);
  int64_t total = stat(second, "total_bytes");
  EXPECT_GE(stat(second, "gets"), total / 65536) << "chunk_size (4 MiB) was used for a partial source";
}

// While its gets wait on a source that does not answer, the reader's progress thread
// sleeps on UCX events (in steps of at most 10 ms) instead of spinning: a stopped source
// must not cost its readers a core each. Over shared memory, where UCX 1.13 also keeps
// saying "events pending" with nothing to progress (Worker::Impl::sleep_until).
TEST(PipelineTest, ReaderWaitingOnAStoppedSourceDoesNotSpin) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 47, 1));
  PeerProcess *victim_p = nullptr, *reader_p = nullptr;
  ASSERT_NO_FATAL_FAILURE(stop_source_of_a_reader(c, &victim_p, &reader_p));
  PeerProcess &victim = *victim_p, &reader = *reader_p;
  const double wall = 1.5;
  double cpu0 = cpu_seconds(reader.pid());
  std::this_thread::sleep_for(std::chrono::duration<double>(wall));
  double used = cpu_seconds(reader.pid()) - cpu0;
  int64_t held = stat(reader, "bytes_held");
  ASSERT_LT(held, stat(reader, "total_bytes")) << "the reader finished before its source was stopped";
  // A spinning progress thread uses ~1 CPU second per second (less only when starved of CPU).
  EXPECT_LT(used, 0.25 * wall) << "the reader used " << used << " CPU s in " << wall << " s waiting";
  // Finishing elsewhere is the next test's subject, over TCP: over shared memory a process
  // stopped (then killed) in the middle of a send can leave a slot of its peer's receive
  // FIFO reserved but never written, which wedges that peer's shared-memory receives (UCX
  // 1.13's mm transports have no peer-failure handling; seen here once in ~15 runs: the
  // trainer then never saw the reader's requests).
  victim.signal(SIGKILL);
}

// Over TCP (see above for why not shared memory): the stopped partial source is killed, and
// the reader resumes from what it holds at the trainer.
TEST(PipelineTest, KilledPartialSourceIsReplacedAndTheReaderFinishesByteExact) {
  Cluster c(std::map<std::string, std::string>{{"UCX_TLS", "tcp"}});
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 51, 1));
  PeerProcess *victim_p = nullptr, *reader_p = nullptr;
  ASSERT_NO_FATAL_FAILURE(stop_source_of_a_reader(c, &victim_p, &reader_p));
  PeerProcess &victim = *victim_p, &reader = *reader_p;
  // The reader stops growing below the total: its only source holds just a prefix.
  int64_t total = stat(reader, "total_bytes"), last = -1, now = 0;
  for (int i = 0; i < 200 && now != last; ++i) {
    last = now;
    std::string r = reader.cmd("stat bytes_held");
    now = std::stoll(word(r, 1));
    if (now != last) i = 0;
  }
  ASSERT_LT(now, total) << "the victim finished before it could be stopped";
  victim.signal(SIGKILL);
  std::string w = reader.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  EXPECT_TRUE(ok(reader.cmd("check 51")));
  EXPECT_EQ(stat(reader, "partial_sources"), 1);
  EXPECT_GE(stat(reader, "source_failures"), 1);
}

}  // namespace
}  // namespace thub::test
