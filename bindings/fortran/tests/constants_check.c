/* The header's constants as a C compiler sees them, for bindings_test.f90 to compare with
 * the module's parameters: the status codes of both are generated from one table
 * (GeneratedListsAreCurrent), the version, memory types and version specifiers are not. */
#include <stdint.h>

#include <tensorhub/tensorhub.h>

/* Writes up to n constants, in the order bindings_test.f90 lists them; returns how many exist. */
int thub_test_header_constants(int64_t *out, int n) {
  const int64_t v[] = {THUB_VERSION_MAJOR,   THUB_VERSION_MINOR,     THUB_VERSION_PATCH,   THUB_SUCCESS,
                       THUB_IN_PROGRESS,     THUB_NOT_UPDATED,       THUB_ERR_ARG,         THUB_ERR_STATE,
                       THUB_ERR_NOT_FOUND,   THUB_ERR_LAYOUT,        THUB_ERR_TRANSPORT,   THUB_ERR_REGISTRY,
                       THUB_ERR_TIMEOUT,     THUB_ERR_NO_MEMORY,     THUB_ERR_UNSUPPORTED, THUB_ERR_AUTH,
                       THUB_ERR_VERSION_LOST, THUB_ERR_CANCELED,     THUB_ERR_INTERNAL,    THUB_MEM_HOST,
                       THUB_MEM_CUDA,        THUB_LATEST,            THUB_LATEST_MINUS(0), THUB_LATEST_MINUS(1),
                       THUB_LATEST_MINUS(7)};
  const int count = (int)(sizeof v / sizeof v[0]);
  int i;
  for (i = 0; i < count && i < n; i++) out[i] = v[i];
  return count;
}
