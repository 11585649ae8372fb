/* tensorhub-demo: one trainer and N rollout processes on this machine moving a synthetic
 * model through TensorHub, step by step, with timings.
 *
 * The trainer starts the embedded registry (THUB_Init without `registry`), then forks and
 * execs itself N times in the rollout role, passing the registry address and two pipe file
 * descriptors on the command line. Every step the trainer
 *   1. unpublishes the previous version (returns once nobody reads its buffers),
 *   2. fills its tensors with data that depends on the step,
 *   3. publishes the step (returns at once: no data moves),
 *   4. tells every rollout "go <step>" and waits for each one's report.
 * Each rollout calls THUB_Replicate (first step) or THUB_Update(THUB_LATEST) until it holds
 * the step, checks a sample of bytes (all of them with --verify), and reports its time.
 * Synchronisation is by pipes only; nothing sleeps. Written in C99 against the public
 * header only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tensorhub/tensorhub.h>

#define MODEL_NAME "demo-policy"
#define MAX_ROLLOUTS 64
#define MAX_UPDATE_TRIES 100000

/* ---- options ------------------------------------------------------------------------ */

struct options {
  uint64_t bytes;
  int tensors;
  int rollouts;
  int steps;
  const char *tls;
  int thub_memory; /* --memory thub: tensors in THUB_Alloc_mem regions */
  int verify;
  /* rollout role only */
  int is_rollout;
  int index;
  int cmd_fd;
  int report_fd;
  const char *registry;
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: tensorhub-demo [--bytes N[K|M|G]] [--tensors T] [--rollouts R] [--steps S]\n"
          "                      [--tls LIST] [--memory malloc|thub] [--verify]\n"
          "  --bytes     model size (default 1G; K/M/G are powers of 1024)\n"
          "  --tensors   number of tensors, a few of them tiny (default 64)\n"
          "  --rollouts  rollout processes (default 3, at most %d)\n"
          "  --steps     published versions (default 5)\n"
          "  --tls       UCX transports, e.g. tcp (info key `tls`); default (or `default`): UCX's\n"
          "              choice, with which rollouts on this host read the trainer's memory with\n"
          "              process_vm_readv (the read path of each rollout is printed)\n"
          "  --memory M  where the tensors live: malloc (default; posix_memalign) or thub\n"
          "              (THUB_Alloc_mem: UCX's shared memory, read over its mapped segment)\n"
          "  --verify    hash every chunk in the library (info key `verify`) and check every byte\n"
          "              (default: a sample of bytes per tensor)\n",
          MAX_ROLLOUTS);
}

static int parse_size(const char *s, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end == 'i' || *end == 'B') end++; /* accept 64MiB, 64MB */
  if (*end == 'B') end++;
  if (*end != '\0') return -1;
  *out = (uint64_t)v * mul;
  return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static void parse_options(int argc, char **argv, struct options *o) {
  enum { OPT_ROLE = 256, OPT_INDEX, OPT_CMD_FD, OPT_REPORT_FD, OPT_REGISTRY, OPT_MEMORY };
  static const struct option longopts[] = {
      {"bytes", required_argument, 0, 'b'},     {"tensors", required_argument, 0, 't'},
      {"rollouts", required_argument, 0, 'r'},  {"steps", required_argument, 0, 's'},
      {"tls", required_argument, 0, 'x'},       {"verify", no_argument, 0, 'v'},
      {"help", no_argument, 0, 'h'},            {"role", required_argument, 0, OPT_ROLE},
      {"index", required_argument, 0, OPT_INDEX}, {"cmd-fd", required_argument, 0, OPT_CMD_FD},
      {"report-fd", required_argument, 0, OPT_REPORT_FD},
      {"registry", required_argument, 0, OPT_REGISTRY}, {"memory", required_argument, 0, OPT_MEMORY},
      {0, 0, 0, 0}};
  int c, bad = 0;
  memset(o, 0, sizeof *o);
  o->bytes = 1ull << 30;
  o->tensors = 64;
  o->rollouts = 3;
  o->steps = 5;
  o->cmd_fd = o->report_fd = -1;
  while ((c = getopt_long(argc, argv, "b:t:r:s:x:vh", longopts, NULL)) != -1) {
    switch (c) {
      case 'b': bad |= parse_size(optarg, &o->bytes) != 0 || o->bytes == 0; break;
      case 't': bad |= parse_int(optarg, 1, 100000, &o->tensors); break;
      case 'r': bad |= parse_int(optarg, 1, MAX_ROLLOUTS, &o->rollouts); break;
      case 's': bad |= parse_int(optarg, 1, 1000000, &o->steps); break;
      case 'x': o->tls = optarg; break;
      case 'v': o->verify = 1; break;
      case 'h': usage(stdout); exit(0);
      case OPT_ROLE: o->is_rollout = strcmp(optarg, "rollout") == 0; bad |= !o->is_rollout; break;
      case OPT_INDEX: bad |= parse_int(optarg, 0, MAX_ROLLOUTS - 1, &o->index); break;
      case OPT_CMD_FD: bad |= parse_int(optarg, 0, 1 << 20, &o->cmd_fd); break;
      case OPT_REPORT_FD: bad |= parse_int(optarg, 0, 1 << 20, &o->report_fd); break;
      case OPT_REGISTRY: o->registry = optarg; break;
      case OPT_MEMORY:
        o->thub_memory = strcmp(optarg, "thub") == 0;
        bad |= !o->thub_memory && strcmp(optarg, "malloc") != 0;
        break;
      default: bad = 1;
    }
    if (bad) break;
  }
  if (bad || optind != argc || (o->is_rollout && (o->cmd_fd < 0 || o->report_fd < 0 || !o->registry))) {
    fprintf(stderr, "tensorhub-demo: bad arguments\n");
    usage(stderr);
    exit(2);
  }
  if (o->bytes < (uint64_t)o->tensors) {
    fprintf(stderr, "tensorhub-demo: --bytes must be at least --tensors\n");
    exit(2);
  }
  /* No transport is forced: same-host rollouts read with process_vm_readv, which sends
   * nothing to the source (UCX 1.13's shared-memory gets, answered by the source's worker,
   * collapsed with more busy processes than cores: docs/demo.md). */
  if (o->tls && strcmp(o->tls, "default") == 0) o->tls = NULL;
}

/* ---- the synthetic model -------------------------------------------------------------- */

struct model_layout {
  int n;
  int ntiny;
  char (*names)[48];
  uint64_t *sizes;
  unsigned char **bufs;
};

/* A few tiny tensors (below the library's compaction threshold) at the end, the rest of the
 * bytes split evenly over "layer" tensors, page-multiple sizes but the last. */
static void make_layout(THUB_Context ctx, const struct options *o, struct model_layout *l) {
  static const uint64_t tiny[] = {4, 1000, 4096, 65536};
  int ntiny = 0, i;
  uint64_t tiny_total = 0;
  l->n = o->tensors;
  l->names = calloc((size_t)l->n, sizeof *l->names);
  l->sizes = calloc((size_t)l->n, sizeof *l->sizes);
  l->bufs = calloc((size_t)l->n, sizeof *l->bufs);
  if (!l->names || !l->sizes || !l->bufs) {
    fprintf(stderr, "tensorhub-demo: out of memory\n");
    exit(1);
  }
  if (l->n >= 8 && o->bytes >= (1u << 20)) {
    ntiny = l->n / 16 > 4 ? 4 : (l->n / 16 < 1 ? 1 : l->n / 16);
    for (i = 0; i < ntiny; i++) tiny_total += tiny[i];
  }
  l->ntiny = ntiny;
  int nbig = l->n - ntiny;
  uint64_t rest = o->bytes - tiny_total;
  uint64_t each = rest / (uint64_t)nbig;
  if (each >= 8192) each &= ~(uint64_t)4095;
  for (i = 0; i < nbig; i++) {
    l->sizes[i] = i == nbig - 1 ? rest - each * (uint64_t)(nbig - 1) : each;
    snprintf(l->names[i], sizeof l->names[i], "layers.%d.weight", i);
  }
  for (i = 0; i < ntiny; i++) {
    l->sizes[nbig + i] = tiny[i];
    snprintf(l->names[nbig + i], sizeof l->names[nbig + i], "layers.%d.bias", i);
  }
  for (i = 0; i < l->n; i++) {
    void *p = NULL;
    size_t n = l->sizes[i] ? l->sizes[i] : 1;
    if (o->thub_memory ? THUB_Alloc_mem(ctx, n, THUB_INFO_NULL, &p) != THUB_SUCCESS
                       : posix_memalign(&p, 4096, n) != 0) {
      fprintf(stderr, "tensorhub-demo: cannot allocate %" PRIu64 " bytes\n", l->sizes[i]);
      exit(1);
    }
    memset(p, 0, l->sizes[i]); /* touch the pages now, not during the first transfer */
    l->bufs[i] = p;
  }
}

/* After THUB_Finalize, which frees the THUB_Alloc_mem regions itself. */
static void free_layout(const struct options *o, struct model_layout *l) {
  int i;
  for (i = 0; i < l->n && !o->thub_memory; i++) free(l->bufs[i]);
  free(l->bufs);
  free(l->sizes);
  free(l->names);
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The value of 8-byte word `w` of tensor `t` at step `s`: cheap, and different per step,
 * per tensor and per position. Tail bytes take the low bytes of the next word's value. */
static uint64_t word_at(uint64_t base, uint64_t w) { return base ^ ((w + 1) * 0x9E3779B97F4A7C15ull); }
static uint64_t base_of(int64_t step, int t) { return mix64((uint64_t)step * 1000003u + (uint64_t)t); }

static void fill_tensor(unsigned char *p, uint64_t bytes, int64_t step, int t) {
  uint64_t base = base_of(step, t), nw = bytes / 8, w;
  for (w = 0; w < nw; w++) {
    uint64_t v = word_at(base, w);
    memcpy(p + 8 * w, &v, 8);
  }
  for (w = nw * 8; w < bytes; w++) p[w] = (unsigned char)(word_at(base, nw) >> (8 * (w % 8)));
}

/* Check byte offset `off` (rounded down to its word) of a tensor; 0 when right. */
static int check_at(const unsigned char *p, uint64_t bytes, uint64_t base, uint64_t off) {
  uint64_t nw = bytes / 8, w = off / 8;
  if (w < nw) {
    uint64_t v;
    memcpy(&v, p + 8 * w, 8);
    return v != word_at(base, w);
  }
  return p[off] != (unsigned char)(word_at(base, nw) >> (8 * (off % 8)));
}

/* Returns -1 when right, else the tensor index (and *bad_off the byte offset). */
static int check_model(const struct model_layout *l, int64_t step, int all, uint64_t *bad_off) {
  int t;
  for (t = 0; t < l->n; t++) {
    uint64_t bytes = l->sizes[t], base = base_of(step, t), off, k;
    if (bytes == 0) continue;
    if (all) {
      for (off = 0; off < bytes; off += (off + 8 <= bytes / 8 * 8) ? 8 : 1) {
        if (check_at(l->bufs[t], bytes, base, off)) return *bad_off = off, t;
      }
      continue;
    }
    /* first and last 64 bytes, and 64 positions spread over the tensor */
    for (off = 0; off < bytes && off < 64; off++) {
      if (check_at(l->bufs[t], bytes, base, off)) return *bad_off = off, t;
    }
    for (off = bytes > 64 ? bytes - 64 : 0; off < bytes; off++) {
      if (check_at(l->bufs[t], bytes, base, off)) return *bad_off = off, t;
    }
    for (k = 0; k < 64; k++) {
      off = mix64(base + k) % bytes;
      if (check_at(l->bufs[t], bytes, base, off)) return *bad_off = off, t;
    }
  }
  return -1;
}

/* ---- helpers ---------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "THUB_Publish: THUB_ERR_STATE (...): <detail of THUB_Last_error>" */
static void thub_error_text(THUB_Context ctx, const char *what, int st, char *buf, size_t len) {
  char detail[1024];
  if (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
  snprintf(buf, len, "%s: %s%s%s", what, THUB_Error_string(st), detail[0] ? " | " : "", detail);
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* 0 on success, 1 on end of file, -1 on error */
static int read_all(int fd, void *buf, size_t len) {
  char *p = buf;
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, p + got, len - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return got == 0 ? 1 : -1;
    got += (size_t)n;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  if (n == 0) return 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the pipe protocol ---------------------------------------------------------------- */

enum { CMD_GO = 1, CMD_QUIT = 2 };
struct command {
  int32_t op;
  int64_t step;
};

enum { REP_READY = 1, REP_STEP = 2 };
/* The read paths, as THUB_Model_stat names their byte counts. */
#define NPATHS 4
static const char *const path_stat[NPATHS] = {"bytes_process_vm_readv", "bytes_ucx_mapped", "bytes_socket",
                                              "bytes_ucx_get"};
static const char *const path_name[NPATHS] = {"process_vm_readv", "ucx_mapped", "socket", "ucx_get"};

struct report { /* smaller than PIPE_BUF: one write, one message */
  int32_t kind;
  int32_t status; /* THUB status, or 1 for a byte mismatch */
  int64_t got;
  double seconds;
  int64_t partial_sources; /* of this transfer (THUB_Model_stat) */
  int64_t path_bytes[NPATHS]; /* of this transfer, per read path (THUB_Model_stat bytes_<path>) */
  char msg[512];
};

/* ---- the rollout role ----------------------------------------------------------------- */

static int rollout_fail(int fd, struct report *r, int status) {
  r->status = status;
  fprintf(stderr, "tensorhub-demo: rollout: %s\n", r->msg);
  (void)write_all(fd, r, sizeof *r);
  return 1;
}

static int rollout_main(const struct options *o) {
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  THUB_Info info = THUB_INFO_NULL;
  struct model_layout l;
  struct report rep;
  struct command cmd;
  char replica[32];
  int st, i, held = 0;
  int64_t partial_before = 0;

  memset(&rep, 0, sizeof rep);
  rep.kind = REP_READY;
  THUB_Info_create(&info);
  THUB_Info_set(info, "registry", o->registry);
  if (o->tls) THUB_Info_set(info, "tls", o->tls);
  if (o->verify) THUB_Info_set(info, "verify", "true");
  st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  if (st != THUB_SUCCESS) {
    thub_error_text(ctx, "THUB_Init", st, rep.msg, sizeof rep.msg);
    return rollout_fail(o->report_fd, &rep, st);
  }
  snprintf(replica, sizeof replica, "rollout-%d", o->index);
  st = THUB_Open(ctx, MODEL_NAME, replica, 0, 1, THUB_INFO_NULL, &m);
  if (st != THUB_SUCCESS) {
    thub_error_text(ctx, "THUB_Open", st, rep.msg, sizeof rep.msg);
    return rollout_fail(o->report_fd, &rep, st);
  }
  make_layout(ctx, o, &l);
  for (i = 0; i < l.n; i++) {
    st = THUB_Register(m, l.names[i], l.bufs[i], l.sizes[i], THUB_MEM_HOST);
    if (st != THUB_SUCCESS) {
      thub_error_text(ctx, "THUB_Register", st, rep.msg, sizeof rep.msg);
      return rollout_fail(o->report_fd, &rep, st);
    }
  }
  if (write_all(o->report_fd, &rep, sizeof rep) != 0) return 1;

  for (;;) {
    int rc = read_all(o->cmd_fd, &cmd, sizeof cmd);
    if (rc != 0 || cmd.op == CMD_QUIT) break; /* end of file: the trainer is gone */
    memset(&rep, 0, sizeof rep);
    rep.kind = REP_STEP;
    rep.got = -1;
    double t0 = now_s();
    int tries = 0;
    int64_t got = -1;
    do {
      const char *what = held ? "THUB_Update" : "THUB_Replicate";
      st = held ? THUB_Update(m, THUB_LATEST, &got) : THUB_Replicate(m, THUB_LATEST, &got);
      if (st < 0) {
        thub_error_text(ctx, what, st, rep.msg, sizeof rep.msg);
        return rollout_fail(o->report_fd, &rep, st);
      }
      held = 1;
    } while (got < cmd.step && ++tries < MAX_UPDATE_TRIES);
    rep.seconds = now_s() - t0;
    rep.got = got;
    if (got != cmd.step) {
      snprintf(rep.msg, sizeof rep.msg, "rollout %d: holds version %" PRId64 ", expected %" PRId64, o->index, got,
               cmd.step);
      return rollout_fail(o->report_fd, &rep, THUB_ERR_STATE);
    }
    int64_t partial = 0;
    if (THUB_Model_stat(m, "partial_sources", &partial) == THUB_SUCCESS) {
      rep.partial_sources = partial - partial_before;
      partial_before = partial;
    }
    for (i = 0; i < NPATHS; i++) {
      if (THUB_Model_stat(m, path_stat[i], &rep.path_bytes[i]) != THUB_SUCCESS) rep.path_bytes[i] = 0;
    }
    uint64_t bad_off = 0;
    int bad = check_model(&l, cmd.step, o->verify, &bad_off);
    if (bad >= 0) {
      snprintf(rep.msg, sizeof rep.msg, "rollout %d: version %" PRId64 ": tensor %s byte %" PRIu64 " is wrong",
               o->index, got, l.names[bad], bad_off);
      return rollout_fail(o->report_fd, &rep, 1);
    }
    if (write_all(o->report_fd, &rep, sizeof rep) != 0) return 1;
  }

  st = THUB_Close(&m);
  if (st == THUB_SUCCESS) st = THUB_Finalize(&ctx);
  if (st != THUB_SUCCESS) {
    char msg[1200];
    thub_error_text(ctx, "THUB_Close/Finalize", st, msg, sizeof msg);
    fprintf(stderr, "tensorhub-demo: rollout %d: %s\n", o->index, msg);
    return 1;
  }
  free_layout(o, &l);
  return 0;
}

/* ---- the trainer role ----------------------------------------------------------------- */

struct rollout_proc {
  pid_t pid;
  int cmd_fd;    /* trainer writes */
  int report_fd; /* trainer reads */
};

static struct rollout_proc procs[MAX_ROLLOUTS];
static int nprocs = 0;

static void stop_rollouts(void) {
  int i;
  for (i = 0; i < nprocs; i++) {
    if (procs[i].pid > 0) {
      kill(procs[i].pid, SIGTERM);
      waitpid(procs[i].pid, NULL, 0);
      procs[i].pid = 0;
    }
  }
}

static void trainer_die(const char *msg) {
  fprintf(stderr, "tensorhub-demo: error: %s\n", msg);
  stop_rollouts();
  exit(1);
}

static void trainer_check(THUB_Context ctx, int st, const char *what) {
  char msg[1200];
  if (st >= 0) return;
  thub_error_text(ctx, what, st, msg, sizeof msg);
  trainer_die(msg);
}

static void spawn_rollout(const struct options *o, const char *self, const char *registry, int index) {
  int cmdp[2], repp[2];
  char a_bytes[32], a_tensors[16], a_index[16], a_cmd[16], a_rep[16];
  char *argv[24];
  int n = 0;
  if (pipe2(cmdp, O_CLOEXEC) != 0 || pipe2(repp, O_CLOEXEC) != 0) trainer_die("pipe failed");
  snprintf(a_bytes, sizeof a_bytes, "%" PRIu64, o->bytes);
  snprintf(a_tensors, sizeof a_tensors, "%d", o->tensors);
  snprintf(a_index, sizeof a_index, "%d", index);
  snprintf(a_cmd, sizeof a_cmd, "%d", cmdp[0]);
  snprintf(a_rep, sizeof a_rep, "%d", repp[1]);
  argv[n++] = (char *)"tensorhub-demo";
  argv[n++] = (char *)"--role";
  argv[n++] = (char *)"rollout";
  argv[n++] = (char *)"--index";
  argv[n++] = a_index;
  argv[n++] = (char *)"--registry";
  argv[n++] = (char *)registry;
  argv[n++] = (char *)"--cmd-fd";
  argv[n++] = a_cmd;
  argv[n++] = (char *)"--report-fd";
  argv[n++] = a_rep;
  argv[n++] = (char *)"--bytes";
  argv[n++] = a_bytes;
  argv[n++] = (char *)"--tensors";
  argv[n++] = a_tensors;
  if (o->tls) {
    argv[n++] = (char *)"--tls";
    argv[n++] = (char *)o->tls;
  }
  if (o->verify) argv[n++] = (char *)"--verify";
  if (o->thub_memory) {
    argv[n++] = (char *)"--memory";
    argv[n++] = (char *)"thub";
  }
  argv[n] = NULL;

  pid_t pid = fork();
  if (pid < 0) trainer_die("fork failed");
  if (pid == 0) {
    /* only async-signal-safe calls between fork and exec: the parent has threads */
    fcntl(cmdp[0], F_SETFD, 0);
    fcntl(repp[1], F_SETFD, 0);
    execv(self, argv);
    _exit(127);
  }
  close(cmdp[0]);
  close(repp[1]);
  procs[index].pid = pid;
  procs[index].cmd_fd = cmdp[1];
  procs[index].report_fd = repp[0];
  nprocs = index + 1;
}

static void read_report(int i, int kind, struct report *r) {
  char msg[700];
  int rc = read_all(procs[i].report_fd, r, sizeof *r);
  if (rc != 0) {
    int status = 0;
    waitpid(procs[i].pid, &status, 0);
    procs[i].pid = 0;
    snprintf(msg, sizeof msg, "rollout %d exited without a report (%s %d)", i,
             WIFSIGNALED(status) ? "signal" : "exit code", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    trainer_die(msg);
  }
  if (r->status < 0 || r->status == 1 || r->kind != kind) {
    r->msg[sizeof r->msg - 1] = '\0';
    snprintf(msg, sizeof msg, "rollout %d: %s", i, r->msg);
    trainer_die(msg);
  }
}

static void send_command(int i, int op, int64_t step) {
  struct command c;
  memset(&c, 0, sizeof c);
  c.op = op;
  c.step = step;
  if (write_all(procs[i].cmd_fd, &c, sizeof c) != 0) trainer_die("cannot write to a rollout's pipe");
}

static void human_bytes(uint64_t b, char *buf, size_t len) {
  if (b >= (1ull << 30)) snprintf(buf, len, "%.2f GiB", (double)b / (double)(1ull << 30));
  else if (b >= (1ull << 20)) snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
  else snprintf(buf, len, "%.1f KiB", (double)b / 1024.0);
}

static int trainer_main(const struct options *o) {
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  THUB_Info info = THUB_INFO_NULL;
  struct model_layout l;
  char registry[256], self[4096], hb[32];
  int i, st;
  int64_t step;
  ssize_t n;

  signal(SIGPIPE, SIG_IGN);
  n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) trainer_die("cannot find /proc/self/exe");
  self[n] = '\0';

  THUB_Info_create(&info);
  if (o->tls) THUB_Info_set(info, "tls", o->tls);
  if (o->verify) THUB_Info_set(info, "verify", "true");
  st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  trainer_check(ctx, st, "THUB_Init");
  trainer_check(ctx, THUB_Registry_address(ctx, registry, sizeof registry), "THUB_Registry_address");

  /* start the rollouts before allocating the model: fork copies less */
  for (i = 0; i < o->rollouts; i++) spawn_rollout(o, self, registry, i);

  trainer_check(ctx, THUB_Open(ctx, MODEL_NAME, "trainer", 0, 1, THUB_INFO_NULL, &m), "THUB_Open");
  make_layout(ctx, o, &l);
  for (i = 0; i < l.n; i++) trainer_check(ctx, THUB_Register(m, l.names[i], l.bufs[i], l.sizes[i], THUB_MEM_HOST), "THUB_Register");

  for (i = 0; i < o->rollouts; i++) {
    struct report r;
    read_report(i, REP_READY, &r);
  }
  human_bytes(o->bytes, hb, sizeof hb);
  printf("tensorhub-demo: model %s, %" PRIu64 " bytes (%s) in %d tensors (%d tiny), %d rollouts, %d steps%s%s%s%s\n",
         MODEL_NAME, o->bytes, hb, l.n, l.ntiny, o->rollouts, o->steps, o->tls ? ", tls=" : "", o->tls ? o->tls : "",
         o->thub_memory ? ", THUB_Alloc_mem tensors" : "", o->verify ? ", verify" : "");
  printf("tensorhub-demo: registry %s (embedded in the trainer)\n", registry);
  printf("replicate = time inside THUB_Replicate/THUB_Update of a rollout; stall = trainer time inside\n"
         "THUB_Unpublish(previous) + THUB_Publish; GB/s = 1e9 bytes per second; p = partial (pipelined) source\n");
  fflush(stdout);

  int nsamples = o->steps * o->rollouts;
  double *rep_s = calloc((size_t)nsamples, sizeof(double));
  double *rep_gbs = calloc((size_t)nsamples, sizeof(double));
  double *stall = calloc((size_t)o->steps, sizeof(double));
  double *pub = calloc((size_t)o->steps, sizeof(double));
  double *unpub = calloc((size_t)o->steps, sizeof(double));
  double *slowest = calloc((size_t)o->steps, sizeof(double));
  double *fill = calloc((size_t)o->steps, sizeof(double));
  int64_t(*paths)[NPATHS] = calloc((size_t)o->rollouts, sizeof *paths); /* bytes per rollout and path */
  if (!rep_s || !rep_gbs || !stall || !pub || !unpub || !slowest || !fill || !paths) trainer_die("out of memory");

  for (step = 1; step <= o->steps; step++) {
    int k = (int)step - 1;
    double t0 = now_s(), t1, t2, t3;
    if (step > 1) trainer_check(ctx, THUB_Unpublish(m), "THUB_Unpublish");
    t1 = now_s();
    for (i = 0; i < l.n; i++) fill_tensor(l.bufs[i], l.sizes[i], step, i); /* "training" */
    t2 = now_s();
    trainer_check(ctx, THUB_Publish(m, step), "THUB_Publish");
    t3 = now_s();
    unpub[k] = t1 - t0;
    pub[k] = t3 - t2;
    fill[k] = t2 - t1;
    stall[k] = unpub[k] + pub[k];

    double ts = now_s();
    for (i = 0; i < o->rollouts; i++) send_command(i, CMD_GO, step);
    printf("v=%-3" PRId64 " bytes=%" PRIu64 "  stall %7.3f ms (unpublish %.3f + publish %.3f)  |", step, o->bytes,
           1e3 * stall[k], 1e3 * unpub[k], 1e3 * pub[k]);
    for (i = 0; i < o->rollouts; i++) {
      struct report r;
      read_report(i, REP_STEP, &r);
      double gbs = (double)o->bytes / r.seconds / 1e9;
      rep_s[k * o->rollouts + i] = r.seconds;
      rep_gbs[k * o->rollouts + i] = gbs;
      for (int p = 0; p < NPATHS; p++) paths[i][p] += r.path_bytes[p];
      printf(" r%d %8.1f ms %6.2f GB/s%s |", i, 1e3 * r.seconds, gbs, r.partial_sources ? " p" : "  ");
    }
    slowest[k] = now_s() - ts;
    printf(" all %.1f ms\n", 1e3 * slowest[k]);
    fflush(stdout);
  }

  double t0 = now_s();
  trainer_check(ctx, THUB_Unpublish(m), "THUB_Unpublish");
  double last_unpub = now_s() - t0;
  for (i = 0; i < o->rollouts; i++) send_command(i, CMD_QUIT, 0);
  int failed = 0;
  for (i = 0; i < o->rollouts; i++) {
    int status = 0;
    waitpid(procs[i].pid, &status, 0);
    procs[i].pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "tensorhub-demo: rollout %d did not exit cleanly\n", i);
      failed = 1;
    }
    close(procs[i].cmd_fd);
    close(procs[i].report_fd);
  }
  trainer_check(ctx, THUB_Close(&m), "THUB_Close");
  trainer_check(ctx, THUB_Finalize(&ctx), "THUB_Finalize");

  double med_s = median(rep_s, nsamples), med_gbs = median(rep_gbs, nsamples);
  printf("summary: %d steps x %d rollouts, %s per replica\n", o->steps, o->rollouts, hb);
  printf("  median replicate per rollout  %.1f ms  (%.2f GB/s)\n", 1e3 * med_s, med_gbs);
  printf("  median step, all rollouts     %.1f ms  (%.2f GB/s aggregate)\n", 1e3 * median(slowest, o->steps),
         (double)o->bytes * o->rollouts / median(slowest, o->steps) / 1e9);
  printf("  median trainer stall          %.3f ms  (unpublish %.3f ms, publish %.3f ms; final unpublish %.3f ms)\n",
         1e3 * median(stall, o->steps), 1e3 * (o->steps > 1 ? median(unpub + 1, o->steps - 1) : 0.0), 1e3 * median(pub, o->steps), 1e3 * last_unpub);
  printf("  median trainer fill (not stall) %.1f ms\n", 1e3 * median(fill, o->steps));
  for (i = 0; i < o->rollouts; i++) {
    int64_t all = 0;
    int p, shown = 0;
    for (p = 0; p < NPATHS; p++) all += paths[i][p];
    printf("  rollout %d read path:", i);
    for (p = 0; p < NPATHS; p++) {
      if (paths[i][p] == 0) continue;
      char b[32];
      human_bytes((uint64_t)paths[i][p], b, sizeof b);
      printf("%s %s %s (%.1f %%)", shown++ ? "," : "", path_name[p], b, 100.0 * (double)paths[i][p] / (double)all);
    }
    printf("%s\n", shown ? "" : " none (no bytes read)");
  }
  free(paths);
  free(rep_s);
  free(rep_gbs);
  free(stall);
  free(pub);
  free(unpub);
  free(slowest);
  free(fill);
  free_layout(o, &l);
  return failed;
}

int main(int argc, char **argv) {
  struct options o;
  parse_options(argc, argv, &o);
  return o.is_rollout ? rollout_main(&o) : trainer_main(&o);
}
