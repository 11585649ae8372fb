// Key/value hints (THUB_Info) and the one place where TENSORHUB_<KEY> environment
// variables overlay them: an explicit info value wins over the environment. Values are read
// through the info key table (info_keys.h): its type, default and range.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/info_keys.h"

namespace thub {

class InfoMap {
 public:
  void set(const std::string& key, const std::string& value) { kv_[key] = value; }
  bool erase(const std::string& key) { return kv_.erase(key) > 0; }
  [[nodiscard]] const std::map<std::string, std::string>& entries() const { return kv_; }

  // The value of `key`: the info's, else TENSORHUB_<KEY>'s, else nullopt.
  [[nodiscard]] std::optional<std::string> lookup(std::string_view key) const;

  // The value of key K (info_key("name")), typed by the table: bool, int64_t (int), uint64_t
  // (size), std::string (string, choice); the table's default when unset. A malformed or
  // out-of-range value throws Error(kArg) naming the key, the value and what is expected.
  template <InfoKey K>
  [[nodiscard]] auto get() const {
    constexpr InfoType t = spec(K).type;
    if constexpr (t == InfoType::kBool) {
      return get_bool(spec(K));
    } else if constexpr (t == InfoType::kInt) {
      return get_int(spec(K));
    } else if constexpr (t == InfoType::kSize) {
      return get_size(spec(K));
    } else {
      return get_string(spec(K));
    }
  }

 private:
  [[nodiscard]] bool get_bool(const InfoKeySpec& k) const;
  [[nodiscard]] int64_t get_int(const InfoKeySpec& k) const;
  [[nodiscard]] uint64_t get_size(const InfoKeySpec& k) const;
  [[nodiscard]] std::string get_string(const InfoKeySpec& k) const;

  std::map<std::string, std::string> kv_;
};

}  // namespace thub
