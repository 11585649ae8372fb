// The transport's completion contract, with real UCX: a get's callback runs on the progress
// thread and never inside Worker::get, even where UCX completes the read during the call.
#include "src/transport/worker.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <vector>

namespace thub::transport {
namespace {

// Chained reads, each issued from the previous one's callback (as the transfer executor
// pumps its chunks). A callback run inside get() would see the issuing frame still open; the
// executor used to recurse once per chunk that way until its stack overflowed
// (examples/engine_embed, a flaky SIGSEGV: a replica reading another model of its own
// context, through UCX's self transport).
void chained_reads(Worker& reader, Worker& source, size_t chunk, size_t chunks) {
  std::vector<unsigned char> src(chunk * chunks), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  auto region = source.map(src.data(), src.size());
  struct State {
    std::shared_ptr<Peer> peer;
    std::unique_ptr<RemoteKey> key;
    size_t next = 0, done = 0, depth = 0, max_depth = 0, failures = 0;
    std::promise<void> finished;
  } st;
  std::function<void()> issue = [&] {
    size_t i = st.next++;
    ++st.depth;
    st.max_depth = std::max(st.max_depth, st.depth);
    reader.get(st.peer, dst.data() + i * chunk, chunk, region->address() + i * chunk, *st.key,
               [&](bool ok, const std::string&) {
                 st.failures += ok ? 0 : 1;
                 if (++st.done == chunks) return st.finished.set_value();
                 if (st.next < chunks) issue();
               });
    --st.depth;
  };
  auto finished = st.finished.get_future();
  reader.call([&] {
    st.peer = reader.peer(source.address(), false);
    st.key = std::make_unique<RemoteKey>(st.peer, region->packed_rkey());
    issue();
  });
  ASSERT_EQ(finished.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  reader.call([&] {
    st.key.reset();
    st.peer.reset();
  });
  EXPECT_EQ(st.failures, 0u);
  EXPECT_EQ(st.max_depth, 1u) << "a callback ran inside Worker::get (chunk " << chunk << ")";
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
}

TEST(WorkerTest, GetCallbackNeverRunsInsideGetOnItsOwnWorker) {
  auto w = Worker::create(WorkerOptions{});
  for (size_t chunk : {8, 32, 4096}) chained_reads(*w, *w, chunk, 20000);
}

TEST(WorkerTest, GetCallbackNeverRunsInsideGetAcrossWorkers) {
  auto source = Worker::create(WorkerOptions{});
  auto reader = Worker::create(WorkerOptions{});
  for (size_t chunk : {8, 32, 4096}) chained_reads(*reader, *source, chunk, 20000);
}

}  // namespace
}  // namespace thub::transport

namespace thub::transport {
namespace {

// Worker::allocate gives registered memory of its own (shared memory where UCX can), and
// Worker::remote_key unpacks a peer's key once per endpoint: a second transfer from the same
// region reuses the mapping instead of attaching the segment again.
TEST(WorkerTest, AllocatedMemoryIsReadableAndItsKeyIsUnpackedOnce) {
  auto source = Worker::create(WorkerOptions{});
  auto reader = Worker::create(WorkerOptions{});
  auto region = source->allocate(1 << 20);
  ASSERT_TRUE(region->allocated());
  ASSERT_NE(region->data(), nullptr);
  EXPECT_TRUE(region->contains(region->data() + 100, 1000));
  EXPECT_FALSE(region->contains(region->data() + (1 << 20) - 10, 11));
  for (size_t i = 0; i < (1u << 20); ++i) region->data()[i] = static_cast<char>(i * 13);
  std::vector<char> dst(1 << 20, 0);
  std::promise<bool> done;
  std::shared_ptr<Peer> peer;
  std::shared_ptr<RemoteKey> k1, k2, k3;
  reader->call([&] {
    peer = reader->peer(source->address(), false);
    k1 = reader->remote_key(peer, region->packed_rkey());
    k2 = reader->remote_key(peer, region->packed_rkey());
    k3 = reader->remote_key(reader->peer(source->address(), false, 1), region->packed_rkey());
    reader->get(peer, dst.data(), dst.size(), region->address(), *k1,
                [&](bool ok, const std::string&) { done.set_value(ok); });
  });
  ASSERT_TRUE(done.get_future().get());
  EXPECT_EQ(std::memcmp(dst.data(), region->data(), dst.size()), 0);
  EXPECT_EQ(k1, k2);  // cached
  EXPECT_NE(k1, k3);  // another endpoint (lane) has its own
  reader->call([&] {
    k1.reset();
    k2.reset();
    k3.reset();
    peer.reset();
  });
}

}  // namespace
}  // namespace thub::transport
