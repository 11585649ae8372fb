// The vocabularies' tables (status codes, info keys, stat keys) rendered as text for people:
// tensorhub-info's listings, tensorhub-registry --help, and the lists kept in the public
// header, the README, docs/info-keys.md and the Fortran module (update_lists.cc rewrites
// them between their BEGIN/END GENERATED markers). Nothing here decides anything.
#pragma once

#include <string>

namespace thub::vocabulary {

// `what`: info-keys[:init|:open|:registry|:env] (init: THUB_Init's, registry keys
// included), registry-flags, stat-keys, status-codes. `format`: text, markdown, c-comment
// (lines of a Doxygen list inside a /** */ block), c-defines, fortran. Throws
// std::invalid_argument for a combination that does not exist.
std::string render(const std::string& what, const std::string& format);

// tensorhub-registry's settings, one or two lines each, for --help.
std::string registry_flags_help();

}  // namespace thub::vocabulary
