// Errors inside the library: an exception that carries a THUB_* status and a detail text.
// src/capi/ catches it at the C boundary; nothing else crosses the API.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace thub {

// The one table of status codes, in the public header's order: the internal code, the
// public name, its number (fixed for ever), what it means (the header's line) and what to do
// about it (the hint). thub::Code and kCodeTexts below are made from it; src/capi/capi.cc
// checks every public THUB_* number against it at compile time, and the header's #defines
// and the Fortran module's parameters are generated from it (tools/vocabulary/).
// ROW(code, NAME, number, message, hint)
#define THUB_STATUS_TABLE(ROW)                                                                                \
  ROW(kSuccess, THUB_SUCCESS, 0, "done", "nothing to do")                                                   \
  ROW(kInProgress, THUB_IN_PROGRESS, 1, "a nonblocking operation is not finished yet", "test or wait again") \
  ROW(kNotUpdated, THUB_NOT_UPDATED, 2,                                                                     \
      "THUB_Update: nothing newer than the held version is available (not an error)",                     \
      "the replica still holds and serves its version")                                                     \
  ROW(kArg, THUB_ERR_ARG, -1, "a bad argument (null handle, negative size, bad info key or value)",          \
      "THUB_Last_error names the argument; an unknown key comes with the nearest known one")                \
  ROW(kState, THUB_ERR_STATE, -2, "not allowed now (register after publish, publish twice, ...)",            \
      "check the order of register/publish/replicate/unpublish")                                            \
  ROW(kNotFound, THUB_ERR_NOT_FOUND, -3, "no such model / version (never published, or dropped)",            \
      "was it published, or already dropped?")                                                              \
  ROW(kLayout, THUB_ERR_LAYOUT, -4, "registered tensors do not match the source's",                          \
      "register the same names and sizes in the same order, with the same compaction_threshold, on every "  \
      "replica")                                                                                            \
  ROW(kTransport, THUB_ERR_TRANSPORT, -5, "the data plane failed and no other source could finish",         \
      "UCX could not start, or every source failed: THUB_Last_error names the peer")                        \
  ROW(kRegistry, THUB_ERR_REGISTRY, -6, "no registry could be reached",                                      \
      "check the registry address (info key registry, TENSORHUB_REGISTRY)")                                 \
  ROW(kTimeout, THUB_ERR_TIMEOUT, -7, "a deadline given in the info passed",                                 \
      "raise timeout_ms, or look for the peer that stalls")                                                 \
  ROW(kNoMemory, THUB_ERR_NO_MEMORY, -8, "allocation or registration failed",                                \
      "free memory, or raise the locked-memory limit (ulimit -l)")                                          \
  ROW(kUnsupported, THUB_ERR_UNSUPPORTED, -9, "e.g. CUDA memory in a build without CUDA",                    \
      "not supported by this build or machine: tensorhub-info --ucx says what is")                          \
  ROW(kAuth, THUB_ERR_AUTH, -10, "the registry refused this client's credentials",                           \
      "check auth_token on both sides")                                                                     \
  ROW(kVersionLost, THUB_ERR_VERSION_LOST, -11, "every holder of the version is gone", "ask for a newer one") \
  ROW(kCanceled, THUB_ERR_CANCELED, -12, "the request was canceled (THUB_Cancel) before it took effect",     \
      "nothing changed; start it again if needed")                                                          \
  ROW(kInternal, THUB_ERR_INTERNAL, -99, "a bug: please report", "please report it with THUB_Last_error's text")

enum class Code : int {
#define THUB_CODE_ENUMERATOR(code, name, number, message, hint) code = number,
  THUB_STATUS_TABLE(THUB_CODE_ENUMERATOR)
#undef THUB_CODE_ENUMERATOR
};

class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& detail) : std::runtime_error(detail), code_(code) {}
  [[nodiscard]] Code code() const { return code_; }

 private:
  Code code_;
};

// One row of the table. `text` is what THUB_Error_string returns: the literal concatenation
// of the name, message and hint, so it is a constant for ever and cannot drift from them.
struct CodeText {
  Code code;
  const char* name;
  const char* message;
  const char* hint;
  const char* text;
};

inline constexpr CodeText kCodeTexts[] = {
#define THUB_CODE_ROW(code, name, number, message, hint) \
  {Code::code, #name, message, hint, #name ": " message "; " hint},
    THUB_STATUS_TABLE(THUB_CODE_ROW)
#undef THUB_CODE_ROW
};
inline constexpr size_t kCodeTextCount = sizeof kCodeTexts / sizeof kCodeTexts[0];

// What THUB_Error_string gives for a number that is no status code.
inline constexpr const char* kUnknownCodeText =
    "THUB_ERR_UNKNOWN: not a TensorHub status code; was it returned by a THUB_* function?";

// The row of `code`, or null.
constexpr const CodeText* find_code(int code) {
  for (const CodeText& t : kCodeTexts) {
    if (static_cast<int>(t.code) == code) return &t;
  }
  return nullptr;
}

// Name of a status code ("THUB_ERR_LAYOUT"), its hint, and its full text; never null.
const char* code_name(int code);
const char* code_hint(int code);
const char* code_string(int code);

}  // namespace thub
