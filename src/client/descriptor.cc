#include "src/client/descriptor.h"

#include "src/common/codec.h"
#include "src/common/status.h"

namespace thub::client {

namespace {
// 2: stream segments, compaction, staging; 3: fill epoch; 4: a tensor is its name and size (no
// region of its own: 40 % fewer bytes for 8,192 tensors)
constexpr uint32_t kDescriptorVersion = 4;

void put(Writer& w, const RemoteRegion& r) { w.u64(r.addr).u64(r.bytes).str(r.rkey); }
RemoteRegion get(Reader& r) {
  RemoteRegion x;
  x.addr = r.u64();
  x.bytes = r.u64();
  x.rkey = r.str();
  return x;
}

// `tensors_bytes` and `put_tensors` encode the tensor list: d.tensors, or a holder's own table.
template <typename PutTensors>
std::string encode(const Descriptor& d, size_t tensors_bytes, PutTensors&& put_tensors, DescriptorPatch* at) {
  Writer w;
  size_t bytes = 64 + d.host.size() + d.worker_address.size() + 2 * (20 + kRkeyBound) + tensors_bytes;
  for (const auto& s : d.segments) bytes += 20 + s.rkey.size();
  w.reserve(bytes);  // one allocation: a shard of 8,192 tensors encodes ~300 KB
  w.u32(kDescriptorVersion).str(d.host).i64(d.pid).str(d.worker_address);
  put(w, d.counter);
  if (at) at->epoch_at = w.size();
  w.u32(d.epoch);
  put(w, d.hashes);
  put_tensors(w);
  w.u64(d.compaction_threshold);
  if (at) at->staged_at = w.size();
  w.u32(d.staged ? 1 : 0);
  w.u32(static_cast<uint32_t>(d.segments.size()));
  for (const auto& s : d.segments) put(w, s);
  return w.take();
}
}  // namespace

std::string encode_descriptor(const Descriptor& d, DescriptorPatch* at) {
  size_t bytes = 4;
  for (const auto& t : d.tensors) bytes += 4 + t.name.size() + 8;
  return encode(d, bytes, [&d](Writer& w) {
    w.u32(static_cast<uint32_t>(d.tensors.size()));
    for (const auto& t : d.tensors) w.str(t.name).u64(t.bytes);
  }, at);
}

std::string encode_descriptor(const Descriptor& d, const TensorTable& table, DescriptorPatch* at) {
  size_t bytes = 4;
  for (const auto& t : table.tensors()) bytes += 4 + t.name.size() + 8;
  return encode(d, bytes, [&table](Writer& w) {
    w.u32(static_cast<uint32_t>(table.tensors().size()));
    for (const auto& t : table.tensors()) w.str(t.name).u64(t.bytes);
  }, at);
}

void patch_descriptor(std::string* bytes, const DescriptorPatch& at, uint32_t epoch, bool staged) {
  auto set = [bytes](size_t off, uint32_t v) {
    if (off + 4 > bytes->size()) throw Error(Code::kInternal, "descriptor patch out of range");
    for (size_t i = 0; i < 4; ++i) (*bytes)[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  set(at.epoch_at, epoch);
  set(at.staged_at, staged ? 1 : 0);
}

Descriptor decode_descriptor(const std::string& bytes) {
  try {
    Reader r(bytes);
    if (const uint32_t v = r.u32(); v != kDescriptorVersion) {
      throw CodecError("descriptor version " + std::to_string(v) + ", this library reads version " +
                       std::to_string(kDescriptorVersion) + " (every process of a job must run one TensorHub version)");
    }
    Descriptor d;
    d.host = r.str();
    d.pid = r.i64();
    d.worker_address = r.str();
    d.counter = get(r);
    d.epoch = r.u32();
    d.hashes = get(r);
    uint32_t n = r.count(4 + 8);
    d.tensors.resize(n);
    for (auto& t : d.tensors) {
      t.name = r.str();
      t.bytes = r.u64();
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
