/* mpi_init_agreement: THUB_MPI_Init returns the same outcome on every rank (run with 3 or more
 * ranks), and THUB_MPI_Finalize never leaves a rank waiting.
 *
 *   1. a bad info key on the root only: THUB_ERR_ARG everywhere, the same detail naming rank 0,
 *      the context handles untouched;
 *   2. a bad info value on the last rank only (the root and the others succeed first):
 *      THUB_ERR_ARG everywhere, the detail naming the last rank, the created contexts undone;
 *      then an auth_token on the other ranks that differs from the root's: THUB_ERR_AUTH
 *      everywhere, the detail naming rank 1 (the lowest failing rank);
 *   3. a NULL ctx on rank 1: THUB_ERR_ARG everywhere;
 *   4. root out of range: THUB_ERR_ARG everywhere;
 *   5. THUB_MPI_Finalize of a NULL handle: THUB_ERR_ARG on every rank, no hang;
 *   6. success with the last rank as root and registry_listen=127.0.0.1:0 (one host: no
 *      loopback refusal): every rank holds a context on the same registry, a 4 KiB tensor
 *      published by the root is replicated and checked by the others, THUB_MPI_Finalize
 *      succeeds everywhere and clears the handles; then a second THUB_MPI_Init on the same
 *      communicator succeeds again (nothing left over from the first); in the first round a
 *      second THUB_MPI_Init whose info names that registry connects every rank to it.
 * Each rank prints one line; the exit code is non-zero when any rank failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <tensorhub/tensorhub.h>
#include <tensorhub/tensorhub_mpi.h>

#define DETAIL_LEN 1024
#define TENSOR_BYTES 4096

static int rank = 0, size = 0, failed = 0;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "rank %d: FAIL ", rank);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  failed = 1;
}

/* Every rank got `want`, and every rank's THUB_MPI_Last_error is the root's and starts with
 * "rank <blamed>:". */
static void expect_agreed(const char *what, int st, int want, int blamed) {
  char detail[DETAIL_LEN] = "", root_detail[DETAIL_LEN] = "", prefix[32];
  int lo = 0, hi = 0;
  MPI_Allreduce(&st, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&st, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (st != want) fail("%s: returned %d, expected %d", what, st, want);
  if (lo != hi) fail("%s: the ranks disagree (lowest code %d)", what, lo);
  if (THUB_MPI_Last_error(detail, sizeof detail) != THUB_SUCCESS) fail("%s: THUB_MPI_Last_error failed", what);
  memcpy(root_detail, detail, sizeof detail);
  MPI_Bcast(root_detail, DETAIL_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (strcmp(detail, root_detail) != 0) fail("%s: detail '%s' differs from rank 0's '%s'", what, detail, root_detail);
  snprintf(prefix, sizeof prefix, "rank %d: ", blamed);
  if (blamed >= 0 && strncmp(detail, prefix, strlen(prefix)) != 0) fail("%s: detail '%s' does not start with '%s'", what, detail, prefix);
  if (rank == 0 && want != THUB_SUCCESS) printf("  %s -> %d on every rank: %s\n", what, st, detail);
  if (rank == 0 && want == THUB_SUCCESS) printf("  %s -> %d on every rank\n", what, st);
}

static THUB_Info info_with(const char *key, const char *value) {
  THUB_Info info = THUB_INFO_NULL;
  if (THUB_Info_create(&info) != THUB_SUCCESS || THUB_Info_set(info, key, value) != THUB_SUCCESS) {
    fail("cannot build an info with %s", key);
  }
  return info;
}

static unsigned char pattern(size_t i) { return (unsigned char)(i * 131u + 7u); }

/* A THUB_MPI_Init whose info names a registry (the one of round_trip): no rank starts one,
 * every rank is connected to that one. */
static void joins_named_registry(const char *registry) {
  THUB_Info info = info_with("registry", registry);
  THUB_Context other = THUB_CONTEXT_NULL;
  char addr[256] = "";
  int st = THUB_MPI_Init(MPI_COMM_WORLD, 0, info, &other);
  THUB_Info_free(&info);
  expect_agreed("info names a registry", st, THUB_SUCCESS, -1);
  if (st != THUB_SUCCESS) return;
  if (THUB_Registry_address(other, addr, sizeof addr) != THUB_SUCCESS || strcmp(addr, registry) != 0) {
    fail("with registry=%s the context uses %s", registry, addr);
  }
  if ((st = THUB_MPI_Finalize(MPI_COMM_WORLD, &other)) != THUB_SUCCESS) fail("THUB_MPI_Finalize returned %d", st);
}

/* Init with the last rank as root, replicate one tensor from it, finalize. */
static void round_trip(int pass) {
  const int root = size - 1;
  THUB_Info info = info_with("registry_listen", "127.0.0.1:0");
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  unsigned char *buf = calloc(1, TENSOR_BYTES);
  char addr[256] = "", root_addr[256] = "", replica[32];
  int64_t got = -1;
  size_t i;
  int st = THUB_MPI_Init(MPI_COMM_WORLD, root, info, &ctx);
  THUB_Info_free(&info);
  expect_agreed(pass == 0 ? "success, root = last rank" : "success again", st, THUB_SUCCESS, -1);
  if (st != THUB_SUCCESS || !buf) {
    free(buf);
    return;
  }
  if (THUB_Registry_address(ctx, addr, sizeof addr) != THUB_SUCCESS) fail("THUB_Registry_address");
  memcpy(root_addr, addr, sizeof addr);
  MPI_Bcast(root_addr, (int)sizeof root_addr, MPI_CHAR, root, MPI_COMM_WORLD);
  if (strcmp(addr, root_addr) != 0) fail("registry %s is not the root's %s", addr, root_addr);
  if (strncmp(addr, "127.0.0.1:", 10) != 0) fail("registry %s is not on registry_listen's address", addr);
  if (pass == 0) joins_named_registry(root_addr);

  snprintf(replica, sizeof replica, "rank-%d", rank);
  if (THUB_Open(ctx, "agreement", replica, 0, 1, THUB_INFO_NULL, &m) != THUB_SUCCESS ||
      THUB_Register(m, "w", buf, TENSOR_BYTES, THUB_MEM_HOST) != THUB_SUCCESS) {
    fail("THUB_Open/THUB_Register");
  }
  if (rank == root) {
    for (i = 0; i < TENSOR_BYTES; i++) buf[i] = pattern(i);
    if (!failed && THUB_Publish(m, 1 + pass) != THUB_SUCCESS) fail("THUB_Publish");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != root && !failed) {
    if ((st = THUB_Replicate(m, THUB_LATEST, &got)) != THUB_SUCCESS) fail("THUB_Replicate: %d", st);
    if (got != 1 + pass) fail("replicated version %d", (int)got);
    for (i = 0; i < TENSOR_BYTES && !failed; i++) {
      if (buf[i] != pattern(i)) fail("byte %d is wrong", (int)i);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (m != THUB_MODEL_NULL && THUB_Close(&m) != THUB_SUCCESS) fail("THUB_Close");
  st = THUB_MPI_Finalize(MPI_COMM_WORLD, &ctx);
  if (st != THUB_SUCCESS) fail("THUB_MPI_Finalize returned %d", st);
  if (ctx != THUB_CONTEXT_NULL) fail("THUB_MPI_Finalize left the handle set");
  free(buf);
}

int main(int argc, char **argv) {
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Context const sentinel = (THUB_Context)&ctx; /* never a real handle: must stay untouched */
  THUB_Info info;
  int st, any_failed = 0;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 3) {
    if (rank == 0) fprintf(stderr, "mpi_init_agreement needs 3 or more ranks (mpirun -np 3)\n");
    MPI_Finalize();
    return 1;
  }
  if (rank == 0) printf("mpi_init_agreement: %d ranks\n", size);

  /* 1. bad key on the root only */
  ctx = sentinel;
  info = rank == 0 ? info_with("registy", "x") : THUB_INFO_NULL;
  st = THUB_MPI_Init(MPI_COMM_WORLD, 0, info, &ctx);
  if (info != THUB_INFO_NULL) THUB_Info_free(&info);
  expect_agreed("bad info key on the root", st, THUB_ERR_ARG, 0);
  if (ctx != sentinel) fail("a failed THUB_MPI_Init wrote the handle");

  /* 2. bad value on the last rank only: the others' contexts are made, then undone */
  info = rank == size - 1 ? info_with("chunk_size", "1") : THUB_INFO_NULL;
  st = THUB_MPI_Init(MPI_COMM_WORLD, 0, info, &ctx);
  if (info != THUB_INFO_NULL) THUB_Info_free(&info);
  expect_agreed("bad info value on the last rank", st, THUB_ERR_ARG, size - 1);
  if (ctx != sentinel) fail("a failed THUB_MPI_Init wrote the handle");

  /* 2b. the root's registry refuses the others' credentials: each other rank fails on its
   * own, after the root succeeded; the code is THUB_ERR_AUTH everywhere, rank 1 blamed */
  info = info_with("auth_token", rank == 0 ? "job-token-right" : "job-token-wrong");
  st = THUB_MPI_Init(MPI_COMM_WORLD, 0, info, &ctx);
  THUB_Info_free(&info);
  expect_agreed("other ranks' auth_token differs from the root's", st, THUB_ERR_AUTH, 1);
  if (ctx != sentinel) fail("a failed THUB_MPI_Init wrote the handle");

  /* 3. NULL ctx on rank 1 */
  st = THUB_MPI_Init(MPI_COMM_WORLD, 0, THUB_INFO_NULL, rank == 1 ? NULL : &ctx);
  expect_agreed("NULL ctx on rank 1", st, THUB_ERR_ARG, 1);
  if (ctx != sentinel) fail("a failed THUB_MPI_Init wrote the handle");

  /* 4. root out of range (checked on every rank before any collective) */
  st = THUB_MPI_Init(MPI_COMM_WORLD, size, THUB_INFO_NULL, &ctx);
  expect_agreed("root out of range", st, THUB_ERR_ARG, -1);

  /* 5. finalize of nothing: an error on every rank, and nobody waits forever */
  ctx = THUB_CONTEXT_NULL;
  st = THUB_MPI_Finalize(MPI_COMM_WORLD, &ctx);
  if (st != THUB_ERR_ARG) fail("THUB_MPI_Finalize of a NULL handle returned %d", st);

  /* 6. success, twice */
  round_trip(0);
  round_trip(1);

  if (failed) {
    printf("rank %d: FAIL\n", rank);
  } else {
    printf("rank %d: ok, every outcome agreed\n", rank);
  }
  fflush(stdout);
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
