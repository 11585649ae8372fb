#include "src/common/nearest_name.h"

#include <algorithm>

namespace thub {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string_view>& known) {
  std::string_view best;
  size_t best_d = std::min<size_t>(4, name.size());  // "x" is near everything short: no hint
  for (std::string_view k : known) {
    size_t d = edit_distance(name, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return std::string(best);
}

}  // namespace thub
