// Errors inside the library: an exception that carries a THUB_* status and a detail text.
// src/capi/ catches it at the C boundary; nothing else crosses the API.
#pragma once

#include <stdexcept>
#include <string>

namespace thub {

// Same numbers as the THUB_* status codes of include/tensorhub/tensorhub.h.
enum class Code : int {
  kSuccess = 0,
  kInProgress = 1,
  kNotUpdated = 2,
  kArg = -1,
  kState = -2,
  kNotFound = -3,
  kLayout = -4,
  kTransport = -5,
  kRegistry = -6,
  kTimeout = -7,
  kNoMemory = -8,
  kUnsupported = -9,
  kAuth = -10,
  kVersionLost = -11,
  kCanceled = -12,
  kInternal = -99,
};

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& detail) : std::runtime_error(detail), code_(code) {}
  [[nodiscard]] Code code() const { return code_; }

 private:
  Code code_;
};

// The one table of status codes: number, name, hint. THUB_* in the public header,
// thub::Code here and sched::Status are checked against it at compile time
// (src/capi/capi.cc, src/client/member_machine.cc).
struct CodeText {
  int code;
  const char* name;
  const char* hint;
};
extern const CodeText kCodeTexts[];
extern const size_t kCodeTextCount;

// Name of a status code ("THUB_ERR_LAYOUT") and a one-line hint; never null.
const char* code_name(int code);
const char* code_hint(int code);

}  // namespace thub
