// INFO, the read-only request behind tensorhub-info --registry: its answer (SNAPSHOT)
// round-trips, is cut to its byte budget and marked truncated, and every malformed one is
// refused with a CodecError; against the real server it shows what clients hold, asks
// nothing of the state machine, and a registry of any size answers within its cap.
#include <gtest/gtest.h>

#include <random>

#include "src/common/codec.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "tests/registry/embedded.h"
#include "tests/registry/raw_client.h"

namespace thub::registry {
namespace {

using sched::Holding;
using sched::Snapshot;

Snapshot sample() {
  Snapshot s;
  s.now = 123456789;
  s.clients = 3;
  s.members = 4;
  s.leases = 1;
  s.waiting = 2;
  s.models_total = 2;
  s.holders_total = 2;
  s.transfers_total = 1;
  sched::ModelView m;
  m.name = "policy";
  m.retain = 2;
  m.versions_published = 7;
  m.latest = 7;
  m.retained = {7, 6};
  m.members = 3;
  s.models.push_back(m);
  m = {};
  m.name = std::string("odd\0name\xff", 9);
  s.models.push_back(m);
  sched::HolderView h;
  h.model = 0;
  h.version = 7;
  h.shard = 1;
  h.num_shards = 2;
  h.replica = "trainer";
  h.member = 11;
  h.client = 2;
  h.state = Holding::kPartial;
  h.spot = true;
  h.load = 1;
  h.bytes_reported = 1u << 30;
  h.reported_at = 99;
  s.holders.push_back(h);
  h.state = Holding::kHostDropping;
  h.model = 1;
  s.holders.push_back(h);
  sched::TransferView t;
  t.lease = 5;
  t.model = 0;
  t.version = 7;
  t.source = 11;
  t.reader = 12;
  t.source_replica = "trainer";
  t.reader_replica = "";  // gone
  t.source_shard = 1;
  t.reader_shard = -1;
  t.source_partial = true;
  t.orphan = true;
  t.granted_at = 42;
  t.bytes_reported = 4096;
  t.reported_at = 43;
  s.transfers.push_back(t);
  return s;
}

TEST(InfoRequestTest, SnapshotRoundTrips) {
  Snapshot s = sample();
  Snapshot d = decode_snapshot(encode_snapshot(s));
  EXPECT_EQ(d.now, s.now);
  EXPECT_EQ(d.waiting, 2u);
  EXPECT_EQ(d.transfers_total, 1u);
  EXPECT_FALSE(d.truncated);
  ASSERT_EQ(d.models.size(), 2u);
  EXPECT_EQ(d.models[0].retained, (std::vector<sched::Version>{7, 6}));
  EXPECT_EQ(d.models[1].name, s.models[1].name);
  ASSERT_EQ(d.holders.size(), 2u);
  EXPECT_EQ(d.holders[0].state, Holding::kPartial);
  EXPECT_EQ(d.holders[0].bytes_reported, 1u << 30);
  EXPECT_EQ(d.holders[0].num_shards, 2);
  EXPECT_TRUE(d.holders[0].spot);
  EXPECT_EQ(d.holders[1].state, Holding::kHostDropping);
  ASSERT_EQ(d.transfers.size(), 1u);
  EXPECT_EQ(d.transfers[0].reader_shard, -1);
  EXPECT_EQ(d.transfers[0].reader_replica, "");
  EXPECT_TRUE(d.transfers[0].source_partial);
  EXPECT_TRUE(d.transfers[0].orphan);
  EXPECT_EQ(d.transfers[0].reported_at, 43);
  EXPECT_EQ(decode_info_request(encode_info_request(17)), 17u);
}

TEST(InfoRequestTest, SnapshotIsCutToItsBudget) {
  Snapshot s;
  s.models_total = s.holders_total = 1;
  sched::ModelView m;
  m.name = "m";
  s.models.push_back(m);
  for (int i = 0; i < 1000; ++i) {
    sched::HolderView h;
    h.replica = std::string(500, 'r');
    h.member = static_cast<uint64_t>(i);
    s.holders.push_back(h);
  }
  s.holders_total = s.holders.size();
  std::string p = encode_snapshot(s, 64u << 10);
  EXPECT_LE(p.size(), 64u << 10);
  Snapshot d = decode_snapshot(p);
  EXPECT_TRUE(d.truncated);
  EXPECT_GT(d.holders.size(), 10u);
  EXPECT_LT(d.holders.size(), 1000u);
  EXPECT_EQ(d.holders_total, 1000u);
  // Everything fits a large budget: not truncated.
  EXPECT_FALSE(decode_snapshot(encode_snapshot(s, 4u << 20)).truncated);
  // Too small for even the model: holders go with it, transfers lose their model.
  s.models[0].name = std::string(2000, 'n');
  sched::TransferView t;
  t.model = 0;
  s.transfers.push_back(t);
  d = decode_snapshot(encode_snapshot(s, 1024));
  EXPECT_TRUE(d.truncated);
  EXPECT_TRUE(d.models.empty());
  EXPECT_TRUE(d.holders.empty());
  ASSERT_EQ(d.transfers.size(), 1u);
  EXPECT_EQ(d.transfers[0].model, sched::TransferView::kNoModel);
}

TEST(InfoRequestTest, MalformedSnapshotsAreRefused) {
  std::string p = encode_snapshot(sample());
  for (size_t n = 0; n < p.size(); ++n) EXPECT_THROW(decode_snapshot(p.substr(0, n)), CodecError) << n;
  EXPECT_THROW(decode_snapshot(p + "x"), CodecError);
  // The encoder never writes a bad model index; a hostile registry may.
  Snapshot s = sample();
  s.holders.clear();
  s.transfers.clear();
  const size_t models_end = encode_snapshot(s).size() - 3 * 4 + 4;  // after the models' list
  s = sample();
  s.transfers.clear();
  const size_t holders_end = encode_snapshot(s).size() - 4;         // after the holders' list
  auto patched = [&](size_t at, uint32_t v) {
    std::string q = p;
    for (int i = 0; i < 4; ++i) q[at + i] = static_cast<char>(v >> (8 * i));
    return q;
  };
  EXPECT_NO_THROW(decode_snapshot(patched(models_end + 4, 1)));
  EXPECT_THROW(decode_snapshot(patched(models_end + 4, 2)), CodecError);       // holder's model
  EXPECT_THROW(decode_snapshot(patched(holders_end + 4 + 8, 2)), CodecError);  // transfer's model
  EXPECT_NO_THROW(decode_snapshot(patched(holders_end + 4 + 8, sched::TransferView::kNoModel)));
  s = sample();
  s.holders[0].state = static_cast<Holding>(sched::kHoldingCount);
  EXPECT_THROW(decode_snapshot(encode_snapshot(s)), CodecError);
  s = sample();
  s.holders[0].shard = -1;
  EXPECT_THROW(decode_snapshot(encode_snapshot(s)), CodecError);
  EXPECT_THROW(decode_info_request(""), CodecError);
  EXPECT_THROW(decode_info_request(encode_info_request(1) + "x"), CodecError);
}

TEST(InfoRequestTest, RandomBytesNeverCrashTheSnapshotDecoder) {
  std::mt19937_64 rng(777);
  std::string good = encode_snapshot(sample());
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = good;
    if (i % 2) {  // random bytes
      s.assign(rng() % 256, '\0');
      for (auto& c : s) c = static_cast<char>(rng());
    } else {      // a well-formed answer with a few bytes flipped
      for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    }
    try {
      (void)decode_snapshot(s);
      ++decoded;
    } catch (const CodecError&) {
    }
  }
  EXPECT_LT(decoded, 20000);
}

TEST(InfoRequestTest, ShowsWhatClientsHoldAndChangesNothing) {
  test::Embedded reg;
  ConnectionOptions co;
  co.addresses = {reg.address()};
  Connection trainer(co), rollout(co), info(co);
  sched::Reply t = trainer.call(sched::Open{0, 0, "policy", "trainer", 0, 1, 1, false});
  ASSERT_EQ(t.status, sched::Status::kOk);
  ASSERT_EQ(trainer.call(sched::Publish{0, 0, t.member, 3, 9, "d"}).status, sched::Status::kOk);
  sched::Reply r = rollout.call(sched::Open{0, 0, "policy", "r0", 0, 1, 0, false});
  sched::Reply g = rollout.call(sched::Replicate{0, 0, r.member, -1, -1, 9, "rd"});
  ASSERT_EQ(g.status, sched::Status::kOk);

  Snapshot s = info.snapshot();
  EXPECT_EQ(s.clients, 3u);
  ASSERT_EQ(s.models.size(), 1u);
  EXPECT_EQ(s.models[0].name, "policy");
  EXPECT_EQ(s.models[0].retain, 1);
  EXPECT_EQ(s.models[0].retained, (std::vector<sched::Version>{3}));
  ASSERT_EQ(s.holders.size(), 2u);
  EXPECT_EQ(s.holders[0].replica, "r0");
  EXPECT_EQ(s.holders[0].state, Holding::kPartial);
  EXPECT_EQ(s.holders[1].replica, "trainer");
  EXPECT_EQ(s.holders[1].state, Holding::kComplete);
  ASSERT_EQ(s.transfers.size(), 1u);
  EXPECT_EQ(s.transfers[0].source, t.member);
  EXPECT_EQ(s.transfers[0].reader, r.member);
  std::string before = info.describe();
  (void)info.snapshot();
  (void)info.snapshot(1);
  EXPECT_EQ(info.describe().substr(info.describe().find('\n')), before.substr(before.find('\n')));
  ASSERT_EQ(rollout.call(sched::TransferDone{0, 0, r.member, g.lease}).status, sched::Status::kOk);
  s = info.snapshot();
  EXPECT_TRUE(s.transfers.empty());
  EXPECT_EQ(s.holders[0].state, Holding::kComplete);
}

// A registry far larger than one reply: the answer stays within its cap, says it is cut, and
// counts what it left out; asking for fewer entries cuts too.
TEST(InfoRequestTest, AHugeRegistryAnswersWithinItsCap) {
  test::Embedded reg([](ServerOptions& o) { o.max_snapshot_bytes = 32u << 10; });
  test::RawClient c(reg.address());
  ASSERT_TRUE(c.hello());
  const int kMembers = 200;
  for (int i = 0; i < kMembers; ++i) {
    sched::Open o{0, 0, "model", std::string(1000, 'a') + std::to_string(i), 0, 1, 0, false};
    ASSERT_TRUE(c.send_event(o, 10 + static_cast<uint64_t>(i)));
    auto r = c.read_reply();
    ASSERT_TRUE(r && r->status == sched::Status::kOk);
    ASSERT_TRUE(c.send_event(sched::Publish{0, 0, r->member, 1, 5, "d"}, 1000 + static_cast<uint64_t>(i)));
    ASSERT_TRUE(c.read_reply());
  }
  ASSERT_TRUE(c.send_frame(MsgType::kInfo, 7, encode_info_request(0)));
  auto f = c.read_frame();
  ASSERT_TRUE(f);
  ASSERT_EQ(f->header.type, MsgType::kSnapshot);
  EXPECT_EQ(f->header.req, 7u);
  EXPECT_LE(f->payload.size(), 32u << 10);
  Snapshot s = decode_snapshot(f->payload);
  EXPECT_TRUE(s.truncated);
  EXPECT_EQ(s.holders_total, static_cast<uint64_t>(kMembers));
  EXPECT_LT(s.holders.size(), static_cast<size_t>(kMembers));
  EXPECT_GT(s.holders.size(), 0u);

  ASSERT_TRUE(c.send_frame(MsgType::kInfo, 8, encode_info_request(3)));
  f = c.read_frame();
  ASSERT_TRUE(f && f->header.type == MsgType::kSnapshot);
  s = decode_snapshot(f->payload);
  EXPECT_TRUE(s.truncated);
  EXPECT_EQ(s.holders.size(), 3u);
}

TEST(InfoRequestTest, InfoBeforeHelloOrMalformedIsRefused) {
  test::Embedded reg;
  {
    test::RawClient c(reg.address());
    ASSERT_TRUE(c.send_frame(MsgType::kInfo, 1, encode_info_request(0)));
    auto r = c.read_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, sched::Status::kState);
    EXPECT_TRUE(c.closed_by_peer());
  }
  test::RawClient c(reg.address());
  ASSERT_TRUE(c.hello());
  ASSERT_TRUE(c.send_frame(MsgType::kInfo, 2, "xy"));
  auto r = c.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, sched::Status::kArg);
  EXPECT_NE(r->detail.find("INFO"), std::string::npos) << r->detail;
  EXPECT_TRUE(c.closed_by_peer());
}

}  // namespace
}  // namespace thub::registry
