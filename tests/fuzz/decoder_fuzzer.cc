// DecoderFuzzer: every decoder of the control plane (the frame header and every entry of the
// schema in src/registry/protocol.cc, and the client's descriptor), on mutated valid messages. Invariants:
// a decoder either refuses (CodecError; the descriptor's Error(kTransport)) or returns a value
// that the encoder turns back into exactly the input (nothing ignored, nothing invented); it
// never throws anything else, never reads out of bounds (ASan), and never allocates more than
// a small multiple of the input (AllocGuard): a claimed length or count is checked before it
// sizes anything.
#include <sstream>

#include "src/client/descriptor.h"
#include "src/common/codec.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/protocol.h"
#include "tests/fuzz/alloc_guard.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/message_model.h"

namespace thub::fuzz {

using registry::MsgType;

namespace {

std::string hex_prefix(const std::string& b, size_t n = 96) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < b.size() && i < n; ++i) {
    s += d[static_cast<uint8_t>(b[i]) >> 4];
    s += d[static_cast<uint8_t>(b[i]) & 15];
  }
  if (b.size() > n) s += "...";
  return s + " (" + std::to_string(b.size()) + " bytes)";
}

std::string random_text(Rng& rng, size_t max) {
  std::string s(pick(rng, max + 1), 'a');
  for (auto& c : s) c = static_cast<char>('a' + pick(rng, 26));
  return s;
}

int64_t small_version(Rng& rng) {
  static const int64_t kV[] = {-3, -2, -1, 0, 1, 2, 5, 1000};
  return kV[pick(rng, std::size(kV))];
}

// A valid request of a random kind, with plausible values.
sched::Event random_request(Rng& rng) {
  switch (pick(rng, 11)) {
    case 0: return sched::Heartbeat{0};
    case 9: return sched::Cancel{0, 0, pick(rng, 100)};
    case 10: return sched::TransferProgress{0, 0, pick(rng, 100), pick(rng, 100), rng(), std::string(rng() % 80, 'p')};
    case 1: {
      int n = 1 + static_cast<int>(pick(rng, 4));
      return sched::Open{0, 0, random_text(rng, 12), random_text(rng, 8), static_cast<int>(pick(rng, n)), n,
                         static_cast<int>(pick(rng, 3)), chance(rng, 4)};
    }
    case 2: return sched::Close{0, 0, pick(rng, 100)};
    case 3: return sched::Publish{0, 0, pick(rng, 100), small_version(rng), rng(), random_text(rng, 40)};
    case 4: return sched::Replicate{0, 0, pick(rng, 100), small_version(rng), small_version(rng), rng(), random_text(rng, 40)};
    case 5: return sched::TransferDone{0, 0, pick(rng, 100), pick(rng, 100)};
    case 6: return sched::SourceFailed{0, 0, pick(rng, 100), pick(rng, 100), rng()};
    case 7: return sched::Unpublish{0, 0, pick(rng, 100)};
    default: return sched::OffloadDone{0, 0, pick(rng, 100), small_version(rng), random_text(rng, 40)};
  }
}

sched::Reply random_reply(Rng& rng) {
  sched::Reply r{};
  static const int kStatus[] = {0, 2, -1, -2, -3, -4, -5, -6, -10, -11};
  r.status = static_cast<sched::Status>(kStatus[pick(rng, std::size(kStatus))]);
  r.detail = random_text(rng, 30);
  r.member = pick(rng, 50);
  r.version = small_version(rng);
  r.lease = pick(rng, 50);
  r.source = pick(rng, 50);
  r.source_descriptor = random_text(rng, 60);
  r.source_partial = chance(rng, 2);
  r.released = chance(rng, 2);
  return r;
}

// The bytes of one input for `target`, and a second message to splice from.
struct Case {
  int target;
  MsgType type = MsgType::kHeartbeat;  // decode_event's type; for kSecret, which of the three
  std::string bytes;
};

enum Target { kHeader, kEvent, kHello, kSecret, kReply, kOrder, kDescriptor, kInfo, kSnapshot, kNotLeader, kTargets };

Message seed_for(int target, Rng& rng, MsgType* type) {
  switch (target) {
    case kEvent: {
      sched::Event ev = random_request(rng);
      *type = registry::type_of(ev);
      return request(ev);
    }
    case kHello: return hello(std::string(registry::kNonceBytes, static_cast<char>(rng())), random_text(rng, 10));
    case kSecret: {  // CHALLENGE, AUTH or AUTH_OK: 32 bytes each
      static const MsgType kSecrets[] = {MsgType::kChallenge, MsgType::kAuth, MsgType::kAuthOk};
      *type = kSecrets[pick(rng, std::size(kSecrets))];
      return secret_field(seeded_bytes(rng, registry::kProofBytes));
    }
    case kInfo: return info(static_cast<uint32_t>(chance(rng, 2) ? pick(rng, 100) : rng()));
    case kSnapshot: return snapshot(random_snapshot(rng));
    case kReply: return reply(random_reply(rng));
    case kOrder: return order(pick(rng, 100), small_version(rng));
    case kDescriptor: return descriptor(rng);
    case kNotLeader: return not_leader({random_text(rng, 24), random_text(rng, 40)});
    default: return describe();
  }
}

Case make_case(Rng& rng) {
  Case c;
  c.target = static_cast<int>(pick(rng, kTargets));
  if (c.target == kHeader) {
    std::string payload(pick(rng, 8), 'p');
    c.bytes = chance(rng, 8) ? frame(any_type(rng), rng(), payload) : mutate_frame(any_type(rng), rng(), payload, rng);
    c.bytes.resize(registry::kHeaderBytes);  // decode_header is given exactly the header
    return c;
  }
  Message m = seed_for(c.target, rng, &c.type);
  MsgType other_type;
  Message other = seed_for(c.target == kEvent ? kEvent : static_cast<int>(pick(rng, kTargets)), rng, &other_type);
  c.bytes = chance(rng, 10) ? serialize(m) : mutate(m, other, rng);
  if (c.target == kEvent && chance(rng, 6)) c.type = chance(rng, 2) ? other_type : any_type(rng);  // type confusion
  return c;
}

// Where a re-encoding differs from the input.
std::string differs(const std::string& again, const std::string& input) {
  size_t i = 0;
  while (i < again.size() && i < input.size() && again[i] == input[i]) ++i;
  return " (re-encoded " + std::to_string(again.size()) + " bytes, first difference at byte " + std::to_string(i) +
         ": input " + (i < input.size() ? std::to_string(static_cast<uint8_t>(input[i])) : "end") + ", re-encoded " +
         (i < again.size() ? std::to_string(static_cast<uint8_t>(again[i])) : "end") + ")";
}

// Decodes one case; returns "" or the violated invariant. *refused: the decoder said no.
std::string check(const Case& c, bool* refused) {
  *refused = false;
  try {
    switch (c.target) {
      case kHeader: {
        registry::FrameHeader h = registry::decode_header(c.bytes);
        if (h.version != registry::kProtocolVersion) return "decode_header accepted version " + std::to_string(h.version);
        if (h.length > registry::kMaxPayload) return "decode_header accepted length " + std::to_string(h.length);
        Writer w;
        w.u32(registry::kMagic).u16(h.version).u16(static_cast<uint16_t>(h.type)).u64(h.req).u32(h.length);
        const std::string& again = w.data();
        if (again != c.bytes) return "decode_header ignored header bytes";
        return "";
      }
      case kEvent: {
        sched::Event ev = registry::decode_event(c.type, 5, 1, c.bytes);
        if (registry::type_of(ev) != c.type) return "decode_event returned another request type";
        std::string again = registry::encode_event(ev);
        if (again != c.bytes) return "decode_event accepted a non-canonical or partly ignored payload" + differs(again, c.bytes);
        return "";
      }
      case kHello: {
        registry::Hello h = registry::decode_hello(c.bytes);
        if (h.nonce.size() != registry::kNonceBytes) return "decode_hello accepted a nonce of another size";
        if (h.datacenter.size() > registry::kMaxNameBytes) return "decode_hello accepted a long datacenter";
        if (registry::encode_hello(h) != c.bytes) return "decode_hello ignored bytes";
        return "";
      }
      case kSecret: {
        std::string s, again;
        if (c.type == MsgType::kChallenge) again = registry::encode_challenge(s = registry::decode_challenge(c.bytes));
        else if (c.type == MsgType::kAuth) again = registry::encode_auth(s = registry::decode_auth(c.bytes));
        else again = registry::encode_auth_ok(s = registry::decode_auth_ok(c.bytes));
        if (s.size() != registry::kProofBytes) return "a handshake decoder accepted another size";
        if (again != c.bytes) return "a handshake decoder ignored bytes";
        return "";
      }
      case kInfo: {
        uint32_t n = registry::decode_info_request(c.bytes);
        if (registry::encode_info_request(n) != c.bytes) return "decode_info_request ignored bytes";
        return "";
      }
      case kSnapshot: {
        sched::Snapshot s = registry::decode_snapshot(c.bytes);
        for (const sched::HolderView& h : s.holders) {
          if (h.model >= s.models.size()) return "decode_snapshot accepted a holder of no model";
        }
        for (const sched::TransferView& t : s.transfers) {
          if (t.model >= s.models.size() && t.model != sched::TransferView::kNoModel) {
            return "decode_snapshot accepted a transfer of no model";
          }
        }
        std::string again = registry::encode_snapshot(s, registry::kMaxPayload);
        if (again != c.bytes) return "decode_snapshot accepted a non-canonical or partly ignored payload" + differs(again, c.bytes);
        return "";
      }
      case kReply: {
        sched::Reply r = registry::decode_reply(c.bytes);
        if (r.detail.size() <= registry::kMaxDetailBytes && registry::encode_reply(r) != c.bytes) {
          return "decode_reply ignored bytes";
        }
        return "";
      }
      case kOrder: {
        sched::MemberId m = 0;
        sched::Version v = 0;
        registry::decode_order(c.bytes, &m, &v);
        if (registry::encode_order(m, v) != c.bytes) return "decode_order ignored bytes";
        return "";
      }
      case kNotLeader: {
        registry::NotLeader n = registry::decode_not_leader(c.bytes);
        if (n.leader.size() > registry::kMaxNameBytes || n.detail.size() > registry::kMaxNameBytes) {
          return "decode_not_leader accepted a text beyond its bound";
        }
        if (registry::encode_not_leader(n) != c.bytes) return "decode_not_leader ignored bytes";
        return "";
      }
      case kDescriptor: {
        client::Descriptor d = client::decode_descriptor(c.bytes);
        std::string again = client::encode_descriptor(d);
        if (again != c.bytes) {
          return "decode_descriptor accepted a non-canonical or partly ignored descriptor" + differs(again, c.bytes);
        }
        return "";
      }
    }
  } catch (const registry::LimitError&) {
    *refused = true;
    return "";
  } catch (const CodecError&) {
    *refused = true;
    return "";
  } catch (const Error& e) {
    *refused = true;
    if (c.target == kDescriptor && e.code() == Code::kTransport) return "";
    return std::string("unexpected Error: ") + e.what();
  } catch (const std::bad_alloc&) {
    return "an allocation beyond the input's size was attempted (a length or count used before it was checked)";
  } catch (const std::exception& e) {
    return std::string("unexpected exception: ") + e.what();
  }
  return "";
}

const char* target_name(int t) {
  static const char* kNames[] = {"header", "event",      "hello", "auth-field", "reply",
                                 "order",  "descriptor", "info",  "snapshot", "not-leader"};
  return t >= 0 && t < kTargets ? kNames[t] : "?";
}

}  // namespace

void DecoderFuzzer::run(uint64_t inputs, Outcome* out) {
  for (uint64_t i = 0; i < inputs; ++i) {
    // One generator per input: input i of seed s is reproducible on its own.
    Rng rng(seed_ * 0x9e3779b97f4a7c15ull + i);
    Case c = make_case(rng);
    bool refused = false;
    std::string why;
    size_t largest = 0, blocked = 0;
    {
      AllocGuard guard(8 * c.bytes.size() + 4096);
      why = check(c, &refused);
      largest = guard.largest();
      blocked = guard.refused();
    }
    ++out->inputs;
    out->refused += refused ? 1 : 0;
    if (largest > out->largest_allocation) out->largest_allocation = largest;
    if (blocked && why.empty()) why = "an allocation of " + std::to_string(blocked) + " bytes was attempted";
    if (!why.empty()) {
      std::ostringstream os;
      os << "decoder " << target_name(c.target);
      if (c.target == kEvent || c.target == kSecret) os << " (type " << static_cast<int>(c.type) << ")";
      os << ", seed " << seed_ << " input " << i << ": " << why << "; input " << hex_prefix(c.bytes);
      out->finding(os.str());
    }
  }
}

}  // namespace thub::fuzz
