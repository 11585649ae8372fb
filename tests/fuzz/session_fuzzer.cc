// SessionFuzzer: whole client sessions through the registry's own frame handler, without a
// socket: bytes go into a connection's input exactly as the serving loop's read would put
// them, Server::Impl::handle_frames decodes, steps sched::Registry and queues replies, and the
// harness takes the replies as the loop's flush would. Sessions are stateful (they reuse the
// member and lease ids the registry gave them) and mutated at every level: fields, frames,
// order, pipelining, partial frames. Invariants, after every delivery:
//  - nothing escapes the handler, nothing in the registry fails internally, every frame it
//    sends decodes, and the registry's own invariants hold after every session;
//  - an independent reading of the session by the protocol's rules (docs/protocol.md) and the
//    registry agree on whether the connection must be closed; a close comes with an error reply;
//  - with a token, a session that has not proven it gets nothing but the CHALLENGE and one error
//    reply (no member, lease or descriptor; never the bytes of another client's descriptor);
//  - allocations stay within a multiple of what the session sent;
//  - every 64 sessions, and at the end, a well-behaved publisher and reader still get exactly
//    the answers they should.
#include <limits>
#include <set>
#include <sstream>

#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/registry/auth.h"
#include "src/registry/server_impl.h"
#include "tests/fuzz/alloc_guard.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/message_model.h"

namespace thub::fuzz {

using registry::FrameHeader;
using registry::MsgType;
using Impl = registry::Server::Impl;

namespace {

struct OutFrame {
  FrameHeader h;
  std::string payload;
};

const std::string kVictimSecret = "VICTIM-DESCRIPTOR: worker address, rkeys";

registry::ServerOptions fuzz_options(const std::string& token, uint64_t seed) {
  registry::ServerOptions o;
  o.auth_token = token;
  o.sched.heartbeat_timeout = std::numeric_limits<int64_t>::max() / 4;  // sessions, not clocks, end clients
  o.frames_per_turn = seed % 2 ? 64 : 3;  // a small budget exercises the "more frames left" path
  return o;
}

// The protocol's rules, read independently of server.cc: which delivered frame must close
// the connection. Run over everything a session sent so far.
struct Oracle {
  enum class Phase { kHello, kChallenged, kReady } phase = Phase::kHello;
  std::string stream;
  size_t off = 0;
  bool closed = false;
  std::string why;
  std::string client_nonce, datacenter, registry_nonce;
  std::set<uint64_t> infos;  // request ids of the well-formed INFOs, which a SNAPSHOT may answer
  registry::RecentNonces* hellos = nullptr;  // with a token: every session's HELLO nonces, as the registry keeps them
  registry::FrameMac mac;  // after a right AUTH (a token): what every frame must carry

  void close(const std::string& w) {
    closed = true;
    why = w;
  }
  void advance(const std::string& token) {
    while (!closed && stream.size() - off >= registry::kHeaderBytes) {
      FrameHeader h;
      try {
        h = registry::decode_header(std::string_view(stream).substr(off, registry::kHeaderBytes));
      } catch (const CodecError&) {
        return close("bad header");
      }
      if (phase == Phase::kHello && h.type != MsgType::kHello) return close("not HELLO first");
      if (phase == Phase::kChallenged && h.type != MsgType::kAuth) return close("not AUTH after CHALLENGE");
      if (phase != Phase::kReady && h.length > registry::kMaxHelloPayload) return close("long handshake frame");
      if (stream.size() - off - registry::kHeaderBytes < h.length) return;  // the rest has not come yet
      std::string_view payload = std::string_view(stream).substr(off + registry::kHeaderBytes, h.length);
      std::string_view header = std::string_view(stream).substr(off, registry::kHeaderBytes);
      off += registry::kHeaderBytes + h.length;
      try {
        payload = mac.open(header, payload);
      } catch (const CodecError& e) {
        return close(std::string("MAC: ") + e.what());
      }
      try {
        judge(h, payload, token);
      } catch (const registry::LimitError&) {
        // refused, the connection stays
      } catch (const CodecError& e) {
        return close(std::string("malformed: ") + e.what());
      }
    }
  }
  void judge(const FrameHeader& h, std::string_view payload, const std::string& token) {
    switch (phase) {
      case Phase::kHello: {
        registry::Hello hello = registry::decode_hello(payload);
        client_nonce = hello.nonce;
        datacenter = hello.datacenter;
        if (!token.empty() && hellos->seen_before(hello.nonce)) return close("replayed HELLO");
        phase = token.empty() ? Phase::kReady : Phase::kChallenged;
        return;
      }
      case Phase::kChallenged: {
        std::string proof = registry::decode_auth(payload);
        registry::Transcript t{client_nonce, registry_nonce, datacenter};
        if (registry_nonce.empty() || proof != registry::client_proof(token, t)) return close("wrong proof");
        phase = Phase::kReady;
        mac = registry::FrameMac(registry::frame_key(token, t, true));  // every later frame is MACed
        return;
      }
      case Phase::kReady:
        switch (h.type) {
          case MsgType::kDescribe:
            if (!payload.empty()) close("DESCRIBE with a payload");
            return;
          case MsgType::kInfo:
            (void)registry::decode_info_request(payload);
            infos.insert(h.req);
            return;
          case MsgType::kHeartbeat:
          case MsgType::kOpen:
          case MsgType::kClose:
          case MsgType::kPublish:
          case MsgType::kReplicate:
          case MsgType::kTransferDone:
          case MsgType::kSourceFailed:
          case MsgType::kUnpublish:
          case MsgType::kOffloadDone:
          case MsgType::kCancel:
          case MsgType::kTransferProgress:
            (void)registry::decode_event(h.type, h.req, 1, payload);
            return;
          default:
            return close("not a request after the handshake");
        }
    }
  }
};

struct Session {
  sched::ClientId id = 0;
  Oracle oracle;
  bool authenticated = false;  // an AUTH_OK (or, without a token, HELLO's REPLY) came
  bool challenged = false;
  std::string nonce, datacenter = "dc";
  std::vector<sched::MemberId> members;
  std::vector<std::pair<sched::MemberId, sched::LeaseId>> leases;
  std::map<uint64_t, MsgType> asked;  // request id -> type, to read the replies
  uint64_t next_req = 1;
  size_t bytes = 0;
  registry::FrameMac tx;  // after a right AUTH: seals what the session sends
};

}  // namespace

struct SessionFuzzer::State {
  State(uint64_t seed_, bool with_token)
      : token(with_token ? "fuzz token " + std::to_string(seed_) : ""), seed(seed_),
        impl(fuzz_options(token, seed_)) {}

  std::string token;
  uint64_t seed;
  Impl impl;
  Rng rng{0};
  Outcome* out = nullptr;
  uint64_t session_no = 0;
  Session victim_session;  // a client that holds a version with a secret descriptor
  sched::ClientId victim = 0;
  sched::MemberId victim_member = 0;
  uint64_t good_runs = 0;
  registry::RecentNonces hellos;  // the oracle's copy of the registry's memory of HELLO nonces
  std::map<sched::ClientId, std::string> rx_keys;        // the registry's frame key, per session
  std::map<sched::ClientId, registry::FrameMac> rx_macs;  // opens what it sends after AUTH_OK

  std::string where() const {
    return std::string(token.empty() ? "sessions" : "sessions with a token") + ", seed " + std::to_string(seed) +
           " session " + std::to_string(session_no);
  }
  void finding(const std::string& s) { out->finding(where() + ": " + s); }

  // A new connection for `s`, whose oracle shares the nonces of every session's HELLO.
  void connect(Session& s) {
    s.oracle.hellos = &hellos;
    sched::ClientId id = s.id = impl.next_client++;
    Impl::Conn& c = impl.conns[id];
    c.host = "fuzz";
    c.hello_deadline_ms = std::numeric_limits<int64_t>::max() / 4;
    c.in_progress_ms = impl.now_ms;
  }

  // Takes every connection's queued replies, as the loop's flush would; checks that each is a
  // frame the registry may send; returns those of `id`.
  std::vector<OutFrame> drain(sched::ClientId id) {
    std::vector<OutFrame> mine;
    for (auto& [cid, c] : impl.conns) {
      std::string_view v = c.out.view();
      size_t off = 0;
      while (v.size() - off >= registry::kHeaderBytes) {
        OutFrame f;
        try {
          f.h = registry::decode_header(v.substr(off, registry::kHeaderBytes));
        } catch (const CodecError& e) {
          finding(std::string("the registry sent a bad frame header: ") + e.what());
          break;
        }
        if (v.size() - off - registry::kHeaderBytes < f.h.length) {
          finding("the registry queued a partial frame");
          break;
        }
        std::string_view payload = v.substr(off + registry::kHeaderBytes, f.h.length);
        registry::FrameMac& mac = rx_macs[cid];
        try {
          payload = mac.open(v.substr(off, registry::kHeaderBytes), payload);
        } catch (const CodecError& e) {
          finding(std::string("a frame from the registry does not carry its MAC: ") + e.what());
        }
        f.payload = std::string(payload);
        off += registry::kHeaderBytes + f.h.length;
        if (f.h.type == MsgType::kAuthOk && !mac.on() && rx_keys.count(cid)) mac = registry::FrameMac(rx_keys[cid]);
        check_sent(f);
        if (cid == id) mine.push_back(std::move(f));
      }
      c.out.consume(v.size());
    }
    return mine;
  }

  void check_sent(const OutFrame& f) {
    try {
      switch (f.h.type) {
        case MsgType::kReply: (void)registry::decode_reply(f.payload); break;
        case MsgType::kHeartbeat:
          if (!f.payload.empty()) finding("a HEARTBEAT answer with a payload");
          break;
        case MsgType::kOffload:
        case MsgType::kDiscard: {
          sched::MemberId m;
          sched::Version v;
          registry::decode_order(f.payload, &m, &v);
          break;
        }
        case MsgType::kChallenge: (void)registry::decode_challenge(f.payload); break;
        case MsgType::kAuthOk: (void)registry::decode_auth_ok(f.payload); break;
        case MsgType::kSnapshot: (void)registry::decode_snapshot(f.payload); break;
        default: finding("the registry sent a frame of type " + std::to_string(static_cast<int>(f.h.type)));
      }
    } catch (const CodecError& e) {
      finding(std::string("the registry sent a frame that does not decode: ") + e.what());
    }
  }

  // Delivers `bytes` to the session's connection and lets the handler work as the loop does
  // (again while frames are left over the per-turn budget). Checks everything above.
  std::vector<OutFrame> feed(Session& s, const std::string& bytes) {
    std::vector<OutFrame> got;
    auto it = impl.conns.find(s.id);
    if (it == impl.conns.end()) {
      finding("the session's connection vanished");
      return got;
    }
    Impl::Conn& c = it->second;
    s.bytes += bytes.size();
    s.oracle.stream += bytes;
    c.in.append(bytes);
    {
      AllocGuard guard(16 * s.bytes + (8u << 20));
      for (int turn = 0; turn < 1000000; ++turn) {
        size_t before = c.in.size();
        try {
          impl.handle_frames(s.id, c);
        } catch (const std::exception& e) {
          finding(std::string("an exception escaped the frame handler: ") + e.what());
          c.closing = true;
        }
        std::vector<OutFrame> now = drain(s.id);
        for (auto& f : now) got.push_back(std::move(f));
        if (c.closing || (c.in.size() == before && !c.more)) break;
      }
      if (guard.refused()) finding("an allocation of " + std::to_string(guard.refused()) + " bytes was attempted");
      if (guard.largest() > out->largest_allocation) out->largest_allocation = guard.largest();
    }
    if (impl.counters.internal_errors != 0) {
      finding("the registry counted an internal error");
      impl.counters.internal_errors = 0;
    }
    // What the registry said, read as a client would.
    for (const OutFrame& f : got) {
      if (f.h.type == MsgType::kChallenge && !s.challenged) {
        s.challenged = true;
        s.oracle.registry_nonce = f.payload.substr(4);
      }
      bool was_authenticated = s.authenticated;
      if (f.h.type == MsgType::kAuthOk) s.authenticated = true;
      if (f.h.type == MsgType::kReply) {
        sched::Reply r = registry::decode_reply(f.payload);
        auto a = s.asked.find(f.h.req);
        if (a != s.asked.end() && a->second == MsgType::kHello && r.status == sched::Status::kOk) s.authenticated = true;
        if (!was_authenticated && !token.empty() && f.h.type == MsgType::kReply) {
          if (static_cast<int>(r.status) >= 0 || r.member || r.lease || r.source || !r.source_descriptor.empty()) {
            finding("a peer that has not proven the token got a non-error reply");
          }
        }
        if (a != s.asked.end()) ++out->answers[std::string(registry::type_name(a->second)) + " " + std::to_string(static_cast<int>(r.status))];
        if (a != s.asked.end() && r.status == sched::Status::kOk) {
          if (a->second == MsgType::kOpen && r.member) s.members.push_back(r.member);
          if (a->second == MsgType::kReplicate && r.lease) s.leases.emplace_back(r.member, r.lease);
        }
      }
      if (f.h.type == MsgType::kSnapshot) ++out->answers["INFO snapshot"];
      if (!was_authenticated && !token.empty() && f.payload.find(kVictimSecret) != std::string::npos) {
        finding("another client's descriptor went to a peer that has not proven the token");
      }
    }
    // Before AUTH_OK a token registry sends the challenge and at most one refusal.
    if (!token.empty() && !s.authenticated) {
      for (const OutFrame& f : got) {
        if (f.h.type != MsgType::kChallenge && f.h.type != MsgType::kReply) {
          finding(std::string("a peer that has not proven the token got a ") + registry::type_name(f.h.type));
        }
      }
    }
    // The protocol's rules and the registry agree on closing.
    s.oracle.advance(token);
    if (s.oracle.closed != c.closing) {
      finding(std::string(c.closing ? "the registry closed a connection the protocol keeps open"
                                    : "the registry kept a connection that must be closed (" + s.oracle.why + ")") +
              "; last delivery " + to_hex(bytes.substr(0, 64)));
    }
    for (const OutFrame& f : got) {
      if (f.h.type == MsgType::kSnapshot && !s.oracle.infos.count(f.h.req)) finding("a SNAPSHOT answered no INFO");
    }
    if (c.closing) {
      if (got.empty() || got.back().h.type != MsgType::kReply ||
          static_cast<int>(registry::decode_reply(got.back().payload).status) >= 0) {
        finding("a connection was closed without an error reply");
      }
    }
    return got;
  }

  void end(Session& s) {
    if (impl.conns.count(s.id)) impl.drop(s.id);
    drain(0);
    std::string bad = impl.reg.check_invariants();
    if (!bad.empty()) finding("the registry's invariants broke: " + bad);
    if (impl.counters.internal_errors != 0) {
      finding("the registry counted an internal error while dropping a client");
      impl.counters.internal_errors = 0;
    }
    for (const auto& [cid, c] : impl.conns) {
      if (c.closing || c.failed) finding("another client's connection (" + std::to_string(cid) + ") is being closed");
    }
  }

  std::string request_frame(Session& s, MsgType t, const std::string& payload) {
    uint64_t req = s.next_req++;
    s.asked[req] = t;
    return sealed(s, frame(t, req, payload));
  }

  // As a client does after a right AUTH: every later frame carries a MAC. A frame whose header
  // does not count its bytes (mutated) is sent as it is: the registry closes at it either way.
  // Read from the frame itself, so that a mutated frame that is still the right AUTH counts.
  std::string sealed(Session& s, std::string f) {
    if (s.tx.on()) return fuzz::sealed(s.tx, std::move(f));
    FrameHeader h;
    try {
      if (f.size() < registry::kHeaderBytes) return f;
      h = registry::decode_header(std::string_view(f).substr(0, registry::kHeaderBytes));
    } catch (const CodecError&) {
      return f;
    }
    if (h.length != f.size() - registry::kHeaderBytes) return f;
    if (!token.empty() && h.type == MsgType::kAuth && s.challenged) {
      registry::Transcript tr{s.nonce, s.oracle.registry_nonce, s.datacenter};
      if (f.substr(registry::kHeaderBytes) == registry::encode_auth(registry::client_proof(token, tr))) {
        s.tx = registry::FrameMac(registry::frame_key(token, tr, true));
        rx_keys[s.id] = registry::frame_key(token, tr, false);
      }
    }
    return f;
  }

  // A well-behaved handshake; false (and a finding) if the registry does not accept it.
  bool handshake(Session& s) {
    s.nonce = random_bytes(registry::kNonceBytes);
    auto got = feed(s, request_frame(s, MsgType::kHello, serialize(hello(s.nonce, s.datacenter))));
    if (token.empty()) return s.authenticated;
    if (!s.challenged) return false;
    registry::Transcript t{s.nonce, s.oracle.registry_nonce, s.datacenter};
    got = feed(s, request_frame(s, MsgType::kAuth, registry::encode_auth(registry::client_proof(token, t))));
    if (got.empty() || got.back().h.type != MsgType::kAuthOk) return false;
    if (got.back().payload.substr(4) != registry::registry_proof(token, t)) {
      finding("the registry's AUTH_OK proof does not verify");
      return false;
    }
    return s.authenticated;
  }

  // A request and its REPLY (status kInternal with "no REPLY" when none came).
  sched::Reply call(Session& s, const sched::Event& ev) {
    auto got = feed(s, request_frame(s, registry::type_of(ev), registry::encode_event(ev)));
    for (const auto& f : got)
      if (f.h.type == MsgType::kReply) return registry::decode_reply(f.payload);
    sched::Reply none{};
    none.status = sched::Status::kInternal;
    none.detail = "no REPLY";
    return none;
  }
  bool heartbeat_answered(Session& s) {
    for (const auto& f : feed(s, request_frame(s, MsgType::kHeartbeat, "")))
      if (f.h.type == MsgType::kHeartbeat) return true;
    return false;
  }

  void setup_victim() {
    Session& s = victim_session;
    connect(s);
    if (!handshake(s)) return finding("the victim's handshake failed");
    victim = s.id;
    sched::Reply r = call(s, sched::Open{0, 0, "vm", "vr", 0, 1, 0, false});
    victim_member = r.member;
    if (call(s, sched::Publish{0, 0, victim_member, 1, 7, kVictimSecret}).status != sched::Status::kOk) {
      finding("the victim could not publish");
    }
  }

  // A publisher and a reader that do everything right, on a model of their own.
  void well_behaved() {
    std::string model = "good-" + std::to_string(good_runs++);
    std::string desc = "GOOD-DESCRIPTOR-" + model;
    Session pub, rd;
    connect(pub);
    connect(rd);
    if (!handshake(pub) || !handshake(rd)) return finding("a well-behaved client's handshake failed");
    sched::Reply a = call(pub, sched::Open{0, 0, model, "r1", 0, 1, 0, false});
    sched::Reply b = call(rd, sched::Open{0, 0, model, "r2", 0, 1, 0, false});
    if (a.status != sched::Status::kOk || b.status != sched::Status::kOk) return finding("a well-behaved OPEN failed");
    sched::Reply p = call(pub, sched::Publish{0, 0, a.member, 1, 9, desc});
    sched::Reply g = call(rd, sched::Replicate{0, 0, b.member, -1, -1, 9, "reader"});
    if (p.status != sched::Status::kOk || g.status != sched::Status::kOk || g.version != 1 || g.source != a.member ||
        g.source_descriptor != desc || g.lease == 0) {
      return finding("a well-behaved publish and replicate got wrong answers: " + p.detail + " / " + g.detail);
    }
    if (call(rd, sched::TransferDone{0, 0, b.member, g.lease}).status != sched::Status::kOk) {
      return finding("a well-behaved TRANSFER_DONE failed");
    }
    if (!heartbeat_answered(rd)) {
      return finding("a well-behaved HEARTBEAT was not answered");
    }
    if (call(rd, sched::Close{0, 0, b.member}).status != sched::Status::kOk ||
        call(pub, sched::Close{0, 0, a.member}).status != sched::Status::kOk) {
      return finding("a well-behaved CLOSE failed");
    }
    end(rd);
    end(pub);
    if (!victim || !impl.conns.count(victim)) return finding("the victim's connection is gone");
    const std::string state = impl.reg.describe();
    const std::string mine = "member " + std::to_string(victim_member) + " client " + std::to_string(victim) + " ";
    if (state.find(mine) == std::string::npos) return finding("the victim's member is gone: " + state.substr(0, 2000));
    // Any client may report a source as failed, which empties it for everybody (issue 13,
    // item 4, is about that); the victim then publishes again, so that its secret is there to leak.
    if (state.find(mine + "holding v1") == std::string::npos) {
      sched::Reply again = call(victim_session, sched::Publish{0, 0, victim_member, 1, 7, kVictimSecret});
      if (again.status != sched::Status::kOk) finding("the victim cannot publish again: " + again.detail);
    }
  }

  int64_t version(Rng& r) {
    static const int64_t kV[] = {-3, -2, -1, -1, 0, 1, 1, 2, 3, 7};
    return chance(r, 10) ? static_cast<int64_t>(interesting(r, Kind::kU64)) : kV[pick(r, std::size(kV))];
  }
  sched::MemberId member(Session& s, Rng& r) {
    if (!s.members.empty() && !chance(r, 10)) return s.members[pick(r, s.members.size())];
    if (chance(r, 3)) return victim_member;
    return chance(r, 2) ? pick(r, 64) : interesting(r, Kind::kU64);
  }
  uint64_t layout(Rng& r) { return chance(r, 2) ? 7 : chance(r, 2) ? 9 : r(); }
  sched::Status status(Rng& r) {
    static const sched::Status kSome[] = {sched::Status::kOk, sched::Status::kNotFound, sched::Status::kNotUpdated,
                                          sched::Status::kVersionLost, sched::Status::kTransport, sched::Status::kState};
    return chance(r, 8) ? static_cast<sched::Status>(static_cast<int32_t>(r())) : kSome[pick(r, std::size(kSome))];
  }

  // A request with live ids, mostly sensible, sometimes not.
  sched::Event request(Session& s, Rng& r) {
    static const char* kModels[] = {"vm", "vm", "m0", "m1", "good-0"};
    // Mostly a request on what the session opened: the handlers' deeper paths (grants, busy
    // sources, drains, failures) need live ids.
    switch (s.members.empty() && !chance(r, 5) ? 1 : pick(r, 16)) {
      case 0: return sched::Heartbeat{0};
      case 14: {
        // With a round, a version and a status sometimes: a round report (protocol 7).
        sched::Cancel c{0, 0, member(s, r)};
        if (chance(r, 2)) {
          c.round = pick(r, 6);
          c.version = chance(r, 2) ? version(r) : -1;
          c.status = status(r);
        }
        return c;
      }
      case 15:
        if (!s.leases.empty() && !chance(r, 4)) {
          auto [m, l] = s.leases[pick(r, s.leases.size())];
          return sched::TransferProgress{0, 0, m, l, chance(r, 2) ? r() % 100000 : interesting(r, Kind::kU64), "socket"};
        }
        return sched::TransferProgress{0, 0, member(s, r), pick(r, 64), r(), std::string(r() % 80, 'q')};
      case 1:
      case 2: {
        int n = chance(r, 3) ? 1 + static_cast<int>(pick(r, 3)) : 1;
        int shard = chance(r, 8) ? static_cast<int>(interesting(r, Kind::kU32)) : static_cast<int>(pick(r, n));
        sched::Open o{0, 0, kModels[pick(r, std::size(kModels))], "r" + std::to_string(pick(r, 4)), shard, n,
                      static_cast<int>(pick(r, 3)), chance(r, 4)};
        if (chance(r, 2)) {  // a re-open's round report, true or not
          o.round = chance(r, 8) ? interesting(r, Kind::kU64) : pick(r, 6);
          o.round_open = chance(r, 2);
          o.round_status = status(r);
          o.round_version = version(r);
          o.round_spec = version(r);
          o.round_newer_than = chance(r, 2) ? version(r) : -1;
        }
        return o;
      }
      case 3: return sched::Close{0, 0, member(s, r)};
      case 4:
      case 5: return sched::Publish{0, 0, member(s, r), version(r), layout(r), "D" + std::to_string(r() % 1000)};
      case 6:
      case 7:
      case 12:
      case 13:
        return sched::Replicate{0, 0, member(s, r), version(r), chance(r, 3) ? version(r) : -1, layout(r),
                                "R" + std::to_string(r() % 1000), chance(r, 2) ? pick(r, 6) : 0, chance(r, 4)};
      case 8:
        if (!s.leases.empty() && !chance(r, 4)) {
          auto [m, l] = s.leases[pick(r, s.leases.size())];
          return sched::TransferDone{0, 0, m, l};
        }
        return sched::TransferDone{0, 0, member(s, r), pick(r, 64)};
      case 9:
        if (!s.leases.empty() && !chance(r, 4)) {
          auto [m, l] = s.leases[pick(r, s.leases.size())];
          return sched::SourceFailed{0, 0, m, l, r() % 100};
        }
        return sched::SourceFailed{0, 0, member(s, r), pick(r, 64), r()};
      case 10: return sched::Unpublish{0, 0, member(s, r)};
      default: return sched::OffloadDone{0, 0, member(s, r), version(r), "O" + std::to_string(r() % 1000)};
    }
  }

  // A well-formed frame of any type (requests with live ids): before the handshake, none of
  // them may be handled.
  std::string well_formed_anything(Session& s, Rng& r) {
    MsgType t = any_type(r);
    switch (t) {
      case MsgType::kHello: return request_frame(s, t, serialize(hello(seeded_bytes(r, registry::kNonceBytes), "dc")));
      case MsgType::kAuth:
      case MsgType::kChallenge:
      case MsgType::kAuthOk: return request_frame(s, t, serialize(secret_field(seeded_bytes(r, registry::kProofBytes))));
      case MsgType::kDescribe: return request_frame(s, t, "");
      case MsgType::kInfo: return request_frame(s, t, registry::encode_info_request(static_cast<uint32_t>(pick(r, 4))));
      case MsgType::kSnapshot: return request_frame(s, t, registry::encode_snapshot(random_snapshot(r)));
      case MsgType::kReply: return request_frame(s, t, registry::encode_reply(sched::Reply{}));
      case MsgType::kOffload:
      case MsgType::kDiscard: return request_frame(s, t, registry::encode_order(victim_member, 1));
      case MsgType::kHeartbeat:
      case MsgType::kOpen:
      case MsgType::kClose:
      case MsgType::kPublish:
      case MsgType::kReplicate:
      case MsgType::kTransferDone:
      case MsgType::kSourceFailed:
      case MsgType::kUnpublish:
      case MsgType::kOffloadDone:
      case MsgType::kCancel:
      case MsgType::kTransferProgress:
        for (;;) {
          sched::Event ev = request(s, r);
          if (registry::type_of(ev) == t) return request_frame(s, t, registry::encode_event(ev));
        }
      default: return request_frame(s, t, std::string(pick(r, 16), 'u'));
    }
  }

  // One hostile-or-not session.
  void session(Rng& r) {
    Session s;
    connect(s);
    s.datacenter = chance(r, 8) ? "" : "dc" + std::to_string(pick(r, 3));
    std::string pending;  // bytes written but not yet delivered (pipelining)
    auto deliver = [&] {
      if (pending.empty() || !impl.conns.count(s.id) || impl.conns[s.id].closing) return;
      std::string b;
      b.swap(pending);
      if (b.size() > 1 && chance(r, 10)) {  // a frame split over two reads
        size_t cut = 1 + pick(r, b.size() - 1);
        feed(s, b.substr(0, cut));
        if (!impl.conns[s.id].closing) feed(s, b.substr(cut));
      } else {
        feed(s, b);
      }
    };
    auto closed = [&] { return !impl.conns.count(s.id) || impl.conns[s.id].closing; };

    // The handshake, usually right.
    s.nonce = seeded_bytes(r, registry::kNonceBytes);
    Message h = hello(s.nonce, s.datacenter);
    if (!chance(r, 10)) {
      std::string payload =
          chance(r, 7) ? mutate(h, hello(seeded_bytes(r, registry::kNonceBytes), "other"), r) : serialize(h);
      pending += chance(r, 12) ? sealed(s, mutate_frame(MsgType::kHello, s.next_req++, payload, r))
                               : request_frame(s, MsgType::kHello, payload);
      if (!token.empty() && !chance(r, 8)) deliver();  // usually wait for the challenge
    }
    // Sometimes any message at all, well formed, where the handshake's next message should be.
    const bool probe = chance(r, 5);
    if (probe) {
      pending += well_formed_anything(s, r);
      if (chance(r, 2)) pending += well_formed_anything(s, r);
    }
    if (!token.empty() && !closed() && !probe) {
      if (s.challenged && !chance(r, 7)) {
        registry::Transcript t{s.nonce, s.oracle.registry_nonce, s.datacenter};
        Message a = secret_field(registry::client_proof(token, t));
        std::string payload = chance(r, 8) ? mutate(a, h, r) : serialize(a);
        pending += chance(r, 12) ? sealed(s, mutate_frame(MsgType::kAuth, s.next_req++, payload, r))
                                 : request_frame(s, MsgType::kAuth, payload);
      } else if (chance(r, 2)) {  // a guessed or replayed proof
        pending += request_frame(s, MsgType::kAuth, serialize(secret_field(seeded_bytes(r, registry::kProofBytes))));
      }
    }
    // Requests, live and mutated.
    int steps = static_cast<int>(pick(r, 14));
    for (int i = 0; i < steps && !closed(); ++i) {
      if (s.tx.on() && chance(r, 40)) {  // a relay's change: a sealed frame whose MAC no longer matches
        std::string f = request_frame(s, MsgType::kHeartbeat, "");
        f[registry::kHeaderBytes + pick(r, f.size() - registry::kHeaderBytes)] ^= static_cast<char>(1 + pick(r, 255));
        pending += f;
      } else if (chance(r, 60)) {  // something that is not a request
        MsgType t = any_type(r);
        std::string payload = t == MsgType::kDescribe && chance(r, 2) ? "" : std::string(pick(r, 40), 'z');
        pending += request_frame(s, t, payload);
      } else if (chance(r, 12)) {  // INFO, the read-only query (not an event: its own handler)
        Message m = info(static_cast<uint32_t>(chance(r, 2) ? pick(r, 4) : interesting(r, Kind::kU32)));
        std::string payload = chance(r, 10) ? mutate(m, info(1), r) : serialize(m);
        pending += chance(r, 40) ? sealed(s, mutate_frame(MsgType::kInfo, s.next_req++, payload, r))
                                 : request_frame(s, MsgType::kInfo, payload);
      } else {
        sched::Event ev = request(s, r);
        Message m = fuzz::request(ev);  // the model of it, to mutate
        std::string payload = chance(r, 10) ? mutate(m, fuzz::request(request(s, r)), r) : serialize(m);
        pending += chance(r, 40) ? sealed(s, mutate_frame(registry::type_of(ev), s.next_req++, payload, r))
                                 : request_frame(s, registry::type_of(ev), payload);
      }
      if (chance(r, 2)) deliver();
    }
    if (chance(r, 20) && !closed()) {  // half a frame, then the peer leaves
      std::string f = request_frame(s, MsgType::kOpen, registry::encode_event(sched::Open{0, 0, "m0", "x", 0, 1, 0, false}));
      pending += f.substr(0, 1 + pick(r, f.size() - 1));
    }
    deliver();
    ++out->inputs;
    out->frames += s.next_req - 1;
    if (closed()) ++out->refused;
    end(s);
  }
};

SessionFuzzer::SessionFuzzer(uint64_t seed, bool with_token) : s_(std::make_unique<State>(seed, with_token)) {}
SessionFuzzer::~SessionFuzzer() = default;

void SessionFuzzer::run(uint64_t sessions, Outcome* out) {
  State& st = *s_;
  st.out = out;
  if (!st.victim) st.setup_victim();
  for (uint64_t i = 0; i < sessions; ++i) {
    st.session_no = i;
    Rng r(st.seed * 0x9e3779b97f4a7c15ull + i);
    st.session(r);
    if (i % 16 == 15) st.impl.apply(sched::Tick{});
    if (i % 64 == 63) st.well_behaved();
  }
  st.well_behaved();
}

}  // namespace thub::fuzz
