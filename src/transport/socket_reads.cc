#include "src/transport/socket_reads.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "src/common/status.h"

namespace thub::transport {

namespace {
// Wire format (host byte order: both ends run the same build; the greeting tells otherwise).
// Reader -> server: the greeting, then requests {id, addr, len, token, watch_addr,
// watch_token, lo, hi} (8 x u64; watch_token 0: no watch).
// Server -> reader: per request, in order, {id, len, status (u32), flags (u32)}, then `len`
// bytes when status is 0, then, when flags has kTrailer, the watched word (u64) as it was
// after the data went into the socket. A watched reply is not begun while the word is in
// [lo, hi). (Greeting ...04: the same without the watch; its readers are refused.)
constexpr char kGreeting[8] = {'T', 'H', 'R', 'D', 0x01, 0x02, 0x03, 0x05};
constexpr size_t kRequestBytes = 64;
constexpr size_t kReplyHeader = 24;
constexpr size_t kTrailerBytes = 8;
constexpr uint32_t kNotServed = 1;
constexpr uint32_t kTrailer = 1;
// Replies queued per connection before the server stops reading its requests (a reader
// keeps max_inflight gets in flight per lane; this only bounds a misbehaving one).
constexpr size_t kMaxQueued = 4096;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void put64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint64_t get64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string ip_text(uint32_t ip) {
  char buf[INET_ADDRSTRLEN] = "?";
  in_addr a{};
  a.s_addr = ip;
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}
}  // namespace

std::vector<uint32_t> local_ipv4(const std::string& devices) {
  std::vector<std::string> names;
  for (size_t start = 0; start <= devices.size();) {
    size_t comma = devices.find(',', start);
    std::string d = devices.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!d.empty() && d != "all" && d.find(':') == std::string::npos) names.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<uint32_t> named, up;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
      uint32_t ip = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      if (std::find(names.begin(), names.end(), i->ifa_name) != names.end()) named.push_back(ip);
      if (!(i->ifa_flags & IFF_LOOPBACK)) up.push_back(ip);
    }
    freeifaddrs(list);
  }
  if (!named.empty()) return named;
  if (!up.empty()) return up;
  return {htonl(INADDR_LOOPBACK)};
}

// ---- ReadServer ------------------------------------------------------------------------

namespace {

// A listening socket on `ip`:`port` (port 0: any free one), or -1 with errno set.
int listen_on(uint32_t ip, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = ip;
  a.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 256) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

// One listening socket per advertised address, all on one port (the endpoint has one): a
// reader can reach the server only where it was told to, never on an interface the user
// did not name (docs/security.md). The port is the first address's free one; if another
// process holds it on a later address, the whole set is tried again.
ReadServer::ReadServer(std::vector<uint32_t> advertise, ReadServerLimits limits)
    : limits_(limits), advertise_(std::move(advertise)) {
  if (advertise_.empty()) throw Error(Code::kArg, "read server: no address to listen on");
  max_conns_ = limits_.max_connections;
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    max_conns_ = std::min<size_t>(max_conns_, std::max<size_t>(1, static_cast<size_t>(nofile.rlim_cur / 2)));
  std::string err;
  for (int attempt = 0; attempt < 16 && listen_fds_.empty(); ++attempt) {
    uint16_t port = 0;
    for (uint32_t ip : advertise_) {
      int fd = listen_on(ip, port);
      if (fd < 0) {
        err = errno_text("read server: bind/listen");
        break;
      }
      if (port == 0) {
        sockaddr_in a{};
        socklen_t alen = sizeof a;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen) != 0) {
          err = errno_text("read server: getsockname");
          ::close(fd);
          break;
        }
        port = ntohs(a.sin_port);
      }
      listen_fds_.push_back(fd);
    }
    if (listen_fds_.size() == advertise_.size()) {
      port_ = port;
      return;
    }
    for (int fd : listen_fds_) ::close(fd);
    listen_fds_.clear();
  }
  throw Error(Code::kTransport, err);
}

ReadServer::~ReadServer() {
  for (auto& c : conns_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  for (int fd : listen_fds_) ::close(fd);
}

void ReadServer::serve(uint64_t addr, uint64_t len, uint64_t token) { regions_[token] = {addr, len}; }

// The watched word is a counter another thread may store to (atomically: ProgressCounter).
static uint64_t load_watched(const uint64_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }

bool ReadServer::waiting(const Reply& r) {
  if (!r.watch || r.sent > 0) return false;
  const uint64_t v = load_watched(r.watch);
  return v >= r.lo && v < r.hi;
}

bool ReadServer::parked() const {
  for (const auto& c : conns_)
    if (c->fd >= 0 && !c->out.empty() && waiting(c->out.front())) return true;
  return false;
}

void ReadServer::withdraw(uint64_t token) {
  auto it = regions_.find(token);
  if (it == regions_.end()) return;
  const uint64_t addr = it->second.addr, end = addr + it->second.len;
  regions_.erase(it);
  for (auto& c : conns_) {
    for (const Reply& r : c->out) {
      auto p = reinterpret_cast<uint64_t>(r.data);
      auto w = reinterpret_cast<uint64_t>(r.watch);
      if ((r.len > 0 && p < end && p + r.len > addr) || (r.watch && w < end && w + 8 > addr)) {
        close_conn(*c);
        break;
      }
    }
  }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->fd < 0; }), conns_.end());
}

size_t ReadServer::pending() const { return pending_; }

// Keeps the per-peer counts: d = +1 when a connection is added, -1 when it goes; a pending
// one counts as pending too until it is authenticated.
void ReadServer::count(const Conn& c, int d) {
  auto bump = [d](std::map<uint32_t, size_t>& m, uint32_t ip) {
    if (d > 0) {
      ++m[ip];
    } else if (auto it = m.find(ip); it != m.end() && --it->second == 0) {
      m.erase(it);
    }
  };
  bump(per_peer_, c.ip);
  if (!c.authed) {
    bump(pending_per_peer_, c.ip);
    pending_ = d > 0 ? pending_ + 1 : pending_ - 1;
  }
}

void ReadServer::add_fds(std::vector<pollfd>* fds) {
  fd_base_ = fds->size();
  // While accepting is paused the listening sockets are not polled: one that stays readable
  // because no descriptor is left would wake the loop at once, for ever.
  const short listen_ev = accepting() ? POLLIN : 0;
  for (int fd : listen_fds_) fds->push_back({fd, listen_ev, 0});
  for (const auto& c : conns_) {
    short ev = c->out.size() < kMaxQueued ? POLLIN : 0;
    if (!c->out.empty() && !waiting(c->out.front())) ev |= POLLOUT;  // a parked reply: nothing to write yet
    fds->push_back({c->fd, ev, 0});
  }
  fd_count_ = fds->size() - fd_base_;
}

int ReadServer::progress(const std::vector<pollfd>& fds) {
  int n = 0;
  if (fd_count_ == 0 || fds.size() < fd_base_ + fd_count_) return 0;
  const size_t listening = listen_fds_.size();
  const size_t known = fd_count_ - listening;  // connections polled (accept may add more)
  for (size_t i = 0; i < known && i < conns_.size(); ++i) {
    Conn& c = *conns_[i];
    short re = fds[fd_base_ + listening + i].revents;
    if (!re || c.fd < 0) continue;
    n++;
    bool alive = true;
    if (re & (POLLIN | POLLHUP | POLLERR)) alive = read_requests(c);
    if (alive && !c.out.empty()) alive = write_replies(c);
    if (alive && c.out.size() < kMaxQueued && !c.in.empty()) parse_requests(c);  // held back by a full queue
    if (!alive) close_conn(c);
  }
  for (size_t i = 0; i < listening; ++i) {
    if (fds[fd_base_ + i].revents & POLLIN) {
      accept_all(listen_fds_[i]);
      n++;
    }
  }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->fd < 0; }), conns_.end());
  fd_count_ = 0;
  expire(Clock::now());
  return n;
}

void ReadServer::expire(Clock::time_point now) {
  if (now < next_expiry_) return;
  next_expiry_ = now + std::chrono::milliseconds(50);
  bool any = false;
  for (auto& c : conns_) {
    if (c->fd < 0) continue;
    const bool late = (!c->authed && now - c->since > limits_.pending_deadline) ||
                      (c->out.empty() && now - c->last_active > limits_.idle_deadline) ||
                      (!c->out.empty() && now - c->write_stuck > limits_.write_deadline);
    if (late) {
      close_conn(*c);
      any = true;
    }
  }
  if (any) conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->fd < 0; }), conns_.end());
}

void ReadServer::accept_all(int listen_fd) {
  for (;;) {
    sockaddr_in from{};
    socklen_t flen = sizeof from;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&from), &flen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        paused_until_ = Clock::now() + limits_.accept_pause;  // the backlog waits
      return;  // EAGAIN: none left
    }
    const uint32_t ip = from.sin_family == AF_INET ? from.sin_addr.s_addr : 0;
    auto at = [](const std::map<uint32_t, size_t>& m, uint32_t k) {
      auto it = m.find(k);
      return it == m.end() ? size_t{0} : it->second;
    };
    if (conns_.size() >= max_conns_ || pending_ >= limits_.max_pending || at(per_peer_, ip) >= limits_.max_per_peer ||
        at(pending_per_peer_, ip) >= limits_.max_pending_per_peer) {
      ::close(fd);  // over a cap: the peer sees its connection closed
      ++refused_;
      continue;
    }
    set_nodelay(fd);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->ip = ip;
    c->since = c->last_active = c->write_stuck = Clock::now();
    count(*c, +1);
    conns_.push_back(std::move(c));
  }
}

bool ReadServer::read_requests(Conn& c) {
  char buf[16384];
  for (;;) {
    ssize_t k = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (k > 0) {
      c.in.append(buf, static_cast<size_t>(k));
      if (c.in.size() >= sizeof buf * 4) break;  // parse before reading more
      continue;
    }
    if (k == 0) return false;  // the reader went away
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  if (!c.greeted) {
    if (c.in.size() < sizeof kGreeting) return true;
    if (std::memcmp(c.in.data(), kGreeting, sizeof kGreeting) != 0) return false;
    c.greeted = true;
    c.in.erase(0, sizeof kGreeting);
  }
  parse_requests(c);
  return true;
}

void ReadServer::parse_requests(Conn& c) {
  size_t pos = 0;
  for (; c.in.size() - pos >= kRequestBytes && c.out.size() < kMaxQueued; pos += kRequestBytes) {
    const char* q = c.in.data() + pos;
    uint64_t id = get64(q), addr = get64(q + 8), len = get64(q + 16), token = get64(q + 24);
    const uint64_t watch_addr = get64(q + 32), watch_token = get64(q + 40);
    Reply r{};
    put64(r.header, id);
    uint32_t status = kNotServed;
    auto inside = [this](uint64_t tok, uint64_t a, uint64_t n) {
      auto in = regions_.find(tok);
      if (in == regions_.end() || a < in->second.addr) return false;
      const uint64_t off = a - in->second.addr;
      return off <= in->second.len && n <= in->second.len - off;
    };
    auto it = regions_.find(token);
    if (inside(token, addr, len)) status = 0;
    // The watched word: 8 aligned bytes of a region this server serves, or the read fails.
    if (status == 0 && watch_token != 0) {
      if (watch_addr % 8 == 0 && inside(watch_token, watch_addr, 8)) {
        r.watch = reinterpret_cast<const uint64_t*>(watch_addr);
        r.lo = get64(q + 48);
        r.hi = get64(q + 56);
      } else {
        status = kNotServed;
      }
    }
    if (it != regions_.end() && !c.authed) {  // a token this server handed out: a credential
      count(c, -1);
      c.authed = true;
      count(c, +1);
    }
    c.last_active = Clock::now();
    if (c.out.empty()) c.write_stuck = c.last_active;
    r.data = status == 0 ? reinterpret_cast<const char*>(addr) : nullptr;
    r.len = status == 0 ? len : 0;
    put64(r.header + 8, r.len);
    std::memcpy(r.header + 16, &status, 4);
    const uint32_t flags = r.watch ? kTrailer : 0;
    std::memcpy(r.header + 20, &flags, 4);
    c.out.push_back(r);
  }
  c.in.erase(0, pos);
}

bool ReadServer::write_replies(Conn& c) {
  while (!c.out.empty()) {
    iovec iov[64];
    int n = 0;
    for (auto it = c.out.begin(); it != c.out.end() && n + 3 <= 64; ++it) {
      if (waiting(*it)) break;  // parked: it and the replies behind it wait for its word
      uint64_t s = it->sent;
      if (s < kReplyHeader) {
        iov[n++] = {it->header + s, kReplyHeader - s};
        s = kReplyHeader;
      }
      const uint64_t data_end = kReplyHeader + it->len;
      if (s < data_end) {
        uint64_t off = s - kReplyHeader;
        iov[n++] = {const_cast<char*>(it->data) + off, static_cast<size_t>(it->len - off)};
        // The sample must be read after these bytes are in the socket: in a later call.
        if (it->watch) break;
        continue;
      }
      if (it->watch) {
        if (!it->sampled) {
          // The data was copied into the socket by an earlier sendmsg: the word read now is
          // the seqlock's counter read after the data read.
          std::atomic_thread_fence(std::memory_order_acquire);
          put64(it->trailer, load_watched(it->watch));
          it->sampled = true;
        }
        iov[n++] = {it->trailer + (s - data_end), static_cast<size_t>(kTrailerBytes - (s - data_end))};
      }
    }
    if (n == 0) return true;  // the first reply is parked
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t k = ::sendmsg(c.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;  // else the reader is gone
    }
    auto left = static_cast<uint64_t>(k);
    if (left > 0) c.write_stuck = c.last_active = Clock::now();
    while (left > 0 && !c.out.empty()) {
      Reply& r = c.out.front();
      uint64_t want = r.total() - r.sent;
      uint64_t take = std::min(want, left);
      r.sent += take;
      left -= take;
      if (r.sent == r.total()) c.out.pop_front();
    }
  }
  return true;
}

void ReadServer::close_conn(Conn& c) {
  if (c.fd >= 0) {
    ::close(c.fd);
    count(c, -1);
  }
  c.fd = -1;
  c.out.clear();
  c.in.clear();
}

// ---- ReadConnection --------------------------------------------------------------------

ReadConnection::ReadConnection(SocketEndpoint to) : to_(std::move(to)) {
  out_.assign(kGreeting, sizeof kGreeting);
  while (next_ < to_.ipv4.size() && !start_connect()) next_++;
  if (fd_ < 0 && error_.empty()) error_ = "the source advertises no address for socket reads";
}

ReadConnection::~ReadConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool ReadConnection::start_connect() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error_ = errno_text("socket");
    return false;
  }
  set_nodelay(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(to_.port);
  a.sin_addr.s_addr = to_.ipv4[next_];
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    error_ = errno_text(("connect to " + ip_text(to_.ipv4[next_]) + ":" + std::to_string(to_.port)).c_str());
    ::close(fd);
    return false;
  }
  fd_ = fd;
  connected_ = false;
  return true;
}

void ReadConnection::read(void* local, uint64_t len, uint64_t remote, uint64_t token, Done done,
                          const ReadWatch* watch) {
  Op op{next_id_++, static_cast<char*>(local), len, std::move(done), watch ? watch->sample : nullptr};
  char q[kRequestBytes] = {};
  put64(q, op.id);
  put64(q + 8, remote);
  put64(q + 16, len);
  put64(q + 24, token);
  if (watch) {
    put64(q + 32, watch->addr);
    put64(q + 40, watch->token);
    put64(q + 48, watch->lo);
    put64(q + 56, watch->hi);
  }
  out_.append(q, sizeof q);
  ops_.push_back(std::move(op));
  if (connected_ && !flush()) {
    // The error shows at the next progress(), which completes the reads.
  }
}

void ReadConnection::add_fds(std::vector<pollfd>* fds) {
  fd_index_ = -1;
  if (fd_ < 0) return;
  short ev = POLLIN;
  if (!connected_ || out_sent_ < out_.size()) ev |= POLLOUT;
  fd_index_ = static_cast<long>(fds->size());
  fds->push_back({fd_, ev, 0});
}

bool ReadConnection::flush() {
  while (out_sent_ < out_.size()) {
    ssize_t k = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      out_sent_ += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    error_ = errno_text("send to the source");
    return false;
  }
  if (out_sent_ == out_.size() || out_sent_ > (1u << 16)) {
    out_.erase(0, out_sent_);
    out_sent_ = 0;
  }
  return true;
}

int ReadConnection::progress(const std::vector<pollfd>& fds, std::vector<std::pair<Done, std::string>>* done) {
  if (fd_ < 0 || fd_index_ < 0 || static_cast<size_t>(fd_index_) >= fds.size()) return 0;
  short re = fds[static_cast<size_t>(fd_index_)].revents;
  fd_index_ = -1;
  if (!re) return 0;
  if (!connected_) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (re & (POLLERR | POLLHUP))) {
      error_ = "connect to " + ip_text(to_.ipv4[next_]) + ":" + std::to_string(to_.port) + ": " +
               std::strerror(err ? err : ECONNREFUSED);
      ::close(fd_);
      fd_ = -1;
      for (next_++; next_ < to_.ipv4.size(); next_++) {
        if (start_connect()) return 1;
      }
      close(error_, done);
      return 1;
    }
    connected_ = true;
  }
  if (!flush() || !receive(done)) close(error_, done);
  return 1;
}

bool ReadConnection::receive(std::vector<std::pair<Done, std::string>>* done) {
  for (;;) {
    ssize_t k;
    if (hdr_got_ < kReplyHeader) {
      k = ::recv(fd_, hdr_ + hdr_got_, kReplyHeader - hdr_got_, MSG_DONTWAIT);
      if (k > 0) {
        hdr_got_ += static_cast<size_t>(k);
        if (hdr_got_ < kReplyHeader) continue;
        if (ops_.empty() || get64(hdr_) != ops_.front().id) {
          error_ = "the source answered a read that was not asked for";
          return false;
        }
        uint32_t status, flags;
        std::memcpy(&status, hdr_ + 16, 4);
        std::memcpy(&flags, hdr_ + 20, 4);
        if (status == 0 && get64(hdr_ + 8) != ops_.front().len) {
          error_ = "the source answered a read with the wrong length";
          return false;
        }
        if (status == 0 && ((flags & kTrailer) != 0) != (ops_.front().sample != nullptr)) {
          error_ = "the source answered a read with a sample it was not asked for (or without one)";
          return false;
        }
        if (status != 0) {
          // The region is not (or no longer) served: this read fails, the connection stays.
          done->push_back({std::move(ops_.front().done), "the source does not serve that memory (any more)"});
          ops_.pop_front();
          hdr_got_ = 0;
        }
        data_got_ = 0;
        trailer_got_ = 0;
        continue;
      }
    } else {
      Op& op = ops_.front();
      const bool whole = data_got_ == op.len && (!op.sample || trailer_got_ == kTrailerBytes);
      if (whole) {
        if (op.sample) *op.sample = get64(trailer_);
        done->push_back({std::move(op.done), std::string()});
        ops_.pop_front();
        hdr_got_ = 0;
        continue;
      }
      if (data_got_ < op.len) {
        k = ::recv(fd_, op.dst + data_got_, static_cast<size_t>(op.len - data_got_), MSG_DONTWAIT);
        if (k > 0) data_got_ += static_cast<uint64_t>(k);
      } else {
        k = ::recv(fd_, trailer_ + trailer_got_, kTrailerBytes - trailer_got_, MSG_DONTWAIT);
        if (k > 0) trailer_got_ += static_cast<size_t>(k);
      }
      if (k > 0) continue;
    }
    if (k == 0) {
      error_ = "the source closed the connection";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    error_ = errno_text("receive from the source");
    return false;
  }
}

void ReadConnection::close(const std::string& why, std::vector<std::pair<Done, std::string>>* done) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (error_.empty()) error_ = why;
  for (auto& op : ops_) done->push_back({std::move(op.done), why});
  ops_.clear();
  hdr_got_ = 0;
}

}  // namespace thub::transport
