/* thub_bcast_baseline: the Open MPI MPI_Bcast baseline for weight broadcast.
 *
 * Rank 0 broadcasts S bytes to all ranks with MPI_Bcast, --warmup + --iters times. Each
 * timed iteration is: barrier, MPI_Bcast, then the max over ranks of the local elapsed
 * time (the broadcast is done when the last rank has the data). Reports every iteration,
 * the median, and a JSON line. The payload depends on the iteration and receivers poison
 * their buffer with a rank-dependent byte first, so stale or partial data cannot pass the
 * check (done outside the timed region).
 *
 * The trainer's stall is the root's own time in MPI_Bcast (median over the iterations): how
 * long the rank that holds the weights is blocked in the call. --label names the run in the
 * JSON line (e.g. the tuned algorithm chosen with --mca options), default "mpi_bcast".
 *
 * When NETLAB_RATE_BPS is set (netlab.sh exports it: the per-host link rate in bit/s), the
 * ideal time bytes*8/rate is reported too: a pipelined broadcast can at best feed every
 * receiver at its link rate.
 *
 * For the elastic benchmark (bench/netlab/run-elastic.sh): --per-rank adds every rank's own
 * time in MPI_Bcast per iteration to the JSON line (a receiver's update latency), and when
 * THUB_BENCH_LAUNCH_REALTIME holds the CLOCK_REALTIME seconds at which mpirun was started,
 * rank 0 reports setup_s: from then until every rank has returned from MPI_Init (a barrier),
 * the price of a new communicator, paid again at every change of membership.
 */
#include <mpi.h>

#include <errno.h>
#include <time.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ITERS = 1000 };
static const size_t BCAST_CHUNK = (size_t)1 << 30; /* MPI counts are int: split above 1 GiB */

typedef struct {
  size_t bytes;
  int iters;
  int warmup;
  int check;
  int per_rank;
  const char *label;
} options_t;

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [--bytes S] [--iters N] [--warmup W] [--no-check] [--label L] [--per-rank]\n"
          "  --bytes S   payload, with optional suffix K/M/G (KiB, MiB, GiB); default 256M\n"
          "  --iters N   timed iterations (default 5, max %d)\n"
          "  --warmup W  untimed iterations first (default 1)\n"
          "  --no-check  skip the data check\n"
          "  --label L   the method's name in the JSON line (default mpi_bcast)\n"
          "  --per-rank  every rank's time in MPI_Bcast per iteration, in the JSON line\n",
          prog, MAX_ITERS);
}

/* "256M", "32MiB", "1048576" -> bytes; 0 on error. */
static size_t parse_size(const char *s) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return 0;
  size_t mult = 1;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': mult = (size_t)1 << 10; end++; break;
    case 'm': case 'M': mult = (size_t)1 << 20; end++; break;
    case 'g': case 'G': mult = (size_t)1 << 30; end++; break;
    default: return 0;
  }
  if (*end == 'i' && end[1] == 'B') end += 2;
  else if (*end == 'B') end++;
  if (*end != '\0') return 0;
  return (size_t)v * mult;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* 0 on success, 1 on a usage error (message already printed). */
static int parse_options(int argc, char **argv, options_t *opt) {
  opt->bytes = (size_t)256 << 20;
  opt->iters = 5;
  opt->warmup = 1;
  opt->check = 1;
  opt->per_rank = 0;
  opt->label = "mpi_bcast";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    if (strcmp(a, "--bytes") == 0 && v) {
      opt->bytes = parse_size(v);
      if (opt->bytes == 0) { fprintf(stderr, "bad --bytes '%s'\n", v); return 1; }
      i++;
    } else if (strcmp(a, "--iters") == 0 && v) {
      if (parse_int(v, 1, MAX_ITERS, &opt->iters)) { fprintf(stderr, "bad --iters '%s'\n", v); return 1; }
      i++;
    } else if (strcmp(a, "--warmup") == 0 && v) {
      if (parse_int(v, 0, MAX_ITERS, &opt->warmup)) { fprintf(stderr, "bad --warmup '%s'\n", v); return 1; }
      i++;
    } else if (strcmp(a, "--label") == 0 && v) {
      for (const char *c = v; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-' || *c == '.')) {
          fprintf(stderr, "bad --label '%s' (letters, digits, '_', '-', '.')\n", v);
          return 1;
        }
      opt->label = v;
      i++;
    } else if (strcmp(a, "--no-check") == 0) {
      opt->check = 0;
    } else if (strcmp(a, "--per-rank") == 0) {
      opt->per_rank = 1;
    } else {
      usage(argv[0]);
      return 1;
    }
  }
  return 0;
}

/* The payload of iteration `iter`: a cheap 64-bit mix of (iter, word index). */
static uint64_t pattern_word(int iter, size_t i) {
  uint64_t x = ((uint64_t)iter + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)i;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

static uint8_t pattern_tail(int iter, size_t j) { return (uint8_t)(iter * 31 + (int)j + 7); }

static void fill_payload(unsigned char *buf, size_t bytes, int iter) {
  size_t words = bytes / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t w = pattern_word(iter, i);
    memcpy(buf + 8 * i, &w, 8);
  }
  for (size_t j = words * 8; j < bytes; j++) buf[j] = pattern_tail(iter, j);
}

/* Number of wrong 8-byte words (or tail bytes); the first bad offset goes to *first_bad. */
static size_t check_payload(const unsigned char *buf, size_t bytes, int iter, size_t *first_bad) {
  size_t words = bytes / 8, bad = 0;
  for (size_t i = 0; i < words; i++) {
    uint64_t w;
    memcpy(&w, buf + 8 * i, 8);
    if (w != pattern_word(iter, i) && bad++ == 0) *first_bad = 8 * i;
  }
  for (size_t j = words * 8; j < bytes; j++)
    if (buf[j] != pattern_tail(iter, j) && bad++ == 0) *first_bad = j;
  return bad;
}

static int bcast_bytes(unsigned char *buf, size_t bytes, int root, MPI_Comm comm) {
  for (size_t off = 0; off < bytes; off += BCAST_CHUNK) {
    size_t n = bytes - off < BCAST_CHUNK ? bytes - off : BCAST_CHUNK;
    int rc = MPI_Bcast(buf + off, (int)n, MPI_BYTE, root, comm);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median_of(const double *v, int n) {
  double *s = malloc((size_t)n * sizeof *s);
  if (!s) return v[0];
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double m = (n % 2) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

/* First line of the MPI library version, JSON-safe (quotes and control chars dropped). */
static void library_name(char *out, size_t cap) {
  char ver[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(ver, &len);
  size_t k = 0;
  for (int i = 0; i < len && ver[i] && ver[i] != '\n' && ver[i] != ',' && k + 1 < cap; i++)
    if (ver[i] != '"' && ver[i] != '\\' && (unsigned char)ver[i] >= 0x20) out[k++] = ver[i];
  out[k] = '\0';
}

static void report(const options_t *opt, int nranks, const double *times, const double *root_times, int check_ok,
                   const double *rank_times, double setup_s) {
  double med = median_of(times, opt->iters), lo = times[0], hi = times[0];
  double root_med = median_of(root_times, opt->iters);
  for (int i = 1; i < opt->iters; i++) {
    if (times[i] < lo) lo = times[i];
    if (times[i] > hi) hi = times[i];
  }
  double gbps = (double)opt->bytes * 8.0 / med / 1e9;
  const char *rate_env = getenv("NETLAB_RATE_BPS");
  double link_bps = rate_env ? strtod(rate_env, NULL) : 0.0;
  double ideal = link_bps > 0 ? (double)opt->bytes * 8.0 / link_bps : 0.0;
  char lib[128];
  library_name(lib, sizeof lib);

  for (int i = 0; i < opt->iters; i++)
    printf("mpi_bcast iter %d: %.4f s\n", i, times[i]);
  printf("mpi_bcast: %d ranks, %.1f MiB, median %.4f s (min %.4f, max %.4f), %.3f Gbit/s",
         nranks, (double)opt->bytes / (1 << 20), med, lo, hi, gbps);
  if (ideal > 0)
    printf(", ideal %.4f s at %.3f Gbit/s links -> %.2fx ideal", ideal, link_bps / 1e9, med / ideal);
  printf(", root in the call %.4f s, data %s\n", root_med, opt->check ? (check_ok ? "ok" : "CORRUPT") : "not checked");

  printf("{\"bench\":\"mpi_bcast\",\"method\":\"%s\",\"impl\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"iters\":%d,"
         "\"warmup\":%d,\"median_s\":%.6f,\"min_s\":%.6f,\"max_s\":%.6f,\"gbps\":%.4f,"
         "\"gbytes_per_s\":%.4f,\"trainer_stall_s\":%.6f",
         opt->label, lib, nranks, opt->bytes, opt->iters, opt->warmup, med, lo, hi, gbps, gbps / 8.0, root_med);
  if (ideal > 0)
    printf(",\"link_gbps\":%.4f,\"ideal_s\":%.6f,\"vs_ideal\":%.4f", link_bps / 1e9, ideal, med / ideal);
  if (setup_s >= 0) printf(",\"setup_s\":%.6f", setup_s);
  printf(",\"check\":\"%s\",\"times_s\":[", opt->check ? (check_ok ? "ok" : "corrupt") : "skipped");
  for (int i = 0; i < opt->iters; i++) printf("%s%.6f", i ? "," : "", times[i]);
  printf("]");
  if (rank_times) { /* [iteration][rank] */
    printf(",\"rank_times_s\":[");
    for (int i = 0; i < opt->iters; i++) {
      printf("%s[", i ? "," : "");
      for (int r = 0; r < nranks; r++) printf("%s%.6f", r ? "," : "", rank_times[(size_t)i * (size_t)nranks + (size_t)r]);
      printf("]");
    }
    printf("]");
  }
  printf("}\n");
  fflush(stdout);
}

static double realtime_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Barrier(MPI_COMM_WORLD);
  const char *launch = getenv("THUB_BENCH_LAUNCH_REALTIME");
  double setup_s = launch ? realtime_s() - strtod(launch, NULL) : -1.0;

  options_t opt;
  int bad_usage = parse_options(argc, argv, &opt);
  MPI_Allreduce(MPI_IN_PLACE, &bad_usage, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad_usage) {
    MPI_Finalize();
    return 2;
  }

  unsigned char *buf = NULL;
  int no_mem = posix_memalign((void **)&buf, 4096, opt.bytes) != 0;
  MPI_Allreduce(MPI_IN_PLACE, &no_mem, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (no_mem) {
    if (rank == 0) fprintf(stderr, "cannot allocate %zu bytes\n", opt.bytes);
    free(buf);
    MPI_Finalize();
    return 1;
  }

  double times[MAX_ITERS], root_times[MAX_ITERS];
  double *rank_times = NULL; /* [iteration][rank], at rank 0 */
  if (opt.per_rank && rank == 0 && !(rank_times = calloc((size_t)opt.iters * (size_t)nranks, sizeof *rank_times))) {
    fprintf(stderr, "cannot allocate the per-rank times\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  unsigned long long errors = 0;
  for (int it = 0; it < opt.warmup + opt.iters; it++) {
    if (rank == 0) fill_payload(buf, opt.bytes, it);
    else memset(buf, 0xA0 + rank % 64, opt.bytes); /* rank-dependent poison */

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc = bcast_bytes(buf, opt.bytes, 0, MPI_COMM_WORLD);
    double elapsed = MPI_Wtime() - t0, slowest = 0.0;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
      fprintf(stderr, "rank %d: MPI_Bcast failed (%d)\n", rank, rc);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (opt.per_rank && it >= opt.warmup)
      MPI_Gather(&elapsed, 1, MPI_DOUBLE, rank ? NULL : rank_times + (size_t)(it - opt.warmup) * (size_t)nranks, 1,
                 MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (it >= opt.warmup) {
      times[it - opt.warmup] = slowest;
      root_times[it - opt.warmup] = elapsed; /* meaningful at rank 0, the root */
    }

    if (opt.check && rank != 0) {
      size_t first_bad = 0, bad = check_payload(buf, opt.bytes, it, &first_bad);
      if (bad) {
        fprintf(stderr, "rank %d iter %d: %zu bad words, first at byte %zu\n", rank, it, bad, first_bad);
        errors += bad;
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

  if (rank == 0) report(&opt, nranks, times, root_times, errors == 0, rank_times, setup_s);
  free(rank_times);
  free(buf);
  MPI_Finalize();
  return errors == 0 ? 0 : 1;
}
