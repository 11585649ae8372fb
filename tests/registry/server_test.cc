// The registry service over real TCP: a malformed frame is answered with an error and
// closes only that connection; the registry keeps serving others.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"

namespace thub::registry {
namespace {

struct RunningServer {
  explicit RunningServer(const std::string& token = "") {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.auth_token = token;
    server = std::make_unique<Server>(o);
    server->start();
  }
  std::unique_ptr<Server> server;
};

sched::Reply read_reply(int fd) {
  char hdr[kHeaderBytes];
  EXPECT_TRUE(read_all(fd, hdr, sizeof hdr));
  FrameHeader h = decode_header(std::string_view(hdr, sizeof hdr));
  std::string p(h.length, '\0');
  EXPECT_TRUE(read_all(fd, p.data(), p.size()));
  return decode_reply(p);
}

TEST(ServerTest, GarbageGetsAnErrorReplyAndOthersAreStillServed) {
  RunningServer rs;
  Fd bad = connect_tcp(parse_host_port(rs.server->address()), 2000);
  std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(write_all(bad.get(), junk.data(), junk.size()));
  sched::Reply r = read_reply(bad.get());
  EXPECT_EQ(r.status, sched::Status::kArg);
  EXPECT_NE(r.detail.find("malformed"), std::string::npos);
  char c;
  EXPECT_EQ(::recv(bad.get(), &c, 1, 0), 0);  // closed by the registry

  ConnectionOptions co;
  co.addresses = {rs.server->address()};
  Connection good(co);
  sched::Reply open = good.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false});
  EXPECT_EQ(open.status, sched::Status::kOk);
  EXPECT_GT(open.member, 0u);
}

TEST(ServerTest, DescribeNamesOpenModels) {
  RunningServer rs;
  ConnectionOptions co;
  co.addresses = {rs.server->address()};
  Connection c(co);
  ASSERT_EQ(c.call(sched::Open{0, 0, "described-model", "r", 0, 1, 0, false}).status, sched::Status::kOk);
  EXPECT_NE(c.describe().find("described-model"), std::string::npos);
}

TEST(ServerTest, RequestBeforeHelloIsRefused) {
  RunningServer rs;
  Fd fd = connect_tcp(parse_host_port(rs.server->address()), 2000);
  std::string f = encode_frame(MsgType::kOpen, 5, encode_event(sched::Open{0, 0, "m", "r", 0, 1, 0, false}));
  ASSERT_TRUE(write_all(fd.get(), f.data(), f.size()));
  sched::Reply r = read_reply(fd.get());
  EXPECT_EQ(r.status, sched::Status::kState);
}

TEST(ServerTest, TruncatedMessageBodyIsRefused) {
  RunningServer rs;
  Fd fd = connect_tcp(parse_host_port(rs.server->address()), 2000);
  std::string hello = encode_frame(MsgType::kHello, 1, encode_hello({std::string(kNonceBytes, 'n'), "dc"}));
  ASSERT_TRUE(write_all(fd.get(), hello.data(), hello.size()));
  EXPECT_EQ(read_reply(fd.get()).status, sched::Status::kOk);
  std::string f = encode_frame(MsgType::kPublish, 2, "\x01\x02");
  ASSERT_TRUE(write_all(fd.get(), f.data(), f.size()));
  sched::Reply r = read_reply(fd.get());
  EXPECT_EQ(r.status, sched::Status::kArg);
  EXPECT_NE(r.detail.find("PUBLISH"), std::string::npos);
}

TEST(ServerTest, WrongTokenIsAuthError) {
  RunningServer rs("s3cret");
  ConnectionOptions co;
  co.addresses = {rs.server->address()};
  co.auth_token = "wrong";
  try {
    Connection c(co);
    FAIL() << "connected with a wrong token";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kAuth);
  }
  co.auth_token = "s3cret";
  EXPECT_NO_THROW(Connection ok(co));
}

TEST(ServerTest, UnreachableRegistryListIsRegistryError) {
  ConnectionOptions co;
  co.addresses = {"127.0.0.1:1", "127.0.0.1:2"};
  co.connect_timeout_ms = 500;
  try {
    Connection c(co);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kRegistry);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:2"), std::string::npos);
  }
}

TEST(ServerTest, FailsOverToTheNextAddress) {
  RunningServer rs;
  ConnectionOptions co;
  co.addresses = {"127.0.0.1:1", rs.server->address()};
  Connection c(co);
  EXPECT_EQ(c.address(), rs.server->address());
}

}  // namespace
}  // namespace thub::registry
