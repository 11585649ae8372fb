#include "src/registry/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "src/common/status.h"

namespace thub::registry {

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

HostPort parse_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) throw Error(Code::kArg, "address '" + s + "' is not host:port");
  HostPort hp;
  hp.host = s.substr(0, colon);
  std::string port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    throw Error(Code::kArg, "address '" + s + "': bad port '" + port + "'");
  }
  unsigned long p = std::stoul(port);
  if (p > 65535) throw Error(Code::kArg, "address '" + s + "': port out of range");
  hp.port = static_cast<uint16_t>(p);
  if (hp.host == "*") hp.host.clear();
  return hp;
}

std::vector<HostPort> parse_address_list(const std::string& s) {
  std::vector<HostPort> out;
  std::istringstream is(s);
  std::string item;
  while (std::getline(is, item, ',')) {
    if (!item.empty()) out.push_back(parse_host_port(item));
  }
  if (out.empty()) throw Error(Code::kArg, "registry address list '" + s + "' is empty");
  return out;
}

namespace {
addrinfo* resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = getaddrinfo(hp.host.empty() ? nullptr : hp.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    throw Error(passive ? Code::kArg : Code::kRegistry,
                "cannot resolve '" + hp.host + "': " + gai_strerror(rc));
  }
  return res;
}
}  // namespace

Fd listen_tcp(const HostPort& hp, uint16_t* bound_port) {
  addrinfo* res = resolve(hp, true);
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    freeaddrinfo(res);
    throw Error(Code::kRegistry, std::string("socket: ") + std::strerror(errno));
  }
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
    int e = errno;
    freeaddrinfo(res);
    throw Error(Code::kRegistry, "cannot listen on " + hp.host + ":" + std::to_string(hp.port) + ": " +
                                     std::strerror(e));
  }
  freeaddrinfo(res);
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  if (bound_port) *bound_port = ntohs(sa.sin_port);
  return fd;
}

Fd connect_tcp(const HostPort& hp, int timeout_ms) {
  std::string name = hp.host + ":" + std::to_string(hp.port);
  addrinfo* res = resolve(hp, false);
  Fd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    freeaddrinfo(res);
    throw Error(Code::kRegistry, std::string("socket: ") + std::strerror(errno));
  }
  int rc = ::connect(fd.get(), res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (rc != 0 && errno != EINPROGRESS) {
    throw Error(Code::kRegistry, "cannot connect to registry " + name + ": " + std::strerror(errno));
  }
  if (rc != 0) {
    pollfd p{fd.get(), POLLOUT, 0};
    int n = ::poll(&p, 1, timeout_ms);
    if (n <= 0) throw Error(Code::kRegistry, "cannot connect to registry " + name + ": timed out");
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) throw Error(Code::kRegistry, "cannot connect to registry " + name + ": " + std::strerror(err));
  }
  int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

std::string advertised_host(const std::string& bound_host) {
  if (!bound_host.empty() && bound_host != "0.0.0.0") return bound_host;
  // All interfaces: advertise the first up, non-loopback IPv4 address, else loopback.
  ifaddrs* ifs = nullptr;
  std::string out = "127.0.0.1";
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
      char buf[INET_ADDRSTRLEN];
      auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
      if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) {
        out = buf;
        break;
      }
    }
    freeifaddrs(ifs);
  }
  return out;
}

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

}  // namespace thub::registry
