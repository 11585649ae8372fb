/* thub_crossdc: a trainer publishes a new version every --period seconds while rollouts in
 * two datacenters keep updating to the latest (the TensorHub paper's Figure 12 at small
 * scale, in the two-datacenter cluster in a box: tools/netlab/netlab.sh --dc-b,
 * bench/netlab/run-crossdc.sh --steps).
 *
 *   thub_crossdc --role trainer --listen IP:PORT --versions V --period P [--bytes S]
 *                [--tensors T] [--linger S] [--stop-file F] [--info K=V]...
 *   thub_crossdc --role rollout --registry IP:PORT --index I --duration S [--poll-ms M]
 *                [--bytes S] [--tensors T] [--info K=V]...
 *
 * The trainer runs the embedded registry on IP:PORT and holds two replicas of the model
 * ("t0", "t1"), so that version v can be published while readers still read v-1: version v
 * goes into replica v % 2 at t0 + (v - 1) x P, after that replica's unpublish of v - 2 (which
 * waits for v - 2's readers: the trainer's stall). Versions overtake each other whenever a
 * version takes longer than P to reach a rollout. After the last version it keeps serving
 * (and the registry running) until the file --stop-file exists, at most --linger s.
 *
 * A rollout calls THUB_Update(THUB_LATEST) every --poll-ms (its inference step) for
 * --duration seconds: a call that returns THUB_SUCCESS moved it to a newer version (checked:
 * sampled words of every tensor), THUB_NOT_UPDATED left it serving what it holds. The time
 * inside each call is the rollout's stall. Each process labels its datacenter with --info
 * datacenter=X. Output: one JSON line per process ("bench":"thub_crossdc").
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <getopt.h>
#include <signal.h>

#include <tensorhub/tensorhub.h>

/* now_s, parse_size, parse_int of the netlab benchmarks (no control channel here) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "line_conn.h"
#pragma GCC diagnostic pop

#define MODEL_NAME "crossdc"
#define MAX_INFO 16
#define MAX_TENSORS 64
#define MAX_CALLS 100000

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("thub_crossdc: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

struct options {
  int trainer, index, versions, tensors, poll_ms, ninfo;
  uint64_t bytes;
  double period, linger, duration;
  const char *addr, *stop_file;
  const char *info_kv[MAX_INFO];
};

static void usage(void) {
  fprintf(stderr,
          "usage: thub_crossdc --role trainer --listen IP:PORT --versions V --period P [--bytes S] [--tensors T]\n"
          "                    [--linger S] [--stop-file F] [--info K=V]...\n"
          "       thub_crossdc --role rollout --registry IP:PORT --index I --duration S [--poll-ms M]\n"
          "                    [--bytes S] [--tensors T] [--info K=V]...\n"
          "  defaults: --bytes 64M, --tensors 4, --linger 5, --poll-ms 100.\n");
  exit(2);
}

static double parse_double(const char *s, const char *what) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0)) die("bad %s '%s'", what, s);
  return v;
}

static void parse(int argc, char **argv, struct options *o) {
  static const struct option longs[] = {
      {"role", required_argument, 0, 'r'},     {"listen", required_argument, 0, 'l'},
      {"registry", required_argument, 0, 'g'}, {"versions", required_argument, 0, 'v'},
      {"period", required_argument, 0, 'p'},   {"bytes", required_argument, 0, 'b'},
      {"tensors", required_argument, 0, 't'},  {"linger", required_argument, 0, 'L'},
      {"index", required_argument, 0, 'i'},    {"duration", required_argument, 0, 'd'},
      {"poll-ms", required_argument, 0, 'm'},  {"info", required_argument, 0, 'I'},
      {"stop-file", required_argument, 0, 's'},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->trainer = -1;
  o->bytes = 64ull << 20;
  o->tensors = 4;
  o->linger = 5;
  o->poll_ms = 100;
  int c;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
      case 'r':
        if (!strcmp(optarg, "trainer")) o->trainer = 1;
        else if (!strcmp(optarg, "rollout")) o->trainer = 0;
        else usage();
        break;
      case 'l': case 'g': o->addr = optarg; break;
      case 'v': if (parse_int(optarg, 1, 10000, &o->versions)) die("bad --versions"); break;
      case 'p': o->period = parse_double(optarg, "--period"); break;
      case 'b': if (parse_size(optarg, &o->bytes)) die("bad --bytes '%s'", optarg); break;
      case 't': if (parse_int(optarg, 1, MAX_TENSORS, &o->tensors)) die("bad --tensors"); break;
      case 'L': o->linger = parse_double(optarg, "--linger"); break;
      case 's': o->stop_file = optarg; break;
      case 'i': if (parse_int(optarg, 0, 1 << 20, &o->index)) die("bad --index"); break;
      case 'd': o->duration = parse_double(optarg, "--duration"); break;
      case 'm': if (parse_int(optarg, 1, 60000, &o->poll_ms)) die("bad --poll-ms"); break;
      case 'I':
        if (o->ninfo == MAX_INFO || !strchr(optarg, '=')) die("bad or too many --info '%s'", optarg);
        o->info_kv[o->ninfo++] = optarg;
        break;
      default: usage();
    }
  }
  if (o->trainer < 0 || !o->addr) usage();
  if (o->trainer && (o->versions < 1 || o->period <= 0)) die("the trainer needs --versions and --period");
  if (!o->trainer && o->duration <= 0) die("a rollout needs --duration");
  if (o->bytes < (uint64_t)o->tensors * 4096) die("--bytes must be at least 4 KiB per tensor");
}

#include "bench_shard.h"

static THUB_Model open_shard(THUB_Context ctx, const char *replica, struct shard *s) {
  THUB_Model m = THUB_MODEL_NULL;
  check_thub(ctx, "THUB_Open", THUB_Open(ctx, MODEL_NAME, replica, 0, 1, THUB_INFO_NULL, &m));
  register_shard(ctx, m, s);
  return m;
}

static THUB_Context context_of(const struct options *o) {
  return init_context(o->ninfo, o->info_kv, o->trainer ? NULL : o->addr, o->trainer ? o->addr : NULL);
}

static void sleep_until(double t) {
  double d = t - now_s();
  if (d > 0) usleep((useconds_t)(d * 1e6));
}

/* ---- trainer ------------------------------------------------------------------------------ */

static int run_trainer(const struct options *o) {
  THUB_Context ctx = context_of(o);
  struct shard s[2];
  THUB_Model m[2];
  int held[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    char name[8];
    snprintf(name, sizeof name, "t%d", k);
    make_shard(&s[k], o->bytes, o->tensors);
    m[k] = open_shard(ctx, name, &s[k]);
  }
  double t0 = now_s(), stall = 0, worst = 0;
  printf("{\"bench\":\"thub_crossdc\",\"role\":\"trainer\",\"event\":\"start\",\"t0\":%.6f}\n", t0);
  fflush(stdout);
  for (int v = 1; v <= o->versions; v++) {
    int k = v % 2;
    sleep_until(t0 + (v - 1) * o->period);
    double a = now_s();
    if (held[k]) check_thub(ctx, "THUB_Unpublish", THUB_Unpublish(m[k]));
    double b = now_s();
    fill_shard(&s[k], v); /* the optimizer step: not a stall */
    double c = now_s();
    check_thub(ctx, "THUB_Publish", THUB_Publish(m[k], v));
    double d = now_s();
    held[k] = v;
    stall += (b - a) + (d - c);
    if ((b - a) + (d - c) > worst) worst = (b - a) + (d - c);
    fprintf(stderr, "thub_crossdc: trainer published v%d at %.3f s (unpublish of v%d %.3f s)\n", v, c - t0, v - 2,
            b - a);
  }
  for (double until = now_s() + o->linger; now_s() < until;) {
    if (o->stop_file && access(o->stop_file, F_OK) == 0) break;
    usleep(100000);
  }
  for (int k = 0; k < 2; k++) {
    if (held[k]) check_thub(ctx, "THUB_Unpublish", THUB_Unpublish(m[k]));
    check_thub(ctx, "THUB_Close", THUB_Close(&m[k]));
  }
  printf("{\"bench\":\"thub_crossdc\",\"role\":\"trainer\",\"versions\":%d,\"period_s\":%.3f,\"bytes\":%" PRIu64
         ",\"t0\":%.6f,\"trainer_stall_s\":%.6f,\"trainer_stall_max_s\":%.6f}\n",
         o->versions, o->period, o->bytes, t0, stall, worst);
  check_thub(THUB_CONTEXT_NULL, "THUB_Finalize", THUB_Finalize(&ctx));
  return 0;
}

/* ---- rollout ------------------------------------------------------------------------------ */

struct call {
  double at, took;
  int64_t got;
  int st;
};

static int run_rollout(const struct options *o) {
  static struct call calls[MAX_CALLS];
  THUB_Context ctx = context_of(o);
  struct shard s;
  char name[32];
  snprintf(name, sizeof name, "r%d", o->index);
  make_shard(&s, o->bytes, o->tensors);
  THUB_Model m = open_shard(ctx, name, &s);
  int n = 0;
  uint64_t bad = 0;
  int64_t held = -1;
  double end = now_s() + o->duration;
  while (now_s() < end && n < MAX_CALLS) {
    struct call *c = &calls[n++];
    c->at = now_s();
    c->got = -1;
    c->st = THUB_Update(m, THUB_LATEST, &c->got);
    c->took = now_s() - c->at;
    if (c->st == THUB_SUCCESS) {
      if (c->got <= held) die("update moved from v%" PRId64 " to v%" PRId64, held, c->got);
      held = c->got;
      uint64_t b = check_shard(&s, held, 0);
      if (b) fprintf(stderr, "thub_crossdc: rollout %d: v%" PRId64 ": %" PRIu64 " wrong words\n", o->index, held, b);
      bad += b;
    } else if (c->st != THUB_NOT_UPDATED && c->st != THUB_ERR_NOT_FOUND) {
      check_thub(ctx, "THUB_Update", c->st);
    }
    usleep((useconds_t)o->poll_ms * 1000);
  }
  /* The library's own counts: bytes it read from the other datacenter, versions its seed
   * buffer carried across (offload_seeding), the host memory of that buffer. */
  int64_t wan = -1, seeds = -1, seed_bytes = -1;
  THUB_Model_stat(m, "wan_bytes", &wan);
  THUB_Model_stat(m, "offload_seeds", &seeds);
  THUB_Model_stat(m, "offload_seed_bytes", &seed_bytes);
  printf("{\"bench\":\"thub_crossdc\",\"role\":\"rollout\",\"index\":%d,\"bad_words\":%" PRIu64 ",\"held\":%" PRId64
         ",\"wan_bytes\":%" PRId64 ",\"offload_seeds\":%" PRId64 ",\"offload_seed_bytes\":%" PRId64 ",\"calls\":[",
         o->index, bad, held, wan, seeds, seed_bytes);
  for (int i = 0; i < n; i++)
    printf("%s[%.6f,%.6f,%" PRId64 ",%d]", i ? "," : "", calls[i].at, calls[i].took, calls[i].got, calls[i].st);
  printf("]}\n");
  if (held >= 0) check_thub(ctx, "THUB_Unpublish", THUB_Unpublish(m));
  check_thub(ctx, "THUB_Close", THUB_Close(&m));
  check_thub(THUB_CONTEXT_NULL, "THUB_Finalize", THUB_Finalize(&ctx));
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  struct options o;
  parse(argc, argv, &o);
  signal(SIGPIPE, SIG_IGN);
  return o.trainer ? run_trainer(&o) : run_rollout(&o);
}
