// The fuzzer's view of the wire format: every control message (and the client's descriptor)
// as a list of typed fields, so that mutations can aim at what decoders must check: a string's
// length prefix, a count, an integer's range, a boolean's byte, a field missing or doubled.
// serialize() of an unmutated model equals the real encoder's bytes (FuzzTest.ModelMatchesTheCodec).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "sched/snapshot.h"
#include "sched/types.h"
#include "src/registry/auth.h"
#include "src/registry/protocol.h"

namespace thub::fuzz {

using Rng = std::mt19937_64;

// kCount8: a count in one byte (the worker address's IPv4s); kRaw: bytes with no length
// prefix (a magic, or the UCX rkey that fills the rest of a packed rkey).
enum class Kind { kU8, kU16, kU32, kU64, kBool, kStr, kCount, kCount8, kRaw };

struct Field {
  Kind kind;
  uint64_t v = 0;                   // integers, booleans (any byte), counts
  std::string s;                    // strings
  std::optional<uint64_t> len;      // a string's length prefix when it lies (u32 on the wire)
};

// What a message is, for the mutations that matter to its decoder.
enum class Shape {
  kHello, kAuthField,  // AUTH, CHALLENGE and AUTH_OK: one 32-byte string
  kHeartbeat, kOpen, kClose, kPublish, kReplicate, kTransferDone, kSourceFailed, kUnpublish,
  kOffloadDone, kCancel, kDescribe, kInfo, kReply, kOrder, kSnapshot, kDescriptor,
  kTransferProgress, kNotLeader,
  kAddress, kRkey,  // the transport's worker address and packed rkey (src/transport/wire_format.h)
};

struct Message {
  Shape shape;
  std::vector<Field> fields;
};

std::string serialize(const Message& m);

// Builders mirroring the real encoders (the harness checks that they agree).
Message hello(const std::string& nonce, const std::string& datacenter);
Message secret_field(const std::string& bytes);
Message request(const sched::Event& ev);  // any client request event
Message describe();
Message info(uint32_t max_entries);
Message reply(const sched::Reply& r);
Message order(uint64_t member, int64_t version);
Message not_leader(const registry::NotLeader& n);
Message snapshot(const sched::Snapshot& s);
// A consistent snapshot (indices in range, shards and states valid) of a few models.
sched::Snapshot random_snapshot(Rng& rng);
Message descriptor(Rng& rng);  // a plausible client descriptor (version 4) with a few tensors

// The transport's own codecs, field by field as src/transport/wire_format.cc writes them:
// a worker address ("THW3"; "THW2" without the datacenter label; the older "THW1" without the
// process identity either) and a packed
// rkey ("THK3"; "THK2" without the slot; "THK1": a token and the UCX rkey).
struct AddressFields {
  std::string ucx;
  uint16_t port = 0;
  std::vector<uint32_t> ipv4;
  uint32_t pid = 0;
  uint64_t nonce_addr = 0, nonce = 0;
  std::string datacenter;  // THW3 only
  int version = 3;
};
struct RkeyFields {
  std::string ucx;
  uint64_t token = 0, addr = 0, len = 0;
  bool ucx_mapped = false, has_slot = false;
  uint32_t slot = 0;
  uint64_t slot_key = 0;
  int version = 3;
};
Message address(const AddressFields& a);
Message rkey(const RkeyFields& k);

// Interesting values for integer fields and length prefixes.
uint64_t interesting(Rng& rng, Kind k);

// One structure-aware mutation of `m` (lengths, counts, integers, booleans, string contents
// and sizes, fields dropped, doubled or swapped), or of its bytes (truncation, trailing bytes,
// flips, splices with `other`). Returns the mutated bytes.
std::string mutate(const Message& m, const Message& other, Rng& rng);

// A frame around `payload` whose header may lie: a wrong length, version, magic or type.
std::string frame(registry::MsgType type, uint64_t req, const std::string& payload);
std::string mutate_frame(registry::MsgType type, uint64_t req, const std::string& payload, Rng& rng);
// After a right AUTH, as a real peer does: a whole frame (its header counts its bytes) is
// sealed when `mac` is on; anything else (a mutated header) goes as it is, and the other side
// refuses it either way.
std::string sealed(registry::FrameMac& mac, std::string f);

// Every message type a peer could send (known and a few unknown), for type swaps.
registry::MsgType any_type(Rng& rng);

inline uint64_t pick(Rng& rng, uint64_t n) { return n ? rng() % n : 0; }
// `n` bytes from the seeded generator (the fuzzers' own nonces: reproducible, unlike getrandom's).
inline std::string seeded_bytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}
inline bool chance(Rng& rng, unsigned one_in) { return pick(rng, one_in) == 0; }

}  // namespace thub::fuzz
