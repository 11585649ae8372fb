// Issue 13, item 6: every control-plane connection proves the shared token with an HMAC
// challenge-response. The token never travels, a recorded handshake replayed on a new
// connection is refused (both ways), a wrong token is THUB_ERR_AUTH, and a registry with a
// token hands nothing but its challenge to a peer that has not proven itself.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <vector>

#include "src/common/crypto.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"
#include "tests/registry/recording_proxy.h"

namespace thub::registry::test {
namespace {

const std::string kToken = "correct horse battery staple 4711";

ConnectionOptions options(const std::string& address, const std::string& token) {
  ConnectionOptions co;
  co.addresses = {address};
  co.auth_token = token;
  co.connect_timeout_ms = 10000;
  return co;
}

Code connect_code(const ConnectionOptions& co, std::string* what = nullptr) {
  try {
    Connection c(co);
    return Code::kSuccess;
  } catch (const Error& e) {
    if (what) *what = e.what();
    return e.code();
  }
}

// Every frame the registry sends until it closes the connection; *closed tells EOF from the guard.
std::vector<Frame> until_closed(RawClient& c, bool* closed) {
  std::vector<Frame> out;
  while (auto f = c.read_frame()) out.push_back(std::move(*f));
  *closed = c.closed_by_peer(1000);
  return out;
}

TEST(AuthTest, RightTokenConnectsAndTheTokenNeverTravels) {
  Embedded e([](ServerOptions& o) { o.auth_token = kToken; });
  RecordingProxy proxy(e.address());
  Connection c(options(proxy.address(), kToken));
  EXPECT_EQ(c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
  ASSERT_TRUE(proxy.wait_frames(3, 3));  // HELLO, AUTH, OPEN; CHALLENGE, AUTH_OK, REPLY
  EXPECT_EQ(proxy.to_registry().find(kToken), std::string::npos) << "the token went to the registry in clear";
  EXPECT_EQ(proxy.to_client().find(kToken), std::string::npos) << "the token came back in clear";
  EXPECT_EQ(proxy.to_registry().find("correct horse"), std::string::npos);
}

TEST(AuthTest, WrongTokenIsAuthErrorAndTheRegistryLogsTheRefusal) {
  Embedded e([](ServerOptions& o) { o.auth_token = kToken; });
  std::string what;
  EXPECT_EQ(connect_code(options(e.address(), "correct horse battery staple 4712"), &what), Code::kAuth);
  EXPECT_NE(what.find("wrong token"), std::string::npos) << what;
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.refusals >= 1 && s.connections == 0; }));
  EXPECT_EQ(connect_code(options(e.address(), kToken)), Code::kSuccess);
}

TEST(AuthTest, ClientWithoutATokenIsToldTheRegistryRequiresOne) {
  Embedded e([](ServerOptions& o) { o.auth_token = kToken; });
  std::string what;
  EXPECT_EQ(connect_code(options(e.address(), ""), &what), Code::kAuth);
  EXPECT_NE(what.find("requires an auth token"), std::string::npos) << what;
}

// A recorded handshake played back on a new connection: its HELLO repeats a nonce the
// registry has seen, and is refused at once (THUB_ERR_AUTH), before any CHALLENGE.
TEST(AuthTest, ReplayedHelloIsRefused) {
  Embedded e([](ServerOptions& o) { o.auth_token = kToken; });
  RecordingProxy proxy(e.address());
  Connection good(options(proxy.address(), kToken));
  ASSERT_TRUE(proxy.wait_frames(2, 2));
  const std::string replay = RecordingProxy::first_frames(proxy.to_registry(), 2);  // HELLO, AUTH

  RawClient attacker(e.address());
  ASSERT_TRUE(attacker.send_bytes(replay));
  bool closed = false;
  std::vector<Frame> got = until_closed(attacker, &closed);
  ASSERT_EQ(got.size(), 1u) << "the replayed HELLO got more than a refusal";
  ASSERT_EQ(got[0].header.type, MsgType::kReply);
  EXPECT_EQ(got[0].reply().status, sched::Status::kAuth);
  EXPECT_NE(got[0].reply().detail.find("replayed HELLO"), std::string::npos) << got[0].reply().detail;
  EXPECT_TRUE(closed);
  // The genuine client is unaffected.
  EXPECT_EQ(good.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
}

// The heart of replay protection: the registry's nonce is fresh, so the AUTH of a recorded
// successful handshake answers nothing on a new connection, even behind a HELLO of the same
// datacenter with a nonce the registry has not seen.
TEST(AuthTest, ReplayedAuthIsRefused) {
  Embedded e([](ServerOptions& o) { o.auth_token = kToken; });
  RecordingProxy proxy(e.address());
  Connection good(options(proxy.address(), kToken));
  ASSERT_TRUE(proxy.wait_frames(2, 2));
  const std::string recorded = RecordingProxy::first_frames(proxy.to_registry(), 2);  // HELLO, AUTH
  const std::string recorded_hello = RecordingProxy::first_frames(proxy.to_registry(), 1);
  const std::string recorded_auth = recorded.substr(recorded_hello.size());
  const std::string recorded_challenge = RecordingProxy::first_frames(proxy.to_client(), 1);

  RawClient attacker(e.address());
  ASSERT_TRUE(attacker.send_bytes(encode_frame(MsgType::kHello, 1, encode_hello({random_bytes(kNonceBytes), "default"})) +
                                  recorded_auth));
  bool closed = false;
  std::vector<Frame> got = until_closed(attacker, &closed);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].header.type, MsgType::kChallenge);
  EXPECT_NE(encode_frame(MsgType::kChallenge, got[0].header.req, got[0].payload), recorded_challenge)
      << "the registry reused a nonce";
  ASSERT_EQ(got[1].header.type, MsgType::kReply);
  EXPECT_EQ(got[1].reply().status, sched::Status::kAuth);
  EXPECT_TRUE(closed);
  EXPECT_EQ(good.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}).status, sched::Status::kOk);
}

// The registry remembers a bounded number of client nonces, forgetting the oldest first.
TEST(AuthTest, RecentNoncesAreBoundedAndForgetTheOldestFirst) {
  RecentNonces n(3);
  EXPECT_FALSE(n.seen_before("a"));
  EXPECT_TRUE(n.seen_before("a"));
  EXPECT_FALSE(n.seen_before("b"));
  EXPECT_FALSE(n.seen_before("c"));
  EXPECT_FALSE(n.seen_before("d"));  // "a" is forgotten
  EXPECT_EQ(n.size(), 3u);
  EXPECT_FALSE(n.seen_before("a"));
  EXPECT_TRUE(n.seen_before("d"));
  EXPECT_TRUE(n.seen_before("c"));
}

// A peer that takes the challenge and never answers holds its connection only until the
// handshake deadline (hello_timeout_ms covers HELLO and AUTH).
TEST(AuthTest, ChallengeLeftUnansweredIsClosedAtTheHandshakeDeadline) {
  Embedded e([](ServerOptions& o) {
    o.auth_token = kToken;
    o.hello_timeout_ms = 200;
  });
  RawClient c(e.address());
  ASSERT_TRUE(c.send_frame(MsgType::kHello, 1, encode_hello({random_bytes(kNonceBytes), "dc"})));
  auto challenge = c.read_frame();
  ASSERT_TRUE(challenge);
  EXPECT_EQ(challenge->header.type, MsgType::kChallenge);
  auto r = c.read_reply();
  ASSERT_TRUE(r) << "a challenged connection is kept without an answer";
  EXPECT_NE(r->detail.find("no AUTH within"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_TRUE(e.wait_for([](const ServerStats& s) { return s.connections == 0 && s.before_hello == 0; }));
}

// A stand-in registry that plays back what a real one said in a recorded handshake.
class ReplayingRegistry {
 public:
  explicit ReplayingRegistry(std::string challenge, std::string auth_ok)
      : challenge_(std::move(challenge)), auth_ok_(std::move(auth_ok)) {
    uint16_t port = 0;
    listener_ = listen_tcp(parse_host_port("127.0.0.1:0"), &port);
    address_ = "127.0.0.1:" + std::to_string(port);
    thread_ = std::thread([this] { run(); });
  }
  ~ReplayingRegistry() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] const std::string& address() const { return address_; }

 private:
  bool read_frame(int fd) {
    char hdr[kHeaderBytes];
    if (!read_all(fd, hdr, sizeof hdr)) return false;
    std::string payload(decode_header(std::string_view(hdr, sizeof hdr)).length, '\0');
    return read_all(fd, payload.data(), payload.size());
  }
  void run() {
    Fd c;
    while (!stop_ && !c.valid()) {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) c = Fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    if (stop_ || !read_frame(c.get()) || !write_all(c.get(), challenge_.data(), challenge_.size())) return;
    if (!read_frame(c.get()) || !write_all(c.get(), auth_ok_.data(), auth_ok_.size())) return;
    char b;
    while (!stop_) {
      pollfd p{c.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) > 0 && ::recv(c.get(), &b, 1, 0) <= 0) return;
    }
  }
  std::string challenge_, auth_ok_, address_;
  Fd listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Mutual authentication, and the client's nonce at work: an impostor that replays a real
// registry's CHALLENGE and AUTH_OK cannot prove anything to a client with a fresh nonce.
TEST(AuthTest, ReplayedRegistryAnswersAreRefusedByTheClient) {
  Embedded e([](ServerOptions& o) { o.auth_token = kToken; });
  RecordingProxy proxy(e.address());
  Connection good(options(proxy.address(), kToken));
  ASSERT_TRUE(proxy.wait_frames(2, 2));
  const std::string down = RecordingProxy::first_frames(proxy.to_client(), 2);
  const std::string challenge = RecordingProxy::first_frames(down, 1);
  ReplayingRegistry impostor(challenge, down.substr(challenge.size()));
  std::string what;
  EXPECT_EQ(connect_code(options(impostor.address(), kToken), &what), Code::kAuth);
  EXPECT_NE(what.find("could not prove"), std::string::npos) << what;
}

TEST(AuthTest, ClientWithMutualAuthRefusesARegistryThatAsksForNoToken) {
  Embedded open_registry;  // no token: it cannot prove anything
  std::string what;
  EXPECT_EQ(connect_code(options(open_registry.address(), kToken), &what), Code::kAuth);
  EXPECT_NE(what.find("asks for no auth token"), std::string::npos) << what;
  ConnectionOptions relaxed = options(open_registry.address(), kToken);
  relaxed.auth_mutual = false;
  EXPECT_EQ(connect_code(relaxed), Code::kSuccess);
}

// A registry with a token and a published member: a peer that has not proven the token gets
// nothing but the challenge and an error, whatever it sends and however it pipelines it.
class BeforeTheProofTest : public ::testing::Test {
 protected:
  void SetUp() override {
    owner_ = std::make_unique<Connection>(options(e_.address(), kToken));
    sched::Reply open = owner_->call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
    ASSERT_EQ(open.status, sched::Status::kOk);
    member_ = open.member;
    ASSERT_EQ(owner_->call(sched::Publish{0, 0, member_, 1, 7, kSecret}).status, sched::Status::kOk);
  }
  // What a peer received for `bytes` sent right after its HELLO (or instead of it).
  void expect_nothing_for(const std::string& bytes, bool after_hello, const std::string& what) {
    SCOPED_TRACE(what);
    RawClient c(e_.address());
    std::string hello =
        encode_frame(MsgType::kHello, 1, encode_hello({random_bytes(kNonceBytes), "dc"}));
    ASSERT_TRUE(c.send_bytes((after_hello ? hello : std::string()) + bytes));
    bool closed = false;
    std::vector<Frame> got = until_closed(c, &closed);
    EXPECT_TRUE(closed) << "the connection stays open";
    size_t i = 0;
    if (after_hello) {
      ASSERT_GE(got.size(), 1u);
      EXPECT_EQ(got[0].header.type, MsgType::kChallenge);
      i = 1;
    }
    ASSERT_EQ(got.size(), i + 1) << "more than one refusal";
    ASSERT_EQ(got[i].header.type, MsgType::kReply);
    sched::Reply r = got[i].reply();
    EXPECT_LT(static_cast<int>(r.status), 0);
    EXPECT_EQ(r.member, 0u);
    EXPECT_EQ(r.source, 0u);
    EXPECT_TRUE(r.source_descriptor.empty());
    for (const Frame& f : got) EXPECT_EQ(f.payload.find(kSecret), std::string::npos) << "a descriptor leaked";
  }

  static inline const std::string kSecret = "SECRET-DESCRIPTOR: worker address and rkeys";
  Embedded e_{[](ServerOptions& o) { o.auth_token = kToken; }};
  std::unique_ptr<Connection> owner_;
  sched::MemberId member_ = 0;
};

TEST_F(BeforeTheProofTest, EveryRequestBeforeTheProofGetsAnErrorAndAClose) {
  const std::vector<std::pair<MsgType, std::string>> requests = {
      {MsgType::kHeartbeat, encode_event(sched::Heartbeat{0})},
      {MsgType::kOpen, encode_event(sched::Open{0, 0, "m", "r2", 0, 1, 0, false})},
      {MsgType::kClose, encode_event(sched::Close{0, 0, member_})},
      {MsgType::kPublish, encode_event(sched::Publish{0, 0, member_, 2, 7, "x"})},
      {MsgType::kReplicate, encode_event(sched::Replicate{0, 0, member_, -1, -1, 7, "x"})},
      {MsgType::kTransferDone, encode_event(sched::TransferDone{0, 0, member_, 1})},
      {MsgType::kSourceFailed, encode_event(sched::SourceFailed{0, 0, member_, 1, 0})},
      {MsgType::kUnpublish, encode_event(sched::Unpublish{0, 0, member_})},
      {MsgType::kOffloadDone, encode_event(sched::OffloadDone{0, 0, member_, 1, "x"})},
      {MsgType::kCancel, encode_event(sched::Cancel{0, 0, member_})},
      {MsgType::kDescribe, ""},
      {MsgType::kInfo, encode_info_request(0)},  // replica names, member ids: not for strangers either
      {MsgType::kHello, encode_hello({random_bytes(kNonceBytes), "dc"})},
      {MsgType::kReply, encode_reply(sched::Reply{})},
      {MsgType::kOffload, encode_order(member_, 1)},
      {MsgType::kChallenge, encode_challenge(random_bytes(kNonceBytes))},
      {MsgType::kAuthOk, encode_auth_ok(random_bytes(kProofBytes))},
      {MsgType::kSnapshot, encode_snapshot(sched::Snapshot{})},
      {static_cast<MsgType>(77), "?"},
  };
  for (const auto& [type, payload] : requests) {
    std::string frame = encode_frame(type, 9, payload);
    expect_nothing_for(frame, true, std::string("after HELLO: ") + type_name(type));
    if (type != MsgType::kHello) expect_nothing_for(frame, false, std::string("instead of HELLO: ") + type_name(type));
  }
  // The owner's member is untouched by all of that: still open, still holding version 1.
  std::string state = owner_->describe();
  EXPECT_NE(state.find("member " + std::to_string(member_) + " client"), std::string::npos) << state;
  EXPECT_NE(state.find("holding v1"), std::string::npos) << state;
  EXPECT_NE(state.find("clients 1,"), std::string::npos) << state;
}

TEST_F(BeforeTheProofTest, AWrongProofPipelinedWithRequestsGetsOnlyTheRefusal) {
  std::string wrong = encode_frame(MsgType::kAuth, 2, encode_auth(std::string(kProofBytes, 'p')));
  std::string rest = encode_frame(MsgType::kOpen, 3, encode_event(sched::Open{0, 0, "m", "r2", 0, 1, 0, false})) +
                     encode_frame(MsgType::kReplicate, 4, encode_event(sched::Replicate{0, 0, 1, -1, -1, 7, "x"})) +
                     encode_frame(MsgType::kDescribe, 5, "") + encode_frame(MsgType::kInfo, 6, encode_info_request(0));
  expect_nothing_for(wrong + rest, true, "wrong proof, then requests");
  // An AUTH of the wrong size is malformed, and refused the same way.
  expect_nothing_for(encode_frame(MsgType::kAuth, 2, encode_auth("short")) + rest, true, "short proof");
}

}  // namespace
}  // namespace thub::registry::test
