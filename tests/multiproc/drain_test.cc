// The mutability contract: unpublish returns only when no peer reads the buffers.
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/multiproc/cluster.h"

namespace thub::test {
namespace {

TEST(DrainTest, UnpublishWaitsForAReaderMidTransfer) {
  // Small chunks and one get in flight keep the reader mid-transfer long enough to stop it.
  Cluster c({{"TENSORHUB_CHUNK_SIZE", "65536"}, {"TENSORHUB_MAX_INFLIGHT", "1"}});
  const std::string layout = "67108864,67108864";
  ASSERT_NO_FATAL_FAILURE(c.start_trainer(layout, 21, 1));
  PeerProcess& reader = c.add_rollout("reader", layout);
  ASSERT_TRUE(ok(reader.cmd("ireplicate 1")));
  ASSERT_TRUE(wait_for_stat(reader, "bytes_held", [](int64_t b) { return b > 0; }));
  reader.signal(SIGSTOP);  // frozen mid-transfer, holding its read lease
  c.trainer->send("unpublish");
  // While the reader is frozen, the unpublish must not return.
  EXPECT_FALSE(c.trainer->reply_ready(1500)) << "unpublish returned while a reader was mid-transfer";
  reader.signal(SIGCONT);
  std::string rep = c.trainer->reply();
  ASSERT_TRUE(ok(rep)) << rep;
  // Only now may the owner overwrite; the reader got the old content intact.
  ASSERT_TRUE(ok(c.trainer->cmd("fill 22")));
  rep = reader.cmd("wait");
  ASSERT_TRUE(ok(rep)) << rep;
  EXPECT_TRUE(ok(reader.cmd("check 21")));
}

}  // namespace
}  // namespace thub::test
