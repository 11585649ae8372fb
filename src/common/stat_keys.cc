#include "src/common/stat_keys.h"

#include <string>
#include <vector>

#include "src/common/nearest_name.h"
#include "src/common/status.h"

namespace thub {

namespace {
constexpr bool names_unique() {
  for (size_t i = 0; i < kStatKeyCount; ++i) {
    if (*kStatKeys[i].doc == '\0') return false;
    for (size_t j = i + 1; j < kStatKeyCount; ++j) {
      if (std::string_view(kStatKeys[i].name) == kStatKeys[j].name) return false;
    }
  }
  return true;
}
static_assert(names_unique(), "kStatKeys: a duplicate name or an empty doc line");
static_assert(kStatKeyCount < 256, "StatKey is 8 bits");
}  // namespace

StatKey find_stat_key(std::string_view name) {
  std::vector<std::string_view> names;
  for (size_t i = 0; i < kStatKeyCount; ++i) {
    if (name == kStatKeys[i].name) return static_cast<StatKey>(i);
    names.emplace_back(kStatKeys[i].name);
  }
  std::string why = "THUB_Model_stat: unknown key '" + std::string(name) + "'";
  if (std::string near = nearest_name(name, names); !near.empty()) why += " (did you mean '" + near + "'?)";
  throw Error(Code::kArg, why);
}

}  // namespace thub
