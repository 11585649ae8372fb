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

#include "tests/multiproc/scenarios.h"

namespace thub::test {
namespace {

// 2 x 32 MiB in 64 KiB chunks with one get in flight: long enough to catch mid-transfer.
const std::map<std::string, std::string>& kSlow = kPipelineSlow;
const std::string& kBig = kPipelineLayout;

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

// `second` asks once `first` (reading the trainer) holds a prefix: the trainer is busy with
// `first`, so `second` is sent to `first`, a partial source. Both end byte-exact.
void second_reads_the_partial_first(PeerProcess& first, PeerProcess& second, int seed) {
  ASSERT_TRUE(ok(first.cmd("ireplicate latest")));
  ASSERT_TRUE(wait_for_stat(first, "bytes_held", [](int64_t b) { return b > 0; }));
  ASSERT_TRUE(ok(second.cmd("ireplicate latest")));
  std::string w = second.cmd("wait");
  ASSERT_TRUE(ok(w)) << w;
  ASSERT_TRUE(ok(first.cmd("wait")));
  EXPECT_TRUE(ok(second.cmd("check " + std::to_string(seed))));
}

TEST(PipelineTest, FourReplicatorsAtOnceAndOneReadsAPartialSource) {
  Cluster c(kSlow);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 31, 1));
  const int64_t partial = replicate_all_at_once(c, 4, 31);
  // One source serves one reader at a time, so three of the four chain off replicas
  // that are still receiving.
  EXPECT_GE(partial, 1);
}

TEST(PipelineTest, ReaderOfAPartialSourceFollowsItsCounter) {
  Cluster c(kSlow);
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 41, 1));
  PeerProcess& first = c.add_rollout("first", kBig);
  PeerProcess& second = c.add_rollout("second", kBig);
  ASSERT_NO_FATAL_FAILURE(second_reads_the_partial_first(first, second, 41));
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
  ASSERT_NO_FATAL_FAILURE(second_reads_the_partial_first(first, second, 43));
  ASSERT_EQ(stat(second, "partial_sources"), 1);
  int64_t total = stat(second, "total_bytes");
  EXPECT_GE(stat(second, "gets"), total / 65536) << "chunk_size (4 MiB) was used for a partial source";
}

// Over the transport's own sockets a reader of a partial source with parked_reads=true (the
// default) does not poll its counter: its chunks park at the source and bring the counter with
// them. With parked_reads=false the same transfer reads the counter again and again.
TEST(PipelineTest, OverSocketsAReaderOfAPartialSourceParksInsteadOfPolling) {
  int64_t reads[2] = {-1, -1};
  for (bool parked : {true, false}) {
    Cluster c(std::map<std::string, std::string>{{"UCX_TLS", "tcp"}});
    ASSERT_NO_FATAL_FAILURE(c.start_trainer(kBig, 53, 1));
    PeerProcess& first = c.add_rollout("first", kBig, "", "chunk_size=65536 max_inflight=1");
    PeerProcess& second = c.add_rollout("second", kBig, "", parked ? "parked_reads=true" : "parked_reads=false");
    ASSERT_NO_FATAL_FAILURE(second_reads_the_partial_first(first, second, 53));
    ASSERT_EQ(stat(second, "partial_sources"), 1) << "the scenario needs a partial source";
    EXPECT_GT(stat(second, "bytes_socket"), 0) << "read over the transport's sockets";
    reads[parked ? 0 : 1] = stat(second, "counter_reads");
  }
  // Parked: the read that shows the granted fill, and the one that vouches for the flag word.
  EXPECT_LE(reads[0], 3) << "a reader whose chunks park polled its source's counter";
  EXPECT_GT(reads[1], 10) << "the same transfer without parked reads (the comparison) polled less than expected";
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
  kill_partial_source_and_resume(c, 51);
}

}  // namespace
}  // namespace thub::test
