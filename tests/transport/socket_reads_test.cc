// Reads over sockets (src/transport/socket_reads.h), the data path to peers UCX would reach
// over tcp: byte-exact through the Worker, a read needs the region's token, a withdrawn
// region is never read again, and a reader that goes away mid-reply (killed, or cancelled)
// costs the source nothing but that connection.
#include "src/transport/socket_reads.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "src/common/status.h"
#include "src/transport/worker.h"

namespace thub::transport {
namespace {

using Done = std::vector<std::pair<ReadConnection::Done, std::string>>;

// Drives one server and its readers with poll() until `until` holds (or `limit` polls, so
// that a broken build fails instead of hanging).
template <typename Pred>
bool drive(ReadServer& server, const std::vector<ReadConnection*>& readers, Pred until, int limit = 200000) {
  for (int i = 0; i < limit; ++i) {
    if (until()) return true;
    std::vector<pollfd> fds;
    server.add_fds(&fds);
    for (auto* r : readers) r->add_fds(&fds);
    ::poll(fds.data(), fds.size(), 100);
    server.progress(fds);
    Done done;
    for (auto* r : readers) r->progress(fds, &done);
    for (auto& [cb, err] : done) cb(err.empty(), err);
  }
  return until();
}

SocketEndpoint loopback(const ReadServer& s) { return {s.endpoint().port, {htonl(INADDR_LOOPBACK)}}; }

TEST(SocketReadsTest, ReadNeedsTheRegionsTokenAndStaysInsideIt) {
  std::vector<char> mem(100000, 'a');
  ReadServer server({htonl(INADDR_LOOPBACK)});
  server.serve(reinterpret_cast<uint64_t>(mem.data()), mem.size(), 42);
  ReadConnection r(loopback(server));
  std::vector<char> dst(1000, 0);
  int done = 0;
  std::string e1, e2, e3;
  bool ok3 = false;
  auto base = reinterpret_cast<uint64_t>(mem.data());
  r.read(dst.data(), 1000, base, 41, [&](bool ok, const std::string& e) { e1 = ok ? "" : e, ++done; });
  r.read(dst.data(), 1000, base + mem.size() - 999, 42,
         [&](bool ok, const std::string& e) { e2 = ok ? "" : e, ++done; });
  r.read(dst.data(), 1000, base + 5, 42, [&](bool ok, const std::string& e) { ok3 = ok, e3 = e, ++done; });
  ASSERT_TRUE(drive(server, {&r}, [&] { return done == 3; }));
  EXPECT_NE(e1.find("does not serve"), std::string::npos) << "wrong token read: " << e1;
  EXPECT_NE(e2.find("does not serve"), std::string::npos) << "read past the region: " << e2;
  EXPECT_TRUE(ok3) << e3;  // the connection survives refused reads
  EXPECT_EQ(std::string(dst.data(), 1000), std::string(1000, 'a'));
}

TEST(SocketReadsTest, WithdrawnRegionIsNeverReadAgain) {
  std::vector<char> mem(1 << 20, 'b');
  ReadServer server({htonl(INADDR_LOOPBACK)});
  server.serve(reinterpret_cast<uint64_t>(mem.data()), mem.size(), 7);
  ReadConnection r(loopback(server));
  std::vector<char> dst(mem.size());
  bool first = false, second = true;
  int done = 0;
  r.read(dst.data(), dst.size(), reinterpret_cast<uint64_t>(mem.data()), 7, [&](bool ok, const std::string&) {
    first = ok;
    ++done;
  });
  ASSERT_TRUE(drive(server, {&r}, [&] { return done == 1; }));
  server.withdraw(7);
  r.read(dst.data(), dst.size(), reinterpret_cast<uint64_t>(mem.data()), 7, [&](bool ok, const std::string&) {
    second = ok;
    ++done;
  });
  ASSERT_TRUE(drive(server, {&r}, [&] { return done == 2; }));
  EXPECT_TRUE(first);
  EXPECT_FALSE(second);
}

// The server listens on the addresses it advertises and nowhere else (not INADDR_ANY): a
// reader reaches it on each of them, and a connect to another local address of the host is
// refused. Linux answers for all of 127/8 on lo, so 127.0.0.3 is such an address.
TEST(SocketReadsTest, ServerListensOnlyWhereItAdvertises) {
  const uint32_t a = inet_addr("127.0.0.1"), b = inet_addr("127.0.0.2"), other = inet_addr("127.0.0.3");
  ReadServer server({a, b});
  std::vector<char> mem(4096, 'c');
  server.serve(reinterpret_cast<uint64_t>(mem.data()), mem.size(), 9);
  const uint16_t port = server.endpoint().port;
  ASSERT_NE(port, 0);
  for (uint32_t ip : {a, b}) {
    ReadConnection r({port, {ip}});
    std::vector<char> dst(mem.size(), 0);
    bool ok = false;
    int done = 0;
    r.read(dst.data(), dst.size(), reinterpret_cast<uint64_t>(mem.data()), 9, [&](bool k, const std::string&) {
      ok = k;
      ++done;
    });
    ASSERT_TRUE(drive(server, {&r}, [&] { return done == 1; }));
    EXPECT_TRUE(ok) << "not reachable on an advertised address";
    EXPECT_EQ(dst, mem);
  }
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = other;
  to.sin_port = htons(port);
  errno = 0;
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0) << "reachable on an address never advertised";
  EXPECT_EQ(errno, ECONNREFUSED);
  ::close(fd);
  EXPECT_THROW(ReadServer(std::vector<uint32_t>{}), Error);
}

// A reader that vanishes with megabytes of replies queued to it (what a SIGKILL does to its
// socket) leaves the server serving the next reader.
TEST(SocketReadsTest, ReaderGoneMidReplyCostsTheServerOnlyThatConnection) {
  std::vector<char> mem(64 << 20);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<char>(i * 13);
  ReadServer server({htonl(INADDR_LOOPBACK)});
  server.serve(reinterpret_cast<uint64_t>(mem.data()), mem.size(), 9);
  std::vector<char> dst(mem.size());
  auto dying = std::make_unique<ReadConnection>(loopback(server));
  size_t landed = 0;
  for (size_t off = 0; off < mem.size(); off += 4 << 20) {
    dying->read(dst.data() + off, 4 << 20, reinterpret_cast<uint64_t>(mem.data()) + off, 9,
                [&](bool ok, const std::string&) { landed += ok; });
  }
  ASSERT_TRUE(drive(server, {dying.get()}, [&] { return landed >= 1; }));
  Done dropped;
  dying->close("killed", &dropped);  // its socket goes, replies still queued at the server
  dying.reset();
  ReadConnection next(loopback(server));
  std::vector<char> again(mem.size(), 0);
  int ok = 0, failed = 0;
  for (size_t off = 0; off < mem.size(); off += 4 << 20) {
    next.read(again.data() + off, 4 << 20, reinterpret_cast<uint64_t>(mem.data()) + off, 9,
              [&](bool good, const std::string&) { (good ? ok : failed)++; });
  }
  ASSERT_TRUE(drive(server, {&next}, [&] { return ok + failed == 16; }));
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(std::memcmp(again.data(), mem.data(), mem.size()), 0);
}

// Through the Worker, as the transfer executor uses it: two workers restricted to tcp serve
// each other's reads over sockets; cancelling the reader's peer mid-transfer completes its
// reads with errors (later, from the loop) and the source serves a fresh peer byte-exact.
TEST(SocketReadsTest, WorkerReadsOverSocketsAndSurvivesACancelledReader) {
  WorkerOptions o;
  o.tls = "tcp,self";
  auto source = Worker::create(o);
  auto reader = Worker::create(o);
  ASSERT_TRUE(source->detects_local_peer_failure());
  std::vector<unsigned char> src(32 << 20), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 31 + 7);
  auto region = source->map(src.data(), src.size());
  auto transfer = [&](bool cancel_midway) {
    std::promise<int> finished;
    auto f = finished.get_future();
    auto failures = std::make_shared<int>(0);
    auto left = std::make_shared<int>(32);
    reader->call([&] {
      auto peer = reader->peer(source->address(), true);
      auto key = reader->remote_key(peer, region->packed_rkey());
      for (size_t i = 0; i < 32; ++i) {
        reader->get(peer, dst.data() + (i << 20), 1 << 20, region->address() + (i << 20), *key,
                    [&finished, failures, left](bool ok, const std::string&) {
                      *failures += !ok;
                      if (--*left == 0) finished.set_value(*failures);
                    });
      }
      if (cancel_midway) reader->cancel_peer(peer);
    });
    EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    return f.get();
  };
  EXPECT_GT(transfer(true), 0);  // cancelled: the reads fail, none lands later
  std::fill(dst.begin(), dst.end(), 0);
  EXPECT_EQ(transfer(false), 0);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
  reader.reset();
  region.reset();
}

}  // namespace
}  // namespace thub::transport
