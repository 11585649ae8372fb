// A registry stand-in that speaks the wire format but misbehaves on purpose: it may never
// answer HELLO, stop answering heartbeats, or never answer requests, while its socket stays
// open (as a stopped process's would: the kernel accepts and buffers). For tests of the
// client's deadlines; it counts what it saw so that tests wait for states, not for time.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "src/registry/byte_queue.h"
#include "src/registry/protocol.h"
#include "src/registry/socket.h"

namespace thub::registry::test {

class FakeRegistry {
 public:
  std::atomic<bool> answer_hello{true};
  std::atomic<bool> answer_heartbeats{true};
  std::atomic<bool> answer_requests{false};
  std::atomic<uint64_t> heartbeats_answered{0};
  std::atomic<uint64_t> requests_seen{0};

  FakeRegistry() {
    uint16_t port = 0;
    listener_ = listen_tcp(parse_host_port("127.0.0.1:0"), &port);
    address_ = "127.0.0.1:" + std::to_string(port);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeRegistry() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] const std::string& address() const { return address_; }
  // Answers nothing any more (heartbeats included); the sockets stay open.
  void go_silent() {
    answer_hello = false;
    answer_heartbeats = false;
    answer_requests = false;
  }

 private:
  struct Peer {
    Fd fd;
    ByteQueue in;
  };
  void loop() {
    std::vector<Peer> peers;
    while (!stop_) {
      std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
      for (auto& p : peers) fds.push_back({p.fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      size_t polled = peers.size();  // a peer accepted below has no pollfd yet
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) peers.push_back(Peer{Fd(fd), {}});
      }
      for (size_t i = 0; i < polled; ++i) {
        if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[65536];
        ssize_t k = ::recv(peers[i].fd.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (k > 0) peers[i].in.append(buf, static_cast<size_t>(k));
        while (peers[i].in.size() >= kHeaderBytes) {
          FrameHeader h = decode_header(peers[i].in.view().substr(0, kHeaderBytes));
          if (peers[i].in.size() < kHeaderBytes + h.length) break;
          peers[i].in.consume(kHeaderBytes + h.length);
          answer(peers[i].fd.get(), h);
        }
      }
    }
  }
  void answer(int fd, const FrameHeader& h) {
    sched::Reply r{};
    if (h.type == MsgType::kHello) {
      if (answer_hello) send(fd, encode_frame(MsgType::kReply, h.req, encode_reply(r)));
    } else if (h.type == MsgType::kHeartbeat) {
      if (answer_heartbeats) {
        send(fd, encode_frame(MsgType::kHeartbeat, h.req, ""));
        ++heartbeats_answered;
      }
    } else {
      ++requests_seen;
      if (answer_requests) send(fd, encode_frame(MsgType::kReply, h.req, encode_reply(r)));
    }
  }
  static void send(int fd, const std::string& f) { write_all(fd, f.data(), f.size()); }

  Fd listener_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace thub::registry::test
