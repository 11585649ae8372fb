#include "src/registry/protocol.h"

#include <climits>
#include <cstdint>
#include <type_traits>

#include "src/common/codec.h"

namespace thub::registry {

using namespace thub::sched;

std::string encode_frame(MsgType type, uint64_t req, std::string_view payload) {
  if (payload.size() > kMaxPayload) throw CodecError("payload exceeds the frame limit");
  Writer w;
  w.u32(kMagic).u16(kProtocolVersion).u16(static_cast<uint16_t>(type)).u64(req);
  w.u32(static_cast<uint32_t>(payload.size()));
  w.raw(payload.data(), payload.size());
  return w.take();
}

FrameHeader decode_header(std::string_view bytes) {
  Reader r(bytes);
  if (r.u32() != kMagic) throw CodecError("bad magic: not a TensorHub registry frame");
  FrameHeader h;
  h.version = r.u16();
  if (h.version != kProtocolVersion) {
    throw CodecError("unsupported protocol version " + std::to_string(h.version) + " (this registry speaks " +
                     std::to_string(kProtocolVersion) + ")");
  }
  h.type = static_cast<MsgType>(r.u16());
  h.req = r.u64();
  h.length = r.u32();
  if (h.length > kMaxPayload) throw CodecError("frame payload of " + std::to_string(h.length) + " bytes is too long");
  return h;
}

std::string encode_hello(const Hello& h) {
  Writer w;
  w.str(h.token).str(h.datacenter);
  return w.take();
}

Hello decode_hello(std::string_view payload) {
  Reader r(payload, kMaxNameBytes);
  Hello h;
  h.token = r.str();
  h.datacenter = r.str();
  r.expect_end();
  return h;
}

MsgType type_of(const Event& ev) {
  return std::visit(
      [](const auto& e) -> MsgType {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, Heartbeat>) return MsgType::kHeartbeat;
        else if constexpr (std::is_same_v<T, Open>) return MsgType::kOpen;
        else if constexpr (std::is_same_v<T, sched::Close>) return MsgType::kClose;
        else if constexpr (std::is_same_v<T, Publish>) return MsgType::kPublish;
        else if constexpr (std::is_same_v<T, Replicate>) return MsgType::kReplicate;
        else if constexpr (std::is_same_v<T, TransferDone>) return MsgType::kTransferDone;
        else if constexpr (std::is_same_v<T, SourceFailed>) return MsgType::kSourceFailed;
        else if constexpr (std::is_same_v<T, Unpublish>) return MsgType::kUnpublish;
        else if constexpr (std::is_same_v<T, OffloadDone>) return MsgType::kOffloadDone;
        else if constexpr (std::is_same_v<T, sched::Cancel>) return MsgType::kCancel;
        else throw CodecError("this event is not a client request");
      },
      ev);
}

std::string encode_event(const Event& ev) {
  Writer w;
  std::visit(
      [&](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, Heartbeat>) {
        } else if constexpr (std::is_same_v<T, Open>) {
          w.str(e.model).str(e.replica).u32(static_cast<uint32_t>(e.shard));
          w.u32(static_cast<uint32_t>(e.num_shards)).u32(static_cast<uint32_t>(e.retain)).boolean(e.spot);
        } else if constexpr (std::is_same_v<T, sched::Close> || std::is_same_v<T, Unpublish> ||
                             std::is_same_v<T, sched::Cancel>) {
          w.u64(e.member);
        } else if constexpr (std::is_same_v<T, Publish>) {
          w.u64(e.member).i64(e.version).u64(e.layout_hash).str(e.descriptor);
        } else if constexpr (std::is_same_v<T, Replicate>) {
          w.u64(e.member).i64(e.spec).i64(e.newer_than).u64(e.layout_hash).str(e.descriptor);
        } else if constexpr (std::is_same_v<T, TransferDone>) {
          w.u64(e.member).u64(e.lease);
        } else if constexpr (std::is_same_v<T, SourceFailed>) {
          w.u64(e.member).u64(e.lease).u64(e.chunks_done);
        } else if constexpr (std::is_same_v<T, OffloadDone>) {
          w.u64(e.member).i64(e.version).str(e.descriptor);
        } else {
          throw CodecError("this event is not a client request");
        }
      },
      ev);
  return w.take();
}

namespace {
void check_size(const char* what, size_t size, size_t limit) {
  if (size > limit) {
    throw LimitError(std::string(what) + " of " + std::to_string(size) + " bytes exceeds the registry's limit of " +
                     std::to_string(limit) + " bytes");
  }
}
std::string bounded(Reader& r, const char* what, size_t limit) {
  std::string s = r.str();
  check_size(what, s.size(), limit);
  return s;
}
std::string descriptor(Reader& r) { return bounded(r, "descriptor", kMaxDescriptorBytes); }

int32_t checked_int(uint32_t v, const char* what, int32_t lo, int32_t hi) {
  auto x = static_cast<int32_t>(v);
  if (x < lo || x > hi) throw CodecError(std::string(what) + " out of range: " + std::to_string(x));
  return x;
}
}  // namespace

void check_limits(const Event& ev) {
  std::visit(
      [](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, Open>) {
          check_size("model name", e.model.size(), kMaxNameBytes);
          check_size("replica name", e.replica.size(), kMaxNameBytes);
        } else if constexpr (std::is_same_v<T, Publish> || std::is_same_v<T, Replicate> ||
                             std::is_same_v<T, OffloadDone>) {
          check_size("descriptor", e.descriptor.size(), kMaxDescriptorBytes);
        }
      },
      ev);
}

Event decode_event(MsgType type, uint64_t req, ClientId client, std::string_view payload) {
  Reader r(payload);
  Event ev;
  switch (type) {
    case MsgType::kHeartbeat:
      ev = Heartbeat{client};
      break;
    case MsgType::kOpen: {
      Open e{client, req, {}, {}, 0, 1, 0, false};
      e.model = bounded(r, "model name", kMaxNameBytes);
      e.replica = bounded(r, "replica name", kMaxNameBytes);
      e.shard = checked_int(r.u32(), "shard", 0, 1 << 20);
      e.num_shards = checked_int(r.u32(), "num_shards", 0, 1 << 20);
      e.retain = checked_int(r.u32(), "retain", 0, 1 << 20);
      e.spot = r.boolean();
      ev = std::move(e);
      break;
    }
    case MsgType::kClose:
      ev = sched::Close{client, req, r.u64()};
      break;
    case MsgType::kUnpublish:
      ev = Unpublish{client, req, r.u64()};
      break;
    case MsgType::kCancel:
      ev = sched::Cancel{client, req, r.u64()};
      break;
    case MsgType::kPublish: {
      Publish e{client, req, 0, 0, 0, {}};
      e.member = r.u64();
      e.version = r.i64();
      e.layout_hash = r.u64();
      e.descriptor = descriptor(r);
      ev = std::move(e);
      break;
    }
    case MsgType::kReplicate: {
      Replicate e{client, req, 0, 0, -1, 0, {}};
      e.member = r.u64();
      e.spec = r.i64();
      e.newer_than = r.i64();
      e.layout_hash = r.u64();
      e.descriptor = descriptor(r);
      ev = std::move(e);
      break;
    }
    case MsgType::kTransferDone: {
      TransferDone e{client, req, 0, 0};
      e.member = r.u64();
      e.lease = r.u64();
      ev = e;
      break;
    }
    case MsgType::kSourceFailed: {
      SourceFailed e{client, req, 0, 0, 0};
      e.member = r.u64();
      e.lease = r.u64();
      e.chunks_done = r.u64();
      ev = e;
      break;
    }
    case MsgType::kOffloadDone: {
      OffloadDone e{client, req, 0, 0, {}};
      e.member = r.u64();
      e.version = r.i64();
      e.descriptor = descriptor(r);
      ev = std::move(e);
      break;
    }
    default:
      throw CodecError(std::string("unexpected message type ") + std::to_string(static_cast<int>(type)));
  }
  r.expect_end();
  return ev;
}

std::string encode_reply(const Reply& x, size_t max_detail) {
  Writer w;
  w.u32(static_cast<uint32_t>(static_cast<int32_t>(x.status)));
  if (x.detail.size() <= max_detail) {
    w.str(x.detail);
  } else {
    std::string note = "\n... (truncated: " + std::to_string(x.detail.size()) + " bytes in all)";
    size_t keep = max_detail > note.size() ? max_detail - note.size() : 0;
    w.str(x.detail.substr(0, keep) + note.substr(0, max_detail - keep));
  }
  w.u64(x.member);
  w.i64(x.version).u64(x.lease).u64(x.source).str(x.source_descriptor).boolean(x.source_partial);
  return w.take();
}

Reply decode_reply(std::string_view payload) {
  Reader r(payload);
  Reply x{};
  x.status = static_cast<sched::Status>(static_cast<int32_t>(r.u32()));
  x.detail = r.str();
  x.member = r.u64();
  x.version = r.i64();
  x.lease = r.u64();
  x.source = r.u64();
  x.source_descriptor = r.str();
  x.source_partial = r.boolean();
  r.expect_end();
  return x;
}

std::string encode_order(MemberId member, Version version) {
  Writer w;
  w.u64(member).i64(version);
  return w.take();
}

void decode_order(std::string_view payload, MemberId* member, Version* version) {
  Reader r(payload);
  *member = r.u64();
  *version = r.i64();
  r.expect_end();
}

std::string encode_info_request(uint32_t max_entries) {
  Writer w;
  w.u32(max_entries);
  return w.take();
}

uint32_t decode_info_request(std::string_view payload) {
  Reader r(payload);
  uint32_t n = r.u32();
  r.expect_end();
  return n;
}

namespace {
// Fixed bytes of each SNAPSHOT entry (a string counts its 4-byte length): the decoder's
// lower bound for a count.
constexpr size_t kSnapshotHeadBytes = 8 * 8 + 1;
constexpr size_t kModelViewBytes = 4 + 4 + 8 + 8 + 4 + 4;
constexpr size_t kHolderViewBytes = 4 + 8 + 4 + 4 + 4 + 8 + 8 + 1 + 1 + 4 + 8 + 8;
constexpr size_t kTransferViewBytes = 8 + 4 + 8 + 8 + 4 + 4 + 8 + 4 + 4 + 1 + 1 + 1 + 8 + 8 + 8;
constexpr int32_t kMaxShards = 1 << 20;

void put(Writer& w, const ModelView& m) {
  w.str(m.name).u32(static_cast<uint32_t>(m.retain)).u64(m.versions_published).i64(m.latest);
  w.u32(static_cast<uint32_t>(m.retained.size()));
  for (Version v : m.retained) w.i64(v);
  w.u32(m.members);
}
void put(Writer& w, const HolderView& h) {
  w.u32(h.model).i64(h.version).u32(static_cast<uint32_t>(h.shard)).u32(static_cast<uint32_t>(h.num_shards));
  w.str(h.replica).u64(h.member).u64(h.client).u8(static_cast<uint8_t>(h.state)).boolean(h.spot);
  w.u32(static_cast<uint32_t>(h.load)).u64(h.bytes_reported).i64(h.reported_at);
}
void put(Writer& w, const TransferView& t) {
  w.u64(t.lease).u32(t.model).i64(t.version);
  w.u64(t.source).str(t.source_replica).u32(static_cast<uint32_t>(t.source_shard));
  w.u64(t.reader).str(t.reader_replica).u32(static_cast<uint32_t>(t.reader_shard));
  w.boolean(t.from_host_copy).boolean(t.source_partial).boolean(t.orphan);
  w.i64(t.granted_at).u64(t.bytes_reported).i64(t.reported_at);
}
}  // namespace

std::string encode_snapshot(const Snapshot& s, size_t max_bytes) {
  size_t left = max_bytes > kSnapshotHeadBytes + 3 * 4 ? max_bytes - kSnapshotHeadBytes - 3 * 4 : 0;
  bool cut = s.truncated;
  // Appends one entry to `list` if it fits what is left.
  auto add = [&](Writer& list, uint32_t& n, const auto& item) {
    Writer one;
    put(one, item);
    if (one.size() > left) return false;
    left -= one.size();
    list.raw(one.data().data(), one.size());
    ++n;
    return true;
  };
  Writer models, holders, transfers;
  uint32_t nm = 0, nh = 0, nt = 0;
  for (const ModelView& m : s.models) {
    if (!add(models, nm, m)) break;
  }
  for (TransferView t : s.transfers) {
    if (t.model >= nm) t.model = TransferView::kNoModel;  // its model did not fit
    if (!add(transfers, nt, t)) break;
  }
  for (const HolderView& h : s.holders) {
    if (h.model >= nm || !add(holders, nh, h)) break;  // sorted by model: the rest are cut too
  }
  cut = cut || nm < s.models.size() || nh < s.holders.size() || nt < s.transfers.size();
  Writer w;
  w.i64(s.now).u64(s.clients).u64(s.members).u64(s.leases).u64(s.waiting);
  w.u64(s.models_total).u64(s.holders_total).u64(s.transfers_total).boolean(cut);
  w.u32(nm).raw(models.data().data(), models.size());
  w.u32(nh).raw(holders.data().data(), holders.size());
  w.u32(nt).raw(transfers.data().data(), transfers.size());
  return w.take();
}

Snapshot decode_snapshot(std::string_view payload) {
  Reader r(payload, kMaxNameBytes);
  Snapshot s;
  s.now = r.i64();
  s.clients = r.u64();
  s.members = r.u64();
  s.leases = r.u64();
  s.waiting = r.u64();
  s.models_total = r.u64();
  s.holders_total = r.u64();
  s.transfers_total = r.u64();
  s.truncated = r.boolean();
  for (uint32_t n = r.count(kModelViewBytes); n > 0; --n) {
    ModelView m;
    m.name = r.str();
    m.retain = checked_int(r.u32(), "retain", 0, kMaxShards);
    m.versions_published = r.u64();
    m.latest = r.i64();
    for (uint32_t k = r.count(8); k > 0; --k) m.retained.push_back(r.i64());
    m.members = r.u32();
    s.models.push_back(std::move(m));
  }
  auto model_index = [&](bool gone_ok) {
    uint32_t i = r.u32();
    if (i >= s.models.size() && !(gone_ok && i == TransferView::kNoModel))
      throw CodecError("model index " + std::to_string(i) + " out of range");
    return i;
  };
  for (uint32_t n = r.count(kHolderViewBytes); n > 0; --n) {
    HolderView h;
    h.model = model_index(false);
    h.version = r.i64();
    h.shard = checked_int(r.u32(), "shard", 0, kMaxShards);
    h.num_shards = checked_int(r.u32(), "num_shards", 0, kMaxShards);
    h.replica = r.str();
    h.member = r.u64();
    h.client = r.u64();
    uint8_t st = r.u8();
    if (st >= kHoldingCount) throw CodecError("holding state " + std::to_string(st) + " unknown");
    h.state = static_cast<Holding>(st);
    h.spot = r.boolean();
    h.load = checked_int(r.u32(), "load", 0, INT32_MAX);
    h.bytes_reported = r.u64();
    h.reported_at = r.i64();
    s.holders.push_back(std::move(h));
  }
  for (uint32_t n = r.count(kTransferViewBytes); n > 0; --n) {
    TransferView t;
    t.lease = r.u64();
    t.model = model_index(true);
    t.version = r.i64();
    t.source = r.u64();
    t.source_replica = r.str();
    t.source_shard = checked_int(r.u32(), "source shard", -1, kMaxShards);
    t.reader = r.u64();
    t.reader_replica = r.str();
    t.reader_shard = checked_int(r.u32(), "reader shard", -1, kMaxShards);
    t.from_host_copy = r.boolean();
    t.source_partial = r.boolean();
    t.orphan = r.boolean();
    t.granted_at = r.i64();
    t.bytes_reported = r.u64();
    t.reported_at = r.i64();
    s.transfers.push_back(std::move(t));
  }
  r.expect_end();
  return s;
}

const char* type_name(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "HELLO";
    case MsgType::kHeartbeat: return "HEARTBEAT";
    case MsgType::kOpen: return "OPEN";
    case MsgType::kClose: return "CLOSE";
    case MsgType::kPublish: return "PUBLISH";
    case MsgType::kReplicate: return "REPLICATE";
    case MsgType::kTransferDone: return "TRANSFER_DONE";
    case MsgType::kSourceFailed: return "SOURCE_FAILED";
    case MsgType::kUnpublish: return "UNPUBLISH";
    case MsgType::kOffloadDone: return "OFFLOAD_DONE";
    case MsgType::kDescribe: return "DESCRIBE";
    case MsgType::kCancel: return "CANCEL";
    case MsgType::kInfo: return "INFO";
    case MsgType::kReply: return "REPLY";
    case MsgType::kOffload: return "OFFLOAD";
    case MsgType::kDiscard: return "DISCARD";
    case MsgType::kSnapshot: return "SNAPSHOT";
  }
  return "UNKNOWN";
}

}  // namespace thub::registry
