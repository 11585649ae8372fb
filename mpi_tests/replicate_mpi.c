/* replicate_mpi: rank 0 is the trainer (it hosts the embedded registry), the other ranks are
 * rollouts. MPI only carries the registry address and orders the steps; every weight byte
 * moves through TensorHub.
 *
 *   all ranks: THUB_MPI_Init(MPI_COMM_WORLD, root 0): rank 0 starts the embedded registry and
 *              shares its address, the others connect to it (libtensorhub_mpi)
 *   for v = 1..3:
 *     rank 0: THUB_Unpublish (v > 1; returns once nobody reads), fill with v, THUB_Publish(v)
 *     barrier
 *     ranks>0: THUB_Replicate (v = 1) or THUB_Update, then check every byte
 *     barrier
 * The last rank also checks the codes of bad calls. THUB_MPI_Finalize closes rank 0's
 * registry after every other rank finalized. Each rank prints one line; the exit code is
 * non-zero when any rank failed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <tensorhub/tensorhub.h>
#include <tensorhub/tensorhub_mpi.h>

#define NTENSORS 5
#define NVERSIONS 3
#define ADDR_LEN 256

static const size_t sizes[NTENSORS] = {(size_t)16 << 20, 0, 100, ((size_t)3 << 20) + 7, (size_t)8 << 20};
static const char *names[NTENSORS] = {"embed.weight", "empty", "bias", "odd.weight", "head.weight"};

static int rank = 0;
static int failed = 0;
static char first_failure[1200] = "";

static void fail(THUB_Context ctx, const char *what, int st) {
  char detail[1024] = "";
  if (st < 0 && THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
  if (!failed) {
    snprintf(first_failure, sizeof first_failure, "%s: %d %s%s%s", what, st, THUB_Error_string(st),
             detail[0] ? " | " : "", detail);
  }
  fprintf(stderr, "rank %d: FAIL %s: %d %s %s\n", rank, what, st, THUB_Error_string(st), detail);
  failed = 1;
}

static int check(THUB_Context ctx, int st, const char *what) {
  if (st < 0) fail(ctx, what, st);
  return st >= 0;
}

static unsigned char pattern(int64_t v, int t, size_t i) {
  uint64_t x = (uint64_t)v * 0x9E3779B97F4A7C15ull + (uint64_t)t * 0xBF58476D1CE4E5B9ull + i;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return (unsigned char)(x >> 29);
}

/* Expect a specific status from a call that must fail. */
static void expect(THUB_Context ctx, int got, int want, const char *what) {
  if (got != want) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s returned %d, expected %d (%s)", what, got, want, THUB_Error_string(want));
    fail(ctx, msg, got);
  }
}

static void bad_input_checks(THUB_Context ctx, THUB_Model m) {
  THUB_Model other = THUB_MODEL_NULL, tmp = THUB_MODEL_NULL;
  unsigned char one[8] = {0};
  int64_t got = -1;
  /* a model that nobody ever published */
  if (check(ctx, THUB_Open(ctx, "no-such-model", "probe", 0, 1, THUB_INFO_NULL, &other), "THUB_Open no-such-model")) {
    if (check(ctx, THUB_Register(other, "x", one, sizeof one, THUB_MEM_HOST), "THUB_Register x")) {
      expect(ctx, THUB_Replicate(other, THUB_LATEST, &got), THUB_ERR_NOT_FOUND, "THUB_Replicate of an unknown model");
      expect(ctx, THUB_Replicate(other, 7, &got), THUB_ERR_NOT_FOUND, "THUB_Replicate of an unknown version");
    }
    check(ctx, THUB_Close(&other), "THUB_Close no-such-model");
  }
  expect(ctx, THUB_Open(ctx, "mpi-model", "bad", 2, 1, THUB_INFO_NULL, &tmp), THUB_ERR_ARG,
         "THUB_Open with shard >= num_shards");
  expect(ctx, THUB_Open(ctx, "", "bad", 0, 1, THUB_INFO_NULL, &tmp), THUB_ERR_ARG, "THUB_Open with an empty name");
  expect(ctx, THUB_Publish(m, -5), THUB_ERR_ARG, "THUB_Publish of a negative version");
  expect(ctx, THUB_Register(m, "late", one, sizeof one, THUB_MEM_HOST), THUB_ERR_STATE,
         "THUB_Register after replicate");
  expect(ctx, THUB_Replicate(m, THUB_LATEST, &got), THUB_ERR_STATE, "THUB_Replicate while holding a version");
  expect(ctx, THUB_Replicate(THUB_MODEL_NULL, THUB_LATEST, &got), THUB_ERR_ARG, "THUB_Replicate of a null model");
  if (THUB_Error_string(12345) == NULL) fail(ctx, "THUB_Error_string(12345) is NULL", THUB_ERR_INTERNAL);
}

int main(int argc, char **argv) {
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  unsigned char *bufs[NTENSORS];
  char addr[ADDR_LEN] = "";
  char replica[32];
  int size = 0, t, st, any_failed = 0;
  int64_t v, got = -1;
  size_t total = 0;
  double t_repl = 0.0;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* rank 0 hosts the embedded registry; the others connect to it (the outcome is the same
   * on every rank, so a failure ends every rank the same way) */
  st = THUB_MPI_Init(MPI_COMM_WORLD, 0, THUB_INFO_NULL, &ctx);
  if (st != THUB_SUCCESS) {
    char detail[1024] = "";
    THUB_MPI_Last_error(detail, sizeof detail);
    fprintf(stderr, "rank %d: FAIL THUB_MPI_Init: %d %s | %s\n", rank, st, THUB_Error_string(st), detail);
    MPI_Finalize();
    return 1;
  }
  check(ctx, THUB_Registry_address(ctx, addr, sizeof addr), "THUB_Registry_address");

  snprintf(replica, sizeof replica, "rank-%d", rank);
  if (!failed) check(ctx, THUB_Open(ctx, "mpi-model", replica, 0, 1, THUB_INFO_NULL, &m), "THUB_Open");
  for (t = 0; t < NTENSORS; t++) {
    bufs[t] = sizes[t] ? calloc(1, sizes[t]) : NULL;
    total += sizes[t];
    if (sizes[t] && !bufs[t]) fail(ctx, "calloc", THUB_ERR_NO_MEMORY);
    if (!failed) check(ctx, THUB_Register(m, names[t], bufs[t], sizes[t], THUB_MEM_HOST), "THUB_Register");
  }

  for (v = 1; v <= NVERSIONS; v++) {
    if (rank == 0 && !failed) {
      if (v > 1) check(ctx, THUB_Unpublish(m), "THUB_Unpublish");
      for (t = 0; t < NTENSORS; t++) {
        size_t i;
        for (i = 0; i < sizes[t]; i++) bufs[t][i] = pattern(v, t, i);
      }
      if (!failed) check(ctx, THUB_Publish(m, v), "THUB_Publish");
    }
    MPI_Barrier(MPI_COMM_WORLD); /* version v is published */
    if (rank != 0 && !failed) {
      double t0 = MPI_Wtime();
      got = -1;
      if (v == 1) {
        /* odd ranks ask for the absolute version, even ranks for the latest */
        st = THUB_Replicate(m, rank % 2 ? v : THUB_LATEST, &got);
        check(ctx, st, "THUB_Replicate");
      } else {
        st = THUB_Update(m, rank % 2 ? v : THUB_LATEST, &got);
        check(ctx, st, "THUB_Update");
        if (st == THUB_NOT_UPDATED) fail(ctx, "THUB_Update found nothing newer", st);
      }
      t_repl += MPI_Wtime() - t0;
      if (!failed && got != v) {
        char msg[100];
        snprintf(msg, sizeof msg, "holds version %" PRId64 ", expected %" PRId64, got, v);
        fail(ctx, msg, THUB_ERR_INTERNAL);
      }
      for (t = 0; t < NTENSORS && !failed; t++) {
        size_t i;
        for (i = 0; i < sizes[t]; i++) {
          if (bufs[t][i] != pattern(v, t, i)) {
            char msg[160];
            snprintf(msg, sizeof msg, "version %" PRId64 ": tensor %s byte %zu is wrong", v, names[t], i);
            fail(ctx, msg, THUB_ERR_INTERNAL);
            break;
          }
        }
      }
    }
    MPI_Barrier(MPI_COMM_WORLD); /* every rank holds v (readers are done) */
  }

  if (rank == size - 1 && rank != 0 && !failed) bad_input_checks(ctx, m);

  /* rank 0's embedded registry outlives the others' contexts (THUB_MPI_Finalize) */
  if (m != THUB_MODEL_NULL) check(ctx, THUB_Close(&m), "THUB_Close");
  check(THUB_CONTEXT_NULL, THUB_MPI_Finalize(MPI_COMM_WORLD, &ctx), "THUB_MPI_Finalize");
  if (ctx != THUB_CONTEXT_NULL) fail(THUB_CONTEXT_NULL, "THUB_MPI_Finalize left the handle set", THUB_ERR_INTERNAL);

  if (failed) {
    printf("rank %d: FAIL %s\n", rank, first_failure);
  } else if (rank == 0) {
    printf("rank %d: ok, published v=1..%d of %zu bytes in %d tensors (registry %s)\n", rank, NVERSIONS, total,
           NTENSORS, addr);
  } else {
    printf("rank %d: ok, replicated v=1..%d and checked every byte, %.1f ms in THUB calls%s\n", rank, NVERSIONS,
           1e3 * t_repl, rank == size - 1 ? "; bad-input codes as documented" : "");
  }
  fflush(stdout);
  for (t = 0; t < NTENSORS; t++) free(bufs[t]);
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed ? 1 : 0;
}
