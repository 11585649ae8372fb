#include "src/registry/protocol.h"

#include <type_traits>

#include "src/common/codec.h"
#include "src/registry/auth.h"

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
    throw CodecError("unsupported protocol version " + std::to_string(h.version) + " (this side speaks " +
                     std::to_string(kProtocolVersion) + ": client and registry must be of the same release)");
  }
  h.type = static_cast<MsgType>(r.u16());
  h.req = r.u64();
  h.length = r.u32();
  if (h.length > kMaxPayload) throw CodecError("frame payload of " + std::to_string(h.length) + " bytes is too long");
  return h;
}

std::string encode_hello(const Hello& h) {
  Writer w;
  w.str(h.nonce).str(h.datacenter);
  return w.take();
}

Hello decode_hello(std::string_view payload) {
  Reader r(payload, kMaxNameBytes);
  Hello h;
  h.nonce = r.str();
  if (h.nonce.size() != kNonceBytes) {
    throw CodecError("HELLO's nonce has " + std::to_string(h.nonce.size()) + " bytes, not " +
                     std::to_string(kNonceBytes));
  }
  h.datacenter = r.str();
  r.expect_end();
  return h;
}

std::string encode_secret_field(std::string_view bytes) {
  Writer w;
  w.str(bytes);
  return w.take();
}

std::string decode_secret_field(std::string_view payload, size_t size, const char* what) {
  Reader r(payload, size);
  std::string s = r.str();
  r.expect_end();
  if (s.size() != size) {
    throw CodecError(std::string(what) + " has " + std::to_string(s.size()) + " bytes, not " + std::to_string(size));
  }
  return s;
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
    case MsgType::kAuth: return "AUTH";
    case MsgType::kReply: return "REPLY";
    case MsgType::kOffload: return "OFFLOAD";
    case MsgType::kDiscard: return "DISCARD";
    case MsgType::kChallenge: return "CHALLENGE";
    case MsgType::kAuthOk: return "AUTH_OK";
  }
  return "UNKNOWN";
}

}  // namespace thub::registry
