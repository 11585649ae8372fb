/* thub_osu_fanout: TensorHub's fan-out against MPI_Bcast of the same bytes, launched by mpirun
 * in the manner of the OSU micro-benchmarks (osu_bcast).
 *
 *   mpirun -np N thub_osu_fanout [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-c] [-a] [-I KEY=VALUE]...
 *                                [--json[=FILE]]
 *
 * Rank 0 is the trainer: it hosts the registry (THUB_MPI_Init) and publishes a model of S
 * bytes (one tensor); ranks 1..N-1 are rollouts and replicate it. Per size S (doubling from
 * MIN to MAX) and per iteration, in this order and on the same ranks and buffers:
 *   TensorHub: rank 0 publishes version v; barrier; each rollout times THUB_Replicate(v);
 *              the iteration's time is the max over ranks (an allreduce, which also makes
 *              sure every rollout holds v); then every rank unpublishes (untimed).
 *   MPI_Bcast: barrier; each rank times MPI_Bcast of the same S bytes from rank 0 (the
 *              buffer TensorHub registered); the max over ranks.
 * Each column is the median over ITERS iterations after WARMUP; MB/s is S (what each rollout
 * receives) per second, 10^6 bytes; ratio = TensorHub time / MPI_Bcast time; CPU s/GB is
 * the CPU time of all ranks (every thread, getrusage) inside the timed windows per 10^9
 * bytes delivered to the rollouts. With -c every rank clears its buffer before each
 * transfer and checks every byte of every version it got (both methods); any wrong byte
 * makes the exit code 1.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <mpi.h>
#include <tensorhub/tensorhub.h>
#include <tensorhub/tensorhub_mpi.h>

#define MAX_INFO 32

struct options {
  size_t min_bytes, max_bytes;
  int iters, warmup, verify, alloc_mem;
  const char *json; /* NULL: table only; "": JSON lines on stdout instead of the table; else a file */
  int ninfo;
  char *info_kv[MAX_INFO];
};

struct method_result {
  double median_us, min_us, max_us, cpu_s_per_gb;
};

static int rank = 0, nranks = 0;

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "thub_osu_fanout: rank %d: ", rank);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static void thub_check(THUB_Context ctx, int st, const char *what) {
  char detail[1024] = "";
  if (st >= 0) return;
  if (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
  die("%s: %d %s | %s", what, st, THUB_Error_string(st), detail);
}

/* "64", "4K", "1M", "2G" (binary units) */
static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end) return -1;
  *out = (size_t)v;
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np N thub_osu_fanout [options]   (N >= 2: rank 0 publishes, N-1 replicate)\n"
          "  -m, --message-size MIN:MAX  sizes from MIN to MAX bytes, doubling (K/M/G suffixes; default 1K:64M)\n"
          "  -i, --iterations N          timed iterations per size (default 20)\n"
          "  -x, --warmup N              untimed iterations first (default 2)\n"
          "  -c, --verify                check every byte of every version on every rank (exit 1 if wrong)\n"
          "  -a, --alloc-mem             buffers from THUB_Alloc_mem (default: page-aligned malloc)\n"
          "  -I, --info KEY=VALUE        an info key for THUB_MPI_Init (repeatable), e.g. -I tls=tcp\n"
          "      --json[=FILE]           JSON lines: on stdout instead of the table, or into FILE\n"
          "  -h, --help\n");
}

static void parse_args(int argc, char **argv, struct options *o) {
  static const struct option longs[] = {
      {"message-size", required_argument, 0, 'm'}, {"iterations", required_argument, 0, 'i'},
      {"warmup", required_argument, 0, 'x'},       {"verify", no_argument, 0, 'c'},
      {"alloc-mem", no_argument, 0, 'a'},          {"info", required_argument, 0, 'I'},
      {"json", optional_argument, 0, 'j'},         {"help", no_argument, 0, 'h'},
      {0, 0, 0, 0}};
  int c;
  memset(o, 0, sizeof *o);
  o->min_bytes = 1024;
  o->max_bytes = (size_t)64 << 20;
  o->iters = 20;
  o->warmup = 2;
  while ((c = getopt_long(argc, argv, "m:i:x:caI:h", longs, NULL)) != -1) {
    switch (c) {
      case 'm': {
        char *colon = strchr(optarg, ':');
        int bad;
        if (!colon) {
          bad = parse_size(optarg, &o->max_bytes);
        } else {
          *colon = '\0';
          bad = parse_size(optarg, &o->min_bytes) || parse_size(colon + 1, &o->max_bytes);
        }
        if (bad || o->min_bytes == 0 || o->min_bytes > o->max_bytes || o->max_bytes > (size_t)1 << 30) {
          if (rank == 0) fprintf(stderr, "thub_osu_fanout: -m wants MIN:MAX with 1 <= MIN <= MAX <= 1G\n");
          MPI_Finalize();
          exit(1);
        }
        break;
      }
      case 'i': o->iters = atoi(optarg); break;
      case 'x': o->warmup = atoi(optarg); break;
      case 'c': o->verify = 1; break;
      case 'a': o->alloc_mem = 1; break;
      case 'I':
        if (o->ninfo == MAX_INFO || !strchr(optarg, '=')) {
          if (rank == 0) fprintf(stderr, "thub_osu_fanout: -I wants KEY=VALUE (at most %d)\n", MAX_INFO);
          MPI_Finalize();
          exit(1);
        }
        o->info_kv[o->ninfo++] = optarg;
        break;
      case 'j': o->json = optarg ? optarg : ""; break;
      case 'h':
        if (rank == 0) usage(stdout);
        MPI_Finalize();
        exit(0);
      default:
        if (rank == 0) usage(stderr);
        MPI_Finalize();
        exit(1);
    }
  }
  if (o->iters < 1 || o->warmup < 0 || optind != argc) {
    if (rank == 0) usage(stderr);
    MPI_Finalize();
    exit(1);
  }
}

/* The bytes of version `v` of the given method (0 TensorHub, 1 MPI_Bcast): never all zero. */
static uint64_t word(uint64_t v, uint64_t j) {
  uint64_t x = v * 0x9E3779B97F4A7C15ull + j * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return x | 1;
}

static void fill(unsigned char *buf, size_t n, uint64_t v) {
  size_t j;
  for (j = 0; j + 8 <= n; j += 8) {
    uint64_t w = word(v, j);
    memcpy(buf + j, &w, 8);
  }
  for (; j < n; j++) buf[j] = (unsigned char)(word(v, j) >> 8) | 1;
}

/* The number of wrong bytes (0 when all match). */
static size_t check(const unsigned char *buf, size_t n, uint64_t v) {
  size_t j, bad = 0;
  for (j = 0; j + 8 <= n; j += 8) {
    uint64_t w = word(v, j);
    if (memcmp(buf + j, &w, 8) != 0) bad++;
  }
  for (; j < n; j++) bad += buf[j] != ((unsigned char)(word(v, j) >> 8) | 1);
  return bad;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* The MPI library and the collective settings mpirun passed (--mca coll_* becomes OMPI_MCA_coll_*). */
static void print_mpi_setup(void) {
  extern char **environ;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0, any = 0;
  char **e;
  MPI_Get_library_version(lib, &len);
  lib[strcspn(lib, ",\n")] = '\0';
  printf("# MPI_Bcast: %s;", lib);
  for (e = environ; *e; e++) {
    if (strncmp(*e, "OMPI_MCA_coll", 13) == 0) {
      printf(" %s", *e + 9);
      any = 1;
    }
  }
  printf("%s\n", any ? "" : " the library's default algorithm choice");
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static struct method_result summarize(double *us, int n, double cpu_s, size_t bytes) {
  struct method_result r;
  double delivered = (double)bytes * (double)(nranks - 1) * (double)n;
  qsort(us, (size_t)n, sizeof *us, cmp_double);
  r.median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  r.min_us = us[0];
  r.max_us = us[n - 1];
  r.cpu_s_per_gb = cpu_s / (delivered / 1e9);
  return r;
}

/* One size: both methods, interleaved per iteration. Returns the wrong bytes seen by this rank. */
static size_t run_size(THUB_Context ctx, unsigned char *buf, size_t bytes, const struct options *o,
                       struct method_result *thub, struct method_result *bcast) {
  char model[64], replica[32];
  THUB_Model m = THUB_MODEL_NULL;
  const int total = o->warmup + o->iters;
  double *t_thub = calloc((size_t)o->iters, sizeof(double));
  double *t_bcast = calloc((size_t)o->iters, sizeof(double));
  double cpu_thub = 0.0, cpu_bcast = 0.0, all_cpu = 0.0;
  size_t wrong = 0;
  int k;
  if (!t_thub || !t_bcast) die("out of memory");
  snprintf(model, sizeof model, "osu-fanout-%zu", bytes);
  snprintf(replica, sizeof replica, "rank-%d", rank); /* every rank is its own replica */
  thub_check(ctx, THUB_Open(ctx, model, replica, 0, 1, THUB_INFO_NULL, &m), "THUB_Open");
  thub_check(ctx, THUB_Register(m, "weights", buf, bytes, THUB_MEM_HOST), "THUB_Register");

  for (k = 0; k < total; k++) {
    const int64_t v = k + 1;
    double t0, dt = 0.0, dmax = 0.0, c0;
    int64_t got = -1;

    /* TensorHub: publish v, every rollout replicates it */
    if (rank == 0) {
      if (o->verify) fill(buf, bytes, (uint64_t)v * 2);
      thub_check(ctx, THUB_Publish(m, v), "THUB_Publish");
    } else if (o->verify) {
      memset(buf, 0, bytes);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    c0 = cpu_seconds();
    t0 = MPI_Wtime();
    if (rank != 0) {
      thub_check(ctx, THUB_Replicate(m, v, &got), "THUB_Replicate");
      dt = MPI_Wtime() - t0;
    }
    if (k >= o->warmup) cpu_thub += cpu_seconds() - c0;
    MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); /* every rollout holds v */
    if (k >= o->warmup) t_thub[k - o->warmup] = 1e6 * dmax;
    if (rank != 0 && o->verify) {
      if (got != v) {
        fprintf(stderr, "thub_osu_fanout: rank %d: size %zu: holds version %" PRId64 ", expected %" PRId64 "\n", rank,
                bytes, got, v);
        wrong++;
      }
      wrong += check(buf, bytes, (uint64_t)v * 2);
    }
    thub_check(ctx, THUB_Unpublish(m), "THUB_Unpublish");

    /* MPI_Bcast of the same bytes from the same buffer */
    if (rank == 0) {
      if (o->verify) fill(buf, bytes, (uint64_t)v * 2 + 1);
    } else if (o->verify) {
      memset(buf, 0, bytes);
    }
    dt = 0.0;
    MPI_Barrier(MPI_COMM_WORLD);
    c0 = cpu_seconds();
    t0 = MPI_Wtime();
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank != 0) dt = MPI_Wtime() - t0;
    if (k >= o->warmup) cpu_bcast += cpu_seconds() - c0;
    MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (k >= o->warmup) t_bcast[k - o->warmup] = 1e6 * dmax;
    if (rank != 0 && o->verify) wrong += check(buf, bytes, (uint64_t)v * 2 + 1);
  }
  thub_check(ctx, THUB_Close(&m), "THUB_Close");

  MPI_Allreduce(&cpu_thub, &all_cpu, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  *thub = summarize(t_thub, o->iters, all_cpu, bytes);
  MPI_Allreduce(&cpu_bcast, &all_cpu, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  *bcast = summarize(t_bcast, o->iters, all_cpu, bytes);
  free(t_thub);
  free(t_bcast);
  return wrong;
}

int main(int argc, char **argv) {
  struct options o;
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Info info = THUB_INFO_NULL;
  unsigned char *buf = NULL;
  char addr[256] = "", detail[1024] = "";
  FILE *json = NULL;
  unsigned long long wrong_total = 0;
  size_t bytes;
  int st, i;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  parse_args(argc, argv, &o);
  if (nranks < 2) {
    if (rank == 0) fprintf(stderr, "thub_osu_fanout: needs 2 or more ranks (mpirun -np N, N >= 2)\n");
    MPI_Finalize();
    return 1;
  }

  thub_check(THUB_CONTEXT_NULL, THUB_Info_create(&info), "THUB_Info_create");
  for (i = 0; i < o.ninfo; i++) {
    char *eq = strchr(o.info_kv[i], '=');
    *eq = '\0';
    thub_check(THUB_CONTEXT_NULL, THUB_Info_set(info, o.info_kv[i], eq + 1), "THUB_Info_set");
    *eq = '=';
  }
  st = THUB_MPI_Init(MPI_COMM_WORLD, 0, info, &ctx);
  THUB_Info_free(&info);
  if (st != THUB_SUCCESS) {
    /* the same outcome on every rank: report once and leave together */
    THUB_MPI_Last_error(detail, sizeof detail);
    if (rank == 0) fprintf(stderr, "thub_osu_fanout: THUB_MPI_Init: %d %s | %s\n", st, THUB_Error_string(st), detail);
    MPI_Finalize();
    return 1;
  }
  thub_check(ctx, THUB_Registry_address(ctx, addr, sizeof addr), "THUB_Registry_address");

  if (o.alloc_mem) {
    void *p = NULL;
    thub_check(ctx, THUB_Alloc_mem(ctx, o.max_bytes, THUB_INFO_NULL, &p), "THUB_Alloc_mem");
    buf = p;
  } else if (posix_memalign((void **)&buf, 4096, o.max_bytes) != 0) {
    die("cannot allocate %zu bytes", o.max_bytes);
  }
  memset(buf, 0, o.max_bytes); /* touch every page before timing */

  if (rank == 0) {
    if (o.json && o.json[0]) {
      json = fopen(o.json, "w");
      if (!json) die("cannot write %s: %s", o.json, strerror(errno));
    } else if (o.json) {
      json = stdout;
    }
    if (json != stdout) {
      char lib[256] = "";
      THUB_Get_library_version(lib, sizeof lib);
      printf("# thub_osu_fanout: TensorHub fan-out vs MPI_Bcast, %d ranks: rank 0 publishes, %d replicate\n", nranks,
             nranks - 1);
      printf("# %s; registry %s (in rank 0); buffers from %s; %d iterations after %d warmup; verify %s\n", lib, addr,
             o.alloc_mem ? "THUB_Alloc_mem" : "malloc", o.iters, o.warmup, o.verify ? "on" : "off");
      for (i = 0; i < o.ninfo; i++) printf("# info %s\n", o.info_kv[i]);
      print_mpi_setup();
      printf("# time: max over ranks from a barrier until the rank holds the bytes, median over iterations\n");
      printf("# MB/s: bytes per rollout / time (10^6 B/s); CPU s/GB: every rank's CPU in the timed windows\n");
      printf("%-12s %15s %15s %8s %16s %16s %11s %11s\n", "# Size", "TensorHub(us)", "MPI_Bcast(us)", "ratio",
             "TensorHub(MB/s)", "MPI_Bcast(MB/s)", "THUB_s/GB", "Bcast_s/GB");
      fflush(stdout);
    }
  }

  for (bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    struct method_result thub, bcast;
    unsigned long long wrong = run_size(ctx, buf, bytes, &o, &thub, &bcast), all_wrong = 0;
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrong_total += all_wrong;
    if (rank == 0) {
      const double ratio = thub.median_us / bcast.median_us;
      if (json != stdout) {
        printf("%-12zu %15.2f %15.2f %8.2f %16.2f %16.2f %11.3f %11.3f%s\n", bytes, thub.median_us, bcast.median_us,
               ratio, (double)bytes / thub.median_us, (double)bytes / bcast.median_us, thub.cpu_s_per_gb,
               bcast.cpu_s_per_gb, all_wrong ? "  WRONG BYTES" : "");
        fflush(stdout);
      }
      if (json) {
        fprintf(json,
                "{\"bench\":\"thub_osu_fanout\",\"ranks\":%d,\"rollouts\":%d,\"bytes\":%zu,\"iters\":%d,\"warmup\":%d,"
                "\"alloc_mem\":%s,\"verify\":%s,\"wrong_bytes\":%llu,"
                "\"thub_us\":%.3f,\"thub_min_us\":%.3f,\"thub_max_us\":%.3f,\"thub_MBps\":%.3f,\"thub_cpu_s_per_GB\":%.4f,"
                "\"bcast_us\":%.3f,\"bcast_min_us\":%.3f,\"bcast_max_us\":%.3f,\"bcast_MBps\":%.3f,"
                "\"bcast_cpu_s_per_GB\":%.4f,\"ratio\":%.4f}\n",
                nranks, nranks - 1, bytes, o.iters, o.warmup, o.alloc_mem ? "true" : "false",
                o.verify ? "true" : "false", all_wrong, thub.median_us, thub.min_us, thub.max_us,
                (double)bytes / thub.median_us, thub.cpu_s_per_gb, bcast.median_us, bcast.min_us, bcast.max_us,
                (double)bytes / bcast.median_us, bcast.cpu_s_per_gb, ratio);
        fflush(json);
      }
    }
    if (bytes > o.max_bytes / 2) break; /* no overflow past MAX */
  }

  if (o.alloc_mem) {
    thub_check(ctx, THUB_Free_mem(ctx, buf), "THUB_Free_mem");
  } else {
    free(buf);
  }
  thub_check(THUB_CONTEXT_NULL, THUB_MPI_Finalize(MPI_COMM_WORLD, &ctx), "THUB_MPI_Finalize");
  if (rank == 0) {
    if (o.verify) {
      fprintf(json == stdout ? stderr : stdout, "# verify: %s (%llu wrong words or bytes over every rank, size and version)\n",
             wrong_total ? "FAILED" : "every byte of every version on every rollout was right", wrong_total);
    }
    if (json && json != stdout) fclose(json);
    fflush(stdout);
  }
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
