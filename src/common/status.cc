#include "src/common/status.h"

namespace thub {

const CodeText kCodeTexts[] = {
    {0, "THUB_SUCCESS", "done"},
    {1, "THUB_IN_PROGRESS", "the operation is still running; test or wait again"},
    {2, "THUB_NOT_UPDATED", "nothing newer than the held version is available (not an error)"},
    {-1, "THUB_ERR_ARG", "a bad argument: check for null handles, sizes and info values"},
    {-2, "THUB_ERR_STATE", "not allowed now: check the order of register/publish/replicate/unpublish"},
    {-3, "THUB_ERR_NOT_FOUND", "no such model or version: was it published, or already dropped?"},
    {-4, "THUB_ERR_LAYOUT",
     "registered tensors differ from the source's: register the same names and sizes in the same order"},
    {-5, "THUB_ERR_TRANSPORT", "the data plane failed: UCX could not start, or no source could finish the transfer"},
    {-6, "THUB_ERR_REGISTRY", "no registry could be reached: check the registry address (TENSORHUB_REGISTRY)"},
    {-7, "THUB_ERR_TIMEOUT", "a deadline given in the info passed"},
    {-8, "THUB_ERR_NO_MEMORY", "allocation or memory registration failed"},
    {-9, "THUB_ERR_UNSUPPORTED", "not supported by this build or machine (e.g. CUDA memory without CUDA)"},
    {-10, "THUB_ERR_AUTH", "the registry refused the credentials: check auth_token"},
    {-11, "THUB_ERR_VERSION_LOST", "every holder of the version is gone: ask for a newer one"},
    {-12, "THUB_ERR_CANCELED", "the request was canceled (THUB_Cancel) before it took effect"},
    {-99, "THUB_ERR_INTERNAL", "a bug in TensorHub: please report it with THUB_Last_error's text"},
};

const size_t kCodeTextCount = sizeof kCodeTexts / sizeof kCodeTexts[0];

namespace {
const CodeText* find(int code) {
  for (size_t i = 0; i < kCodeTextCount; ++i) {
    if (kCodeTexts[i].code == code) return &kCodeTexts[i];
  }
  return nullptr;
}
}  // namespace

const char* code_name(int code) {
  const CodeText* t = find(code);
  return t ? t->name : "THUB_ERR_UNKNOWN";
}

const char* code_hint(int code) {
  const CodeText* t = find(code);
  return t ? t->hint : "an unknown status code";
}

}  // namespace thub
