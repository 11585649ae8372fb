// A message channel between the two processes of a transfer benchmark: length-prefixed
// messages over one end of a socketpair. Used to exchange addresses and rkeys and to order
// the steps of the two roles without files or sleeps.
#pragma once

#include <cstdint>
#include <string>

namespace thub::bench {

// Builds a message out of fields (u64 numbers and byte strings).
class MessageWriter {
 public:
  MessageWriter& u64(uint64_t v);
  MessageWriter& bytes(const std::string& s);
  [[nodiscard]] const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

// Reads the fields back in the order they were written; throws on a short message.
class MessageReader {
 public:
  explicit MessageReader(std::string msg) : buf_(std::move(msg)) {}
  uint64_t u64();
  std::string bytes();

 private:
  std::string buf_;
  size_t pos_ = 0;
};

class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  void send(const std::string& msg);            // throws std::runtime_error
  std::string recv();                           // blocks; throws on EOF
  [[nodiscard]] bool readable() const;          // a message (or EOF) is waiting

 private:
  int fd_;
};

}  // namespace thub::bench
