// Key/value hints (THUB_Info) and the one place where TENSORHUB_<KEY> environment
// variables overlay them: an explicit info value wins over the environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace thub {

class InfoMap {
 public:
  void set(const std::string& key, const std::string& value) { kv_[key] = value; }
  bool erase(const std::string& key) { return kv_.erase(key) > 0; }
  [[nodiscard]] const std::map<std::string, std::string>& entries() const { return kv_; }

  // The value of `key`: the info's, else TENSORHUB_<KEY>'s, else nullopt.
  [[nodiscard]] std::optional<std::string> lookup(const std::string& key) const;

  // Typed getters; a malformed value throws Error(kArg) naming the key and value.
  [[nodiscard]] std::string get_string(const std::string& key, const std::string& dflt) const;
  [[nodiscard]] bool get_bool(const std::string& key, bool dflt) const;
  [[nodiscard]] int64_t get_int(const std::string& key, int64_t dflt, int64_t min, int64_t max) const;
  // Sizes accept a K/M/G suffix (powers of two): "4M", "512k", "1G".
  [[nodiscard]] uint64_t get_size(const std::string& key, uint64_t dflt, uint64_t min, uint64_t max) const;
  // One of `choices` (a |-separated list such as "auto|direct|copy|tcp").
  [[nodiscard]] std::string get_choice(const std::string& key, const std::string& dflt,
                                       const std::string& choices) const;

 private:
  std::map<std::string, std::string> kv_;
};

// Parsers shared with tools (throw Error(kArg) on bad input).
bool parse_bool(const std::string& key, const std::string& v);
uint64_t parse_size(const std::string& key, const std::string& v);

}  // namespace thub
