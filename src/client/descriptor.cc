#include "src/client/descriptor.h"

#include "src/common/codec.h"
#include "src/common/status.h"

namespace thub::client {

namespace {
constexpr uint32_t kDescriptorVersion = 3;  // 2: stream segments, compaction, staging; 3: fill epoch

void put(Writer& w, const RemoteRegion& r) { w.u64(r.addr).u64(r.bytes).str(r.rkey); }
RemoteRegion get(Reader& r) {
  RemoteRegion x;
  x.addr = r.u64();
  x.bytes = r.u64();
  x.rkey = r.str();
  return x;
}
}  // namespace

std::string encode_descriptor(const Descriptor& d) {
  Writer w;
  w.u32(kDescriptorVersion).str(d.host).i64(d.pid).str(d.worker_address);
  put(w, d.counter);
  w.u32(d.epoch);
  put(w, d.hashes);
  w.u32(static_cast<uint32_t>(d.tensors.size()));
  for (const auto& t : d.tensors) {
    w.str(t.name);
    put(w, t.region);
  }
  w.u64(d.compaction_threshold).u32(d.staged ? 1 : 0);
  w.u32(static_cast<uint32_t>(d.segments.size()));
  for (const auto& s : d.segments) put(w, s);
  return w.take();
}

Descriptor decode_descriptor(const std::string& bytes) {
  try {
    Reader r(bytes);
    if (r.u32() != kDescriptorVersion) throw CodecError("unknown descriptor version");
    Descriptor d;
    d.host = r.str();
    d.pid = r.i64();
    d.worker_address = r.str();
    d.counter = get(r);
    d.epoch = r.u32();
    d.hashes = get(r);
    uint32_t n = r.count(4 + 8 + 8 + 4);
    d.tensors.resize(n);
    for (auto& t : d.tensors) {
      t.name = r.str();
      t.region = get(r);
    }
    d.compaction_threshold = r.u64();
    const uint32_t staged = r.u32();
    if (staged > 1) throw CodecError("bad staged flag " + std::to_string(staged));  // 0 or 1, as encoded
    d.staged = staged == 1;
    uint32_t ns = r.count(8 + 8 + 4);
    d.segments.resize(ns);
    for (auto& s : d.segments) s = get(r);
    r.expect_end();
    return d;
  } catch (const CodecError& e) {
    throw Error(Code::kTransport, std::string("malformed source descriptor: ") + e.what());
  }
}

}  // namespace thub::client
