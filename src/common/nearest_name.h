// "Did you mean ...?": the known name nearest to a misspelt one, for every vocabulary that
// refuses unknown names (info keys, THUB_Model_stat keys).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace thub {

// Levenshtein distance between two names.
size_t edit_distance(std::string_view a, std::string_view b);

// The name of `known` nearest to `name` (edit distance <= 3 and less than name's length),
// or "" when none is close.
std::string nearest_name(std::string_view name, const std::vector<std::string_view>& known);

}  // namespace thub
