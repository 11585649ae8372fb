#include "src/common/status.h"

namespace thub {

namespace {
constexpr bool same(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

// Numbers and names unique, every text there (an empty message or hint would make a
// useless THUB_Error_string).
constexpr bool table_is_consistent() {
  for (size_t i = 0; i < kCodeTextCount; ++i) {
    const CodeText& a = kCodeTexts[i];
    if (!*a.message || !*a.hint) return false;
    for (size_t j = i + 1; j < kCodeTextCount; ++j) {
      if (a.code == kCodeTexts[j].code || same(a.name, kCodeTexts[j].name)) return false;
    }
  }
  return true;
}
static_assert(table_is_consistent(), "THUB_STATUS_TABLE: a duplicate number or name, or an empty text");
}  // namespace

const char* code_name(int code) {
  const CodeText* t = find_code(code);
  return t ? t->name : "THUB_ERR_UNKNOWN";
}

const char* code_hint(int code) {
  const CodeText* t = find_code(code);
  return t ? t->hint : "not a TensorHub status code";
}

const char* code_string(int code) {
  const CodeText* t = find_code(code);
  return t ? t->text : kUnknownCodeText;
}

}  // namespace thub
