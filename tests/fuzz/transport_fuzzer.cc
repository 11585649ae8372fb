// The transport's own peer-facing formats (issue 19, item 2), fuzzed as the registry's are:
//  - the worker address and packed rkey codecs (src/transport/wire_format.h): every version,
//    from valid seeds and the message model's structure-aware mutations;
//  - the socket-read protocol from both ends (src/transport/socket_reads.h): a real
//    ReadServer on loopback answering hostile request streams, and a real ReadConnection
//    reading from a hostile server.
// Each side is checked against an independent reading of the protocol (the oracle below):
// what must be answered, with which bytes, and what must fail; memory around every region
// and destination is a canary that must never be read out or written.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "src/common/status.h"
#include "src/registry/socket.h"
#include "src/transport/socket_reads.h"
#include "src/transport/wire_format.h"
#include "tests/fuzz/alloc_guard.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/message_model.h"

namespace thub::fuzz {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kGuardMs = 5000;  // a hang guard, never a pass criterion
constexpr char kGreeting[8] = {'T', 'H', 'R', 'D', 0x01, 0x02, 0x03, 0x05};  // socket_reads.cc
constexpr size_t kRequestBytes = 64, kReplyHeader = 24;
constexpr uint32_t kTrailer = 1;  // reply flag: the watched word follows the data
constexpr char kCanary = static_cast<char>(0xee);

std::string hex_head(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string o;
  for (size_t i = 0; i < s.size() && i < 48; ++i) {
    o += d[(s[i] >> 4) & 15];
    o += d[s[i] & 15];
  }
  return o + (s.size() > 48 ? "..." : "") + " (" + std::to_string(s.size()) + " bytes)";
}

void put64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }
uint64_t get64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// ---- codecs --------------------------------------------------------------------------------

AddressFields random_address(Rng& r) {
  AddressFields a;
  a.ucx = seeded_bytes(r, chance(r, 8) ? pick(r, 2000) : pick(r, 200));
  a.port = static_cast<uint16_t>(r());
  for (uint64_t i = 0, n = chance(r, 16) ? 255 : pick(r, 5); i < n; ++i) a.ipv4.push_back(static_cast<uint32_t>(r()));
  a.pid = static_cast<uint32_t>(r());
  a.nonce_addr = r();
  a.nonce = r();
  a.version = chance(r, 6) ? 1 : chance(r, 4) ? 2 : 3;
  if (a.version == 3) a.datacenter = seeded_bytes(r, chance(r, 8) ? 255 : pick(r, 12));
  return a;
}

RkeyFields random_rkey(Rng& r) {
  RkeyFields k;
  k.ucx = seeded_bytes(r, pick(r, 300));
  k.token = r();
  k.addr = chance(r, 4) ? interesting(r, Kind::kU64) : r() >> 16;
  k.len = pick(r, 1u << 30);
  if (k.len > UINT64_MAX - k.addr) k.addr = UINT64_MAX - k.len;
  k.version = static_cast<int>(1 + pick(r, 3));
  if (chance(r, 2)) k.version = 3;
  k.ucx_mapped = k.version >= 2 && chance(r, 2);
  k.has_slot = k.version == 3 && chance(r, 2);
  k.slot = static_cast<uint32_t>(r());
  k.slot_key = r() | 1;
  return k;
}

bool starts(const std::string& s, const char* magic) { return s.size() >= 4 && s.compare(0, 4, magic, 4) == 0; }

// What decoding `in` must give, as wire_format.h says: a finding's text, or "".
// The decoder runs under an AllocGuard (at most 8x its input plus 4 KiB); the oracle's own
// model of the input does not.
std::string check_address(const std::string& in, bool* refused, size_t* largest) {
  transport::DecodedAddress d;
  const int version = starts(in, "THW1") ? 1 : starts(in, "THW2") ? 2 : starts(in, "THW3") ? 3 : 0;
  try {
    AllocGuard guard(8 * in.size() + 4096);
    d = transport::decode_address(in);
    *largest = guard.largest();
  } catch (const Error& e) {
    *refused = true;
    if (e.code() != Code::kTransport) return std::string("decode_address threw another code: ") + e.what();
    if (version == 0) return "decode_address refused a bare UCX address";
    return "";
  }
  if (version == 0) {
    if (d.ucx != in || d.sock.port != 0 || !d.sock.ipv4.empty() || d.proc.pid != 0 || !d.datacenter.empty())
      return "a bare UCX address did not decode as itself";
    return "";
  }
  AddressFields f{d.ucx, d.sock.port, d.sock.ipv4, d.proc.pid, d.proc.nonce_addr, d.proc.nonce, d.datacenter, version};
  if (version == 1 && d.proc.pid != 0) return "a THW1 address decoded with a process identity";
  if (version < 3 && !d.datacenter.empty()) return "an address before THW3 decoded with a datacenter label";
  if (serialize(address(f)) != in) return "decode_address accepted a non-canonical or partly ignored address";
  if (version == 3 && transport::encode_address(d.ucx, d.sock, d.proc, d.datacenter) != in)
    return "encode_address does not give back the address decoded";
  return "";
}

std::string check_rkey(const std::string& in, bool* refused, size_t* largest) {
  transport::DecodedRkey d;
  const int version = starts(in, "THK1") ? 1 : starts(in, "THK2") ? 2 : starts(in, "THK3") ? 3 : 0;
  try {
    AllocGuard guard(8 * in.size() + 4096);
    d = transport::decode_rkey(in);
    *largest = guard.largest();
  } catch (const Error& e) {
    *refused = true;
    if (e.code() != Code::kTransport) return std::string("decode_rkey threw another code: ") + e.what();
    if (version == 0) return "decode_rkey refused a bare UCX rkey";
    return "";
  }
  if (version == 0) {
    if (d.ucx != in || d.token != 0 || d.has_region || d.has_slot || d.ucx_mapped)
      return "a bare UCX rkey did not decode as itself";
    return "";
  }
  if (d.has_region != (version >= 2)) return "decode_rkey: a region where the version has none, or none where it has";
  if (d.has_region && d.len > UINT64_MAX - d.addr) return "decode_rkey accepted a region that wraps around";
  if (d.has_slot && (version != 3 || d.slot_key == 0)) return "decode_rkey accepted a slot without a key or a THK3";
  RkeyFields f{d.ucx, d.token, d.addr, d.len, d.ucx_mapped, d.has_slot, d.slot, d.slot_key, version};
  if (serialize(rkey(f)) != in) return "decode_rkey accepted a non-canonical or partly ignored rkey";
  if (version == 3 &&
      transport::encode_rkey(d.ucx, d.token, d.addr, d.len, d.ucx_mapped, {d.has_slot, d.slot, d.slot_key}) != in)
    return "encode_rkey does not give back the rkey decoded";
  return "";
}

// ---- sockets -------------------------------------------------------------------------------

// Receives until `want` bytes came, the peer closed (EOF or reset) or the guard passed.
// Returns 1: all came; 0: closed first; -1: the guard.
int recv_until(int fd, std::string* got, size_t want) {
  auto deadline = Clock::now() + std::chrono::milliseconds(kGuardMs);
  char buf[65536];
  while (got->size() < want) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    ssize_t k = ::recv(fd, buf, std::min(sizeof buf, want - got->size()), 0);
    if (k > 0) got->append(buf, static_cast<size_t>(k));
    else if (k == 0 || (errno != EINTR && errno != EAGAIN)) return 0;
  }
  return 1;
}

// True when the peer sends nothing more for a moment (and has not closed).
bool quiet(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 1) == 0) return true;
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

}  // namespace

// ---- the codecs ------------------------------------------------------------------------------

void TransportCodecFuzzer::run(uint64_t inputs, Outcome* out) {
  Rng rng(seed_ ^ 0x7472616e73706f72ull);
  for (uint64_t i = 0; i < inputs; ++i) {
    const bool is_rkey = i % 2 == 1;
    Message m = is_rkey ? rkey(random_rkey(rng)) : address(random_address(rng));
    Message other = chance(rng, 2) ? rkey(random_rkey(rng)) : address(random_address(rng));
    const bool valid = chance(rng, 8);
    std::string in = valid ? serialize(m) : mutate(m, other, rng);
    if (!valid && chance(rng, 64)) in = seeded_bytes(rng, pick(rng, 64));  // anything at all, magic or not
    bool refused = false;
    std::string finding;
    size_t largest = 0;
    try {
      finding = is_rkey ? check_rkey(in, &refused, &largest) : check_address(in, &refused, &largest);
    } catch (const std::bad_alloc&) {
      finding = "an allocation beyond the input's size was attempted (a length used before it was checked)";
    } catch (const std::exception& e) {
      finding = std::string("unexpected exception: ") + e.what();
    }
    if (valid && refused && finding.empty()) finding = "a valid encoding was refused";
    out->inputs++;
    if (refused) out->refused++;
    out->largest_allocation = std::max<uint64_t>(out->largest_allocation, largest);
    out->answers[std::string(is_rkey ? "rkey " : "address ") + (refused ? "refused" : "decoded")]++;
    if (!finding.empty())
      out->finding("transport codecs seed " + std::to_string(seed_) + " input " + std::to_string(i) + " (" +
                   (is_rkey ? "rkey" : "address") + "): " + finding + ": " + hex_head(in));
  }
}

// ---- a ReadServer against hostile readers ----------------------------------------------------

struct ReadServerFuzzer::State {
  // One block of memory: regions served (A, B), one withdrawn (W), canaries everywhere else.
  std::vector<char> mem = std::vector<char>(160u << 10, kCanary);
  struct Region {
    uint64_t addr, len, token;
    bool served;
  };
  std::vector<Region> regions;
  std::unique_ptr<transport::ReadServer> server;
  std::thread loop;
  std::atomic<bool> stop{false};

  explicit State(Rng& rng) {
    auto add = [&](size_t off, size_t len, bool served) {
      for (size_t i = 0; i < len; ++i) mem[off + i] = static_cast<char>((i * 131 + off) % 251);  // never 0xee
      regions.push_back({reinterpret_cast<uint64_t>(mem.data() + off), len, rng() | 1, served});
    };
    add(16u << 10, 32u << 10, true);
    add(80u << 10, 4u << 10, true);
    add(100u << 10, 1u << 10, false);
    server = std::make_unique<transport::ReadServer>(std::vector<uint32_t>{htonl(INADDR_LOOPBACK)});
    for (const Region& r : regions) server->serve(r.addr, r.len, r.token);
    server->withdraw(regions[2].token);
    loop = std::thread([this] {
      std::vector<pollfd> fds;
      while (!stop.load()) {
        fds.clear();
        server->add_fds(&fds);
        if (::poll(fds.data(), fds.size(), 5) > 0) server->progress(fds);
        server->expire(Clock::now());
      }
    });
  }
  ~State() {
    stop = true;
    loop.join();
  }
  // What the server must answer to one request: "" for not served, else the bytes.
  bool served(uint64_t addr, uint64_t len, uint64_t token) const {
    for (const Region& r : regions) {
      if (r.token != token || !r.served) continue;
      return addr >= r.addr && addr - r.addr <= r.len && len <= r.len - (addr - r.addr);
    }
    return false;
  }
};

ReadServerFuzzer::ReadServerFuzzer(uint64_t seed) : seed_(seed) {}
ReadServerFuzzer::~ReadServerFuzzer() = default;

void ReadServerFuzzer::run(uint64_t sessions, Outcome* out) {
  Rng rng(seed_ ^ 0x7265616473727672ull);
  if (!s_) s_ = std::make_unique<State>(rng);
  State& s = *s_;
  const uint16_t port = s.server->endpoint().port;
  for (uint64_t n = 0; n < sessions; ++n) {
    auto finding = [&](const std::string& what) {
      out->finding("read server seed " + std::to_string(seed_) + " session " + std::to_string(n) + ": " + what);
    };
    // The stream: a greeting (mostly right), then requests aimed at the regions' edges.
    std::string stream(kGreeting, sizeof kGreeting);
    if (chance(rng, 16)) stream[pick(rng, stream.size())] ^= static_cast<char>(1 + pick(rng, 255));
    if (chance(rng, 32)) stream.resize(pick(rng, stream.size()));
    const uint64_t k = 1 + pick(rng, 40);
    for (uint64_t i = 0; i < k; ++i) {
      const State::Region& r = s.regions[pick(rng, s.regions.size())];
      uint64_t token = r.token;
      switch (pick(rng, 8)) {
        case 0: token = rng(); break;
        case 1: token = chance(rng, 2) ? 0 : r.token ^ (1ull << pick(rng, 64)); break;
        case 2: token = s.regions[pick(rng, s.regions.size())].token; break;  // another region's
        default: break;
      }
      uint64_t off = pick(rng, r.len + 1), len = pick(rng, std::min<uint64_t>(r.len - off, 8192) + 1);
      uint64_t addr = r.addr + off;
      switch (pick(rng, 10)) {
        case 0: addr = r.addr - 1 - pick(rng, 64); break;                              // before
        case 1: addr = r.addr + r.len; len = pick(rng, 2); break;                       // at the end
        case 2: len = r.len - off + 1 + pick(rng, 64); break;                           // past it
        case 3: len = interesting(rng, Kind::kU64); break;                              // huge, or wrapping
        case 4: addr = interesting(rng, Kind::kU64); break;
        case 5: addr = UINT64_MAX - pick(rng, 16); len = 1 + pick(rng, 64); break;   // wraps
        default: break;
      }
      // The watch (socket_reads.h): mostly none (its other fields then garbage now and then), a
      // word of a region with the range beside it (served, the word behind the data) or around
      // it (parked: nothing more on this connection), or a word it does not serve.
      uint64_t waddr = 0, wtoken = 0, lo = 0, hi = 0;
      const State::Region& wr = s.regions[pick(rng, 2)];  // a served region
      const uint64_t word_at = (wr.addr + 7) / 8 * 8 + 8 * pick(rng, (wr.len - 16) / 8);
      uint64_t word = 0;
      std::memcpy(&word, reinterpret_cast<const void*>(word_at), 8);
      switch (pick(rng, 12)) {
        case 0:
        case 1:
          waddr = word_at, wtoken = wr.token;
          lo = word + 1 + pick(rng, 4), hi = lo + pick(rng, 1000);  // above it (or empty)
          if (chance(rng, 2) && word > 0) lo = 0, hi = word;        // below it
          break;
        case 2:
          waddr = word_at, wtoken = wr.token;
          lo = word - std::min<uint64_t>(word, pick(rng, 100)), hi = word + 1 + pick(rng, 100);
          break;
        case 3:
          waddr = word_at + 1 + pick(rng, 7), wtoken = wr.token;  // misaligned
          break;
        case 4:
          waddr = word_at, wtoken = chance(rng, 2) ? rng() | 1 : s.regions[2].token;  // not served
          break;
        case 5:
          waddr = wr.addr + wr.len - pick(rng, 8), wtoken = wr.token;  // past the end
          if (chance(rng, 2)) waddr = interesting(rng, Kind::kU64);
          break;
        case 6:
          waddr = rng(), lo = rng(), hi = rng();  // no token: not a watch
          break;
        default: break;
      }
      put64(&stream, chance(rng, 8) ? interesting(rng, Kind::kU64) : i + 1);
      put64(&stream, addr);
      put64(&stream, len);
      put64(&stream, token);
      put64(&stream, waddr);
      put64(&stream, wtoken);
      put64(&stream, lo);
      put64(&stream, hi);
      if (chance(rng, 64)) stream += seeded_bytes(rng, 1 + pick(rng, 40));  // misaligns the rest
    }
    if (chance(rng, 8)) stream += seeded_bytes(rng, 1 + pick(rng, kRequestBytes - 1));  // a request cut short
    // The oracle: the protocol's own reading of that stream.
    const bool greeted = stream.size() >= sizeof kGreeting && std::memcmp(stream.data(), kGreeting, sizeof kGreeting) == 0;
    std::string expect;
    uint64_t requests = 0, refused = 0;
    bool parked = false;  // a request waits for its word: nothing after it is answered
    if (greeted) {
      for (size_t p = sizeof kGreeting; stream.size() - p >= kRequestBytes && !parked; p += kRequestBytes) {
        const char* q = stream.data() + p;
        uint64_t id = get64(q), addr = get64(q + 8), len = get64(q + 16), token = get64(q + 24);
        const uint64_t waddr = get64(q + 32), wtoken = get64(q + 40), lo = get64(q + 48), hi = get64(q + 56);
        bool ok = s.served(addr, len, token);
        const bool watched = ok && wtoken != 0;
        if (watched && (waddr % 8 != 0 || !s.served(waddr, 8, wtoken))) ok = false;
        uint64_t word = 0;
        if (ok && watched) std::memcpy(&word, reinterpret_cast<const void*>(waddr), 8);
        requests++;
        if (!ok) refused++;
        if (ok && watched && word >= lo && word < hi) {
          parked = true;
          out->answers["requests parked (the session ends waiting)"]++;
          break;
        }
        put64(&expect, id);
        put64(&expect, ok ? len : 0);
        const uint32_t status = ok ? 0 : 1, flags = ok && watched ? kTrailer : 0;
        expect.append(reinterpret_cast<const char*>(&status), 4);
        expect.append(reinterpret_cast<const char*>(&flags), 4);
        if (ok) expect.append(reinterpret_cast<const char*>(addr), len);
        if (ok && watched) put64(&expect, word);
      }
    }
    out->inputs++;
    out->frames += requests;
    out->refused += refused;
    int fd = -1;
    try {
      fd = registry::connect_tcp({"127.0.0.1", port}, kGuardMs).release();
    } catch (const Error& e) {
      finding(std::string("cannot connect to the read server: ") + e.what());
      continue;
    }
    // Written in random pieces, now and then a pause for the server to read a piece alone.
    bool sent = true;
    for (size_t p = 0; p < stream.size() && sent;) {
      size_t piece = std::min(stream.size() - p, 1 + static_cast<size_t>(pick(rng, chance(rng, 2) ? 40 : 2000)));
      sent = registry::write_all(fd, stream.data() + p, piece);
      p += piece;
      if (chance(rng, 16)) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (chance(rng, 32)) {  // gone without reading the replies, now and then with a reset
      if (chance(rng, 2)) {
        linger l{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      ::close(fd);
      continue;
    }
    std::string got;
    if (!greeted) {
      if (stream.size() >= sizeof kGreeting) {
        int rc = sent ? recv_until(fd, &got, 1) : 0;
        if (rc != 0) finding(rc < 0 ? "a connection with a wrong greeting was kept" : "a wrong greeting got an answer");
        out->answers["session closed at the greeting"]++;
      }
      ::close(fd);
      continue;
    }
    int rc = recv_until(fd, &got, expect.size());
    if (rc != 1) {
      finding(std::string(rc < 0 ? "no answer within the guard" : "the server closed the connection") + " after " +
              std::to_string(got.size()) + " of " + std::to_string(expect.size()) + " bytes, " +
              std::to_string(requests) + " requests");
    } else if (got != expect) {
      size_t at = 0;
      while (at < got.size() && got[at] == expect[at]) at++;
      finding("the answer differs from the protocol's at byte " + std::to_string(at) + " of " +
              std::to_string(expect.size()) + (got.find(kCanary) != std::string::npos ? " (memory it does not serve)" : ""));
    } else if (!quiet(fd)) {
      finding("the server sent more than its requests' answers");
    }
    out->answers[refused == requests ? "sessions with every request refused" : "sessions with reads served"]++;
    ::close(fd);
    // Now and then the real reader reads through the same server: it is still serving.
    if (n % 32 == 31) {
      const State::Region& a = s.regions[0];
      std::vector<char> dst(4096, 0);
      transport::ReadConnection rc_conn(s.server->endpoint());
      bool done = false;
      std::string err;
      rc_conn.read(dst.data(), dst.size(), a.addr + 100, a.token, [&](bool, const std::string& e) { err = e; });
      auto deadline = Clock::now() + std::chrono::milliseconds(kGuardMs);
      std::vector<pollfd> fds;
      std::vector<std::pair<transport::ReadConnection::Done, std::string>> completions;
      while (!done && Clock::now() < deadline) {
        fds.clear();
        rc_conn.add_fds(&fds);
        if (fds.empty()) break;
        if (::poll(fds.data(), fds.size(), 10) > 0) rc_conn.progress(fds, &completions);
        for (auto& [cb, e] : completions) {
          cb(e.empty(), e);
          done = true;
        }
        completions.clear();
      }
      if (!done || !err.empty() || std::memcmp(dst.data(), reinterpret_cast<const char*>(a.addr + 100), dst.size()) != 0)
        finding("the real reader could not read through the server afterwards: " + (done ? err : "no answer"));
    }
  }
}

// ---- a ReadConnection against a hostile server -------------------------------------------------

struct ReadClientFuzzer::State {
  uint16_t port = 0;
  registry::Fd listener = registry::listen_tcp({"127.0.0.1", 0}, &port);
  int listen_fd = listener.get();
};

ReadClientFuzzer::ReadClientFuzzer(uint64_t seed) : seed_(seed) {}
ReadClientFuzzer::~ReadClientFuzzer() = default;

void ReadClientFuzzer::run(uint64_t sessions, Outcome* out) {
  Rng rng(seed_ ^ 0x72656164636c6e74ull);
  if (!s_) s_ = std::make_unique<State>();
  State& s = *s_;
  constexpr size_t kGap = 64;  // canary bytes before and after every destination
  for (uint64_t n = 0; n < sessions; ++n) {
    auto finding = [&](const std::string& what) {
      out->finding("read client seed " + std::to_string(seed_) + " session " + std::to_string(n) + ": " + what);
    };
    // The reads the reader asks for: ids 1, 2, ... (ReadConnection numbers them so).
    const size_t k = 1 + pick(rng, 8);
    std::vector<uint64_t> lens(k);
    size_t total = kGap;
    for (auto& l : lens) total += (l = chance(rng, 8) ? 0 : pick(rng, 8192)) + kGap;
    std::vector<char> mem(total, kCanary);
    std::vector<size_t> at(k);
    for (size_t i = 0, p = kGap; i < k; p += lens[i] + kGap, ++i) at[i] = p;
    // The server's answer: a right one per read (some "not served"), then mutated.
    // Some reads watch a word of the source: a served answer then has the trailer flag and
    // the word behind the data.
    std::vector<bool> watched(k);
    for (size_t i = 0; i < k; ++i) watched[i] = chance(rng, 2);
    std::string stream;
    std::vector<std::string> data(k);
    for (size_t i = 0; i < k; ++i) {
      const bool served = !chance(rng, 6);
      put64(&stream, i + 1);
      put64(&stream, served ? lens[i] : (chance(rng, 2) ? 0 : rng()));
      const uint32_t status = served ? 0 : (chance(rng, 2) ? 1 : static_cast<uint32_t>(rng()) | 1);
      stream.append(reinterpret_cast<const char*>(&status), 4);
      // Flags: the trailer bit as the read asks (now and then the other), other bits garbage.
      uint32_t flags = chance(rng, 8) ? 0x78787878u : 0;
      if (served && watched[i] != chance(rng, 16)) flags |= kTrailer;
      stream.append(reinterpret_cast<const char*>(&flags), 4);
      if (served) stream += seeded_bytes(rng, lens[i]);
      if (served && (flags & kTrailer)) put64(&stream, rng());
    }
    switch (pick(rng, 10)) {
      case 0: stream.resize(pick(rng, stream.size() + 1)); break;                       // cut short
      case 1: stream += seeded_bytes(rng, 1 + pick(rng, 64)); break;                     // more than asked
      case 2: if (!stream.empty()) stream[pick(rng, stream.size())] ^= static_cast<char>(1u << pick(rng, 8)); break;
      case 3: {  // one header's id or length lies
        const size_t target = pick(rng, k);
        size_t h = 0;
        for (size_t i = 0; i < target; ++i) {
          uint32_t status, flags;
          std::memcpy(&status, stream.data() + h + 16, 4);
          std::memcpy(&flags, stream.data() + h + 20, 4);
          h += kReplyHeader + (status == 0 ? lens[i] + ((flags & kTrailer) ? 8 : 0) : 0);
        }
        const uint64_t near = chance(rng, 2) ? lens[target] + 1 : (lens[target] ? lens[target] - 1 : 1);
        const uint64_t v = chance(rng, 2) ? interesting(rng, Kind::kU64) : near;
        std::memcpy(&stream[h + (chance(rng, 2) ? 0 : 8)], &v, 8);
        break;
      }
      case 4: stream = seeded_bytes(rng, pick(rng, 200)); break;                        // garbage
      default: break;
    }
    // The oracle: how the reader must read that stream (socket_reads.h's protocol).
    std::vector<int> want(k, 0);  // 1: succeeds with the bytes sent, -1: fails
    std::vector<std::string> want_bytes(k);
    std::vector<uint64_t> want_sample(k, 0);
    {
      size_t p = 0, i = 0;
      for (; i < k; ++i) {
        if (stream.size() - p < kReplyHeader) break;
        const char* h = stream.data() + p;
        uint32_t status, flags;
        std::memcpy(&status, h + 16, 4);
        std::memcpy(&flags, h + 20, 4);
        if (get64(h) != i + 1) break;
        if (status != 0) {
          want[i] = -1;
          p += kReplyHeader;
          continue;
        }
        if (get64(h + 8) != lens[i] || ((flags & kTrailer) != 0) != watched[i]) break;
        const uint64_t body = lens[i] + (watched[i] ? 8 : 0);
        if (stream.size() - p - kReplyHeader < body) break;
        want[i] = 1;
        want_bytes[i] = stream.substr(p + kReplyHeader, lens[i]);
        if (watched[i]) want_sample[i] = get64(stream.data() + p + kReplyHeader + lens[i]);
        p += kReplyHeader + body;
      }
      for (; i < k; ++i) want[i] = -1;  // the connection fails under them
    }
    out->inputs++;
    out->frames += k;
    // Run both ends: the reader's progress and the hostile server's writes, in this thread.
    transport::ReadConnection reader(transport::SocketEndpoint{s.port, {htonl(INADDR_LOOPBACK)}});
    std::vector<int> got(k, 0);
    std::vector<uint64_t> samples(k, 0);
    for (size_t i = 0; i < k; ++i) {
      transport::ReadWatch w{0x9000 + 8 * i, 43, i, i + 1, &samples[i]};
      reader.read(
          mem.data() + at[i], lens[i], 0x1000 * (i + 1), 42,
          [&got, i](bool ok, const std::string& e) { got[i] = ok && e.empty() ? 1 : -1; }, watched[i] ? &w : nullptr);
    }
    int conn = -1;
    size_t asked = 0, sent = 0;
    std::string requests;
    auto deadline = Clock::now() + std::chrono::milliseconds(kGuardMs);
    std::vector<pollfd> fds;
    std::vector<std::pair<transport::ReadConnection::Done, std::string>> completions;
    auto pending = [&] {
      for (int g : got)
        if (g == 0) return true;
      return false;
    };
    while (pending() && Clock::now() < deadline) {
      fds.clear();
      reader.add_fds(&fds);
      const size_t server_at = fds.size();
      fds.push_back({conn >= 0 ? conn : conn == -1 ? s.listen_fd : -1, static_cast<short>(conn >= 0 && asked >= 8 + kRequestBytes * k ? POLLOUT : POLLIN), 0});
      ::poll(fds.data(), fds.size(), 10);
      reader.progress(fds, &completions);
      for (auto& [cb, e] : completions) cb(e.empty(), e);
      completions.clear();
      const short re = fds[server_at].revents;
      if (conn == -1 && (re & POLLIN)) {
        conn = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      } else if (conn >= 0 && asked < 8 + kRequestBytes * k && (re & POLLIN)) {
        char buf[4096];
        ssize_t r = ::recv(conn, buf, sizeof buf, 0);
        if (r > 0) {
          requests.append(buf, static_cast<size_t>(r));
          asked += static_cast<size_t>(r);
        }
      } else if (conn >= 0 && asked >= 8 + kRequestBytes * k && sent < stream.size() && (re & POLLOUT)) {
        size_t piece = std::min(stream.size() - sent, 1 + static_cast<size_t>(pick(rng, 3000)));
        ssize_t w = ::send(conn, stream.data() + sent, piece, MSG_NOSIGNAL);
        if (w > 0) sent += static_cast<size_t>(w);
      }
      if (conn >= 0 && asked >= 8 + kRequestBytes * k && sent == stream.size()) {
        ::close(conn);  // the whole answer is out: the server goes
        conn = -2;
      }
    }
    if (conn >= 0) ::close(conn);
    if (pending()) {
      finding("reads still outstanding after the server closed: " + reader.error());
      continue;
    }
    // The reader asked what it was told to, greeting first.
    if (requests.size() < 8 + kRequestBytes * k || std::memcmp(requests.data(), kGreeting, 8) != 0) {
      finding("the reader's requests are not the protocol's");
    } else {
      for (size_t i = 0; i < k; ++i) {
        const char* q = requests.data() + 8 + kRequestBytes * i;
        const bool watch_ok = watched[i] ? get64(q + 32) == 0x9000 + 8 * i && get64(q + 40) == 43 &&
                                               get64(q + 48) == i && get64(q + 56) == i + 1
                                         : get64(q + 40) == 0;
        if (get64(q) != i + 1 || get64(q + 8) != 0x1000 * (i + 1) || get64(q + 16) != lens[i] || get64(q + 24) != 42 ||
            !watch_ok)
          finding("request " + std::to_string(i) + " is not the read asked for");
      }
    }
    for (size_t i = 0; i < k; ++i) {
      if (got[i] != want[i]) {
        finding("read " + std::to_string(i) + (got[i] > 0 ? " succeeded where the protocol says it fails"
                                                           : " failed where the protocol says it succeeds") +
                ": " + hex_head(stream));
      } else if (got[i] > 0 && std::memcmp(mem.data() + at[i], want_bytes[i].data(), lens[i]) != 0) {
        finding("read " + std::to_string(i) + " holds other bytes than the server sent");
      } else if (got[i] > 0 && watched[i] && samples[i] != want_sample[i]) {
        finding("read " + std::to_string(i) + " brought another word than the server sent behind its data");
      }
      if (got[i] < 0) out->refused++;
    }
    // Nothing written outside the destinations.
    for (size_t i = 0, p = 0; i <= k; ++i) {
      for (size_t b = 0; b < kGap; ++b)
        if (mem[p + b] != kCanary) {
          finding("the reader wrote outside its destination (after read " + std::to_string(i) + ")");
          break;
        }
      if (i < k) p = at[i] + lens[i];
    }
    out->answers[reader.failed() ? "sessions the reader closed" : "sessions the reader kept"]++;
  }
}

}  // namespace thub::fuzz
