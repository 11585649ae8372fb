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

// `tensors`: d.tensors, or a holder's own table (Tensor): each listed by name and size.
template <typename Tensors>
std::string encode(const Descriptor& d, const Tensors& tensors, DescriptorPatch* at) {
  Writer w;
  size_t bytes = 64 + d.host.size() + d.worker_address.size() + 2 * (20 + kRkeyBound) + 4;
  for (const auto& t : tensors) bytes += 4 + t.name.size() + 8;
  for (const auto& s : d.segments) bytes += 20 + s.rkey.size();
  w.reserve(bytes);  // one allocation: a shard of 8,192 tensors encodes ~140 KB
  w.u32(kDescriptorVersion).str(d.host).i64(d.pid).str(d.worker_address);
  put(w, d.counter);
  if (at) at->epoch_at = w.size();
  w.u32(d.epoch);
  put(w, d.hashes);
  w.u32(static_cast<uint32_t>(tensors.size()));
  for (const auto& t : tensors) w.str(t.name).u64(t.bytes);
  w.u64(d.compaction_threshold);
  if (at) at->staged_at = w.size();
  w.u32(d.staged ? 1 : 0);
  w.u32(static_cast<uint32_t>(d.segments.size()));
  for (const auto& s : d.segments) put(w, s);
  return w.take();
}
}  // namespace

std::string encode_descriptor(const Descriptor& d, DescriptorPatch* at) { return encode(d, d.tensors, at); }

std::string encode_descriptor(const Descriptor& d, const TensorTable& table, DescriptorPatch* at) {
  return encode(d, table.tensors(), at);
}

void patch_descriptor(std::string* bytes, const DescriptorPatch& at, uint32_t epoch, bool staged) {
  try {
    patch_u32(*bytes, at.epoch_at, epoch);
    patch_u32(*bytes, at.staged_at, staged ? 1 : 0);
  } catch (const CodecError& e) {
    throw Error(Code::kInternal, std::string("descriptor patch: ") + e.what());
  }
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
