// A lying source: a publisher whose descriptor does not match the memory it registered or
// the layout it claims. Every length, offset and count in a source's descriptor is checked
// against the reader's own plan before the transfer uses it; the reader gets a clear error
// and its memory stays its own (run under ASan in CI: no write outside our buffers).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/client/context.h"
#include "src/client/descriptor.h"
#include "src/client/holding.h"
#include "src/client/model.h"
#include "src/client/progress_counter.h"
#include "src/client/request.h"
#include "src/common/info.h"
#include "src/common/status.h"
#include "src/registry/connection.h"
#include "src/transport/cuda_staging.h"
#include "src/transport/worker.h"

namespace thub::client {
namespace {

constexpr uint64_t kBig = 3u << 20;   // served in place
constexpr uint64_t kSmall = 4096;     // packed into the compact segment
constexpr uint64_t kThreshold = 64u << 10;  // the victim's and the liar's (part of the layout)

// The victim: a real context (embedded registry) and model, the C++ core under the C API.
struct Victim {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Model> model;
  std::vector<char> big = std::vector<char>(kBig, 0), small = std::vector<char>(kSmall, 0);
  Victim() {
    InfoMap info;
    info.set("verify", "false");
    info.set("stall_timeout_ms", "2000");
    info.set("compaction_threshold", std::to_string(kThreshold));
    ctx = std::make_unique<Context>(info);
    model = std::make_unique<Model>(*ctx, "policy", "victim", 0, 1, InfoMap());
    model->register_tensor("big", big.data(), big.size(), 0);
    model->register_tensor("small", small.data(), small.size(), 0);
  }
};

// The liar: its own UCX worker and registered memory with the victim's layout, speaking to
// the registry directly, so that it can publish any descriptor it likes.
struct Liar {
  // The memory outlives the worker: a get the victim gave up on may still be answered.
  std::vector<char> big = std::vector<char>(kBig, 7), small = std::vector<char>(kSmall, 9);
  std::unique_ptr<transport::Worker> worker = transport::Worker::create({});
  Holding h;
  std::unique_ptr<registry::Connection> conn;
  uint64_t member = 0;

  explicit Liar(const std::string& registry, const std::string& replica = "liar") {
    h.table.add("big", big.data(), big.size(), 0);
    h.table.add("small", small.data(), small.size(), 0);
    h.map(*worker, kThreshold, false);
    std::memcpy(h.compact->data(), small.data(), kSmall);
    h.begin_fill(next_fill_epoch());  // as if a transfer had filled it: no checksums
    h.fill_writer().show(0, nullptr, 0, 0, h.plan.total_bytes());
    registry::ConnectionOptions o;
    o.addresses = {registry};
    conn = std::make_unique<registry::Connection>(o);
    sched::Reply r = conn->call(sched::Open{0, 0, "policy", replica, 0, 1, 0, false}, 10000);
    EXPECT_EQ(r.status, sched::Status::kOk) << r.detail;
    member = r.member;
  }
  // Publishes version 1 with the descriptor `tamper` makes of the true one.
  void publish(const std::function<void(Descriptor&)>& tamper) {
    Descriptor d = decode_descriptor(h.descriptor(worker->address(), h.epoch()));
    tamper(d);
    publish_raw(encode_descriptor(d));
  }
  void publish_raw(const std::string& desc) {
    sched::Reply r = conn->call(sched::Publish{0, 0, member, 1, h.table.layout_hash(kThreshold), desc}, 10000);
    ASSERT_EQ(r.status, sched::Status::kOk) << r.detail;
  }
};

// THUB_Replicate of the latest version through the C++ core: throws Error on failure.
void replicate_latest(Model& m) {
  auto r = m.replicate(-1, false);
  r->wait();
  if (r->code() != Code::kSuccess) throw Error(r->code(), r->detail());
}

// Replicates from a liar publishing what `tamper` makes; returns the error code (kSuccess
// when the replicate worked) and the message in *what.
Code replicate_from_liar(const std::function<void(Descriptor&)>& tamper, std::string* what,
                         const std::string& raw = {}) {
  Victim v;
  Liar liar(v.ctx->registry_address());
  if (raw.empty()) {
    liar.publish(tamper);
  } else {
    liar.publish_raw(raw);
  }
  try {
    replicate_latest(*v.model);
    *what = "";
    EXPECT_EQ(std::memcmp(v.big.data(), liar.big.data(), kBig), 0);
    return Code::kSuccess;
  } catch (const Error& e) {
    *what = e.what();
    return e.code();
  }
}

TEST(HostileSourceTest, TruthfulSourceIsRead) {
  std::string what;
  EXPECT_EQ(replicate_from_liar([](Descriptor&) {}, &what), Code::kSuccess) << what;
}

// The integrity region is read into a buffer sized by the reader's own plan: a source that
// claims a longer one is refused, not read past the end of that buffer.
TEST(HostileSourceTest, LongerIntegrityRegionIsRefused) {
  std::string what;
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.hashes.bytes = 65536; }, &what), Code::kLayout);
  EXPECT_NE(what.find("integrity region"), std::string::npos) << what;
}

TEST(HostileSourceTest, SegmentLongerThanTheStreamIsRefused) {
  std::string what;
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.segments.back().bytes += 1u << 20; }, &what), Code::kLayout);
  EXPECT_NE(what.find("segment"), std::string::npos) << what;
}

TEST(HostileSourceTest, SegmentsThatDoNotAddUpAreRefused) {
  std::string what;
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.segments.back().bytes -= 1; }, &what), Code::kLayout);
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.segments.push_back(d.segments.back()); }, &what),
            Code::kLayout);
}

TEST(HostileSourceTest, EmptySegmentIsRefused) {
  std::string what;
  EXPECT_EQ(replicate_from_liar(
                [](Descriptor& d) {
                  RemoteRegion empty = d.segments.front();
                  empty.bytes = 0;
                  d.segments.insert(d.segments.begin(), empty);
                },
                &what),
            Code::kLayout);
}

TEST(HostileSourceTest, MalformedCounterIsRefused) {
  std::string what;
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.counter.bytes = 4096; }, &what), Code::kLayout);
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.epoch = 0; }, &what), Code::kLayout);
  EXPECT_NE(what.find("progress counter"), std::string::npos) << what;
}

TEST(HostileSourceTest, OtherTensorsAreALayoutError) {
  std::string what;
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.tensors.pop_back(); }, &what), Code::kLayout);
  EXPECT_EQ(replicate_from_liar([](Descriptor& d) { d.tensors[0].bytes = 1; }, &what), Code::kLayout);
}

TEST(HostileSourceTest, GarbageDescriptorIsATransportError) {
  std::string what;
  EXPECT_EQ(replicate_from_liar({}, &what, std::string(300, '\x7f')), Code::kTransport);
  EXPECT_NE(what.find("malformed source descriptor"), std::string::npos) << what;
}

// A source whose descriptor does not decode has failed, not the reader's transfer: the
// reader reports it and the registry hands out another holder. The liar is the older member,
// so the registry offers it first (sched/source_chooser.cc).
TEST(HostileSourceTest, GarbageDescriptorIsAFailedSourceAndAnotherHolderIsTaken) {
  Victim v;
  Liar liar(v.ctx->registry_address());
  Liar honest(v.ctx->registry_address(), "honest");
  std::memset(honest.big.data(), 5, kBig);
  liar.publish_raw(std::string(300, '\x7f'));
  honest.publish([](Descriptor&) {});
  replicate_latest(*v.model);
  EXPECT_EQ(std::memcmp(v.big.data(), honest.big.data(), kBig), 0);
  EXPECT_EQ(v.model->stat(stat_key("source_failures")), 1);
}

// A source whose counter says it holds less than a complete holder must is a failed source,
// not one to poll for ever.
TEST(HostileSourceTest, CompleteSourceWhoseCounterLagsHasFailed) {
  Victim v;
  Liar liar(v.ctx->registry_address());
  liar.h.fill_writer().show(0, nullptr, 0, 0, 100);
  liar.publish([](Descriptor&) {});
  try {
    replicate_latest(*v.model);
    FAIL() << "replicated from a source whose counter shows 100 bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("progress counter shows 100"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace thub::client
