#include "bench/transfer/channel.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace thub::bench {

namespace {
void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw std::runtime_error(std::string("channel write: ") + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) throw std::runtime_error("channel: the other process closed it");
    if (k < 0) throw std::runtime_error(std::string("channel read: ") + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}
}  // namespace

MessageWriter& MessageWriter::u64(uint64_t v) {
  buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
  return *this;
}

MessageWriter& MessageWriter::bytes(const std::string& s) {
  u64(s.size());
  buf_.append(s);
  return *this;
}

uint64_t MessageReader::u64() {
  uint64_t v = 0;
  if (buf_.size() - pos_ < sizeof v) throw std::runtime_error("channel: short message");
  std::memcpy(&v, buf_.data() + pos_, sizeof v);
  pos_ += sizeof v;
  return v;
}

std::string MessageReader::bytes() {
  uint64_t n = u64();
  if (buf_.size() - pos_ < n) throw std::runtime_error("channel: short message");
  std::string s = buf_.substr(pos_, n);
  pos_ += n;
  return s;
}

Channel::~Channel() {
  if (fd_ >= 0) ::close(fd_);
}

void Channel::send(const std::string& msg) {
  uint64_t n = msg.size();
  write_all(fd_, reinterpret_cast<const char*>(&n), sizeof n);
  write_all(fd_, msg.data(), msg.size());
}

std::string Channel::recv() {
  uint64_t n = 0;
  read_all(fd_, reinterpret_cast<char*>(&n), sizeof n);
  std::string msg(n, '\0');
  read_all(fd_, msg.data(), n);
  return msg;
}

bool Channel::readable() const {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

}  // namespace thub::bench
