// Frames and messages of the control plane: every request round-trips, and every
// malformed frame is refused with a CodecError.
#include <gtest/gtest.h>

#include <random>

#include "src/common/codec.h"
#include "src/registry/protocol.h"

namespace thub::registry {
namespace {

TEST(ProtocolTest, HeaderRoundTrip) {
  std::string f = encode_frame(MsgType::kPublish, 77, "abc");
  ASSERT_EQ(f.size(), kHeaderBytes + 3);
  FrameHeader h = decode_header(std::string_view(f).substr(0, kHeaderBytes));
  EXPECT_EQ(h.type, MsgType::kPublish);
  EXPECT_EQ(h.req, 77u);
  EXPECT_EQ(h.length, 3u);
}

TEST(ProtocolTest, BadMagicVersionAndLengthAreRefused) {
  std::string f = encode_frame(MsgType::kOpen, 1, "");
  std::string bad = f;
  bad[0] ^= 1;
  EXPECT_THROW(decode_header(bad), CodecError);
  bad = f;
  bad[4] = static_cast<char>(kProtocolVersion + 1);  // another protocol version
  EXPECT_THROW(decode_header(bad), CodecError);
  Writer w;
  w.u32(kMagic).u16(kProtocolVersion).u16(3).u64(1).u32(kMaxPayload + 1);
  EXPECT_THROW(decode_header(w.data()), CodecError);
}

TEST(ProtocolTest, RequestsRoundTrip) {
  sched::Replicate rep{0, 0, 12, -3, 5, 0xabcdef, "desc"};
  std::string p = encode_event(rep);
  sched::Event ev = decode_event(MsgType::kReplicate, 99, 4, p);
  auto* got = std::get_if<sched::Replicate>(&ev);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->client, 4u);
  EXPECT_EQ(got->req, 99u);
  EXPECT_EQ(got->member, 12u);
  EXPECT_EQ(got->spec, -3);
  EXPECT_EQ(got->newer_than, 5);
  EXPECT_EQ(got->layout_hash, 0xabcdefu);
  EXPECT_EQ(got->descriptor, "desc");

  sched::Open open{0, 0, "m", "r", 2, 4, 3, true};
  ev = decode_event(MsgType::kOpen, 1, 1, encode_event(open));
  auto* o = std::get_if<sched::Open>(&ev);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->model, "m");
  EXPECT_EQ(o->shard, 2);
  EXPECT_EQ(o->num_shards, 4);
  EXPECT_EQ(o->retain, 3);
  EXPECT_TRUE(o->spot);
}

TEST(ProtocolTest, ReplyRoundTrip) {
  sched::Reply r{};
  r.status = sched::Status::kVersionLost;
  r.detail = "gone";
  r.member = 3;
  r.version = 8;
  r.lease = 9;
  r.source = 10;
  r.source_descriptor = std::string("\0x\1", 3);
  r.source_partial = true;
  sched::Reply d = decode_reply(encode_reply(r));
  EXPECT_EQ(d.status, r.status);
  EXPECT_EQ(d.detail, r.detail);
  EXPECT_EQ(d.version, 8);
  EXPECT_EQ(d.source_descriptor, r.source_descriptor);
  EXPECT_TRUE(d.source_partial);
}

TEST(ProtocolTest, TruncatedOrPaddedPayloadsAreRefused) {
  std::string p = encode_event(sched::Publish{0, 0, 1, 2, 3, "descriptor"});
  for (size_t n = 0; n < p.size(); ++n) {
    EXPECT_THROW(decode_event(MsgType::kPublish, 1, 1, p.substr(0, n)), CodecError) << n;
  }
  EXPECT_THROW(decode_event(MsgType::kPublish, 1, 1, p + "x"), CodecError);
  EXPECT_THROW(decode_event(static_cast<MsgType>(4242), 1, 1, p), CodecError);
  EXPECT_THROW(decode_event(MsgType::kReply, 1, 1, p), CodecError);
}

// Which requests may wait at the registry and what answers each come from the schema, which
// the connection's deadlines and reply matching rely on.
TEST(ProtocolTest, DeferralAndAnswersComeFromTheSchema) {
  for (int t = 0; t < 1024; ++t) {
    auto type = static_cast<MsgType>(t);
    bool deferred = type == MsgType::kReplicate || type == MsgType::kSourceFailed || type == MsgType::kUnpublish;
    EXPECT_EQ(may_defer(type), deferred) << type_name(type);
  }
  EXPECT_EQ(answer_to(MsgType::kOpen), MsgType::kReply);
  EXPECT_EQ(answer_to(MsgType::kReplicate), MsgType::kReply);
  EXPECT_EQ(answer_to(MsgType::kHeartbeat), MsgType::kHeartbeat);
  EXPECT_EQ(answer_to(MsgType::kInfo), MsgType::kSnapshot);
  EXPECT_EQ(answer_to(MsgType::kAuth), MsgType::kAuthOk);
  EXPECT_EQ(answer_to(MsgType::kHello), MsgType::kReply);  // or, from a registry with a token, CHALLENGE
  EXPECT_STREQ(type_name(static_cast<MsgType>(4242)), "UNKNOWN");
}

TEST(ProtocolTest, RandomBytesNeverCrashTheDecoder) {
  std::mt19937_64 rng(12345);
  const MsgType types[] = {MsgType::kOpen, MsgType::kPublish, MsgType::kReplicate, MsgType::kSourceFailed,
                           MsgType::kOffloadDone, MsgType::kUnpublish};
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    try {
      (void)decode_event(types[i % 6], 1, 1, s);
      ++decoded;
    } catch (const CodecError&) {
    }
  }
  EXPECT_LT(decoded, 20000);  // most random inputs are refused, none crashes
}

}  // namespace
}  // namespace thub::registry
