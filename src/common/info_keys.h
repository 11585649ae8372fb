// Every info key TensorHub reads, in one table: its name, where it applies, its type and
// default, and its documentation line. A key given to a call that does not know it is an
// error (a misspelt `auth_token` must not mean "no authentication"), and a TENSORHUB_<KEY>
// environment variable that names no key is reported once per process.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace thub {

class InfoMap;

enum class InfoScope {
  kContext,           // THUB_Init
  kEmbeddedRegistry,  // THUB_Init, used when the context starts the embedded registry
  kModel,             // THUB_Open
  kEnvironment,       // only read from TENSORHUB_<KEY> (no info key)
  kMemory,            // THUB_Alloc_mem (no keys yet)
};

struct InfoKeySpec {
  const char* name;
  InfoScope scope;
  const char* type;     // "string", "bool", "int", "size", or a choice "a|b|c"
  const char* dflt;     // the default, as text
  const char* doc;      // one line
};

// The whole table, in documentation order.
const std::vector<InfoKeySpec>& info_keys();

// Limits on what THUB_Info_set accepts (a key or value longer than this is THUB_ERR_ARG).
constexpr size_t kMaxInfoKeyBytes = 256;
constexpr size_t kMaxInfoValueBytes = 64 * 1024;
void check_info_text(const std::string& key, const std::string& value);  // throws Error(kArg)

// Throws Error(kArg) for a key of `info` that `call` (of `scope`; kContext also accepts the
// embedded registry's keys) does not read, naming the nearest known key. Also reports, once
// per process on stderr, TENSORHUB_* environment variables that name no key.
void check_info_keys(const InfoMap& info, InfoScope scope, const char* call);

// The known key nearest to `name` (edit distance <= 3), or "" when none is close.
std::string nearest_info_key(const std::string& name);

}  // namespace thub
