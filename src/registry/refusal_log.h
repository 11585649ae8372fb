// Every refusal of the registry (a connection over a cap, a missing HELLO, a stalled frame,
// unread replies, accept failing) is logged to stderr, also when not verbose, but at most one
// line per kind per interval, so that a flood of bad clients cannot flood the log: the next
// line of a kind says how many were left out. No sockets here.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace thub::registry {

class RefusalLog {
 public:
  explicit RefusalLog(int64_t interval_ms = 1000) : interval_ms_(interval_ms) {}
  // Writes "tensorhub-registry: <line>" unless a line of `kind` was written less than the
  // interval ago (then counts it).
  void add(const std::string& kind, const std::string& line, int64_t now_ms);
  [[nodiscard]] uint64_t total() const { return total_; }

 private:
  struct Kind {
    int64_t last_ms = 0;
    bool written = false;
    uint64_t left_out = 0;
  };
  int64_t interval_ms_;
  std::map<std::string, Kind> kinds_;
  uint64_t total_ = 0;
};

}  // namespace thub::registry
