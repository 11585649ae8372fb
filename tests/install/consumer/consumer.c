/* An outside C program against an installed TensorHub: one context with the embedded
 * registry, a trainer replica publishes two tensors, a rollout replica of the same model in
 * this process replicates them; every byte is compared, and an update finds nothing newer.
 *   consumer PREFIX     (exit 0 only when all of it held and the library came from PREFIX) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorhub/tensorhub.h>

#include "where.h"

#define N 300000

static THUB_Context ctx = THUB_CONTEXT_NULL;

static int ok(int st, const char *what) {
  char detail[512] = "";
  if (st >= 0) return 1;
  THUB_Last_error(ctx, detail, sizeof detail);
  fprintf(stderr, "%s: %s | %s\n", what, THUB_Error_string(st), detail);
  return 0;
}

int main(int argc, char **argv) {
  static float tw[N], rw[N];
  int32_t tb[16], rb[16];
  THUB_Model trainer = THUB_MODEL_NULL, rollout = THUB_MODEL_NULL;
  int64_t got = -1;
  int major = -1, minor = -1, patch = -1, i;
  if (argc != 2 || !library_is_under(argv[1])) return 1;
  if (!ok(THUB_Get_version(&major, &minor, &patch), "THUB_Get_version")) return 1;
  if (major != THUB_VERSION_MAJOR || minor != THUB_VERSION_MINOR) {
    fprintf(stderr, "library %d.%d, header %d.%d\n", major, minor, THUB_VERSION_MAJOR, THUB_VERSION_MINOR);
    return 1;
  }
  for (i = 0; i < N; i++) tw[i] = (float)(i % 1009) * 0.5f;
  for (i = 0; i < 16; i++) tb[i] = 1000 + i;
  if (!ok(THUB_Init(THUB_INFO_NULL, &ctx), "THUB_Init") ||
      !ok(THUB_Open(ctx, "consumer", "trainer", 0, 1, THUB_INFO_NULL, &trainer), "THUB_Open trainer") ||
      !ok(THUB_Register(trainer, "w", tw, sizeof tw, THUB_MEM_HOST), "THUB_Register") ||
      !ok(THUB_Register(trainer, "b", tb, sizeof tb, THUB_MEM_HOST), "THUB_Register") ||
      !ok(THUB_Publish(trainer, 7), "THUB_Publish") ||
      !ok(THUB_Open(ctx, "consumer", "rollout", 0, 1, THUB_INFO_NULL, &rollout), "THUB_Open rollout") ||
      !ok(THUB_Register(rollout, "w", rw, sizeof rw, THUB_MEM_HOST), "THUB_Register") ||
      !ok(THUB_Register(rollout, "b", rb, sizeof rb, THUB_MEM_HOST), "THUB_Register") ||
      !ok(THUB_Replicate(rollout, THUB_LATEST, &got), "THUB_Replicate"))
    return 1;
  if (got != 7 || memcmp(tw, rw, sizeof tw) != 0 || memcmp(tb, rb, sizeof tb) != 0) {
    fprintf(stderr, "replicated version %lld differs from the published 7\n", (long long)got);
    return 1;
  }
  if (THUB_Update(rollout, THUB_LATEST, &got) != THUB_NOT_UPDATED) {
    fprintf(stderr, "THUB_Update found something newer than the only version\n");
    return 1;
  }
  if (!ok(THUB_Close(&rollout), "THUB_Close") || !ok(THUB_Close(&trainer), "THUB_Close") ||
      !ok(THUB_Finalize(&ctx), "THUB_Finalize"))
    return 1;
  printf("C consumer: version 7 replicated byte-exact against the installed library\n");
  return 0;
}
