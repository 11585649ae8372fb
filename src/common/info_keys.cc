#include "src/common/info_keys.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "src/common/info.h"
#include "src/common/nearest_name.h"
#include "src/common/status.h"

extern char** environ;

namespace thub {

namespace {

// ---- the table, checked at compile time ----------------------------------------------------

constexpr bool is_key_name(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

constexpr bool default_fits(const InfoKeySpec& k, std::string_view d) {
  switch (k.type) {
    case InfoType::kString:
      return true;
    case InfoType::kBool:
      return parse_bool_text(d) >= 0;
    case InfoType::kChoice:
      return *k.choices != '\0' && is_choice(k.choices, d);
    case InfoType::kInt:
    case InfoType::kSize: {
      ParsedNumber p = k.type == InfoType::kInt ? parse_int_text(d) : parse_size_text(d);
      return k.min <= k.max && p.ok && p.value >= k.min && p.value <= k.max;
    }
  }
  return false;
}

constexpr size_t first_bad_row() {
  constexpr unsigned kKnown = static_cast<unsigned>(InfoScope::kContext) | static_cast<unsigned>(InfoScope::kRegistry) |
                              static_cast<unsigned>(InfoScope::kModel) | static_cast<unsigned>(InfoScope::kEnvironment);
  for (size_t i = 0; i < kInfoKeyCount; ++i) {
    const InfoKeySpec& k = kInfoKeys[i];
    if (!is_key_name(k.name) || *k.doc == '\0' || k.scopes == 0 || (k.scopes & ~kKnown) != 0) return i;
    // An environment-only key is nothing else; a flag or daemon default only on registry keys.
    if (has_scope(k, InfoScope::kEnvironment) && k.scopes != static_cast<unsigned>(InfoScope::kEnvironment)) return i;
    if ((*k.flag != '\0' || k.daemon_dflt) && !has_scope(k, InfoScope::kRegistry)) return i;
    if (!default_fits(k, k.dflt) || (k.daemon_dflt && !default_fits(k, k.daemon_dflt))) return i;
    for (size_t j = i + 1; j < kInfoKeyCount; ++j) {
      if (std::string_view(k.name) == kInfoKeys[j].name) return j;
    }
  }
  return kInfoKeyCount;
}
// A failure here: the row first_bad_row() names has a malformed name, no doc line, an
// unknown scope, a default that does not parse or lies outside [min, max], or a duplicate name.
static_assert(first_bad_row() == kInfoKeyCount, "kInfoKeys: a malformed row");
static_assert(kInfoKeyCount < 65536, "InfoKey is 16 bits");

// Does a call of `scope` read key `k`? THUB_Init reads the context's keys and the registry's
// (for its embedded registry).
bool applies(const InfoKeySpec& k, InfoScope scope) {
  switch (scope) {
    case InfoScope::kContext:
      return has_scope(k, InfoScope::kContext) || has_scope(k, InfoScope::kRegistry);
    case InfoScope::kRegistry:
      return has_scope(k, InfoScope::kRegistry);
    case InfoScope::kModel:
      return has_scope(k, InfoScope::kModel);
    case InfoScope::kEnvironment:
    case InfoScope::kMemory:
      break;
  }
  return false;
}

// Where a key that `scope` does not read is read instead, for the message.
std::string read_by(const InfoKeySpec& k) {
  if (has_scope(k, InfoScope::kEnvironment)) {
    return "it is read from the environment only, as " + environment_name(k.name);
  }
  if (has_scope(k, InfoScope::kModel)) return "it is a key of THUB_Open";
  if (has_scope(k, InfoScope::kRegistry)) return "it is a key of THUB_Init and tensorhub-registry";
  return "it is a key of THUB_Init";
}

std::vector<std::string_view> all_names() {
  std::vector<std::string_view> v;
  for (const auto& k : kInfoKeys) v.emplace_back(k.name);
  return v;
}

void warn_unknown_environment() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; ++e) {
      const char* kv = *e;
      if (std::strncmp(kv, "TENSORHUB_", 10) != 0) continue;
      const char* eq = std::strchr(kv, '=');
      std::string name(kv + 10, eq ? static_cast<size_t>(eq - kv - 10) : std::strlen(kv + 10));
      std::string key;
      for (char c : name) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (find_info_key(key)) continue;
      std::string hint;
      if (std::string near = nearest_info_key(key); !near.empty()) {
        hint = " (did you mean " + environment_name(near) + "?)";
      }
      std::fprintf(stderr, "tensorhub: warning: TENSORHUB_%s names no setting and is ignored%s\n", name.c_str(),
                   hint.c_str());
    }
  });
}
}  // namespace

const InfoKeySpec* find_info_key(std::string_view name) {
  for (const auto& k : kInfoKeys) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string environment_name(std::string_view key) {
  std::string n = "TENSORHUB_";
  for (char c : key) n += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return n;
}

std::string registry_flag(const InfoKeySpec& k) {
  std::string f = "--";
  for (const char* p = k.name; *p; ++p) f += *p == '_' ? '-' : *p;
  return f;
}

void check_info_text(const std::string& key, const std::string& value) {
  if (key.size() > kMaxInfoKeyBytes) {
    throw Error(Code::kArg, "info key of " + std::to_string(key.size()) + " bytes is longer than " +
                                std::to_string(kMaxInfoKeyBytes));
  }
  if (value.size() > kMaxInfoValueBytes) {
    throw Error(Code::kArg, "the value of info key '" + key + "' (" + std::to_string(value.size()) +
                                " bytes) is longer than " + std::to_string(kMaxInfoValueBytes));
  }
}

std::string nearest_info_key(const std::string& name) {
  static const std::vector<std::string_view> names = all_names();
  return nearest_name(name, names);
}

void check_info_keys(const InfoMap& info, InfoScope scope, const char* call) {
  warn_unknown_environment();
  for (const auto& [key, value] : info.entries()) {
    const InfoKeySpec* k = find_info_key(key);
    if (k && applies(*k, scope)) continue;
    std::string why = std::string(call) + ": unknown info key '" + key + "'";
    if (k) {
      why += " (" + read_by(*k) + ")";
    } else if (std::string near = nearest_info_key(key); !near.empty()) {
      why += " (did you mean '" + near + "'?)";
    }
    throw Error(Code::kArg, why);
  }
}

}  // namespace thub
