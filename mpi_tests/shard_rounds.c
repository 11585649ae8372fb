/* shard_rounds: do the shards of one replica get the same outcome in every round? An outside
 * test of sharding consistency (issue 18, item 6), written against the public header only and
 * run against a standalone tensorhub-registry (shard_rounds.sh starts it), as a user would.
 *
 *   2*S ranks. Ranks 0..S-1 are the S shards of one trainer replica ("trainer"), ranks S..2S-1
 *   the S shards of one rollout replica ("rollout") of the same model; each shard registers
 *   NTENSORS tensors of 1 MiB (uint32 words). MPI_COMM_WORLD is split into the two groups.
 *
 *   trainer, lock step (default): for v = 0, 1, 2, ...: write the pattern of (v, shard, tensor,
 *     word index), THUB_Publish(v), an MPI_Allreduce among the trainer shards (the barrier of a
 *     collective optimizer step; it also agrees on whether to stop), THUB_Unpublish, rewrite.
 *     No hold between versions. It stops once rollout shard 0 has said the rollout finished.
 *   trainer, --unsync: no collective between publish and unpublish: each shard publishes,
 *     holds v for its own random 0-3 ms (the workload, not a synchronisation), unpublishes and
 *     rewrites on its own. Only the version numbers are kept together (a nonblocking reduction
 *     started after publish v and completed before publish v+1), else no version would ever be
 *     complete on every shard.
 *   rollout, SPMD: for round = 0..R-1 every shard makes the same call: THUB_Replicate of
 *     THUB_LATEST while the replica holds nothing (round 0, and after a round that left the
 *     shards apart), else THUB_Update of THUB_LATEST; then checks EVERY word of its buffers
 *     against the pattern of the version it holds (the `held_version` stat), then an
 *     MPI_Allgather of (code, version, held, wrong words) among the rollout shards, then a
 *     barrier. Counted on rollout shard 0:
 *       errors            shard-rounds with an error code, or whose held version contradicts the
 *                         code (success but held != got; THUB_NOT_UPDATED but held moved)
 *       not_updated       rounds where every shard answered THUB_NOT_UPDATED (nothing newer)
 *       not_found         THUB_Replicate rounds where every shard answered THUB_ERR_NOT_FOUND:
 *                         no version was available at that moment (the lock-step trainer has
 *                         none published while it rewrites); the next round asks again
 *       disagreeing_rounds rounds whose shards got different codes, versions or held versions
 *       corrupted_words   words that do not match the pattern of the version held
 *     A round that does not leave every shard holding the same version makes every shard that
 *     holds one unpublish it, and the next round is a THUB_Replicate on every shard (what an SPMD
 *     application does when "asked again with every shard").
 *
 * Rollout shard 0 prints one summary line:
 *   shard_rounds: shards=S mode=lockstep rounds=R errors=E not_updated=N not_found=F
 *     disagreeing_rounds=D corrupted_words=C versions_seen=K ...
 * and every rank exits 1 when E, D or C is not 0, a trainer call failed, or the rollout never
 * moved (versions_seen < 2: a liveness check, so that a rollout that gets nothing cannot pass),
 * or, with --notify, never moved after the trigger (versions_second_half < 1: after the first
 * registry was killed, only the backup can have served it).
 * Every failing shard-round prints rank, round, call, code, error string and the library's
 * detail.
 *
 * Every wait is bounded: the blocking THUB calls by the `timeout_ms` info key (--call-timeout-ms),
 * and each step of each rank (a round, a trainer version, a barrier, the final collectives) by
 * an alarm (--step-timeout-s): a rank stuck longer prints where it is stuck and exits 3, which
 * makes mpirun end the job. The ctest TIMEOUT is only the last resort.
 *
 * Options:
 *   --rounds R            rollout rounds (default 200)
 *   --registry LIST       host:port[,host:port...] of the registry and its backups (else
 *                         TENSORHUB_REGISTRY; one of the two is required: no embedded registry)
 *   --unsync              the unsynchronised trainer
 *   --notify FIFO --ack FIFO   when round R/2 begins, rollout shard 0 writes "round N" into
 *                         the first and waits for a line on the second before it goes on
 *                         (shard_rounds.sh kills the first registry in between)
 *   --call-timeout-ms MS  the timeout_ms info key of every context (default 10000)
 *   --step-timeout-s S    the alarm bound per step (default 30)
 *   --report N            print at most N lines of per-round detail per rank (default 20)
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#include <tensorhub/tensorhub.h>

#define NTENSORS 4
#define WORDS ((size_t)1 << 18) /* 1 MiB of uint32 words per tensor */
#define MODEL "shard-rounds"
#define TAG_DONE 18

/* ---- options ---- */
static int opt_rounds = 200;
static const char *opt_registry = NULL;
static int opt_unsync = 0;
static const char *opt_notify = NULL, *opt_ack = NULL;
static long opt_call_timeout_ms = 10000;
static unsigned opt_step_timeout_s = 30;
static int opt_report = 20;

/* ---- this rank ---- */
static int rank = 0, world = 0, nshards = 0, shard = 0, is_trainer = 0;
static int reported = 0; /* detail lines printed by this rank */
static uint32_t *bufs[NTENSORS];

/* ---- bounded steps: an alarm per step; the handler prints the step and exits ---- */
static char step_msg[2][400];
static volatile sig_atomic_t step_cur = 0;

static void on_alarm(int sig) {
  const char *m = step_msg[step_cur];
  ssize_t n = write(2, m, strlen(m));
  (void)n;
  (void)sig;
  _exit(3);
}

/* Start a bounded step: what the alarm prints if it does not end within the bound. */
static void step(const char *fmt, ...) {
  char what[256];
  va_list ap;
  int next = !step_cur;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(step_msg[next], sizeof step_msg[next],
           "shard_rounds: TIMEOUT rank %d (%s shard %d): %s did not finish within %u s (--step-timeout-s)\n", rank,
           is_trainer ? "trainer" : "rollout", shard, what, opt_step_timeout_s);
  step_cur = next;
  alarm(opt_step_timeout_s);
}

/* The code's name alone ("THUB_ERR_VERSION_LOST"), for the one-line round reports. */
static const char *code_name(int st, char *buf, size_t len) {
  const char *s = THUB_Error_string(st);
  size_t n = strcspn(s, ":");
  if (n >= len) n = len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  return buf;
}

static int report_ok(void) { return reported++ < opt_report; }

/* One failed call: rank, where, code, error string, the library's detail. */
static void report_call(THUB_Context ctx, const char *where, int st) {
  char detail[1024] = "";
  if (!report_ok()) return;
  if (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
  fprintf(stderr, "shard_rounds: rank %d (%s shard %d): %s: %d %s%s%s\n", rank, is_trainer ? "trainer" : "rollout",
          shard, where, st, THUB_Error_string(st), detail[0] ? " | " : "", detail);
}

/* ---- the pattern: every word depends on (version, shard, tensor, index) ---- */
static uint32_t seed_of(int64_t v, int s, int t) {
  uint64_t x = ((uint64_t)v << 16) ^ ((uint64_t)(unsigned)s << 4) ^ (uint64_t)(unsigned)t;
  x += 0x9E3779B97F4A7C15ull; /* splitmix64 */
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (uint32_t)(x >> 32) | 1u;
}

static uint32_t word_of(uint32_t seed, size_t i) { return seed ^ ((uint32_t)i * 0x9E3779B1u); }

static void fill(int64_t v) {
  int t;
  for (t = 0; t < NTENSORS; t++) {
    uint32_t seed = seed_of(v, shard, t);
    uint32_t *b = bufs[t];
    size_t i;
    for (i = 0; i < WORDS; i++) b[i] = word_of(seed, i);
  }
}

/* Count the words that are not version v's; describe the first one. */
static int64_t verify(int64_t v, int round) {
  int64_t bad = 0;
  int t;
  for (t = 0; t < NTENSORS; t++) {
    uint32_t seed = seed_of(v, shard, t);
    const uint32_t *b = bufs[t];
    size_t i;
    for (i = 0; i < WORDS; i++) {
      if (b[i] == word_of(seed, i)) continue;
      if (bad == 0 && report_ok()) {
        /* whose word is it? look a few versions around */
        int64_t from = -1, u;
        for (u = v - 50 < 0 ? 0 : v - 50; u <= v + 50 && from < 0; u++)
          if (b[i] == word_of(seed_of(u, shard, t), i)) from = u;
        fprintf(stderr,
                "shard_rounds: rank %d (rollout shard %d) round %d: holds version %" PRId64
                " but tensor %d word %zu is 0x%08x, expected 0x%08x (%s%" PRId64 ")\n",
                rank, shard, round, v, t, i, b[i], word_of(seed, i), from >= 0 ? "version " : "no version near: ",
                from >= 0 ? from : v);
      }
      bad++;
    }
  }
  return bad;
}

static int64_t held_version(THUB_Model m) {
  int64_t h = -2;
  if (THUB_Model_stat(m, "held_version", &h) != THUB_SUCCESS) return -2;
  return h;
}

static void usage(void) {
  if (rank == 0)
    fprintf(stderr,
            "usage: mpirun -np 2S shard_rounds [--rounds R] [--registry HOST:PORT[,HOST:PORT...]] [--unsync]\n"
            "       [--notify FIFO --ack FIFO] [--call-timeout-ms MS] [--step-timeout-s S] [--report N]\n");
}

static int parse(int argc, char **argv) {
  int i;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--unsync")) {
      opt_unsync = 1;
      continue;
    }
    if (!val) {
      usage();
      return 0;
    }
    if (!strcmp(a, "--rounds")) opt_rounds = atoi(val);
    else if (!strcmp(a, "--registry")) opt_registry = val;
    else if (!strcmp(a, "--notify")) opt_notify = val;
    else if (!strcmp(a, "--ack")) opt_ack = val;
    else if (!strcmp(a, "--call-timeout-ms")) opt_call_timeout_ms = atol(val);
    else if (!strcmp(a, "--step-timeout-s")) opt_step_timeout_s = (unsigned)atoi(val);
    else if (!strcmp(a, "--report")) opt_report = atoi(val);
    else {
      usage();
      return 0;
    }
    i++;
  }
  if (opt_rounds < 1 || opt_step_timeout_s < 1 || opt_call_timeout_ms < 0 || (!opt_notify != !opt_ack)) {
    usage();
    return 0;
  }
  if (!opt_registry && !getenv("TENSORHUB_REGISTRY")) {
    if (rank == 0)
      fprintf(stderr, "shard_rounds: needs a standalone registry: --registry HOST:PORT[,HOST:PORT...] or "
                      "TENSORHUB_REGISTRY (shard_rounds.sh starts tensorhub-registry)\n");
    return 0;
  }
  return 1;
}

/* Rollout shard 0 at round R/2: tell the driver, wait until it says it acted (bounded by the
 * caller's step). */
static int notify_driver(int round) {
  char line[64];
  int fd;
  ssize_t n;
  snprintf(line, sizeof line, "round %d\n", round);
  fd = open(opt_notify, O_WRONLY);
  if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
    fprintf(stderr, "shard_rounds: rank %d: cannot write %s: %s\n", rank, opt_notify, strerror(errno));
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  fd = open(opt_ack, O_RDONLY);
  if (fd < 0) {
    fprintf(stderr, "shard_rounds: rank %d: cannot open %s: %s\n", rank, opt_ack, strerror(errno));
    return 0;
  }
  do n = read(fd, line, sizeof line - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) {
    fprintf(stderr, "shard_rounds: rank %d: no answer on %s\n", rank, opt_ack);
    return 0;
  }
  line[n] = '\0';
  printf("shard_rounds: round %d: driver says %s", round, line);
  fflush(stdout);
  return 1;
}

/* ---- the trainer ---- */
/* The trainer's THUB_Unpublish calls: the longest and the sum (seconds), and how many. */
static double unpublish_max_s = 0, unpublish_sum_s = 0;
static int64_t unpublish_count = 0;

static int64_t run_trainer(THUB_Context ctx, THUB_Model m, MPI_Comm group, int *errors) {
  double unpublish_started;
  int64_t v = 0;
  int done_flag = 0, got_done = 0, pace_in = 0, pace_out = 0;
  MPI_Request done_req, pace = MPI_REQUEST_NULL;
  unsigned rng = 12345u + (unsigned)rank * 7919u;
  MPI_Irecv(&done_flag, 1, MPI_INT, nshards, TAG_DONE, MPI_COMM_WORLD, &done_req);
  fill(v);
  for (;;) {
    int st, stop = 0;
    char where[96];
    step("trainer version %" PRId64, v);
    st = THUB_Publish(m, v);
    if (st != THUB_SUCCESS) {
      snprintf(where, sizeof where, "version %" PRId64 ": THUB_Publish", v);
      report_call(ctx, where, st);
      ++*errors;
    }
    if (v == 0) MPI_Barrier(MPI_COMM_WORLD); /* the rollout starts once version 0 is out */
    if (!got_done) MPI_Test(&done_req, &got_done, MPI_STATUS_IGNORE);
    if (opt_unsync) {
      /* Each shard holds v for its own random 0-3 ms (the workload, not a synchronisation) and
       * unpublishes on its own. Only the version numbers are kept together: a nonblocking
       * reduction started now and completed before the next publish (every shard has
       * published v before any publishes v+1; it also agrees on stopping). Without it the
       * shards' counters drift apart and no version is ever complete on every shard. */
      struct timespec ts;
      pace_in = got_done;
      MPI_Iallreduce(&pace_in, &pace_out, 1, MPI_INT, MPI_MAX, group, &pace);
      rng = rng * 1103515245u + 12345u;
      ts.tv_sec = 0;
      ts.tv_nsec = (long)((rng >> 8) % 3001u) * 1000L;
      nanosleep(&ts, NULL);
    } else {
      MPI_Allreduce(&got_done, &stop, 1, MPI_INT, MPI_MAX, group); /* the optimizer step's collective */
    }
    unpublish_started = MPI_Wtime();
    st = THUB_Unpublish(m);
    {
      /* how long the trainer waited for its readers and for the rounds that keep its buffers
       * for a shard that has not asked yet (round_hold_ms): the cost of the rounds' agreement */
      double waited = MPI_Wtime() - unpublish_started;
      if (waited > unpublish_max_s) unpublish_max_s = waited;
      unpublish_sum_s += waited;
      unpublish_count++;
    }
    if (st != THUB_SUCCESS) {
      snprintf(where, sizeof where, "version %" PRId64 ": THUB_Unpublish", v);
      report_call(ctx, where, st);
      ++*errors;
    }
    if (opt_unsync) {
      MPI_Wait(&pace, MPI_STATUS_IGNORE);
      stop = pace_out;
    }
    if (stop) break;
    fill(++v);
  }
  step("trainer: waiting for the rollout's end message");
  if (!got_done) MPI_Wait(&done_req, MPI_STATUS_IGNORE);
  return v + 1;
}

/* ---- the rollout ---- */
typedef struct {
  int64_t st, got, held, bad;
} outcome;

typedef struct {
  int64_t errors, not_updated, not_found, disagreeing, corrupted, versions_seen, versions_late, ok_rounds, resets;
  int64_t own_errors; /* this shard's alone (an unpublish, the trigger, the close): summed at the end */
} tally;

static void run_rollout(THUB_Context ctx, THUB_Model m, MPI_Comm group, tally *tl) {
  outcome *all = calloc((size_t)nshards, sizeof *all);
  int empty = 1; /* does the replica hold nothing (every shard)? then the round is a Replicate */
  int64_t last_seen = -1;
  int round, s;
  MPI_Barrier(MPI_COMM_WORLD); /* the trainer has published version 0 */
  for (round = 0; round < opt_rounds; round++) {
    outcome me;
    int64_t prev = held_version(m), got = -1;
    const char *call = empty ? "THUB_Replicate(THUB_LATEST)" : "THUB_Update(THUB_LATEST)";
    int st, same = 1, all_ok = 1, any_error = 0, bad_here = 0;
    char where[128];
    if (round == opt_rounds / 2 && opt_notify && shard == 0) {
      step("round %d: waiting for the driver's answer on %s", round, opt_ack);
      if (!notify_driver(round)) tl->own_errors++;
    }
    step("round %d: %s", round, call);
    if (empty) {
      size_t t;
      for (t = 0; t < NTENSORS; t++) memset(bufs[t], 0xA5, WORDS * sizeof(uint32_t)); /* no stale bytes pass */
      st = THUB_Replicate(m, THUB_LATEST, &got);
    } else {
      st = THUB_Update(m, THUB_LATEST, &got);
    }
    me.st = st;
    me.got = st == THUB_SUCCESS ? got : -1;
    me.held = held_version(m);
    snprintf(where, sizeof where, "round %d: %s", round, call);
    if (st < 0) {
      /* a round-wide "nothing available yet" is judged after the gather */
      if (!(empty && st == THUB_ERR_NOT_FOUND)) report_call(ctx, where, st);
    } else if ((st == THUB_SUCCESS && me.held != got) || (st == THUB_NOT_UPDATED && me.held != prev)) {
      if (report_ok())
        fprintf(stderr,
                "shard_rounds: rank %d (rollout shard %d) %s: returned %d (%s) with version %" PRId64
                " but holds %" PRId64 " (held %" PRId64 " before)\n",
                rank, shard, where, st, THUB_Error_string(st), got, me.held, prev);
      bad_here = 1;
    }
    me.bad = me.held >= 0 ? verify(me.held, round) : 0;
    if (bad_here) me.st = THUB_ERR_INTERNAL; /* counted as this shard's error */
    step("round %d: MPI_Allgather of the outcomes", round);
    MPI_Allgather(&me, 4, MPI_INT64_T, all, 4, MPI_INT64_T, group);
    for (s = 0; s < nshards; s++) {
      if (all[s].st != all[0].st || all[s].got != all[0].got || all[s].held != all[0].held) same = 0;
      if (all[s].st != THUB_SUCCESS && all[s].st != THUB_NOT_UPDATED) all_ok = 0;
      tl->corrupted += all[s].bad;
    }
    if (!same) {
      tl->disagreeing++;
      if (empty && st == THUB_ERR_NOT_FOUND) report_call(ctx, where, st); /* not round-wide after all */
      if (shard == 0 && report_ok()) {
        char line[1024];
        int off = snprintf(line, sizeof line, "shard_rounds: round %d: %s: the shards disagree:", round, call);
        for (s = 0; s < nshards && off < (int)sizeof line; s++) {
          char name[48];
          off += snprintf(line + off, sizeof line - (size_t)off,
                          " [shard %d: %s (%" PRId64 "), version %" PRId64 ", holds %" PRId64 "]", s,
                          code_name((int)all[s].st, name, sizeof name), all[s].st, all[s].got, all[s].held);
        }
        fprintf(stderr, "%s\n", line);
      }
    }
    if (same && all[0].st == THUB_ERR_NOT_FOUND && empty) {
      tl->not_found++; /* every shard: no version available at that moment */
    } else {
      for (s = 0; s < nshards; s++)
        if (all[s].st < 0) {
          tl->errors++;
          any_error = 1;
        }
    }
    if (same && all[0].st == THUB_NOT_UPDATED) tl->not_updated++;
    if (same && all_ok && all[0].held >= 0) {
      tl->ok_rounds++;
      if (all[0].held != last_seen) {
        tl->versions_seen++;
        if (round >= opt_rounds / 2) tl->versions_late++; /* after the driver's trigger, if any */
      }
      last_seen = all[0].held;
      empty = 0;
    } else {
      /* the shards are apart (or hold nothing): every shard gives up what it holds, and the
       * next round asks again with every shard */
      if (me.held >= 0) {
        step("round %d: THUB_Unpublish after a failed round", round);
        st = THUB_Unpublish(m);
        if (st != THUB_SUCCESS) {
          snprintf(where, sizeof where, "round %d: THUB_Unpublish after a failed round", round);
          report_call(ctx, where, st);
          tl->own_errors++;
        }
      }
      if (!empty || any_error || !same) tl->resets++;
      empty = 1;
    }
    step("round %d: MPI_Barrier", round);
    MPI_Barrier(group);
  }
  free(all);
}

int main(int argc, char **argv) {
  THUB_Context ctx = THUB_CONTEXT_NULL;
  THUB_Model m = THUB_MODEL_NULL;
  THUB_Info info = THUB_INFO_NULL;
  MPI_Comm group = MPI_COMM_NULL;
  tally tl;
  int64_t trainer_versions = 0, trainer_versions_max = 0, trainer_errors_all = 0, own_errors_all = 0, mine;
  int trainer_errors = 0, setup_errors = 0, t, st, verdict = 0;
  double t0;
  struct sigaction sa;
  char value[32];

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  memset(&tl, 0, sizeof tl);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  if (world < 2 || world % 2 || !parse(argc, argv)) {
    if (rank == 0 && (world < 2 || world % 2)) fprintf(stderr, "shard_rounds: needs an even number of ranks (2*S)\n");
    MPI_Finalize();
    return 2;
  }
  nshards = world / 2;
  is_trainer = rank < nshards;
  shard = rank % nshards;
  MPI_Comm_split(MPI_COMM_WORLD, is_trainer ? 0 : 1, shard, &group);
  t0 = MPI_Wtime();

  step("setup: THUB_Init, THUB_Open, THUB_Register");
  THUB_Info_create(&info);
  if (opt_registry) THUB_Info_set(info, "registry", opt_registry);
  snprintf(value, sizeof value, "%ld", opt_call_timeout_ms);
  THUB_Info_set(info, "timeout_ms", value);
  st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  if (st != THUB_SUCCESS) {
    report_call(THUB_CONTEXT_NULL, "THUB_Init", st);
    setup_errors++;
  } else {
    st = THUB_Open(ctx, MODEL, is_trainer ? "trainer" : "rollout", shard, nshards, THUB_INFO_NULL, &m);
    if (st != THUB_SUCCESS) {
      report_call(ctx, "THUB_Open", st);
      setup_errors++;
    }
  }
  for (t = 0; t < NTENSORS; t++) {
    char name[32];
    void *p = NULL;
    if (posix_memalign(&p, 4096, WORDS * sizeof(uint32_t)) != 0) {
      fprintf(stderr, "shard_rounds: rank %d: out of memory\n", rank);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    bufs[t] = p;
    memset(p, 0, WORDS * sizeof(uint32_t));
    snprintf(name, sizeof name, "layer%d.weight", t);
    if (m != THUB_MODEL_NULL) {
      st = THUB_Register(m, name, p, WORDS * sizeof(uint32_t), THUB_MEM_HOST);
      if (st != THUB_SUCCESS) {
        report_call(ctx, "THUB_Register", st);
        setup_errors++;
      }
    }
  }
  /* one rank's setup failure ends every rank the same way */
  step("setup: MPI_Allreduce of the setup outcome");
  MPI_Allreduce(MPI_IN_PLACE, &setup_errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (setup_errors == 0) {
    if (is_trainer) {
      trainer_versions = run_trainer(ctx, m, group, &trainer_errors);
    } else {
      run_rollout(ctx, m, group, &tl);
      if (shard == 0) {
        for (t = 0; t < nshards; t++) MPI_Send(&t, 1, MPI_INT, t, TAG_DONE, MPI_COMM_WORLD);
      }
    }
  }
  step("end: THUB_Close, THUB_Finalize");
  if (m != THUB_MODEL_NULL && (st = THUB_Close(&m)) != THUB_SUCCESS) {
    report_call(ctx, "THUB_Close", st);
    if (is_trainer) trainer_errors++;
    else tl.own_errors++;
  }
  if (ctx != THUB_CONTEXT_NULL) THUB_Finalize(&ctx);

  step("end: MPI_Reduce of the trainer's figures");
  mine = trainer_errors;
  MPI_Reduce(&mine, &trainer_errors_all, 1, MPI_INT64_T, MPI_SUM, nshards, MPI_COMM_WORLD);
  MPI_Reduce(&tl.own_errors, &own_errors_all, 1, MPI_INT64_T, MPI_SUM, nshards, MPI_COMM_WORLD);
  tl.errors += own_errors_all; /* on rollout shard 0, which reports */
  MPI_Reduce(&trainer_versions, &trainer_versions_max, 1, MPI_INT64_T, MPI_MAX, nshards, MPI_COMM_WORLD);
  {
    double unpub_max_all = 0, unpub_sum_all = 0;
    int64_t unpub_n_all = 0;
    MPI_Reduce(&unpublish_max_s, &unpub_max_all, 1, MPI_DOUBLE, MPI_MAX, nshards, MPI_COMM_WORLD);
    MPI_Reduce(&unpublish_sum_s, &unpub_sum_all, 1, MPI_DOUBLE, MPI_SUM, nshards, MPI_COMM_WORLD);
    MPI_Reduce(&unpublish_count, &unpub_n_all, 1, MPI_INT64_T, MPI_SUM, nshards, MPI_COMM_WORLD);
    if (rank == nshards)
      printf("shard_rounds: trainer unpublish: %" PRId64 " calls, mean %.3f ms, longest %.3f ms (round_hold_ms bounds "
             "the wait for a shard that has not asked)\n",
             unpub_n_all, unpub_n_all ? 1e3 * unpub_sum_all / (double)unpub_n_all : 0.0, 1e3 * unpub_max_all);
  }
  if (rank == nshards) {
    int fail = trainer_errors_all != 0 || setup_errors != 0 || tl.errors != 0 || tl.disagreeing != 0 || tl.corrupted != 0 ||
               tl.versions_seen < 2 || (opt_notify && tl.versions_late < 1);
    printf("shard_rounds: shards=%d mode=%s rounds=%d errors=%" PRId64 " not_updated=%" PRId64
           " not_found=%" PRId64 " disagreeing_rounds=%" PRId64 " corrupted_words=%" PRId64
            " versions_seen=%" PRId64 " versions_second_half=%" PRId64 " ok_rounds=%" PRId64 " resets=%" PRId64 " trainer_versions=%" PRId64
           " trainer_errors=%" PRId64 " setup_errors=%" PRId64 " seconds=%.1f result=%s\n",
           nshards, opt_unsync ? "unsync" : "lockstep", setup_errors ? 0 : opt_rounds, tl.errors, tl.not_updated,
           tl.not_found, tl.disagreeing, tl.corrupted, tl.versions_seen, tl.versions_late, tl.ok_rounds, tl.resets, trainer_versions_max,
           trainer_errors_all, (int64_t)setup_errors, MPI_Wtime() - t0, fail ? "FAIL" : "ok");
    fflush(stdout);
    verdict = fail;
  }
  MPI_Bcast(&verdict, 1, MPI_INT, nshards, MPI_COMM_WORLD);
  alarm(0);
  for (t = 0; t < NTENSORS; t++) free(bufs[t]);
  MPI_Comm_free(&group);
  MPI_Finalize();
  return verdict ? 1 : 0;
}
