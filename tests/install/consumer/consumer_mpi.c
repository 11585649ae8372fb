/* An MPI program built with mpicc and tensorhub.pc's flags against an installed TensorHub:
 * rank 0 starts the embedded registry and publishes, MPI_Bcast gives the others its address,
 * every other rank replicates and compares every byte; the ranks agree on the outcome with
 * MPI_Allreduce before rank 0 withdraws the version.
 *   mpirun -np 2 consumer_mpi PREFIX */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tensorhub/tensorhub.h>

#include "where.h"

#define N (1 << 20)

static int check(THUB_Context ctx, int rank, int st, const char *what) {
  char detail[512] = "";
  if (st >= 0) return 0;
  THUB_Last_error(ctx, detail, sizeof detail);
  fprintf(stderr, "rank %d: %s: %s | %s\n", rank, what, THUB_Error_string(st), detail);
  return 1;
}

int main(int argc, char **argv) {
  static unsigned char w[N];
  char addr[256] = "";
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Info info = THUB_INFO_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  int rank = 0, size = 0, bad = 0, any_bad = 0, i;
  int64_t got = -1;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 2 || !library_is_under(argv[1]) || size < 2) MPI_Abort(MPI_COMM_WORLD, 1);

  if (rank == 0) {
    for (i = 0; i < N; i++) w[i] = (unsigned char)(i * 7 + 3);
    bad |= check(ctx, rank, THUB_Init(THUB_INFO_NULL, &ctx), "THUB_Init");
    if (!bad) bad |= check(ctx, rank, THUB_Registry_address(ctx, addr, sizeof addr), "THUB_Registry_address");
  }
  MPI_Bcast(addr, sizeof addr, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (addr[0] == '\0') MPI_Abort(MPI_COMM_WORLD, 1);
  if (rank != 0) {
    THUB_Info_create(&info);
    THUB_Info_set(info, "registry", addr);
    bad |= check(ctx, rank, THUB_Init(info, &ctx), "THUB_Init");
    THUB_Info_free(&info);
  }
  if (!bad) {
    char replica[32];
    snprintf(replica, sizeof replica, "rank-%d", rank);
    bad |= check(ctx, rank, THUB_Open(ctx, "mpi-consumer", replica, 0, 1, THUB_INFO_NULL, &m), "THUB_Open");
  }
  if (!bad) bad |= check(ctx, rank, THUB_Register(m, "w", w, sizeof w, THUB_MEM_HOST), "THUB_Register");
  if (!bad && rank == 0) bad |= check(ctx, rank, THUB_Publish(m, 1), "THUB_Publish");
  MPI_Barrier(MPI_COMM_WORLD); /* published before anyone asks */
  if (!bad && rank != 0) {
    bad |= check(ctx, rank, THUB_Replicate(m, THUB_LATEST, &got), "THUB_Replicate");
    for (i = 0; !bad && i < N; i++) {
      if (w[i] != (unsigned char)(i * 7 + 3)) {
        fprintf(stderr, "rank %d: byte %d is %u\n", rank, i, w[i]);
        bad = 1;
      }
    }
    if (!bad && got != 1) bad = 1;
  }
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (m != THUB_MODEL_NULL) any_bad |= check(ctx, rank, THUB_Close(&m), "THUB_Close");
  /* the registry (rank 0's context) goes last */
  if (rank != 0 && ctx != THUB_CONTEXT_NULL) any_bad |= check(ctx, rank, THUB_Finalize(&ctx), "THUB_Finalize");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0 && ctx != THUB_CONTEXT_NULL) any_bad |= check(ctx, rank, THUB_Finalize(&ctx), "THUB_Finalize");
  if (rank == 0 && !any_bad) printf("MPI consumer: %d ranks replicated 1 MiB byte-exact from rank 0\n", size - 1);
  MPI_Finalize();
  return any_bad ? 1 : 0;
}
