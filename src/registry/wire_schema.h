// The vocabulary of the control plane's one schema (the table is in protocol.cc): a message
// is a payload struct and its fields in wire order; a field is a member pointer and a wire
// kind, which encodes the member, decodes it with every bound checked, and knows its limit.
// Encoding, decoding, the client-side limit checks, names and answers all come from the
// table, so that adding a message is one entry there (and its number in MsgType).
// Internal to src/registry/: nothing outside includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "src/common/codec.h"
#include "src/registry/protocol.h"

namespace thub::registry::wire {

// ---- kinds: how one member travels --------------------------------------------------------
// Each has put(Writer&, const T&), get(Reader&, T&) and kMinBytes (its smallest encoding, for
// the bound on a list's count).

struct U32 {
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, uint32_t v) const { w.u32(v); }
  void get(Reader& r, uint32_t& v) const { v = r.u32(); }
};
struct U64 {
  static constexpr size_t kMinBytes = 8;
  void put(Writer& w, uint64_t v) const { w.u64(v); }
  void get(Reader& r, uint64_t& v) const { v = r.u64(); }
};
struct I64 {
  static constexpr size_t kMinBytes = 8;
  void put(Writer& w, int64_t v) const { w.i64(v); }
  void get(Reader& r, int64_t& v) const { v = r.i64(); }
};
struct Bool {
  static constexpr size_t kMinBytes = 1;
  void put(Writer& w, bool v) const { w.boolean(v); }
  void get(Reader& r, bool& v) const { v = r.boolean(); }
};

// An int as u32 (two's complement); outside [lo, hi] the message is malformed.
struct Int {
  int32_t lo, hi;
  const char* what;
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, int v) const { w.u32(static_cast<uint32_t>(v)); }
  void get(Reader& r, int& v) const {
    auto x = static_cast<int32_t>(r.u32());
    if (x < lo || x > hi) throw CodecError(std::string(what) + " out of range: " + std::to_string(x));
    v = x;
  }
};

// An enum by its int32 value as u32, passed on unchecked (a REPLY's status: the caller says
// what an unknown code means).
template <class E>
struct Code32 {
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, E v) const { w.u32(static_cast<uint32_t>(static_cast<int32_t>(v))); }
  void get(Reader& r, E& v) const { v = static_cast<E>(static_cast<int32_t>(r.u32())); }
};

// An enum in one byte, below `count`.
template <class E>
struct Enum8 {
  uint8_t count;
  const char* what;
  static constexpr size_t kMinBytes = 1;
  void put(Writer& w, E v) const { w.u8(static_cast<uint8_t>(v)); }
  void get(Reader& r, E& v) const {
    uint8_t x = r.u8();
    if (x >= count) throw CodecError(std::string(what) + " " + std::to_string(x) + " unknown");
    v = static_cast<E>(x);
  }
};

// A string bounded only by the message's reader (max_str of its entry).
struct Text {
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, const std::string& v) const { w.str(v); }
  void get(Reader& r, std::string& v) const { v = r.str(); }
};

// A string the registry stores (a name, a descriptor): one longer than `limit` decodes but is
// refused (LimitError: the stream is intact, the connection stays). check() is the same test
// on the client, before sending.
struct Stored {
  size_t limit;
  const char* what;
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, const std::string& v) const { w.str(v); }
  void get(Reader& r, std::string& v) const {
    v = r.str();
    check(v);
  }
  void check(const std::string& v) const {
    if (v.size() > limit) {
      throw LimitError(std::string(what) + " of " + std::to_string(v.size()) +
                       " bytes exceeds the registry's limit of " + std::to_string(limit) + " bytes");
    }
  }
};

// A string of exactly `size` bytes (a nonce, a proof): another size is malformed (its length
// is checked against the input before anything is copied, as for every string).
struct Exact {
  size_t size;
  const char* what;
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, const std::string& v) const { w.str(v); }
  void get(Reader& r, std::string& v) const {
    v = r.str();
    if (v.size() != size) {
      throw CodecError(std::string(what) + " has " + std::to_string(v.size()) + " bytes, not " + std::to_string(size));
    }
  }
};

// ---- fields and messages -------------------------------------------------------------------

template <class P, class M, class K>
struct Field {
  using Kind = K;
  M P::*member;
  K kind;
};
template <class P, class M, class K>
constexpr Field<P, M, K> field(M P::*member, K kind) {
  return {member, kind};
}

// The smallest encoding of a field list (a tuple of Fields).
template <class Fields>
struct MinBytes;
template <class... F>
struct MinBytes<std::tuple<F...>> {
  static constexpr size_t value = (size_t{0} + ... + F::Kind::kMinBytes);
};

template <class P, class... F>
void put_fields(Writer& w, const std::tuple<F...>& fields, const P& p) {
  std::apply([&](const auto&... f) { (f.kind.put(w, p.*f.member), ...); }, fields);
}
template <class P, class... F>
void get_fields(Reader& r, const std::tuple<F...>& fields, P& p) {
  std::apply([&](const auto&... f) { (f.kind.get(r, p.*f.member), ...); }, fields);
}

// A list: u32 count, bounded by the bytes left at the items' smallest size, then the items.
template <class Item, class Fields>
struct List {
  Fields fields;
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, const std::vector<Item>& v) const {
    w.u32(static_cast<uint32_t>(v.size()));
    for (const Item& x : v) put_fields(w, fields, x);
  }
  void get(Reader& r, std::vector<Item>& v) const {
    v.clear();
    for (uint32_t n = r.count(MinBytes<Fields>::value); n > 0; --n) {
      Item x{};
      get_fields(r, fields, x);
      v.push_back(std::move(x));
    }
  }
};
template <class Item, class... F>
constexpr List<Item, std::tuple<F...>> list(F... f) {
  return {std::tuple<F...>(f...)};
}

// A list of i64 (versions).
struct I64List {
  static constexpr size_t kMinBytes = 4;
  void put(Writer& w, const std::vector<int64_t>& v) const {
    w.u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) w.i64(x);
  }
  void get(Reader& r, std::vector<int64_t>& v) const {
    v.clear();
    for (uint32_t n = r.count(8); n > 0; --n) v.push_back(r.i64());
  }
};

// Who sends a message, and what answers it.
enum class Flow : uint8_t {
  kRequest,   // client -> registry; answered by `answer` (REPLY unless said otherwise)
  kDeferred,  // a request the registry may answer much later (drains, busy sources)
  kOrder,     // registry -> client, unsolicited or an answer
};

struct Traits {
  MsgType type;
  const char* name;
  Flow flow;
  MsgType answer = MsgType::kReply;
  size_t max_str = size_t{64} << 20;  // the Reader's bound on every string of the message
};

template <class P, class... F>
struct Message {
  using Payload = P;
  Traits t;
  std::tuple<F...> fields;
  void (*check)(const P&) = nullptr;  // what no single field can tell (indices between lists)
};

template <class P, class... F>
constexpr Message<P, F...> message(Traits t, F... f) {
  return {t, std::tuple<F...>(f...), nullptr};
}
template <class P, class... F>
constexpr Message<P, F...> checked_message(Traits t, void (*check)(const P&), F... f) {
  return {t, std::tuple<F...>(f...), check};
}

template <class M>
void encode_into(Writer& w, const M& m, const typename M::Payload& p) {
  put_fields(w, m.fields, p);
}

template <class M>
std::string encode(const M& m, const typename M::Payload& p) {
  Writer w;
  encode_into(w, m, p);
  return w.take();
}

// Decodes into `p` (whose members that are not on the wire, such as the client id, the
// caller has set); every bound checked, nothing may trail.
template <class M>
void decode_into(const M& m, std::string_view payload, typename M::Payload& p) {
  Reader r(payload, m.t.max_str);
  get_fields(r, m.fields, p);
  r.expect_end();
  if (m.check) m.check(p);
}

template <class P, class F>
void check_field(const P& p, const F& f) {
  if constexpr (std::is_same_v<typename F::Kind, Stored>) f.kind.check(p.*f.member);
}

// Every Stored field of `p`: LimitError for the first over its limit.
template <class M>
void check_stored(const M& m, const typename M::Payload& p) {
  std::apply([&](const auto&... f) { (check_field(p, f), ...); }, m.fields);
}

// Calls fn(entry) for each entry of a schema tuple, in order.
template <class Schema, class Fn>
void for_each(const Schema& s, Fn&& fn) {
  std::apply([&](const auto&... m) { (fn(m), ...); }, s);
}

}  // namespace thub::registry::wire
