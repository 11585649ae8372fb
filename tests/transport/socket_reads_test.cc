// Reads over sockets (src/transport/socket_reads.h), the data path to peers UCX would reach
// over tcp: byte-exact through the Worker, a read needs the region's token, a withdrawn
// region is never read again, and a reader that goes away mid-reply (killed, or cancelled)
// costs the source nothing but that connection.
#include "src/transport/socket_reads.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
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

// A watched read (socket_reads.h) is parked while the watched word lies in [lo, hi): nothing
// of it, nor of the reads behind it, is sent. Once the word leaves the range the data comes,
// and behind it the word's value as read after the data went out. A watch of a word the
// server does not serve (another token, misaligned, past the region) is refused like a bad
// read, and the connection stays.
TEST(SocketReadsTest, WatchedReadParksUntilTheWordLeavesTheRangeAndBringsIt) {
  std::vector<char> mem(1 << 20);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<char>(i * 7);
  alignas(8) uint64_t word = 5;
  ReadServer server({htonl(INADDR_LOOPBACK)});
  const auto base = reinterpret_cast<uint64_t>(mem.data()), waddr = reinterpret_cast<uint64_t>(&word);
  server.serve(base, mem.size(), 11);
  server.serve(waddr, sizeof word, 12);
  ReadConnection r(loopback(server));
  std::vector<char> dst(mem.size(), 0);
  uint64_t sample = 0, unused = 0;
  int parked_done = 0, behind_done = 0;
  ReadWatch w{waddr, 12, 0, 100, &sample};
  r.read(dst.data(), 4096, base, 11, [&](bool ok, const std::string&) { parked_done = ok ? 1 : -1; }, &w);
  r.read(dst.data() + 4096, 4096, base + 4096, 11, [&](bool ok, const std::string&) { behind_done = ok ? 1 : -1; });
  // Parked: a hundred rounds of polling bring nothing, and the server says so.
  drive(server, {&r}, [] { return false; }, 5);
  EXPECT_EQ(parked_done, 0);
  EXPECT_EQ(behind_done, 0) << "a read behind a parked one was answered before it";
  EXPECT_TRUE(server.parked());
  EXPECT_EQ(dst[5], 0);
  // The word passes the range's end: the read is served, then the one behind it.
  __atomic_store_n(&word, uint64_t{100}, __ATOMIC_RELEASE);
  ASSERT_TRUE(drive(server, {&r}, [&] { return parked_done != 0 && behind_done != 0; }));
  EXPECT_EQ(parked_done, 1);
  EXPECT_EQ(behind_done, 1);
  EXPECT_EQ(sample, 100u);
  EXPECT_FALSE(server.parked());
  EXPECT_EQ(std::memcmp(dst.data(), mem.data(), 8192), 0);
  // A word outside the range at once (below it too: another fill) is served at once with it.
  ReadWatch below{waddr, 12, 200, 300, &sample};
  int done = 0;
  r.read(dst.data(), 100, base, 11, [&](bool ok, const std::string&) { done = ok ? 1 : -1; }, &below);
  ASSERT_TRUE(drive(server, {&r}, [&] { return done != 0; }));
  EXPECT_EQ(done, 1);
  EXPECT_EQ(sample, 100u);
  // Watches of words it does not serve: refused, the connection kept.
  std::vector<ReadWatch> bad = {{waddr, 11, 0, 1, &unused},        // the word under another region's token
                                {waddr, 99, 0, 1, &unused},        // a token it never handed out
                                {base + 3, 11, 0, 1, &unused},     // misaligned
                                {base + mem.size(), 11, 0, 1, &unused}};  // past the region
  int refused = 0, answered = 0;
  for (auto& b : bad)
    r.read(dst.data(), 100, base, 11, [&](bool ok, const std::string&) { ++(ok ? answered : refused); }, &b);
  ASSERT_TRUE(drive(server, {&r}, [&] { return refused + answered == 4; }));
  EXPECT_EQ(refused, 4);
  EXPECT_FALSE(r.failed());
  // The region of a parked read's word withdrawn: that connection is closed, its read fails.
  ReadWatch again{waddr, 12, 0, 1000, &sample};
  done = 0;
  r.read(dst.data(), 100, base, 11, [&](bool ok, const std::string&) { done = ok ? 1 : -1; }, &again);
  drive(server, {&r}, [] { return false; }, 3);
  ASSERT_TRUE(server.parked());
  server.withdraw(12);
  ASSERT_TRUE(drive(server, {&r}, [&] { return done != 0; }));
  EXPECT_EQ(done, -1);
  EXPECT_FALSE(server.parked());
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

// A raw TCP connection to the server (no greeting unless sent): -1 when refused.
int raw_connect(const ReadServer& server) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(server.endpoint().port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

ReadServerLimits short_limits() {
  ReadServerLimits l;
  l.max_pending = 8;
  l.max_pending_per_peer = 4;
  l.pending_deadline = std::chrono::milliseconds(300);
  l.write_deadline = std::chrono::milliseconds(300);
  return l;
}

// Issue 19: connections without a credential (no greeting, no token) once took a trainer's
// descriptors to their limit. Now a peer holds few pending connections, and only until the
// pending deadline; a reader that presented a token keeps its connection past it.
TEST(SocketReadsTest, ConnectionsWithoutATokenAreCappedAndTimedOut) {
  std::vector<char> mem(1 << 20, 'm');
  ReadServer server({htonl(INADDR_LOOPBACK)}, short_limits());
  server.serve(reinterpret_cast<uint64_t>(mem.data()), mem.size(), 7);
  std::vector<int> idle;
  for (int i = 0; i < 40; ++i) idle.push_back(raw_connect(server));
  const auto t0 = std::chrono::steady_clock::now();
  drive(server, {}, [&] { return server.refused() >= 36; }, 200);
  EXPECT_LE(server.connections(), 4u) << "pending connections from one peer are capped";
  EXPECT_GE(server.refused(), 36u);
  // Past the deadline they are closed, and a reader with a token is served.
  ASSERT_TRUE(drive(server, {}, [&] { return server.connections() == 0; }, 100));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  ReadConnection r(loopback(server));
  std::vector<char> dst(4096, 0);
  int done = 0;
  std::string err;
  auto read_once = [&] {
    r.read(dst.data(), dst.size(), reinterpret_cast<uint64_t>(mem.data()), 7,
           [&](bool ok, const std::string& e) { err = ok ? "" : e, ++done; });
  };
  read_once();
  ASSERT_TRUE(drive(server, {&r}, [&] { return done == 1; }));
  EXPECT_TRUE(err.empty()) << err;
  EXPECT_EQ(server.pending(), 0u) << "a valid token authenticates the connection";
  // Authenticated: the pending deadline no longer applies.
  const auto t1 = std::chrono::steady_clock::now();
  drive(server, {&r}, [&] { return std::chrono::steady_clock::now() - t1 > std::chrono::milliseconds(500); }, 20);
  read_once();
  ASSERT_TRUE(drive(server, {&r}, [&] { return done == 2; }));
  EXPECT_TRUE(err.empty()) << err;
  EXPECT_EQ(std::string(dst.data(), dst.size()), std::string(4096, 'm'));
  for (int fd : idle)
    if (fd >= 0) ::close(fd);
}

// A reader that asks and never takes its replies holds the server's memory and a descriptor:
// its connection is closed after the write deadline.
TEST(SocketReadsTest, RepliesNotTakenForTheWriteDeadlineCloseTheConnection) {
  std::vector<char> mem(32 << 20, 'w');
  ReadServer server({htonl(INADDR_LOOPBACK)}, short_limits());
  server.serve(reinterpret_cast<uint64_t>(mem.data()), mem.size(), 8);
  int fd = raw_connect(server);
  ASSERT_GE(fd, 0);
  const char greeting[8] = {'T', 'H', 'R', 'D', 0x01, 0x02, 0x03, 0x05};
  std::string req(greeting, 8);
  for (uint64_t v : {uint64_t{1}, reinterpret_cast<uint64_t>(mem.data()), uint64_t{mem.size()}, uint64_t{8}, uint64_t{0},
                     uint64_t{0}, uint64_t{0}, uint64_t{0}})
    req.append(reinterpret_cast<const char*>(&v), 8);
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  ASSERT_TRUE(drive(server, {}, [&] { return server.connections() == 1 && server.pending() == 0; }, 100));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(drive(server, {}, [&] { return server.connections() == 0; }, 100)) << "never closed";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  ::close(fd);
}

// Out of descriptors, accept fails and the listening socket stays readable: the server stops
// polling it for a while instead of waking the loop at once, for ever.
TEST(SocketReadsTest, OutOfDescriptorsPausesAccepting) {
  ReadServer server({htonl(INADDR_LOOPBACK)});
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  std::vector<int> fds;
  int probe = ::dup(0);
  ASSERT_GE(probe, 0);
  ::close(probe);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(probe + 8);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int i = 0; i < 16; ++i) {
    int fd = raw_connect(server);
    if (fd < 0) break;
    fds.push_back(fd);
  }
  // Fill the table so that accept has no descriptor left.
  for (int fd = ::dup(0); fd >= 0; fd = ::dup(0)) fds.push_back(fd);
  std::vector<pollfd> pfds;
  server.add_fds(&pfds);
  ::poll(pfds.data(), pfds.size(), 100);
  server.progress(pfds);
  EXPECT_FALSE(server.accepting()) << "accept failed with EMFILE; accepting pauses";
  std::vector<pollfd> again;
  server.add_fds(&again);
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(again[0].events, 0) << "the listening socket is not polled while paused";
  for (int fd : fds) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_TRUE(server.accepting());
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

// Through the Worker: a watched get over sockets waits while the source's word is in the
// range, although nothing wakes the source's progress thread when another thread stores it
// (it looks again within a millisecond), and brings the word; a peer read another way (a
// process read on this host) cannot watch, and says so.
TEST(SocketReadsTest, WorkerWatchedGetWaitsForTheSourcesCounterMovedByAnotherThread) {
  WorkerOptions o;
  o.tls = "tcp,self";
  auto source = Worker::create(o);
  auto reader = Worker::create(o);
  std::vector<unsigned char> src(1 << 20), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 29 + 3);
  alignas(8) static uint64_t counter = 0;
  __atomic_store_n(&counter, uint64_t{10}, __ATOMIC_RELEASE);
  auto region = source->map(src.data(), src.size());
  auto word = source->map(&counter, sizeof counter);
  std::promise<std::pair<bool, uint64_t>> done;
  auto f = done.get_future();
  uint64_t sample = 0;
  bool watches = false;
  std::shared_ptr<Peer> peer;
  std::shared_ptr<RemoteKey> key, wkey;
  reader->call([&] {
    peer = reader->peer(source->address(), true);
    key = reader->remote_key(peer, region->packed_rkey());
    wkey = reader->remote_key(peer, word->packed_rkey());
    watches = Worker::watches(*peer, *key, *wkey);
    if (!watches) return;
    Worker::Watch w{word->address(), wkey.get(), 0, 100, &sample};
    reader->get_watched(peer, dst.data(), dst.size(), region->address(), *key, w,
                        [&](bool ok, const std::string&) { done.set_value({ok, sample}); });
  });
  ASSERT_TRUE(watches) << "a peer read over sockets can watch its counter";
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout) << "served while parked";
  __atomic_store_n(&counter, uint64_t{100}, __ATOMIC_RELEASE);  // not the source's progress thread
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto [ok, got] = f.get();
  EXPECT_TRUE(ok);
  EXPECT_EQ(got, 100u);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), src.size()), 0);
  reader->call([&] {
    key.reset();
    wkey.reset();
    peer.reset();
  });

  // A source on this host read with process reads (UCX's default transports): no watch.
  auto local_src = Worker::create(WorkerOptions{});
  auto local_rdr = Worker::create(WorkerOptions{});
  auto r2 = local_src->map(src.data(), src.size());
  auto w2 = local_src->map(&counter, sizeof counter);
  bool local_watches = true;
  std::string err;
  std::promise<void> failed;
  auto ff = failed.get_future();
  local_rdr->call([&] {
    peer = local_rdr->peer(local_src->address(), false);
    key = local_rdr->remote_key(peer, r2->packed_rkey());
    wkey = local_rdr->remote_key(peer, w2->packed_rkey());
    local_watches = Worker::watches(*peer, *key, *wkey);
    Worker::Watch w{w2->address(), wkey.get(), 0, 1000, &sample};
    local_rdr->get_watched(peer, dst.data(), 64, r2->address(), *key, w, [&](bool ok, const std::string& e) {
      err = ok ? "" : e;
      failed.set_value();
    });
  });
  ASSERT_EQ(ff.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_FALSE(local_watches);
  EXPECT_NE(err.find("cannot watch"), std::string::npos) << err;
  local_rdr->call([&] {
    key.reset();
    wkey.reset();
    peer.reset();
  });
}

}  // namespace
}  // namespace thub::transport
