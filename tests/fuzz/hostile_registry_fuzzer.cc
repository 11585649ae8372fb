// HostileRegistryFuzzer: the client library's handshake and reader against a registry that
// lies (fuzz_targets.h). Each session is one real Connection to a stand-in on loopback that
// answers from a seeded script of mutated frames.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "src/common/codec.h"
#include "src/common/crypto.h"
#include "src/common/status.h"
#include "src/registry/auth.h"
#include "src/registry/connection.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/message_model.h"

namespace thub::fuzz {

using registry::FrameHeader;
using registry::MsgType;

namespace {
const std::string kToken = "hostile registry fuzz token";

// One frame from a blocking socket, within `ms`; false on EOF, error or timeout.
bool read_frame(int fd, int ms, FrameHeader* h, std::string* payload, std::string* buf) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    if (buf->size() >= registry::kHeaderBytes) {
      try {
        *h = registry::decode_header(std::string_view(*buf).substr(0, registry::kHeaderBytes));
      } catch (const CodecError&) {
        return false;
      }
      if (buf->size() >= registry::kHeaderBytes + h->length) {
        *payload = buf->substr(registry::kHeaderBytes, h->length);
        buf->erase(0, registry::kHeaderBytes + h->length);
        return true;
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char tmp[4096];
    ssize_t k = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (k > 0) buf->append(tmp, static_cast<size_t>(k));
    else if (k == 0 || (errno != EAGAIN && errno != EINTR)) return false;
  }
}

// What the stand-in did, for the verdict on the client.
struct Script {
  bool proved = false;      // what it sent reads as an AUTH_OK with the right proof
  bool plain_ok = false;    // what it sent reads as a REPLY with status 0
};

// The first frame of `bytes` as the client reads it, if it reads.
bool first_frame(const std::string& bytes, FrameHeader* h, std::string* payload) {
  if (bytes.size() < registry::kHeaderBytes) return false;
  try {
    *h = registry::decode_header(std::string_view(bytes).substr(0, registry::kHeaderBytes));
  } catch (const CodecError&) {
    return false;
  }
  if (bytes.size() < registry::kHeaderBytes + h->length) return false;
  *payload = bytes.substr(registry::kHeaderBytes, h->length);
  return true;
}
bool reads_as_ok(const std::string& bytes) {
  FrameHeader h;
  std::string p;
  if (!first_frame(bytes, &h, &p) || h.type != MsgType::kReply) return false;
  try {
    return registry::decode_reply(p).status == sched::Status::kOk;
  } catch (const CodecError&) {
    return false;
  }
}
// The 32-byte field of a CHALLENGE or AUTH_OK frame, "" if it does not read as one.
std::string reads_as(const std::string& bytes, MsgType type) {
  FrameHeader h;
  std::string p;
  if (!first_frame(bytes, &h, &p) || h.type != type) return "";
  try {
    return type == MsgType::kChallenge ? registry::decode_challenge(p) : registry::decode_auth_ok(p);
  } catch (const CodecError&) {
    return "";
  }
}

// `m` as a frame, or a mutation of it.
std::string maybe_mutated(MsgType t, const Message& m, Rng& r) {
  if (!chance(r, 3)) return frame(t, 0, serialize(m));
  return chance(r, 2) ? frame(t, 0, mutate(m, m, r)) : mutate_frame(t, 0, serialize(m), r);
}

void stand_in(int listener, Rng r, Script* s) {
  pollfd lp{listener, POLLIN, 0};
  if (::poll(&lp, 1, 5000) <= 0) return;
  registry::Fd c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!c.valid()) return;
  std::string buf, payload;
  FrameHeader h;
  if (!read_frame(c.get(), 3000, &h, &payload, &buf) || h.type != MsgType::kHello) return;
  registry::Hello hello;
  try {
    hello = registry::decode_hello(payload);
  } catch (const CodecError&) {
    return;
  }
  const bool knows_token = !chance(r, 3);
  std::string right_proof;
  std::string out;
  registry::FrameMac seal;  // on after a right, unmutated AUTH_OK
  switch (pick(r, 9)) {
    case 8:  // "I do not lead" in place of a welcome: the client must not stay
      out = maybe_mutated(MsgType::kNotLeader, not_leader({"127.0.0.1:1", "not leading"}), r);
      break;
    case 0:
    case 1: {  // no token: "welcome"
      sched::Reply ok{};
      out = maybe_mutated(MsgType::kReply, reply(ok), r);
      break;
    }
    case 2: {  // an error, maybe THUB_ERR_AUTH
      sched::Reply no{};
      no.status = chance(r, 2) ? sched::Status::kAuth : sched::Status::kArg;
      no.detail = "no";
      out = maybe_mutated(MsgType::kReply, reply(no), r);
      break;
    }
    case 3:  // junk, or a header announcing far more than a handshake
      out = chance(r, 2) ? std::string(1 + pick(r, 64), static_cast<char>(r()))
                         : frame(MsgType::kChallenge, 0, "").substr(0, 16) + std::string("\xff\xff\xff\x03", 4);
      break;
    default: {  // a challenge, then (maybe) a proof
      out = maybe_mutated(MsgType::kChallenge, secret_field(seeded_bytes(r, registry::kNonceBytes)), r);
      const std::string ns = reads_as(out, MsgType::kChallenge);  // the nonce the client will see
      if (!registry::write_all(c.get(), out.data(), out.size())) return;
      out.clear();
      if (!read_frame(c.get(), 3000, &h, &payload, &buf) || h.type != MsgType::kAuth) return;
      registry::Transcript t{hello.nonce, ns, hello.datacenter};
      const std::string right = registry::registry_proof(kToken, t);
      std::string proof = knows_token ? right : seeded_bytes(r, registry::kProofBytes);
      if (chance(r, 5)) {
        sched::Reply no{};
        no.status = sched::Status::kAuth;
        out = maybe_mutated(MsgType::kReply, reply(no), r);
      } else {
        out = maybe_mutated(MsgType::kAuthOk, secret_field(proof), r);
        // A registry that knows the token seals what follows its AUTH_OK, as the real one does.
        if (knows_token && !ns.empty() && reads_as(out, MsgType::kAuthOk) == right) {
          seal = registry::FrameMac(registry::frame_key(kToken, t, false));
        }
      }
      right_proof = ns.empty() ? "" : right;
    }
  }
  if (chance(r, 20) && out.size() > 1) {  // cut short
    out.resize(pick(r, out.size()));
    seal = registry::FrameMac();
  }
  // Then whatever a broken registry sends: orders, replies, snapshots, mutated.
  for (int i = 0, n = static_cast<int>(pick(r, 6)); i < n; ++i) {
    if (chance(r, 4)) {  // a SNAPSHOT, answering the client's INFO or not
      Message m = snapshot(random_snapshot(r));
      out += sealed(seal, chance(r, 3) ? frame(MsgType::kSnapshot, pick(r, 4), mutate(m, m, r))
                                       : frame(MsgType::kSnapshot, pick(r, 4), serialize(m)));
      continue;
    }
    if (chance(r, 8)) {  // "I do not lead": the client must leave (and may try the leader named)
      Message m = not_leader({chance(r, 2) ? "127.0.0.1:1" : "", "a fuzzer"});
      out += sealed(seal, chance(r, 3) ? frame(MsgType::kNotLeader, 0, mutate(m, m, r))
                                       : frame(MsgType::kNotLeader, 0, serialize(m)));
      continue;
    }
    Message m = chance(r, 2) ? order(pick(r, 5), static_cast<int64_t>(pick(r, 3))) : reply(sched::Reply{});
    MsgType t = m.shape == Shape::kOrder ? (chance(r, 2) ? MsgType::kOffload : MsgType::kDiscard) : MsgType::kReply;
    out += sealed(seal, chance(r, 3) ? frame(t, pick(r, 4), mutate(m, m, r)) : frame(t, pick(r, 4), serialize(m)));
  }
  // The verdict reads the stream as the client will (a frame cut short is completed by the next).
  s->plain_ok = reads_as_ok(out);
  s->proved = !right_proof.empty() && reads_as(out, MsgType::kAuthOk) == right_proof;
  if (!registry::write_all(c.get(), out.data(), out.size())) return;
  // Until the client leaves.
  char tmp[4096];
  for (int i = 0; i < 500; ++i) {
    pollfd p{c.get(), POLLIN, 0};
    if (::poll(&p, 1, 10) > 0 && ::recv(c.get(), tmp, sizeof tmp, 0) <= 0) return;
  }
}
}  // namespace

void HostileRegistryFuzzer::run(uint64_t sessions, Outcome* out) {
  for (uint64_t i = 0; i < sessions; ++i) {
    Rng r(seed_ * 0x9e3779b97f4a7c15ull + i);
    uint16_t port = 0;
    registry::Fd listener = registry::listen_tcp(registry::parse_host_port("127.0.0.1:0"), &port);
    const bool with_token = chance(r, 2);
    Script script;
    std::thread fake(stand_in, listener.get(), Rng(r()), &script);
    registry::ConnectionOptions co;
    co.addresses = {"127.0.0.1:" + std::to_string(port)};
    co.auth_token = with_token ? kToken : "";
    co.connect_timeout_ms = 300;
    co.registry_timeout_ms = 300;
    co.reconnect_ms = 0;
    co.heartbeat_ms = 50;
    auto where = [&] { return "hostile registry, seed " + std::to_string(seed_) + " session " + std::to_string(i) + ": "; };
    bool connected = false;
    try {
      registry::Connection c(co);
      connected = true;
      c.on_order([](const registry::Order&) {});
      try {
        if (chance(r, 3)) (void)c.snapshot(0, 100);
        else (void)c.call(sched::Open{0, 0, "m", "r", 0, 1, 0, false}, 100);
      } catch (const Error&) {
      }
    } catch (const Error&) {
      ++out->refused;
    } catch (const std::exception& e) {
      out->finding(where() + "the client threw something other than thub::Error: " + e.what());
    }
    fake.join();
    ++out->inputs;
    if (connected && with_token && !script.proved) {
      out->finding(where() + "a client with a token accepted a registry that did not prove it");
    }
    if (connected && !with_token && !script.plain_ok) {
      out->finding(where() + "a client accepted a HELLO answer that was not a plain REPLY 0");
    }
  }
}

}  // namespace thub::fuzz
