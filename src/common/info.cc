#include "src/common/info.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "src/common/status.h"

namespace thub {

namespace {
std::string env_name(const std::string& key) {
  std::string n = "TENSORHUB_";
  for (char c : key) n += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return n;
}

[[noreturn]] void bad(const std::string& key, const std::string& v, const std::string& want) {
  throw Error(Code::kArg, "info key '" + key + "': value '" + v + "' is not " + want);
}
}  // namespace

std::optional<std::string> InfoMap::lookup(const std::string& key) const {
  auto it = kv_.find(key);
  if (it != kv_.end()) return it->second;
  if (const char* e = std::getenv(env_name(key).c_str())) return std::string(e);
  return std::nullopt;
}

std::string InfoMap::get_string(const std::string& key, const std::string& dflt) const {
  auto v = lookup(key);
  return v ? *v : dflt;
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  bad(key, v, "a boolean (true/false, 1/0, yes/no, on/off)");
}

bool InfoMap::get_bool(const std::string& key, bool dflt) const {
  auto v = lookup(key);
  return v ? parse_bool(key, *v) : dflt;
}

int64_t InfoMap::get_int(const std::string& key, int64_t dflt, int64_t min, int64_t max) const {
  auto v = lookup(key);
  if (!v) return dflt;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0) bad(key, *v, "an integer");
  if (x < min || x > max) {
    std::ostringstream os;
    os << "an integer in [" << min << ", " << max << "]";
    bad(key, *v, os.str());
  }
  return x;
}

uint64_t parse_size(const std::string& key, const std::string& v) {
  if (v.empty() || !std::isdigit(static_cast<unsigned char>(v[0]))) bad(key, v, "a size");
  errno = 0;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (errno != 0) bad(key, v, "a size");
  std::string suffix(end);
  unsigned shift = 0;
  if (suffix == "" || suffix == "B" || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "K" || suffix == "KiB") shift = 10;
  else if (suffix == "m" || suffix == "M" || suffix == "MiB") shift = 20;
  else if (suffix == "g" || suffix == "G" || suffix == "GiB") shift = 30;
  else bad(key, v, "a size (digits with an optional K, M or G suffix)");
  if (shift && x > (~0ull >> shift)) bad(key, v, "a size that fits in 64 bits");
  return static_cast<uint64_t>(x) << shift;
}

uint64_t InfoMap::get_size(const std::string& key, uint64_t dflt, uint64_t min, uint64_t max) const {
  auto v = lookup(key);
  if (!v) return dflt;
  uint64_t x = parse_size(key, *v);
  if (x < min || x > max) {
    std::ostringstream os;
    os << "a size in [" << min << ", " << max << "] bytes";
    bad(key, *v, os.str());
  }
  return x;
}

std::string InfoMap::get_choice(const std::string& key, const std::string& dflt,
                                const std::string& choices) const {
  auto v = lookup(key);
  if (!v) return dflt;
  std::istringstream is(choices);
  std::string c;
  while (std::getline(is, c, '|')) {
    if (c == *v) return c;
  }
  bad(key, *v, "one of " + choices);
}

}  // namespace thub
