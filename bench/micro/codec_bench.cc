// Codecs on the control path: the source descriptor a publish carries and a grant hands
// out (src/client/descriptor.h), control-plane frames, events and replies
// (src/registry/protocol.h), and the 8-byte progress-counter value readers poll
// (src/client/progress_counter.h).
#include <benchmark/benchmark.h>

#include <string>

#include "src/client/descriptor.h"
#include "src/client/progress_counter.h"
#include "src/registry/protocol.h"

namespace {

using namespace thub;

// A descriptor like a direct-mode holder's: T tensors with real-looking names, one stream
// segment per large tensor (the compact segment first), packed rkeys of 64 bytes.
client::Descriptor make_descriptor(int tensors) {
  client::Descriptor d;
  d.host = "boot-id:netns:hostname";
  d.pid = 4242;
  d.worker_address = std::string(180, 'w');
  const std::string rkey(64, 'k');
  d.counter = {0x7f0000001000, 8, rkey};
  d.hashes = {0x7f0000002000, 8 * 1025, rkey};
  for (int i = 0; i < tensors; ++i) {
    d.tensors.push_back({"model.layers." + std::to_string(i / 12) + ".mlp.up_proj.weight", 1u << 20});
  }
  d.compaction_threshold = 2u << 20;
  d.segments.push_back({0x7f0010000000, 64u << 20, rkey});
  for (int i = 0; i < tensors / 10; ++i) d.segments.push_back({0x7f0100000000ull + (uint64_t(i) << 24), 16u << 20, rkey});
  return d;
}

void BM_DescriptorEncode(benchmark::State& state) {
  client::Descriptor d = make_descriptor(static_cast<int>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string s = client::encode_descriptor(d);
    bytes = s.size();
    benchmark::DoNotOptimize(s);
  }
  state.counters["descriptor_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_DescriptorEncode)->Arg(100)->Arg(1000)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_DescriptorDecode(benchmark::State& state) {
  const std::string s = client::encode_descriptor(make_descriptor(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    client::Descriptor d = client::decode_descriptor(s);
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(s.size()));
}
BENCHMARK(BM_DescriptorDecode)->Arg(100)->Arg(1000)->Arg(8192)->Unit(benchmark::kMicrosecond);

void BM_FrameHeader(benchmark::State& state) {
  const std::string payload(64, 'p');
  uint64_t req = 0;
  for (auto _ : state) {
    std::string f = registry::encode_frame(registry::MsgType::kReplicate, ++req, payload);
    registry::FrameHeader h = registry::decode_header(std::string_view(f).substr(0, registry::kHeaderBytes));
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_FrameHeader);

// A Publish request carrying a descriptor of range(0) tensors: encode, then decode on the
// registry's side.
void BM_PublishEvent(benchmark::State& state) {
  sched::Publish p{0, 7, 3, 11, 0x1234, client::encode_descriptor(make_descriptor(static_cast<int>(state.range(0))))};
  const sched::Event ev = p;
  for (auto _ : state) {
    std::string payload = registry::encode_event(ev);
    sched::Event back = registry::decode_event(registry::type_of(ev), 7, 1, payload);
    benchmark::DoNotOptimize(back);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(p.descriptor.size()));
}
BENCHMARK(BM_PublishEvent)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

// A grant (Reply with the source's descriptor): encode on the registry, decode at the client.
void BM_GrantReply(benchmark::State& state) {
  sched::Reply r;
  r.client = 1;
  r.req = 9;
  r.version = 11;
  r.lease = 5;
  r.source = 3;
  r.source_descriptor = client::encode_descriptor(make_descriptor(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    std::string payload = registry::encode_reply(r);
    sched::Reply back = registry::decode_reply(payload);
    benchmark::DoNotOptimize(back);
  }
}
BENCHMARK(BM_GrantReply)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

// The progress counter's value: (version, bytes) packed into 8 bytes, and read back for the
// version a reader was granted.
void BM_CounterValue(benchmark::State& state) {
  uint64_t bytes = 0, sum = 0;
  int64_t version = 5;
  for (auto _ : state) {
    uint64_t v = client::counter_value(version, bytes);
    benchmark::DoNotOptimize(v);
    sum += client::counter_bytes_of(v, version);
    bytes += 4096;
  }
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_CounterValue);

}  // namespace
