#include "src/common/info.h"

#include <cstdlib>

#include "src/common/status.h"

namespace thub {

namespace {
[[noreturn]] void bad(const InfoKeySpec& k, const std::string& v, const std::string& want) {
  throw Error(Code::kArg, "info key '" + std::string(k.name) + "': value '" + v + "' is not " + want);
}

std::string range_text(const InfoKeySpec& k, const char* what, const char* unit) {
  return std::string(what) + " in [" + std::to_string(k.min) + ", " + std::to_string(k.max) + "]" + unit;
}
}  // namespace

std::optional<std::string> InfoMap::lookup(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  if (it != kv_.end()) return it->second;
  if (const char* e = std::getenv(environment_name(key).c_str())) return std::string(e);
  return std::nullopt;
}

bool InfoMap::get_bool(const InfoKeySpec& k) const {
  std::string v = lookup(k.name).value_or(k.dflt);
  int b = parse_bool_text(v);
  if (b < 0) bad(k, v, "a boolean (true/false, 1/0, yes/no, on/off)");
  return b == 1;
}

int64_t InfoMap::get_int(const InfoKeySpec& k) const {
  std::string v = lookup(k.name).value_or(k.dflt);
  ParsedNumber p = parse_int_text(v);
  if (!p.ok) bad(k, v, "an integer");
  if (p.value < k.min || p.value > k.max) bad(k, v, range_text(k, "an integer", ""));
  return p.value;
}

uint64_t InfoMap::get_size(const InfoKeySpec& k) const {
  std::string v = lookup(k.name).value_or(k.dflt);
  ParsedNumber p = parse_size_text(v);
  if (!p.ok) bad(k, v, "a size (digits with an optional K, M, G or T suffix)");
  if (p.value < k.min || p.value > k.max) bad(k, v, range_text(k, "a size", " bytes"));
  return static_cast<uint64_t>(p.value);
}

std::string InfoMap::get_string(const InfoKeySpec& k) const {
  std::string v = lookup(k.name).value_or(k.dflt);
  if (k.type == InfoType::kChoice && !is_choice(k.choices, v)) bad(k, v, std::string("one of ") + k.choices);
  return v;
}

}  // namespace thub
