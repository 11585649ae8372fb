// The control plane's messages as one schema (kSchema below): each entry is a message's number,
// name, direction, answer and fields in wire order, and everything else is derived from it:
// encoding, decoding with every bound checked, the registry's storage limits (refused on
// decode, checked by the client before sending), names, which event a frame carries and which
// frame an event travels in. Adding a message: its number in MsgType, one entry here.
#include "src/registry/protocol.h"

#include <climits>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <variant>

#include "src/common/codec.h"
#include "src/registry/auth.h"  // kMacBytes
#include "src/registry/wire_schema.h"

namespace thub::registry {

using namespace thub::sched;

namespace {

// Payloads that are not sched events.
struct Empty {};
struct OrderMsg {
  MemberId member = 0;
  Version version = -1;
};
struct InfoMsg {
  uint32_t max_entries = 0;
};
// The handshake's values (one type each: entry<P>() finds a message by its payload).
struct ChallengeMsg {
  std::string nonce;
};
struct AuthMsg {
  std::string proof;
};
struct AuthOkMsg {
  std::string proof;
};

constexpr int32_t kMaxShards = 1 << 20;

using wire::Bool;
using wire::Exact;
using wire::field;
using wire::Flow;
using wire::I64;
using wire::I64List;
using wire::Int;
using wire::Stored;
using wire::Text;
using wire::U32;
using wire::U64;

constexpr Stored kName(const char* what) { return Stored{kMaxNameBytes, what}; }
constexpr Stored kDescriptor{kMaxDescriptorBytes, "descriptor"};

// SNAPSHOT's lists (named: encode_snapshot measures their items against its budget).
constexpr auto kModelViews = wire::list<ModelView>(
    field(&ModelView::name, Text{}), field(&ModelView::retain, Int{0, kMaxShards, "retain"}),
    field(&ModelView::versions_published, U64{}), field(&ModelView::latest, I64{}),
    field(&ModelView::retained, I64List{}), field(&ModelView::members, U32{}));
constexpr auto kHolderViews = wire::list<HolderView>(
    field(&HolderView::model, U32{}), field(&HolderView::version, I64{}),
    field(&HolderView::shard, Int{0, kMaxShards, "shard"}),
    field(&HolderView::num_shards, Int{0, kMaxShards, "num_shards"}),
    field(&HolderView::replica, Text{}), field(&HolderView::member, U64{}), field(&HolderView::client, U64{}),
    field(&HolderView::state, wire::Enum8<Holding>{kHoldingCount, "holding state"}), field(&HolderView::spot, Bool{}),
    field(&HolderView::load, Int{0, INT32_MAX, "load"}), field(&HolderView::bytes_reported, U64{}),
    field(&HolderView::reported_at, I64{}));
constexpr auto kTransferViews = wire::list<TransferView>(
    field(&TransferView::lease, U64{}), field(&TransferView::model, U32{}), field(&TransferView::version, I64{}),
    field(&TransferView::source, U64{}), field(&TransferView::source_replica, Text{}),
    field(&TransferView::source_shard, Int{-1, kMaxShards, "source shard"}), field(&TransferView::reader, U64{}),
    field(&TransferView::reader_replica, Text{}),
    field(&TransferView::reader_shard, Int{-1, kMaxShards, "reader shard"}),
    field(&TransferView::from_host_copy, Bool{}), field(&TransferView::source_partial, Bool{}),
    field(&TransferView::orphan, Bool{}), field(&TransferView::granted_at, I64{}),
    field(&TransferView::bytes_reported, U64{}), field(&TransferView::reported_at, I64{}),
    field(&TransferView::path, Text{}));

// What no field can tell alone: holders and transfers name models of the same snapshot.
void check_snapshot(const Snapshot& s) {
  auto index = [&](uint32_t i, bool unknown_ok) {
    if (i >= s.models.size() && !(unknown_ok && i == TransferView::kNoModel))
      throw CodecError("model index " + std::to_string(i) + " out of range");
  };
  for (const HolderView& h : s.holders) index(h.model, false);
  for (const TransferView& t : s.transfers) index(t.model, true);
}

constexpr wire::Traits request(MsgType t, const char* name, MsgType answer = MsgType::kReply) {
  return {t, name, Flow::kRequest, answer};
}
constexpr wire::Traits deferred(MsgType t, const char* name) { return {t, name, Flow::kDeferred}; }
constexpr wire::Traits order(MsgType t, const char* name, size_t max_str = size_t{64} << 20) {
  return {t, name, Flow::kOrder, MsgType::kReply, max_str};
}

// The schema: every message of docs/protocol.md, in the order of its tables.
constexpr auto kSchema = std::make_tuple(
    // client -> registry
    // HELLO is answered by a REPLY, or by a CHALLENGE when the registry has a token.
    wire::message<Hello>({MsgType::kHello, "HELLO", Flow::kRequest, MsgType::kReply, kMaxNameBytes},
                         field(&Hello::nonce, Exact{kNonceBytes, "HELLO's nonce"}), field(&Hello::datacenter, Text{})),
    wire::message<Heartbeat>(request(MsgType::kHeartbeat, "HEARTBEAT", MsgType::kHeartbeat)),
    wire::message<Open>(request(MsgType::kOpen, "OPEN"), field(&Open::model, kName("model name")),
                        field(&Open::replica, kName("replica name")), field(&Open::shard, Int{0, kMaxShards, "shard"}),
                        field(&Open::num_shards, Int{0, kMaxShards, "num_shards"}),
                        field(&Open::retain, Int{0, kMaxShards, "retain"}), field(&Open::spot, Bool{}),
                        field(&Open::round, U64{}), field(&Open::round_open, Bool{}),
                        field(&Open::round_status, wire::Code32<Status>{}), field(&Open::round_version, I64{}),
                        field(&Open::round_spec, I64{}), field(&Open::round_newer_than, I64{})),
    wire::message<sched::Close>(request(MsgType::kClose, "CLOSE"), field(&sched::Close::member, U64{})),
    wire::message<Publish>(request(MsgType::kPublish, "PUBLISH"), field(&Publish::member, U64{}),
                           field(&Publish::version, I64{}), field(&Publish::layout_hash, U64{}),
                           field(&Publish::descriptor, kDescriptor)),
    wire::message<Replicate>(deferred(MsgType::kReplicate, "REPLICATE"), field(&Replicate::member, U64{}),
                             field(&Replicate::spec, I64{}), field(&Replicate::newer_than, I64{}),
                             field(&Replicate::layout_hash, U64{}), field(&Replicate::descriptor, kDescriptor),
                             field(&Replicate::round, U64{}), field(&Replicate::whole, Bool{}),
                             field(&Replicate::seed_only, Bool{})),
    wire::message<TransferDone>(request(MsgType::kTransferDone, "TRANSFER_DONE"), field(&TransferDone::member, U64{}),
                                field(&TransferDone::lease, U64{})),
    wire::message<SourceFailed>(deferred(MsgType::kSourceFailed, "SOURCE_FAILED"), field(&SourceFailed::member, U64{}),
                                field(&SourceFailed::lease, U64{}), field(&SourceFailed::chunks_done, U64{})),
    wire::message<TransferProgress>(request(MsgType::kTransferProgress, "TRANSFER_PROGRESS"),
                                    field(&TransferProgress::member, U64{}), field(&TransferProgress::lease, U64{}),
                                    field(&TransferProgress::bytes, U64{}),
                                    field(&TransferProgress::path, Stored{kMaxPathBytes, "read path"})),
    wire::message<Unpublish>(deferred(MsgType::kUnpublish, "UNPUBLISH"), field(&Unpublish::member, U64{})),
    wire::message<OffloadDone>(request(MsgType::kOffloadDone, "OFFLOAD_DONE"), field(&OffloadDone::member, U64{}),
                               field(&OffloadDone::version, I64{}), field(&OffloadDone::descriptor, kDescriptor)),
    wire::message<Empty>(request(MsgType::kDescribe, "DESCRIBE")),
    wire::message<sched::Cancel>(request(MsgType::kCancel, "CANCEL"), field(&sched::Cancel::member, U64{}),
                                 field(&sched::Cancel::round, U64{}), field(&sched::Cancel::version, I64{}),
                                 field(&sched::Cancel::status, wire::Code32<Status>{})),
    wire::message<InfoMsg>(request(MsgType::kInfo, "INFO", MsgType::kSnapshot), field(&InfoMsg::max_entries, U32{})),
    wire::message<AuthMsg>(request(MsgType::kAuth, "AUTH", MsgType::kAuthOk),
                           field(&AuthMsg::proof, Exact{kProofBytes, "AUTH's proof"})),
    // registry -> client
    wire::message<Reply>(order(MsgType::kReply, "REPLY"), field(&Reply::status, wire::Code32<Status>{}),
                         field(&Reply::detail, Text{}), field(&Reply::member, U64{}), field(&Reply::version, I64{}),
                         field(&Reply::lease, U64{}), field(&Reply::source, U64{}),
                         field(&Reply::source_descriptor, Text{}), field(&Reply::source_partial, Bool{}),
                         field(&Reply::released, Bool{})),
    wire::message<OrderMsg>(order(MsgType::kOffload, "OFFLOAD"), field(&OrderMsg::member, U64{}),
                            field(&OrderMsg::version, I64{})),
    wire::message<OrderMsg>(order(MsgType::kDiscard, "DISCARD"), field(&OrderMsg::member, U64{}),
                            field(&OrderMsg::version, I64{})),
    wire::message<ChallengeMsg>(order(MsgType::kChallenge, "CHALLENGE"),
                                field(&ChallengeMsg::nonce, Exact{kNonceBytes, "CHALLENGE's nonce"})),
    wire::message<AuthOkMsg>(order(MsgType::kAuthOk, "AUTH_OK"),
                             field(&AuthOkMsg::proof, Exact{kProofBytes, "AUTH_OK's proof"})),
    wire::message<NotLeader>(order(MsgType::kNotLeader, "NOT_LEADER", kMaxNameBytes),
                             field(&NotLeader::leader, Text{}), field(&NotLeader::detail, Text{})),
    wire::checked_message<Snapshot>(
        order(MsgType::kSnapshot, "SNAPSHOT", kMaxNameBytes), check_snapshot, field(&Snapshot::now, I64{}),
        field(&Snapshot::clients, U64{}), field(&Snapshot::members, U64{}), field(&Snapshot::leases, U64{}),
        field(&Snapshot::waiting, U64{}), field(&Snapshot::models_total, U64{}), field(&Snapshot::holders_total, U64{}),
        field(&Snapshot::transfers_total, U64{}), field(&Snapshot::truncated, Bool{}),
        field(&Snapshot::models, kModelViews), field(&Snapshot::holders, kHolderViews),
        field(&Snapshot::transfers, kTransferViews)));

using Schema = std::decay_t<decltype(kSchema)>;
constexpr size_t kEntries = std::tuple_size_v<Schema>;

template <size_t... I>
constexpr bool numbers_unique(std::index_sequence<I...>) {
  const MsgType types[] = {std::get<I>(kSchema).t.type...};
  for (size_t a = 0; a < sizeof...(I); ++a)
    for (size_t b = a + 1; b < sizeof...(I); ++b)
      if (types[a] == types[b]) return false;
  return true;
}
static_assert(numbers_unique(std::make_index_sequence<kEntries>{}), "two schema entries share a message number");

// The first entry whose payload is P (-1: none). Payloads are unique but for the two orders.
template <class P, size_t... I>
constexpr int index_of(std::index_sequence<I...>) {
  int found = -1;
  ((found = found < 0 && std::is_same_v<typename std::tuple_element_t<I, Schema>::Payload, P> ? static_cast<int>(I)
                                                                                              : found),
   ...);
  return found;
}
template <class P>
constexpr int kIndexOf = index_of<P>(std::make_index_sequence<kEntries>{});

template <class P>
const auto& entry() {
  static_assert(kIndexOf<P> >= 0, "no schema entry carries this payload");
  return std::get<static_cast<size_t>(kIndexOf<P>)>(kSchema);
}

template <class P, class = void>
struct HasReq : std::false_type {};
template <class P>
struct HasReq<P, std::void_t<decltype(std::declval<P&>().req)>> : std::true_type {};

template <class P, class V>
struct IsAlternative;
template <class P, class... A>
struct IsAlternative<P, std::variant<A...>> : std::bool_constant<(std::is_same_v<P, A> || ...)> {};

template <class P>
P decode_as(std::string_view payload) {
  P p{};
  wire::decode_into(entry<P>(), payload, p);
  return p;
}

template <class Fn>
auto for_entry(MsgType t, Fn&& fn) {
  bool found = false;
  wire::for_each(kSchema, [&](const auto& m) {
    if (!found && m.t.type == t) {
      found = true;
      fn(m);
    }
  });
  return found;
}

}  // namespace

void encode_frame(MsgType type, uint64_t req, std::string_view payload, std::string* out) {
  if (payload.size() > kMaxPayload) throw CodecError("payload exceeds the frame limit");
  Writer w(std::move(*out));
  w.reserve(kHeaderBytes + payload.size() + kMacBytes);  // room for a MAC tag (auth.h) too
  w.u32(kMagic).u16(kProtocolVersion).u16(static_cast<uint16_t>(type)).u64(req);
  w.u32(static_cast<uint32_t>(payload.size()));
  w.raw(payload.data(), payload.size());
  *out = w.take();
}

std::string encode_frame(MsgType type, uint64_t req, std::string_view payload) {
  std::string f;
  encode_frame(type, req, payload, &f);
  return f;
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

std::string encode_hello(const Hello& h) { return wire::encode(entry<Hello>(), h); }
Hello decode_hello(std::string_view payload) { return decode_as<Hello>(payload); }

std::string encode_challenge(std::string_view nonce) {
  return wire::encode(entry<ChallengeMsg>(), ChallengeMsg{std::string(nonce)});
}
std::string decode_challenge(std::string_view payload) { return decode_as<ChallengeMsg>(payload).nonce; }
std::string encode_auth(std::string_view proof) { return wire::encode(entry<AuthMsg>(), AuthMsg{std::string(proof)}); }
std::string decode_auth(std::string_view payload) { return decode_as<AuthMsg>(payload).proof; }
std::string encode_auth_ok(std::string_view proof) {
  return wire::encode(entry<AuthOkMsg>(), AuthOkMsg{std::string(proof)});
}
std::string decode_auth_ok(std::string_view payload) { return decode_as<AuthOkMsg>(payload).proof; }

std::string encode_not_leader(const NotLeader& n) { return wire::encode(entry<NotLeader>(), n); }
NotLeader decode_not_leader(std::string_view payload) { return decode_as<NotLeader>(payload); }

MsgType type_of(const Event& ev) {
  return std::visit(
      [](const auto& e) -> MsgType {
        using T = std::decay_t<decltype(e)>;
        if constexpr (kIndexOf<T> >= 0) return entry<T>().t.type;
        else throw CodecError("this event is not a client request");
      },
      ev);
}

void encode_event(const Event& ev, std::string* out) {
  Writer w(std::move(*out));
  std::visit(
      [&w](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (kIndexOf<T> >= 0) wire::encode_into(w, entry<T>(), e);
        else throw CodecError("this event is not a client request");
      },
      ev);
  *out = w.take();
}

std::string encode_event(const Event& ev) {
  std::string out;
  encode_event(ev, &out);
  return out;
}

void check_limits(const Event& ev) {
  std::visit(
      [](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (kIndexOf<T> >= 0) wire::check_stored(entry<T>(), e);
      },
      ev);
}

Event decode_event(MsgType type, uint64_t req, ClientId client, std::string_view payload) {
  std::optional<Event> ev;
  for_entry(type, [&](const auto& m) {
    using P = typename std::decay_t<decltype(m)>::Payload;
    if constexpr (IsAlternative<P, Event>::value) {
      P p{};
      p.client = client;
      if constexpr (HasReq<P>::value) p.req = req;
      wire::decode_into(m, payload, p);
      ev = std::move(p);
    }
  });
  if (!ev) throw CodecError(std::string("unexpected message type ") + std::to_string(static_cast<int>(type)));
  return std::move(*ev);
}

std::string encode_reply(const Reply& x, size_t max_detail) {
  if (x.detail.size() <= max_detail) return wire::encode(entry<Reply>(), x);
  Reply cut = x;
  std::string note = "\n... (truncated: " + std::to_string(x.detail.size()) + " bytes in all)";
  size_t keep = max_detail > note.size() ? max_detail - note.size() : 0;
  cut.detail = x.detail.substr(0, keep) + note.substr(0, max_detail - keep);
  return wire::encode(entry<Reply>(), cut);
}

Reply decode_reply(std::string_view payload) { return decode_as<Reply>(payload); }

std::string encode_order(MemberId member, Version version) {
  return wire::encode(entry<OrderMsg>(), OrderMsg{member, version});
}

void decode_order(std::string_view payload, MemberId* member, Version* version) {
  OrderMsg o = decode_as<OrderMsg>(payload);
  *member = o.member;
  *version = o.version;
}

std::string encode_info_request(uint32_t max_entries) { return wire::encode(entry<InfoMsg>(), InfoMsg{max_entries}); }
uint32_t decode_info_request(std::string_view payload) { return decode_as<InfoMsg>(payload).max_entries; }

std::string encode_snapshot(const Snapshot& s, size_t max_bytes) {
  const auto& m = entry<Snapshot>();
  const size_t fixed = wire::MinBytes<std::decay_t<decltype(m.fields)>>::value;  // the head and three counts
  size_t left = max_bytes > fixed ? max_bytes - fixed : 0;
  // Takes `item` if its encoding fits what is left.
  auto fits = [&](const auto& list, const auto& item) {
    Writer one;
    wire::put_fields(one, list.fields, item);
    if (one.size() > left) return false;
    left -= one.size();
    return true;
  };
  Snapshot fit;
  fit.now = s.now;
  fit.clients = s.clients;
  fit.members = s.members;
  fit.leases = s.leases;
  fit.waiting = s.waiting;
  fit.models_total = s.models_total;
  fit.holders_total = s.holders_total;
  fit.transfers_total = s.transfers_total;
  for (const ModelView& x : s.models) {
    if (!fits(kModelViews, x)) break;
    fit.models.push_back(x);
  }
  for (TransferView t : s.transfers) {
    if (t.model >= fit.models.size()) t.model = TransferView::kNoModel;  // its model did not fit
    if (!fits(kTransferViews, t)) break;
    fit.transfers.push_back(std::move(t));
  }
  for (const HolderView& h : s.holders) {
    if (h.model >= fit.models.size() || !fits(kHolderViews, h)) break;  // sorted by model: the rest are cut too
    fit.holders.push_back(h);
  }
  fit.truncated = s.truncated || fit.models.size() < s.models.size() || fit.holders.size() < s.holders.size() ||
                  fit.transfers.size() < s.transfers.size();
  return wire::encode(m, fit);
}

Snapshot decode_snapshot(std::string_view payload) { return decode_as<Snapshot>(payload); }

const char* type_name(MsgType t) {
  const char* name = "UNKNOWN";
  for_entry(t, [&](const auto& m) { name = m.t.name; });
  return name;
}

bool may_defer(MsgType t) {
  bool d = false;
  for_entry(t, [&](const auto& m) { d = m.t.flow == Flow::kDeferred; });
  return d;
}

MsgType answer_to(MsgType t) {
  MsgType a = MsgType::kReply;
  for_entry(t, [&](const auto& m) { a = m.t.answer; });
  return a;
}

}  // namespace thub::registry
