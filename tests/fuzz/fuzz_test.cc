// Issue 13, item 5: short, deterministic runs of the control-plane fuzzers (CI, also under
// ASan+UBSan). THUB_FUZZ_SCALE=k multiplies every count; the soak is tools' thub_fuzz
// (docs/security.md). A finding prints the seed and input number that reproduce it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <set>

#include "src/client/descriptor.h"
#include "src/registry/auth.h"
#include "src/registry/protocol.h"
#include "src/transport/wire_format.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/message_model.h"

namespace thub::fuzz {
namespace {

// `n` inputs, or `sanitized` under AddressSanitizer: tools/ci/test.sh's sanitizer run unwinds
// the stack slowly on every allocation (LSAN_OPTIONS=fast_unwind_on_malloc=0, for its leak
// suppressions), which makes these allocation-heavy loops about 20 times slower there; the
// counts keep all Fuzz tests together under 30 s in that run.
uint64_t scaled(uint64_t n, uint64_t sanitized) {
#if defined(__SANITIZE_ADDRESS__)
  n = sanitized;
#else
  (void)sanitized;
#endif
  const char* s = std::getenv("THUB_FUZZ_SCALE");
  return s ? n * std::strtoull(s, nullptr, 10) : n;
}

void report(const char* what, const Outcome& o, std::chrono::steady_clock::time_point t0) {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %llu inputs (%llu frames), %llu refused, largest allocation %llu B, %.2f s\n", what,
              static_cast<unsigned long long>(o.inputs), static_cast<unsigned long long>(o.frames),
              static_cast<unsigned long long>(o.refused), static_cast<unsigned long long>(o.largest_allocation), s);
  for (const auto& f : o.findings) ADD_FAILURE() << f;
}

// The fuzzer's model of each message is the real encoding, so that its mutations start from
// valid messages.
TEST(FuzzTest, ModelMatchesTheCodec) {
  Rng rng(7);
  const std::string nonce(registry::kNonceBytes, 'n');
  EXPECT_EQ(serialize(hello(nonce, "dc")), registry::encode_hello({nonce, "dc"}));
  EXPECT_EQ(serialize(secret_field(nonce)), registry::encode_challenge(nonce));
  EXPECT_EQ(serialize(secret_field(nonce)), registry::encode_auth(nonce));
  EXPECT_EQ(serialize(secret_field(nonce)), registry::encode_auth_ok(nonce));
  EXPECT_EQ(serialize(info(77)), registry::encode_info_request(77));
  EXPECT_EQ(serialize(not_leader({"h:1", "why"})), registry::encode_not_leader({"h:1", "why"}));
  const sched::Event events[] = {
      sched::Heartbeat{0},
      sched::Open{0, 0, "m", "r", 1, 2, 3, true},
      sched::Close{0, 0, 4},
      sched::Publish{0, 0, 5, 6, 7, "desc"},
      sched::Replicate{0, 0, 8, -1, -2, 9, "d"},
      sched::TransferDone{0, 0, 10, 11},
      sched::SourceFailed{0, 0, 12, 13, 14},
      sched::Unpublish{0, 0, 15},
      sched::OffloadDone{0, 0, 16, 17, "o"},
      sched::Cancel{0, 0, 18},
      sched::TransferProgress{0, 0, 19, 20, 21, "process_vm_readv"},
  };
  for (const auto& ev : events) EXPECT_EQ(serialize(request(ev)), registry::encode_event(ev));
  sched::Reply r{};
  r.status = sched::Status::kVersionLost;
  r.detail = "x";
  r.member = 1;
  r.version = 2;
  r.lease = 3;
  r.source = 4;
  r.source_descriptor = "s";
  r.source_partial = true;
  r.released = true;
  EXPECT_EQ(serialize(reply(r)), registry::encode_reply(r));
  EXPECT_EQ(serialize(order(5, -6)), registry::encode_order(5, -6));
  for (int i = 0; i < 50; ++i) {
    std::string d = serialize(descriptor(rng));
    EXPECT_EQ(client::encode_descriptor(client::decode_descriptor(d)), d);
    sched::Snapshot snap = random_snapshot(rng);
    EXPECT_EQ(serialize(snapshot(snap)), registry::encode_snapshot(snap));
  }
  // The transport's codecs (current versions: the older ones are written by nothing now).
  transport::SocketEndpoint ep{7, {0x0100007f, 0x0200000a}};
  transport::ProcessIdentity id{1234, 0x7f0000001000, 99};
  EXPECT_EQ(serialize(address({"ucx-address", ep.port, ep.ipv4, id.pid, id.nonce_addr, id.nonce, "dc-b", 3})),
            transport::encode_address("ucx-address", ep, id, "dc-b"));
  EXPECT_EQ(serialize(address({"ucx-address", ep.port, ep.ipv4, id.pid, id.nonce_addr, id.nonce, "", 3})),
            transport::encode_address("ucx-address", ep, id));
  EXPECT_EQ(serialize(rkey({"ucx-rkey", 5, 0x1000, 4096, true, true, 3, 77, 3})),
            transport::encode_rkey("ucx-rkey", 5, 0x1000, 4096, true, {true, 3, 77}));
  EXPECT_EQ(serialize(rkey({"ucx-rkey", 5, 0x1000, 4096, false, false, 0, 0, 3})),
            transport::encode_rkey("ucx-rkey", 5, 0x1000, 4096));
}

// A message added to the schema without a fuzz model fails here: the fuzzers draw from
// any_type and the models above, which must name every type that has a name.
TEST(FuzzTest, EveryMessageOfTheSchemaIsFuzzed) {
  std::set<int> drawn;
  Rng rng(9);
  for (int i = 0; i < 10000; ++i) drawn.insert(static_cast<int>(any_type(rng)));
  for (int t = 0; t < 65536; ++t) {
    if (std::string(registry::type_name(static_cast<registry::MsgType>(t))) != "UNKNOWN") {
      EXPECT_TRUE(drawn.count(t)) << "message type " << t << " (" << registry::type_name(static_cast<registry::MsgType>(t))
                                  << ") is never drawn by the fuzzers";
    }
  }
}

TEST(FuzzTest, DecodersRefuseOrRoundTripEveryMutatedMessage) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  DecoderFuzzer(1).run(scaled(200000, 30000), &o);
  report("decoders", o, t0);
  EXPECT_GT(o.refused, o.inputs / 4) << "the mutations hardly ever produce bad input";
  EXPECT_LT(o.refused, o.inputs) << "no input was valid: the seeds are wrong";
}

TEST(FuzzTest, SessionsThroughTheFrameHandler) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  SessionFuzzer(2, false).run(scaled(20000, 3000), &o);
  report("sessions", o, t0);
  EXPECT_GT(o.refused, 0u);
  EXPECT_LT(o.refused, o.inputs);
}

TEST(FuzzTest, SessionsThroughTheFrameHandlerWithAToken) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  SessionFuzzer(3, true).run(scaled(20000, 3000), &o);
  report("sessions with a token", o, t0);
  EXPECT_GT(o.refused, 0u);
  EXPECT_LT(o.refused, o.inputs);
}

TEST(FuzzTest, SessionsOverSockets) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  SocketFuzzer(4, false).run(scaled(300, 150), &o);
  report("socket sessions", o, t0);
}

TEST(FuzzTest, SessionsOverSocketsWithAToken) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  SocketFuzzer(5, true).run(scaled(300, 150), &o);
  report("socket sessions with a token", o, t0);
}

TEST(FuzzTest, ClientAgainstAHostileRegistry) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  HostileRegistryFuzzer(6).run(scaled(150, 100), &o);
  report("client against a hostile registry", o, t0);
  EXPECT_GT(o.refused, 0u);
  EXPECT_LT(o.refused, o.inputs) << "no session connected: the stand-in never answers right";
}

TEST(FuzzTest, TransportCodecsRefuseOrRoundTripEveryMutatedInput) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  TransportCodecFuzzer(7).run(scaled(100000, 20000), &o);
  report("transport codecs", o, t0);
  EXPECT_GT(o.refused, o.inputs / 4) << "the mutations hardly ever produce bad input";
  EXPECT_LT(o.refused, o.inputs) << "no input was valid: the seeds are wrong";
}

TEST(FuzzTest, SocketReadServerAgainstHostileReaders) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  ReadServerFuzzer(8).run(scaled(500, 150), &o);
  report("socket-read server", o, t0);
  EXPECT_GT(o.refused, 0u);
  EXPECT_LT(o.refused, o.frames) << "no request was served: the requests miss every region";
}

TEST(FuzzTest, SocketReaderAgainstAHostileServer) {
  Outcome o;
  auto t0 = std::chrono::steady_clock::now();
  ReadClientFuzzer(9).run(scaled(500, 150), &o);
  report("socket reader", o, t0);
  EXPECT_GT(o.refused, 0u);
  EXPECT_LT(o.refused, o.frames) << "no read succeeded: the answers are never right";
}

}  // namespace
}  // namespace thub::fuzz
