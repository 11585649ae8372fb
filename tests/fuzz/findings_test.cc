// What the control-plane fuzzers found, one regression test each (docs/security.md,
// "Fuzzing"), and the bounds they hold the decoders to, stated as plain tests.
#include <gtest/gtest.h>

#include "src/client/descriptor.h"
#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/protocol.h"
#include "src/transport/wire_format.h"
#include "tests/fuzz/alloc_guard.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::fuzz {
namespace {

client::Descriptor small_descriptor() {
  client::Descriptor d;
  d.host = "h";
  d.pid = 42;
  d.worker_address = "worker";
  d.counter = {0x1000, 8, "rk"};
  d.epoch = 3;
  d.hashes = {0x2000, 16, "rk"};
  d.tensors = {{"w", 64}};
  d.segments = {{0x3000, 64, "rk"}};
  return d;
}

// Finding 1 (decoder fuzzer, descriptor): the `staged` flag, a u32 encoded as 0 or 1, was
// read as "any non-zero value is true", so a descriptor that is not what any holder encodes
// decoded as if it were. It is now refused like any other malformed descriptor.
TEST(FuzzFindingTest, DescriptorStagedFlagIsZeroOrOne) {
  client::Descriptor d = small_descriptor();
  d.staged = true;
  std::string bytes = client::encode_descriptor(d);
  // The flag sits right after the tensors: find it by encoding with and without it.
  d.staged = false;
  std::string unstaged = client::encode_descriptor(d);
  size_t at = 0;
  while (bytes[at] == unstaged[at]) ++at;
  ASSERT_EQ(bytes[at], 1);
  EXPECT_TRUE(client::decode_descriptor(bytes).staged);
  EXPECT_FALSE(client::decode_descriptor(unstaged).staged);
  for (uint32_t bad : {2u, 0x100u, 0xffffffffu}) {
    std::string b = bytes;
    for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(bad >> (8 * i));
    try {
      (void)client::decode_descriptor(b);
      ADD_FAILURE() << "staged flag " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kTransport);
      EXPECT_NE(std::string(e.what()).find("staged"), std::string::npos) << e.what();
    }
  }
}

// Finding 2 (session fuzzer): DESCRIBE's payload was never looked at, so bytes trailing it
// were ignored where every other message refuses them. Now it is malformed like the others:
// an error reply and the connection closed.
TEST(FuzzFindingTest, DescribeWithAPayloadIsRefusedAndClosed) {
  registry::test::Embedded e;
  registry::test::RawClient c(e.address());
  ASSERT_TRUE(c.hello());
  ASSERT_TRUE(c.send_frame(registry::MsgType::kDescribe, 7, "trailing"));
  auto r = c.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, sched::Status::kArg);
  EXPECT_NE(r->detail.find("trailing bytes"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
  registry::test::RawClient fine(e.address());
  ASSERT_TRUE(fine.hello());
  ASSERT_TRUE(fine.send_frame(registry::MsgType::kDescribe, 8, ""));
  auto ok = fine.read_reply();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, sched::Status::kOk);
  EXPECT_NE(ok->detail.find("clients 1"), std::string::npos) << ok->detail;
}

// Finding 3 (socket fuzzer, in its own harness at first): a handshake Transcript held string
// views, and one built from a temporary (the challenge's payload.substr(4)) pointed at freed
// memory: every proof came out wrong. The transcript owns its bytes now.
TEST(FuzzFindingTest, TranscriptBuiltFromTemporariesStaysValid) {
  const std::string payload = "\x20\0\0\0" + std::string(registry::kNonceBytes, 'N');
  const std::string nc(registry::kNonceBytes, 'c');
  registry::Transcript from_temporaries{nc, payload.substr(4), std::string("dc")};
  std::string ns = payload.substr(4);
  registry::Transcript from_names{nc, ns, "dc"};
  EXPECT_EQ(registry::client_proof("token", from_temporaries), registry::client_proof("token", from_names));
  EXPECT_NE(registry::client_proof("token", from_names), registry::registry_proof("token", from_names));
}

// The bound the fuzzers check on every input, stated once: a count of 4 billion or a length
// of 4 GiB is refused before it sizes anything.
TEST(FuzzFindingTest, HugeCountsAndLengthsAreRefusedBeforeAllocation) {
  client::Descriptor d = small_descriptor();
  std::string bytes = client::encode_descriptor(d);
  // The tensor count follows version, host, pid, worker address, counter, epoch and hashes.
  size_t at = 4 + (4 + d.host.size()) + 8 + (4 + d.worker_address.size()) + (16 + 4 + 2) + 4 + (16 + 4 + 2);
  ASSERT_EQ(static_cast<uint8_t>(bytes[at]), 1u);
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(4000000000u >> (8 * i));
  {
    AllocGuard guard(1u << 20);
    EXPECT_THROW((void)client::decode_descriptor(bytes), Error);
    EXPECT_EQ(guard.refused(), 0u) << "tried to allocate " << guard.refused() << " bytes";
    EXPECT_LT(guard.largest(), 4096u);
  }
  // A string announced as 4 GiB in every request that has one.
  Writer w;
  w.u64(1).i64(2).u64(3).u32(0xffffffffu).raw("abc", 3);
  for (auto type : {registry::MsgType::kPublish, registry::MsgType::kOpen, registry::MsgType::kOffloadDone}) {
    AllocGuard guard(1u << 20);
    EXPECT_THROW((void)registry::decode_event(type, 1, 1, w.data()), CodecError) << registry::type_name(type);
    EXPECT_EQ(guard.refused(), 0u);
  }
  AllocGuard guard(1u << 20);
  EXPECT_THROW((void)registry::decode_reply(w.data()), CodecError);
  EXPECT_EQ(guard.refused(), 0u);
}

// Protocol 1 sent the token in HELLO; a client of that release is refused with the reason.
TEST(FuzzFindingTest, ProtocolOneHelloIsRefusedWithTheVersion) {
  registry::test::Embedded e;
  registry::test::RawClient c(e.address());
  Writer hello;
  hello.str("the old token in clear").str("dc");
  Writer w;
  w.u32(registry::kMagic).u16(1).u16(1).u64(1).u32(static_cast<uint32_t>(hello.size())).raw(hello.data().data(),
                                                                                         hello.size());
  ASSERT_TRUE(c.send_bytes(w.data()));
  auto r = c.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, sched::Status::kArg);
  EXPECT_NE(r->detail.find("unsupported protocol version 1"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
}

// Finding 5 (transport codec fuzzer): a worker address with bytes after its last field was
// accepted and the bytes ignored, where every other decoder refuses them.
TEST(FuzzFindingTest, WorkerAddressWithTrailingBytesIsRefused) {
  const std::string a = transport::encode_address("ucx", {7, {0x0100007f}}, {42, 0x1000, 9});
  EXPECT_EQ(transport::decode_address(a).proc.pid, 42u);
  try {
    transport::decode_address(a + "x");
    FAIL() << "trailing bytes accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kTransport);
    EXPECT_NE(std::string(e.what()).find("trailing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace thub::fuzz
