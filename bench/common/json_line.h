// One JSON object on one line, built field by field, for the benchmarks' machine-readable
// output. Numbers that were not measured (negative, NaN, infinite) are written as null, so
// a reader can tell "not measured" from zero.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace thub::bench {

class JsonLine {
 public:
  JsonLine& str(const char* key, const std::string& v) {
    std::string e;
    for (char c : v) {
      if (c == '"' || c == '\\') e += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) e += c;
    }
    return field(key, "\"" + e + "\"");
  }
  JsonLine& num(const char* key, double v, const char* fmt = "%.6g") {
    if (!std::isfinite(v) || v < 0) return field(key, "null");
    char b[64];
    std::snprintf(b, sizeof b, fmt, v);
    return field(key, b);
  }
  JsonLine& integer(const char* key, long long v) { return field(key, std::to_string(v)); }
  JsonLine& boolean(const char* key, bool v) { return field(key, v ? "true" : "false"); }
  JsonLine& raw(const char* key, const std::string& json) { return field(key, json); }
  [[nodiscard]] std::string text() const { return "{" + body_ + "}"; }

 private:
  JsonLine& field(const char* key, const std::string& v) {
    if (!body_.empty()) body_ += ',';
    body_ += '"';
    body_ += key;
    body_ += "\":";
    body_ += v;
    return *this;
  }
  std::string body_;
};

}  // namespace thub::bench
