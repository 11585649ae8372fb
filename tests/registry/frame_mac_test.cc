// Issue 19 item 5: after a handshake with a token every frame either way carries a MAC under
// a session key (src/registry/auth.h). A relay that lacks the token can forward bytes, but a
// frame it changes, drops, replays or reorders is detected and the connection dropped: it
// rewrote a grant's version and the reader reported success with the changed one.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <string>
#include <thread>

#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"
#include "tests/registry/embedded.h"

namespace thub::registry::test {
namespace {

const Transcript kT{std::string(kNonceBytes, 'c'), std::string(kNonceBytes, 'r'), "dc"};

TEST(FrameMacTest, SealedFramesOpenInOrderOnceAndUnchanged) {
  FrameMac tx(frame_key("token", kT, true)), rx(frame_key("token", kT, true));
  std::string a = encode_frame(MsgType::kOpen, 1, "first"), b = encode_frame(MsgType::kClose, 2, "second");
  tx.seal(a);
  tx.seal(b);
  auto open = [&](FrameMac& m, const std::string& f) {
    FrameHeader h = decode_header(std::string_view(f).substr(0, kHeaderBytes));
    EXPECT_EQ(h.length, f.size() - kHeaderBytes);
    return std::string(m.open(std::string_view(f).substr(0, kHeaderBytes), std::string_view(f).substr(kHeaderBytes)));
  };
  EXPECT_EQ(open(rx, a), "first");
  EXPECT_EQ(open(rx, b), "second");
  // Replayed, reordered, changed anywhere (header, body, tag), the other direction's key,
  // another token: refused.
  FrameMac again(frame_key("token", kT, true));
  EXPECT_THROW(open(again, b), CodecError);  // b is frame 1, not 0: reordered
  FrameMac replay(frame_key("token", kT, true));
  EXPECT_EQ(open(replay, a), "first");
  EXPECT_THROW(open(replay, a), CodecError);  // replayed
  for (size_t i = 0; i < a.size(); ++i) {
    if (i >= kHeaderBytes - 4 && i < kHeaderBytes) continue;  // the length: a frame of another size
    std::string c = a;
    c[i] = static_cast<char>(c[i] ^ 0x01);
    FrameMac m(frame_key("token", kT, true));
    // The header does not decode (magic, version), or the MAC does not match.
    bool refused = false;
    try {
      (void)decode_header(std::string_view(c).substr(0, kHeaderBytes));
      (void)m.open(std::string_view(c).substr(0, kHeaderBytes), std::string_view(c).substr(kHeaderBytes));
    } catch (const CodecError&) {
      refused = true;
    }
    EXPECT_TRUE(refused) << "byte " << i << " changed and taken";
  }
  FrameMac other_way(frame_key("token", kT, false)), other_token(frame_key("token2", kT, true));
  EXPECT_THROW(open(other_way, a), CodecError);
  EXPECT_THROW(open(other_token, a), CodecError);
  std::string bare = encode_frame(MsgType::kOpen, 1, "x");  // no MAC at all
  FrameMac m(frame_key("token", kT, true));
  EXPECT_THROW(open(m, bare), CodecError);
}

// A TCP relay between a client and the registry that forwards everything, and changes one
// byte of the first frame in `direction` after the handshake (the registry's AUTH_OK).
class Relay {
 public:
  enum class Change { kNone, kRegistryToClient, kClientToRegistry };
  Relay(const std::string& upstream, Change change) : upstream_(upstream), change_(change) {
    uint16_t port = 0;
    listener_ = listen_tcp(parse_host_port("127.0.0.1:0"), &port);
    address_ = "127.0.0.1:" + std::to_string(port);
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] const std::string& address() const { return address_; }
  std::atomic<int> changed{0};

 private:
  // Whole frames of `buf`, each passed to `fn(frame)` (which may change it) and forwarded.
  template <typename Fn>
  static bool forward_frames(std::string& buf, int to, Fn&& fn) {
    while (buf.size() >= kHeaderBytes) {
      FrameHeader h = decode_header(std::string_view(buf).substr(0, kHeaderBytes));
      if (buf.size() < kHeaderBytes + h.length) return true;
      std::string f = buf.substr(0, kHeaderBytes + h.length);
      buf.erase(0, f.size());
      fn(h, f);
      if (!write_all(to, f.data(), f.size())) return false;
    }
    return true;
  }
  void run() {
    Fd client, up;
    std::string from_client, from_registry;
    bool authed = false;  // the registry's AUTH_OK went by
    while (!stop_) {
      if (!client.valid()) {
        pollfd p{listener_.get(), POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        client = Fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        up = connect_tcp(parse_host_port(upstream_), 2000);
        continue;
      }
      pollfd ps[2] = {{client.get(), POLLIN, 0}, {up.get(), POLLIN, 0}};
      if (::poll(ps, 2, 20) <= 0) continue;
      char buf[65536];
      for (int side = 0; side < 2; ++side) {
        if (!(ps[side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t k = ::recv(ps[side].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (k <= 0) {
          client = Fd();
          up = Fd();
          return;
        }
        std::string& acc = side == 0 ? from_client : from_registry;
        acc.append(buf, static_cast<size_t>(k));
        auto change = [&](Change dir) {
          return [&, dir](const FrameHeader& h, std::string& f) {
            if (side == 1 && h.type == MsgType::kAuthOk) {
              authed = true;
              return;
            }
            if (authed && change_ == dir && changed == 0 && f.size() > kHeaderBytes + kMacBytes) {
              f[kHeaderBytes] = static_cast<char>(f[kHeaderBytes] ^ 0x01);  // the body's first byte
              ++changed;
            }
          };
        };
        bool ok = side == 0 ? forward_frames(acc, up.get(), change(Change::kClientToRegistry))
                            : forward_frames(acc, client.get(), change(Change::kRegistryToClient));
        if (!ok) return;
      }
    }
  }
  std::string upstream_;
  Change change_;
  Fd listener_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ConnectionOptions through(const Relay& relay) {
  ConnectionOptions co;
  co.addresses = {relay.address()};
  co.auth_token = "relay test token";
  co.reconnect_ms = 0;
  co.request_timeout_ms = 5000;
  co.heartbeat_ms = 1000;
  return co;
}

TEST(FrameMacTest, AnUnchangedRelayIsHarmless) {
  Embedded reg([](ServerOptions& o) { o.auth_token = "relay test token"; });
  Relay relay(reg.address(), Relay::Change::kNone);
  Connection c(through(relay));
  sched::Reply r = c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
  EXPECT_EQ(r.status, sched::Status::kOk);
  EXPECT_NE(r.member, 0u);
  EXPECT_EQ(c.call(sched::Publish{0, 0, r.member, 7, 1, "d"}).status, sched::Status::kOk);
}

TEST(FrameMacTest, AReplyChangedOnTheWayIsDetectedAndTheConnectionDropped) {
  Embedded reg([](ServerOptions& o) { o.auth_token = "relay test token"; });
  Relay relay(reg.address(), Relay::Change::kRegistryToClient);
  Connection c(through(relay));
  try {
    sched::Reply r = c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
    FAIL() << "a changed reply was taken (status " << static_cast<int>(r.status) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kRegistry);
    EXPECT_NE(std::string(e.what()).find("failed its MAC"), std::string::npos) << e.what();
  }
  EXPECT_EQ(relay.changed, 1);
  // Dropped (the pending request fails first, then the connection's state follows).
  for (int i = 0; i < 500 && c.connected(); ++i) ::poll(nullptr, 0, 10);
  EXPECT_FALSE(c.connected());
}

TEST(FrameMacTest, ARequestChangedOnTheWayIsRefusedAndTheConnectionClosed) {
  Embedded reg([](ServerOptions& o) { o.auth_token = "relay test token"; });
  Relay relay(reg.address(), Relay::Change::kClientToRegistry);
  Connection c(through(relay));
  sched::Reply r = c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
  EXPECT_EQ(r.status, sched::Status::kAuth);
  EXPECT_NE(r.detail.find("failed its MAC"), std::string::npos) << r.detail;
  EXPECT_EQ(r.member, 0u);
  EXPECT_EQ(relay.changed, 1);
  EXPECT_TRUE(reg.wait_for([](const ServerStats& s) { return s.connections == 0; }));
}

}  // namespace
}  // namespace thub::registry::test
