// SocketFuzzer: sessions over real TCP to a running registry Server, so that its reads and
// writes see what a hostile peer does to them: frames cut into random pieces, pipelined,
// mutated, truncated. Each session ends with a HEARTBEAT probe; the registry must then either
// answer the probe (everything before it was handled) or close the connection (with an error
// reply); it must never hang, send a frame that does not decode, or (with a token) send a
// peer that has not proven it anything but the challenge and one refusal. Every 32 sessions
// and at the end, the real client library (registry::Connection) publishes and replicates
// through the same registry.
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <sstream>

#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/server.h"
#include "src/registry/socket.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/message_model.h"

namespace thub::fuzz {

using registry::FrameHeader;
using registry::MsgType;

namespace {
constexpr uint64_t kProbe = 0xfeedfacecafe;
constexpr int kGuardMs = 10000;  // a hang guard, never a pass criterion

// Reads frames from a socket; false at EOF, error or the guard.
class Reader {
 public:
  explicit Reader(int fd) : fd_(fd) {}
  // 1: a frame; 0: closed by the peer; -1: the guard passed; -2: garbage; -3: a bad MAC.
  int next(FrameHeader* h, std::string* payload) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kGuardMs);
    for (;;) {
      if (buf_.size() >= registry::kHeaderBytes) {
        try {
          *h = registry::decode_header(std::string_view(buf_).substr(0, registry::kHeaderBytes));
        } catch (const CodecError&) {
          return -2;
        }
        if (buf_.size() >= registry::kHeaderBytes + h->length) {
          std::string_view v(buf_);
          std::string_view body = v.substr(registry::kHeaderBytes, h->length);
          try {
            body = mac.open(v.substr(0, registry::kHeaderBytes), body);
          } catch (const CodecError&) {
            return -3;
          }
          *payload = std::string(body);
          buf_.erase(0, registry::kHeaderBytes + h->length);
          return 1;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -1;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char tmp[65536];
      ssize_t k = ::recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
      if (k > 0) buf_.append(tmp, static_cast<size_t>(k));
      else if (k == 0 || (errno != EAGAIN && errno != EINTR)) return 0;
    }
  }

  registry::FrameMac mac;  // after AUTH_OK (a token): opens every frame

 private:
  int fd_;
  std::string buf_;
};

sched::Event any_request(Rng& r) {
  switch (pick(r, 9)) {
    case 8: return sched::Cancel{0, 0, pick(r, 40)};
    case 0: return sched::Open{0, 0, "m" + std::to_string(pick(r, 3)), "r" + std::to_string(pick(r, 3)), 0, 1, 0, false};
    case 1: return sched::Publish{0, 0, pick(r, 40), static_cast<int64_t>(pick(r, 4)), 7, "D"};
    case 2: return sched::Replicate{0, 0, pick(r, 40), -1, -1, 7, "R"};
    case 3: return sched::TransferDone{0, 0, pick(r, 40), pick(r, 40)};
    case 4: return sched::SourceFailed{0, 0, pick(r, 40), pick(r, 40), 3};
    case 5: return sched::Unpublish{0, 0, pick(r, 40)};
    case 6: return sched::Close{0, 0, pick(r, 40)};
    default: return sched::OffloadDone{0, 0, pick(r, 40), 1, "O"};
  }
}
}  // namespace

struct SocketFuzzer::State {
  State(uint64_t seed_, bool with_token) : seed(seed_), token(with_token ? "socket fuzz token" : "") {
    registry::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.auth_token = token;
    o.frame_timeout_ms = 100;  // a session left with half a frame is closed soon
    o.hello_timeout_ms = 2000;
    server = std::make_unique<registry::Server>(o);
    server->start();
  }
  uint64_t seed;
  std::string token;
  std::unique_ptr<registry::Server> server;
  Outcome* out = nullptr;
  uint64_t session_no = 0, good_runs = 0;

  void finding(const std::string& s) {
    out->finding(std::string(token.empty() ? "socket" : "socket with a token") + ", seed " + std::to_string(seed) +
                 " session " + std::to_string(session_no) + ": " + s);
  }

  // Writes `b` in random pieces (each its own send, so the registry reads them apart).
  static bool write_pieces(int fd, const std::string& b, Rng& r) {
    for (size_t off = 0; off < b.size();) {
      size_t n = chance(r, 3) ? 1 + pick(r, 7) : b.size() - off;
      n = std::min(n, b.size() - off);
      if (!registry::write_all(fd, b.data() + off, n)) return false;
      off += n;
    }
    return true;
  }

  void session(Rng& r) {
    registry::Fd fd = registry::connect_tcp(registry::parse_host_port(server->address()), 5000);
    Reader in(fd.get());
    FrameHeader h;
    std::string payload;
    bool proven = token.empty();
    registry::FrameMac tx;  // after a right AUTH: seals what we send
    std::string rx_key;     // the registry's frame key, for what follows its AUTH_OK
    std::string bytes;
    uint64_t req = 1;
    // The handshake: usually right, computed from the real challenge.
    if (!chance(r, 8)) {
      std::string nonce = seeded_bytes(r, registry::kNonceBytes);
      Message m = hello(nonce, "dc");
      const bool clean = !chance(r, 6);
      std::string hp = clean || chance(r, 2) ? serialize(m) : mutate(m, m, r);
      bytes = clean || hp != serialize(m) ? frame(MsgType::kHello, req++, hp) : mutate_frame(MsgType::kHello, req++, hp, r);
      if (!token.empty() && !chance(r, 6)) {
        if (!write_pieces(fd.get(), bytes, r)) return;
        bytes.clear();
        int got = in.next(&h, &payload);
        if (got == 0) return;  // refused (a mutated HELLO): the close is checked by the decoder fuzzers' twin
        if (got < 0) return finding(got == -1 ? "no answer to HELLO" : "a bad frame header from the registry");
        if (h.type == MsgType::kChallenge && clean) {
          registry::Transcript t{nonce, payload.substr(4), "dc"};
          Message a = secret_field(registry::client_proof(token, t));
          std::string ap = chance(r, 8) ? mutate(a, a, r) : serialize(a);
          bytes = frame(MsgType::kAuth, req++, ap);
          if (ap == serialize(a)) {  // the right proof: every later frame either way is MACed
            tx = registry::FrameMac(registry::frame_key(token, t, true));
            rx_key = registry::frame_key(token, t, false);
          }
          if (ap == serialize(a) && chance(r, 2)) {  // wait for AUTH_OK, then requests
            if (!write_pieces(fd.get(), bytes, r)) return;
            bytes.clear();
            if (in.next(&h, &payload) != 1 || h.type != MsgType::kAuthOk) {
              return finding(std::string("a right proof was not accepted: ") + registry::type_name(h.type) + " " +
                             (h.type == MsgType::kReply ? registry::decode_reply(payload).detail : ""));
            }
            proven = true;
            in.mac = registry::FrameMac(rx_key);
          }
        } else if (h.type != MsgType::kReply && h.type != MsgType::kChallenge) {
          return finding("HELLO answered with a " + std::string(registry::type_name(h.type)));
        }
      }
    }
    int steps = static_cast<int>(pick(r, 8));
    for (int i = 0; i < steps; ++i) {
      if (chance(r, 10)) {  // INFO, read-only: a SNAPSHOT only for a proven peer
        Message m = info(static_cast<uint32_t>(pick(r, 4)));
        bytes += sealed(tx, frame(MsgType::kInfo, req++, chance(r, 4) ? mutate(m, m, r) : serialize(m)));
        continue;
      }
      sched::Event ev = any_request(r);
      Message m = request(ev);
      std::string p = chance(r, 4) ? mutate(m, request(any_request(r)), r) : serialize(m);
      bytes += sealed(tx, chance(r, 10) ? mutate_frame(registry::type_of(ev), req++, p, r) : frame(registry::type_of(ev), req++, p));
      if (tx.on() && chance(r, 40)) {  // a relay's change: a sealed frame whose MAC no longer matches
        std::string f = sealed(tx, frame(MsgType::kHeartbeat, req++, ""));
        f[registry::kHeaderBytes + pick(r, f.size() - registry::kHeaderBytes)] ^= static_cast<char>(1 + pick(r, 255));
        bytes += f;
      }
    }
    if (chance(r, 50)) bytes.resize(pick(r, bytes.size() + 1));  // ends inside a frame
    bytes += sealed(tx, frame(MsgType::kHeartbeat, kProbe, ""));
    if (!write_pieces(fd.get(), bytes, r)) return;  // the registry may close while we write
    ++out->inputs;
    out->frames += req;
    // Everything the registry says until it answers the probe or closes.
    for (;;) {
      int got = in.next(&h, &payload);
      if (got == 0) {
        ++out->refused;
        return;
      }
      if (got == -1) return finding("the registry neither answered the probe nor closed the connection");
      if (got == -2) return finding("the registry sent a bad frame header");
      if (got == -3) return finding("a frame from the registry failed its MAC");
      if (h.type == MsgType::kHeartbeat && h.req == kProbe) return;
      try {
        if (h.type == MsgType::kReply) {
          sched::Reply rep = registry::decode_reply(payload);
          if (!proven && !token.empty() &&
              (static_cast<int>(rep.status) >= 0 || rep.member || rep.lease || !rep.source_descriptor.empty())) {
            return finding("a peer that has not proven the token got a non-error reply");
          }
        } else if (h.type == MsgType::kAuthOk) {
          proven = true;
          if (!rx_key.empty()) in.mac = registry::FrameMac(rx_key);
        } else if (h.type == MsgType::kSnapshot) {
          if (!proven) return finding("a peer that has not proven the token got a SNAPSHOT");
          (void)registry::decode_snapshot(payload);
        } else if (h.type == MsgType::kOffload || h.type == MsgType::kDiscard) {
          sched::MemberId mm;
          sched::Version vv;
          registry::decode_order(payload, &mm, &vv);
        } else if (h.type != MsgType::kHeartbeat && h.type != MsgType::kChallenge) {
          return finding("the registry sent a " + std::string(registry::type_name(h.type)));
        }
      } catch (const CodecError& e) {
        return finding(std::string("a frame from the registry does not decode: ") + e.what());
      }
    }
  }

  // The client library publishes and replicates through the fuzzed registry.
  void well_behaved() {
    registry::ConnectionOptions co;
    co.addresses = {server->address()};
    co.auth_token = token;
    try {
      registry::Connection pub(co), rd(co);
      std::string model = "socket-good-" + std::to_string(good_runs++);
      sched::Reply a = pub.call(sched::Open{0, 0, model, "r1", 0, 1, 0, false});
      sched::Reply b = rd.call(sched::Open{0, 0, model, "r2", 0, 1, 0, false});
      sched::Reply p = pub.call(sched::Publish{0, 0, a.member, 1, 9, "GOOD"});
      sched::Reply g = rd.call(sched::Replicate{0, 0, b.member, -1, -1, 9, "reader"});
      if (a.status != sched::Status::kOk || b.status != sched::Status::kOk || p.status != sched::Status::kOk ||
          g.status != sched::Status::kOk || g.source != a.member || g.source_descriptor != "GOOD") {
        finding("a well-behaved client got wrong answers: " + g.detail);
      }
    } catch (const std::exception& e) {
      finding(std::string("a well-behaved client failed: ") + e.what());
    }
  }
};

SocketFuzzer::SocketFuzzer(uint64_t seed, bool with_token) : s_(std::make_unique<State>(seed, with_token)) {}
SocketFuzzer::~SocketFuzzer() = default;

void SocketFuzzer::run(uint64_t sessions, Outcome* out) {
  State& st = *s_;
  st.out = out;
  for (uint64_t i = 0; i < sessions; ++i) {
    st.session_no = i;
    Rng r(st.seed * 0x9e3779b97f4a7c15ull + i);
    try {
      st.session(r);
    } catch (const std::exception& e) {
      st.finding(std::string("the session failed: ") + e.what());
    }
    if (i % 32 == 31) st.well_behaved();
  }
  st.well_behaved();
  registry::ServerStats s = st.server->stats();
  if (s.internal_errors) st.finding("the registry counted " + std::to_string(s.internal_errors) + " internal errors");
}

}  // namespace thub::fuzz
