#include "tests/fuzz/message_model.h"

#include <algorithm>
#include <type_traits>

#include "src/common/codec.h"
#include "src/registry/auth.h"

namespace thub::fuzz {

using registry::MsgType;

namespace {
Field u32(uint64_t v) { return {Kind::kU32, v, {}, {}}; }
Field u64(uint64_t v) { return {Kind::kU64, v, {}, {}}; }
Field i64(int64_t v) { return {Kind::kU64, static_cast<uint64_t>(v), {}, {}}; }
Field boolean(bool b) { return {Kind::kBool, b ? 1u : 0u, {}, {}}; }
Field str(std::string s) { return {Kind::kStr, 0, std::move(s), {}}; }
Field count(uint64_t n) { return {Kind::kCount, n, {}, {}}; }

void region(std::vector<Field>& f, uint64_t addr, uint64_t bytes, std::string rkey) {
  f.push_back(u64(addr));
  f.push_back(u64(bytes));
  f.push_back(str(std::move(rkey)));
}

std::string random_string(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}
}  // namespace

std::string serialize(const Message& m) {
  Writer w;
  for (const Field& f : m.fields) {
    switch (f.kind) {
      case Kind::kU8:
      case Kind::kCount8:
      case Kind::kBool: w.u8(static_cast<uint8_t>(f.v)); break;
      case Kind::kRaw: w.raw(f.s.data(), f.s.size()); break;
      case Kind::kU16: w.u16(static_cast<uint16_t>(f.v)); break;
      case Kind::kU32:
      case Kind::kCount: w.u32(static_cast<uint32_t>(f.v)); break;
      case Kind::kU64: w.u64(f.v); break;
      case Kind::kStr:
        w.u32(static_cast<uint32_t>(f.len ? *f.len : f.s.size()));
        w.raw(f.s.data(), f.s.size());
        break;
    }
  }
  return w.take();
}

Message hello(const std::string& nonce, const std::string& datacenter) {
  return {Shape::kHello, {str(nonce), str(datacenter)}};
}
Message secret_field(const std::string& bytes) { return {Shape::kAuthField, {str(bytes)}}; }
Message describe() { return {Shape::kDescribe, {}}; }
Message info(uint32_t max_entries) { return {Shape::kInfo, {u32(max_entries)}}; }

Message request(const sched::Event& ev) {
  return std::visit(
      [](const auto& e) -> Message {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, sched::Heartbeat>) {
          return {Shape::kHeartbeat, {}};
        } else if constexpr (std::is_same_v<T, sched::Open>) {
          return {Shape::kOpen,
                  {str(e.model), str(e.replica), u32(static_cast<uint32_t>(e.shard)),
                   u32(static_cast<uint32_t>(e.num_shards)), u32(static_cast<uint32_t>(e.retain)), boolean(e.spot),
                   u64(e.round), boolean(e.round_open), u32(static_cast<uint32_t>(static_cast<int32_t>(e.round_status))),
                   i64(e.round_version), i64(e.round_spec), i64(e.round_newer_than)}};
        } else if constexpr (std::is_same_v<T, sched::Close>) {
          return {Shape::kClose, {u64(e.member)}};
        } else if constexpr (std::is_same_v<T, sched::Unpublish>) {
          return {Shape::kUnpublish, {u64(e.member)}};
        } else if constexpr (std::is_same_v<T, sched::Publish>) {
          return {Shape::kPublish, {u64(e.member), i64(e.version), u64(e.layout_hash), str(e.descriptor)}};
        } else if constexpr (std::is_same_v<T, sched::Replicate>) {
          return {Shape::kReplicate,
                  {u64(e.member), i64(e.spec), i64(e.newer_than), u64(e.layout_hash), str(e.descriptor), u64(e.round),
                   boolean(e.whole), boolean(e.seed_only)}};
        } else if constexpr (std::is_same_v<T, sched::TransferDone>) {
          return {Shape::kTransferDone, {u64(e.member), u64(e.lease)}};
        } else if constexpr (std::is_same_v<T, sched::SourceFailed>) {
          return {Shape::kSourceFailed, {u64(e.member), u64(e.lease), u64(e.chunks_done)}};
        } else if constexpr (std::is_same_v<T, sched::OffloadDone>) {
          return {Shape::kOffloadDone, {u64(e.member), i64(e.version), str(e.descriptor)}};
        } else if constexpr (std::is_same_v<T, sched::Cancel>) {
          return {Shape::kCancel,
                  {u64(e.member), u64(e.round), i64(e.version), u32(static_cast<uint32_t>(static_cast<int32_t>(e.status)))}};
        } else if constexpr (std::is_same_v<T, sched::TransferProgress>) {
          return {Shape::kTransferProgress, {u64(e.member), u64(e.lease), u64(e.bytes), str(e.path)}};
        } else {
          throw std::logic_error("not a client request");
        }
      },
      ev);
}

Message reply(const sched::Reply& r) {
  return {Shape::kReply,
          {u32(static_cast<uint32_t>(static_cast<int32_t>(r.status))), str(r.detail), u64(r.member), i64(r.version),
           u64(r.lease), u64(r.source), str(r.source_descriptor), boolean(r.source_partial), boolean(r.released)}};
}

Message order(uint64_t member, int64_t version) { return {Shape::kOrder, {u64(member), i64(version)}}; }
Message not_leader(const registry::NotLeader& n) { return {Shape::kNotLeader, {str(n.leader), str(n.detail)}}; }

Message snapshot(const sched::Snapshot& s) {
  auto u32i = [](int v) { return u32(static_cast<uint32_t>(v)); };
  Message m{Shape::kSnapshot,
            {i64(s.now), u64(s.clients), u64(s.members), u64(s.leases), u64(s.waiting), u64(s.models_total),
             u64(s.holders_total), u64(s.transfers_total), boolean(s.truncated)}};
  auto& f = m.fields;
  f.push_back(count(s.models.size()));
  for (const sched::ModelView& x : s.models) {
    f.insert(f.end(), {str(x.name), u32i(x.retain), u64(x.versions_published), i64(x.latest), count(x.retained.size())});
    for (int64_t v : x.retained) f.push_back(i64(v));
    f.push_back(u32(x.members));
  }
  f.push_back(count(s.holders.size()));
  for (const sched::HolderView& h : s.holders) {
    f.insert(f.end(), {u32(h.model), i64(h.version), u32i(h.shard), u32i(h.num_shards), str(h.replica), u64(h.member),
                       u64(h.client), Field{Kind::kU8, static_cast<uint64_t>(h.state), {}, {}}, boolean(h.spot),
                       u32i(h.load), u64(h.bytes_reported), i64(h.reported_at)});
  }
  f.push_back(count(s.transfers.size()));
  for (const sched::TransferView& t : s.transfers) {
    f.insert(f.end(), {u64(t.lease), u32(t.model), i64(t.version), u64(t.source), str(t.source_replica),
                       u32i(t.source_shard), u64(t.reader), str(t.reader_replica), u32i(t.reader_shard),
                       boolean(t.from_host_copy), boolean(t.source_partial), boolean(t.orphan), i64(t.granted_at),
                       u64(t.bytes_reported), i64(t.reported_at), str(t.path)});
  }
  return m;
}

sched::Snapshot random_snapshot(Rng& rng) {
  sched::Snapshot s;
  s.now = static_cast<int64_t>(pick(rng, 1u << 30));
  s.clients = pick(rng, 10);
  s.members = pick(rng, 20);
  s.leases = pick(rng, 5);
  s.waiting = pick(rng, 5);
  s.truncated = chance(rng, 4);
  for (uint64_t i = pick(rng, 4); i > 0; --i) {
    sched::ModelView m;
    m.name = "model-" + std::to_string(pick(rng, 1000));
    m.retain = static_cast<int>(pick(rng, 3));
    m.versions_published = pick(rng, 100);
    m.latest = static_cast<int64_t>(pick(rng, 100)) - 1;
    for (uint64_t k = pick(rng, 3); k > 0; --k) m.retained.push_back(static_cast<int64_t>(pick(rng, 100)));
    m.members = static_cast<uint32_t>(pick(rng, 8));
    s.models.push_back(std::move(m));
  }
  for (uint32_t model = 0; model < s.models.size(); ++model) {
    for (uint64_t k = pick(rng, 3); k > 0; --k) {
      sched::HolderView h;
      h.model = model;
      h.version = static_cast<int64_t>(pick(rng, 100));
      h.num_shards = 1 + static_cast<int>(pick(rng, 4));
      h.shard = static_cast<int>(pick(rng, static_cast<uint64_t>(h.num_shards)));
      h.replica = "r" + std::to_string(pick(rng, 10));
      h.member = pick(rng, 100);
      h.client = pick(rng, 100);
      h.state = static_cast<sched::Holding>(pick(rng, sched::kHoldingCount));
      h.spot = chance(rng, 3);
      h.load = static_cast<int>(pick(rng, 4));
      h.bytes_reported = pick(rng, 1u << 20);
      h.reported_at = static_cast<int64_t>(pick(rng, 1u << 30));
      s.holders.push_back(std::move(h));
    }
  }
  for (uint64_t k = pick(rng, 3); k > 0; --k) {
    sched::TransferView t;
    t.lease = pick(rng, 100);
    t.model = s.models.empty() || chance(rng, 4) ? sched::TransferView::kNoModel
                                                 : static_cast<uint32_t>(pick(rng, s.models.size()));
    t.version = static_cast<int64_t>(pick(rng, 100));
    t.source = pick(rng, 100);
    t.reader = pick(rng, 100);
    t.source_replica = chance(rng, 4) ? "" : "t";
    t.reader_replica = chance(rng, 4) ? "" : "r";
    t.source_shard = static_cast<int>(pick(rng, 3)) - 1;
    t.reader_shard = static_cast<int>(pick(rng, 3)) - 1;
    t.from_host_copy = chance(rng, 3);
    t.source_partial = chance(rng, 3);
    t.orphan = chance(rng, 5);
    t.granted_at = static_cast<int64_t>(pick(rng, 1u << 30));
    t.bytes_reported = pick(rng, 1u << 20);
    t.reported_at = static_cast<int64_t>(pick(rng, 1u << 30));
    if (pick(rng, 2)) t.path = pick(rng, 2) ? "process_vm_readv" : "socket";
    s.transfers.push_back(std::move(t));
  }
  s.models_total = s.models.size();
  s.holders_total = s.holders.size();
  s.transfers_total = s.transfers.size();
  return s;
}

Message address(const AddressFields& a) {
  Message m{Shape::kAddress, {}};
  auto& f = m.fields;
  f.push_back({Kind::kRaw, 0, "THW" + std::to_string(a.version), {}});
  f.push_back(str(a.ucx));
  f.push_back({Kind::kU16, a.port, {}, {}});
  f.push_back({Kind::kCount8, a.ipv4.size(), {}, {}});
  for (uint32_t ip : a.ipv4) f.push_back(u32(ip));
  if (a.version != 1) {
    f.push_back(u32(a.pid));
    f.push_back(u64(a.nonce_addr));
    f.push_back(u64(a.nonce));
  }
  if (a.version >= 3) {
    f.push_back({Kind::kCount8, a.datacenter.size(), {}, {}});
    f.push_back({Kind::kRaw, 0, a.datacenter, {}});
  }
  return m;
}

Message rkey(const RkeyFields& k) {
  Message m{Shape::kRkey, {}};
  auto& f = m.fields;
  f.push_back({Kind::kRaw, 0, "THK" + std::to_string(k.version), {}});
  f.push_back(u64(k.token));
  if (k.version >= 2) {
    f.push_back(u64(k.addr));
    f.push_back(u64(k.len));
    f.push_back({Kind::kU8, (k.ucx_mapped ? 1u : 0u) | (k.has_slot ? 2u : 0u), {}, {}});
    if (k.has_slot) {
      f.push_back(u32(k.slot));
      f.push_back(u64(k.slot_key));
    }
  }
  f.push_back({Kind::kRaw, 0, k.ucx, {}});
  return m;
}

Message descriptor(Rng& rng) {
  Message m{Shape::kDescriptor, {}};
  auto& f = m.fields;
  f.push_back(u32(4));
  f.push_back(str("host-" + std::to_string(pick(rng, 100))));
  f.push_back(i64(static_cast<int64_t>(1000 + pick(rng, 30000))));
  f.push_back(str(random_string(rng, 16 + pick(rng, 48))));  // worker address
  region(f, 0x7f0000000000 + pick(rng, 1 << 20) * 8, 8, random_string(rng, pick(rng, 40)));  // counter
  f.push_back(u32(1 + pick(rng, 1000)));                                                       // epoch
  region(f, 0x7f1000000000, 8 + 8 * pick(rng, 4), random_string(rng, pick(rng, 40)));        // hashes
  uint64_t n = pick(rng, 4);
  f.push_back(count(n));
  for (uint64_t i = 0; i < n; ++i) {
    f.push_back(str("t" + std::to_string(i)));
    f.push_back(u64(1 + pick(rng, 1 << 20)));
  }
  f.push_back(u64(2u << 20));
  f.push_back(u32(pick(rng, 2)));
  uint64_t ns = pick(rng, 4);
  f.push_back(count(ns));
  for (uint64_t i = 0; i < ns; ++i) region(f, 0x7f3000000000 + i * 4096, 1 + pick(rng, 1 << 20), "");
  return m;
}

uint64_t interesting(Rng& rng, Kind k) {
  static const uint64_t kValues[] = {
      0, 1, 2, 3, 7, 8, 31, 32, 33, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000,
      4095, 4096, 4097,                                   // kMaxNameBytes
      (16u << 10), (16u << 10) + 1,                       // kMaxHelloPayload
      (1u << 20), (1u << 20) + 1,                         // sched's shard bounds
      (32u << 20) + 1, (63u << 20) + 1, (64u << 20), (64u << 20) + 1,  // descriptor and frame limits
      0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 4000000000ull,
      0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull,
      0xfffffffffffffffeull, /* -2 */ 0xfffffffffffffff0ull};
  uint64_t v = kValues[pick(rng, std::size(kValues))];
  if (chance(rng, 4)) v = rng();
  switch (k) {
    case Kind::kU8:
    case Kind::kCount8:
    case Kind::kRaw:
    case Kind::kBool: return chance(rng, 2) ? 2 + pick(rng, 254) : v & 0xff;
    case Kind::kU16: return v & 0xffff;
    case Kind::kU32:
    case Kind::kCount:
    case Kind::kStr: return v & 0xffffffff;
    case Kind::kU64: return v;
  }
  return v;
}

namespace {
// Grows or shrinks a string to a boundary size. Sizes near the descriptor limits are rare
// (they cost tens of MiB each) but present.
void resize_string(Field& f, Rng& rng) {
  static const size_t kSizes[] = {0, 1, 31, 32, 33, 64, 4095, 4096, 4097, 16000, (16u << 10) + 1};
  size_t n = kSizes[pick(rng, std::size(kSizes))];
  if (chance(rng, 5000)) n = chance(rng, 2) ? (32u << 20) + 1 : (63u << 20) + 1;
  char c = f.s.empty() ? 'x' : f.s[pick(rng, f.s.size())];
  f.s.resize(n, c);
  f.len.reset();
}

void mutate_fields(Message& m, const Message& other, Rng& rng) {
  auto& f = m.fields;
  switch (pick(rng, 9)) {
    case 0:
    case 1: {  // an integer, count or boolean to an interesting value
      if (f.empty()) break;
      Field& x = f[pick(rng, f.size())];
      if (x.kind == Kind::kStr) x.len = interesting(rng, Kind::kStr);
      else if (x.kind == Kind::kRaw && !x.s.empty()) x.s[pick(rng, x.s.size())] = static_cast<char>(rng());
      else x.v = interesting(rng, x.kind);
      break;
    }
    case 2: {  // a string's length prefix lies, by a little or a lot
      std::vector<size_t> strs;
      for (size_t i = 0; i < f.size(); ++i)
        if (f[i].kind == Kind::kStr) strs.push_back(i);
      if (strs.empty()) break;
      Field& x = f[strs[pick(rng, strs.size())]];
      const uint64_t n = x.s.size();
      const uint64_t choices[] = {n + 1, n ? n - 1 : 0, n + 2, 0, 0xffffffff, 4000000000ull, n + 1000000,
                                  interesting(rng, Kind::kStr)};
      x.len = choices[pick(rng, std::size(choices))] & 0xffffffff;
      break;
    }
    case 3: {  // a count of many with few items behind it
      for (Field& x : f) {
        if (x.kind == Kind::kCount && chance(rng, 2)) x.v = chance(rng, 2) ? 4000000000ull : interesting(rng, x.kind);
        if (x.kind == Kind::kCount8 && chance(rng, 2)) x.v = chance(rng, 2) ? 255 : x.v + 1;
      }
      break;
    }
    case 4: {  // string contents and sizes
      std::vector<size_t> strs;
      for (size_t i = 0; i < f.size(); ++i)
        if (f[i].kind == Kind::kStr || f[i].kind == Kind::kRaw) strs.push_back(i);
      if (strs.empty()) break;
      Field& x = f[strs[pick(rng, strs.size())]];
      if (chance(rng, 2)) {
        resize_string(x, rng);
      } else if (!x.s.empty()) {
        x.s[pick(rng, x.s.size())] = static_cast<char>(chance(rng, 2) ? 0 : rng());
      }
      break;
    }
    case 5:  // a field missing
      if (!f.empty()) f.erase(f.begin() + static_cast<long>(pick(rng, f.size())));
      break;
    case 6:  // a field doubled
      if (!f.empty()) {
        size_t i = pick(rng, f.size());
        f.insert(f.begin() + static_cast<long>(i), f[i]);
      }
      break;
    case 7:  // two fields swapped (a string where an integer was: a type confusion)
      if (f.size() >= 2) std::swap(f[pick(rng, f.size())], f[pick(rng, f.size())]);
      break;
    case 8:  // a field of another message
      if (!other.fields.empty()) {
        const Field& o = other.fields[pick(rng, other.fields.size())];
        if (f.empty()) f.push_back(o);
        else f[pick(rng, f.size())] = o;
      }
      break;
  }
}

void mutate_bytes(std::string& b, const std::string& other, Rng& rng) {
  switch (pick(rng, 7)) {
    case 0:  // truncated anywhere
      b.resize(pick(rng, b.size() + 1));
      break;
    case 1:  // trailing bytes
      b.append(1 + pick(rng, 8), static_cast<char>(rng()));
      break;
    case 2:  // bit flips
      for (int k = 0, n = 1 + static_cast<int>(pick(rng, 4)); k < n && !b.empty(); ++k)
        b[pick(rng, b.size())] ^= static_cast<char>(1u << pick(rng, 8));
      break;
    case 3:  // a byte set
      if (!b.empty()) b[pick(rng, b.size())] = static_cast<char>(interesting(rng, Kind::kU8));
      break;
    case 4: {  // a range deleted
      if (b.empty()) break;
      size_t at = pick(rng, b.size());
      b.erase(at, 1 + pick(rng, std::min<size_t>(16, b.size() - at)));
      break;
    }
    case 5: {  // a u32 written somewhere (a length where there was none)
      if (b.size() < 4) break;
      size_t at = pick(rng, b.size() - 3);
      uint64_t v = interesting(rng, Kind::kU32);
      for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
      break;
    }
    case 6: {  // spliced with another message
      size_t cut = pick(rng, b.size() + 1);
      b = b.substr(0, cut) + other.substr(pick(rng, other.size() + 1));
      break;
    }
  }
}
}  // namespace

std::string mutate(const Message& m, const Message& other, Rng& rng) {
  Message x = m;
  int rounds = 1 + static_cast<int>(pick(rng, 3));
  for (int i = 0; i < rounds; ++i) mutate_fields(x, other, rng);
  std::string b = serialize(x);
  if (chance(rng, 3)) mutate_bytes(b, serialize(other), rng);
  return b;
}

std::string frame(MsgType type, uint64_t req, const std::string& payload) {
  Writer w;
  w.u32(registry::kMagic).u16(registry::kProtocolVersion).u16(static_cast<uint16_t>(type)).u64(req);
  w.u32(static_cast<uint32_t>(payload.size()));
  w.raw(payload.data(), payload.size());
  return w.take();
}

std::string sealed(registry::FrameMac& mac, std::string f) {
  if (!mac.on() || f.size() < registry::kHeaderBytes) return f;
  try {
    if (registry::decode_header(std::string_view(f).substr(0, registry::kHeaderBytes)).length ==
        f.size() - registry::kHeaderBytes) {
      mac.seal(f);
    }
  } catch (const CodecError&) {
  }
  return f;
}

std::string mutate_frame(MsgType type, uint64_t req, const std::string& payload, Rng& rng) {
  uint32_t magic = registry::kMagic;
  uint16_t version = registry::kProtocolVersion;
  uint64_t length = payload.size();
  switch (pick(rng, 6)) {
    case 0: type = any_type(rng); break;                                    // a type swap
    case 1: length = interesting(rng, Kind::kU32); break;                   // the length lies
    case 2: length = chance(rng, 2) ? length + 1 : (length ? length - 1 : 0); break;
    case 3: version = chance(rng, 2) ? 1 : static_cast<uint16_t>(rng()); break;  // protocol 1, or any
    case 4: magic ^= 1u << pick(rng, 32); break;
    case 5: req = interesting(rng, Kind::kU64); break;
  }
  Writer w;
  w.u32(magic).u16(version).u16(static_cast<uint16_t>(type)).u64(req).u32(static_cast<uint32_t>(length));
  w.raw(payload.data(), payload.size());
  return w.take();
}

MsgType any_type(Rng& rng) {
  // Every number of MsgType, then a few that no message has.
  static const uint16_t kTypes[] = {1,   2,   3,   4,   5,   6, 7,  8,  9,   10,  11,    12, 13,
                                    14,  15,  100, 101, 102, 103, 104, 105, 0, 16, 99, 106, 0xffff};
  return static_cast<MsgType>(kTypes[pick(rng, std::size(kTypes))]);
}

}  // namespace thub::fuzz
