/* thub_elastic: a trainer publishes a new version every step while rollouts join and leave
 * between steps and spot rollouts are SIGKILLed mid-transfer (the TensorHub paper's Figures
 * 10/11 at small scale, in the cluster in a box: tools/netlab/, bench/netlab/run-elastic.sh).
 *
 *   thub_elastic --role trainer --listen IP --schedule SPEC [--bytes S] [--tensors T]
 *                [--standalone K] [--train-s X] [--mode LABEL] [--out FILE] [--log-dir DIR]
 *                [--launcher NETLAB_SH] [--seed N] [--kill-range LO:HI] [--proc-timeout S]
 *                [--registry-port P] [--control-port Q] [--info K=V]... [--rollout-info K=V]... [--rep R]
 *   thub_elastic --role trainer --schedule SPEC --print-hosts     (hosts the schedule needs)
 *   thub_elastic --role rollout --trainer IP:Q --index I [--spot] [--info K=V]...
 *
 * SPEC: phases "N[xS][kC]" separated by commas, e.g. "2x3,8x3,4x3,12x3": N rollouts hold each
 * version of the phase's S steps (default 1). Growing, the trainer starts N - alive new
 * rollouts before the phase's first step (spot=true; the first K of the run are the non-spot
 * "standalone" rollouts). Shrinking, alive - N spot rollouts are preempted in the phase's
 * first step: each gets a kill fraction f (seeded, uniform in --kill-range, default 0.2:0.8)
 * with its GO and SIGKILLs itself once it holds f of the shard, mid-transfer. kC adds churn to
 * every step of the phase: C more spot rollouts are preempted and C fresh ones join.
 *
 * The trainer (host 0) runs the embedded registry (its --info keys: pipeline, max_readers,
 * ...) and, per step v: writes version v into its tensors (not timed as a stall: that is the
 * optimizer), THUB_Publish(v) at t0, GO to every member, "trains" for --train-s (a sleep;
 * default 1.5 x the ideal S/R), then THUB_Unpublish before it may write the next version (it
 * waits for the trainer's own readers to finish). Trainer stall = publish + unpublish time:
 * the time inside TensorHub calls. The trainer opens with retain=1, so that a version whose
 * only complete holders are spot rollouts survives the unpublish (retention offload).
 * Each rollout (a process of its own in a host of its own, started by the trainer through
 * `netlab.sh exec`) answers GO with THUB_Update(THUB_LATEST) and reports its times: update
 * latency = rollout done - t0 (one CLOCK_MONOTONIC for the whole machine). The step ends once
 * every member is done or gone; membership changes only between steps.
 *
 * Output: one JSON line per (step, rollout) ("bench":"thub_elastic") and per step
 * ("thub_elastic_step") appended to --out, a human line per step on stdout.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <getopt.h>

#include <tensorhub/tensorhub.h>

#include "line_conn.h"

#define MODEL_NAME "elastic"
#define MAX_PROCS 512 /* rollout processes over a whole run */
#define MAX_STEPS 512
#define MAX_HOSTS 64
#define MAX_INFO 16
#define MAX_TENSORS 64

struct options {
  int trainer, print_hosts, spot, index, rep, tensors, standalone, registry_port, control_port, proc_timeout;
  uint64_t bytes;
  double train_s, kill_lo, kill_hi;
  unsigned long long seed;
  const char *listen_ip, *schedule, *mode, *out, *log_dir, *launcher, *trainer_addr;
  int ninfo, nrinfo;
  char *info_kv[MAX_INFO], *rinfo_kv[MAX_INFO];
};

static void usage(FILE *f) {
  fputs("usage: thub_elastic --role trainer --listen IP --schedule SPEC [--bytes S] [--tensors T]\n"
        "         [--standalone K] [--train-s X] [--mode LABEL] [--out FILE] [--log-dir DIR]\n"
        "         [--launcher NETLAB_SH] [--seed N] [--kill-range LO:HI] [--proc-timeout S]\n"
        "         [--registry-port P] [--control-port Q] [--info K=V]... [--rollout-info K=V]... [--rep R]\n"
        "       thub_elastic --role trainer --schedule SPEC --print-hosts\n"
        "       thub_elastic --role rollout --trainer IP:Q --index I [--spot] [--info K=V]...\n"
        "  SPEC: N[xS][kC],... e.g. 2x3,8x3,4x3,12x3 (see the comment at the top of elastic.c)\n",
        f);
}

#define die lc_die

static void parse_options(int argc, char **argv, struct options *o) {
  enum { O_ROLE = 256, O_LISTEN, O_SCHED, O_STANDALONE, O_TRAIN, O_MODE, O_OUT, O_LOGDIR, O_LAUNCHER, O_SEED,
         O_KILL, O_PTMO, O_RPORT, O_CPORT, O_INFO, O_RINFO, O_PRINT, O_TRAINER, O_INDEX, O_SPOT, O_REP };
  static const struct option lo[] = {
      {"role", 1, 0, O_ROLE},         {"listen", 1, 0, O_LISTEN},       {"schedule", 1, 0, O_SCHED},
      {"bytes", 1, 0, 'b'},           {"tensors", 1, 0, 't'},           {"standalone", 1, 0, O_STANDALONE},
      {"train-s", 1, 0, O_TRAIN},     {"mode", 1, 0, O_MODE},           {"out", 1, 0, O_OUT},
      {"log-dir", 1, 0, O_LOGDIR},    {"launcher", 1, 0, O_LAUNCHER},   {"seed", 1, 0, O_SEED},
      {"kill-range", 1, 0, O_KILL},   {"proc-timeout", 1, 0, O_PTMO},   {"registry-port", 1, 0, O_RPORT},
      {"control-port", 1, 0, O_CPORT}, {"info", 1, 0, O_INFO},          {"rollout-info", 1, 0, O_RINFO},
      {"print-hosts", 0, 0, O_PRINT}, {"trainer", 1, 0, O_TRAINER},     {"index", 1, 0, O_INDEX},
      {"spot", 0, 0, O_SPOT},         {"rep", 1, 0, O_REP},             {"help", 0, 0, 'h'},
      {0, 0, 0, 0}};
  int c, bad = 0, role = 0;
  char *end;
  memset(o, 0, sizeof *o);
  o->bytes = 128ull << 20;
  o->tensors = 4;
  o->standalone = 2;
  o->train_s = -1.0;
  o->kill_lo = 0.2, o->kill_hi = 0.8;
  o->seed = 1;
  o->registry_port = 29600, o->control_port = 29601;
  o->proc_timeout = 1800;
  o->mode = "pipeline";
  o->index = -1;
  o->rep = 1;
  while (!bad && (c = getopt_long(argc, argv, "b:t:h", lo, NULL)) != -1) {
    switch (c) {
      case O_ROLE: role = 1, o->trainer = strcmp(optarg, "trainer") == 0, bad = !o->trainer && strcmp(optarg, "rollout"); break;
      case O_LISTEN: o->listen_ip = optarg; break;
      case O_SCHED: o->schedule = optarg; break;
      case 'b': bad = parse_size(optarg, &o->bytes) != 0 || o->bytes == 0; break;
      case 't': bad = parse_int(optarg, 1, MAX_TENSORS, &o->tensors); break;
      case O_STANDALONE: bad = parse_int(optarg, 0, MAX_HOSTS, &o->standalone); break;
      case O_TRAIN: o->train_s = strtod(optarg, &end), bad = *end || o->train_s < 0; break;
      case O_MODE: o->mode = optarg; break;
      case O_OUT: o->out = optarg; break;
      case O_LOGDIR: o->log_dir = optarg; break;
      case O_LAUNCHER: o->launcher = optarg; break;
      case O_SEED: o->seed = strtoull(optarg, &end, 10), bad = *end != '\0'; break;
      case O_KILL:
        o->kill_lo = strtod(optarg, &end);
        bad = *end != ':' || (o->kill_hi = strtod(end + 1, &end), *end) || o->kill_lo <= 0 || o->kill_hi >= 1 ||
              o->kill_lo > o->kill_hi;
        break;
      case O_PTMO: bad = parse_int(optarg, 10, 86400, &o->proc_timeout); break;
      case O_RPORT: bad = parse_int(optarg, 1, 65535, &o->registry_port); break;
      case O_CPORT: bad = parse_int(optarg, 1, 65535, &o->control_port); break;
      case O_INFO:
        bad = o->ninfo == MAX_INFO || !strchr(optarg, '=');
        if (!bad) o->info_kv[o->ninfo++] = optarg;
        break;
      case O_RINFO:
        bad = o->nrinfo == MAX_INFO || !strchr(optarg, '=');
        if (!bad) o->rinfo_kv[o->nrinfo++] = optarg;
        break;
      case O_PRINT: o->print_hosts = 1; break;
      case O_TRAINER: o->trainer_addr = optarg; break;
      case O_INDEX: bad = parse_int(optarg, 0, MAX_PROCS - 1, &o->index); break;
      case O_SPOT: o->spot = 1; break;
      case O_REP: bad = parse_int(optarg, 1, 1000000, &o->rep); break;
      case 'h': usage(stdout); exit(0);
      default: bad = 1;
    }
  }
  if (!bad && role && o->trainer) bad = !o->schedule || (!o->print_hosts && !o->listen_ip);
  if (!bad && role && !o->trainer) bad = !o->trainer_addr || o->index < 0;
  if (bad || !role || optind != argc) {
    usage(stderr);
    exit(2);
  }
  if (o->bytes < (uint64_t)o->tensors * 4096) die("--bytes must be at least 4 KiB per tensor");
}

/* ---- the schedule ------------------------------------------------------------------------ */

struct step_plan {
  int target; /* rollouts that are to hold the version at the end of the step */
  int churn;  /* extra spot rollouts preempted (and replaced) in this step */
  int first;  /* first step of its phase */
};

static int parse_schedule(const char *spec, const struct options *o, struct step_plan *plan) {
  int n = 0;
  const char *p = spec;
  while (*p) {
    char *end;
    long target = strtol(p, &end, 10), steps = 1, churn = 0;
    if (end == p || target < 1 || target >= MAX_HOSTS) die("--schedule: bad phase at '%s'", p);
    p = end;
    while (*p == 'x' || *p == 'k') {
      char what = *p++;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v > MAX_STEPS) die("--schedule: bad number at '%s'", p);
      if (what == 'x') steps = v;
      else churn = v;
      p = end;
    }
    if (*p == ',') p++;
    else if (*p) die("--schedule: unexpected '%s'", p);
    if (target < o->standalone) die("--schedule: phase of %ld rollouts, below --standalone %d", target, o->standalone);
    if (churn > target - o->standalone) die("--schedule: churn %ld needs as many spot rollouts", churn);
    for (long s = 0; s < steps; s++) {
      if (n == MAX_STEPS) die("--schedule: more than %d steps", MAX_STEPS);
      plan[n++] = (struct step_plan){(int)target, (int)churn, s == 0};
    }
  }
  if (n == 0) die("--schedule: no step");
  return n;
}

/* Rollouts at the publish of step k (alive before it plus joiners), given `alive` before. */
static int members_of(const struct step_plan *p, int alive, int *kills) {
  int k = (alive > p->target ? alive - p->target : 0) + p->churn;
  if (kills) *kills = k;
  return p->target + k;
}

#include "bench_shard.h"

static THUB_Model open_shard(THUB_Context ctx, const char *replica, struct shard *s, const char *retain, int spot) {
  THUB_Model m = THUB_MODEL_NULL;
  THUB_Info info = THUB_INFO_NULL;
  check_thub(ctx, "THUB_Info_create", THUB_Info_create(&info));
  if (retain) THUB_Info_set(info, "retain", retain);
  THUB_Info_set(info, "spot", spot ? "true" : "false");
  int st = THUB_Open(ctx, MODEL_NAME, replica, 0, 1, info, &m);
  THUB_Info_free(&info);
  check_thub(ctx, "THUB_Open", st);
  register_shard(ctx, m, s);
  return m;
}

static double cpu_s(void) { /* this process, all threads (UCX progress, embedded registry) */
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)ru.ru_stime.tv_usec;
}

/* ---- rollout ----------------------------------------------------------------------------- */

static int rollout_main(const struct options *o) {
  struct conn c = {.fd = tcp_connect(o->trainer_addr)};
  char line[LINE_MAX_LEN], registry[256], replica[32];
  uint64_t bytes = 0;
  int tensors = 0;
  if (!read_line(&c, line, sizeof line) || sscanf(line, "HELLO %255s %" SCNu64 " %d", registry, &bytes, &tensors) != 3 ||
      tensors < 1 || tensors > MAX_TENSORS)
    die("rollout %d: bad HELLO '%s'", o->index, line);
  THUB_Context ctx = init_context(o->ninfo, (const char *const *)o->info_kv, registry, NULL);
  struct shard s;
  make_shard(&s, bytes, tensors);
  snprintf(replica, sizeof replica, "rollout-%d", o->index);
  THUB_Model m = open_shard(ctx, replica, &s, NULL, o->spot);
  send_line(&c, "READY %d %d", (int)getpid(), o->index);

  while (read_line(&c, line, sizeof line) && strcmp(line, "QUIT") != 0) {
    int64_t v = 0, got = -1;
    double t0 = 0, die_at = 0;
    if (sscanf(line, "GO %" SCNd64 " %lf %lf", &v, &t0, &die_at) != 3) die("rollout %d: unexpected '%s'", o->index, line);
    double t_go = now_s(), cpu0 = cpu_s();
    int64_t partial0 = stat_of(m, "partial_sources"), fail0 = stat_of(m, "source_failures");
    int st;
    if (die_at > 0) {
      /* A spot rollout preempted mid-transfer: watch our own progress counter and SIGKILL
       * ourselves once we hold die_at of the shard. The counter still shows the previous
       * version until the new transfer starts, so first see it drop below the mark. */
      THUB_Request req = THUB_REQUEST_NULL;
      int done = 0;
      int64_t kill_at = (int64_t)(die_at * (double)bytes), held = stat_of(m, "bytes_held");
      int armed = held < kill_at;
      check_thub(ctx, "THUB_Iupdate", THUB_Iupdate(m, THUB_LATEST, &req));
      for (st = 0; !done;) {
        held = stat_of(m, "bytes_held");
        if (!armed) armed = held < kill_at;
        else if (held >= kill_at) {
          send_line(&c, "DYING %" PRId64 " %" PRId64 " %.6f", v, held, now_s());
          kill(getpid(), SIGKILL);
        }
        st = THUB_Test(&req, &done, &got);
        if (st < 0) break;
        if (!done) nanosleep(&(struct timespec){0, 500 * 1000}, NULL);
      }
    } else {
      st = THUB_Update(m, THUB_LATEST, &got);
    }
    double t_end = now_s(), cpu = cpu_s() - cpu0;
    if (st != THUB_SUCCESS) {
      char detail[300] = "";
      THUB_Last_error(ctx, detail, sizeof detail);
      for (char *q = detail; *q; q++)
        if (*q == '\n' || *q == '"' || *q == '\\') *q = ' ';
      fprintf(stderr, "rollout %d: version %" PRId64 ": %s | %s\n", o->index, v, THUB_Error_string(st), detail);
      send_line(&c, "FAIL %" PRId64 " %.6f %.6f %d %.200s", v, t_go, t_end, st, detail);
      continue;
    }
    uint64_t bad = got == v ? check_shard(&s, v, 0) : UINT64_MAX;
    send_line(&c, "DONE %" PRId64 " %.6f %.6f %.4f %" PRId64 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, v,
              t_go, t_end, cpu, got, bad, stat_of(m, "partial_sources") - partial0,
              stat_of(m, "source_failures") - fail0, stat_of(m, "counter_reads"), stat_of(m, "gets"));
  }
  check_thub(ctx, "THUB_Close", THUB_Close(&m));
  send_line(&c, "BYE");
  check_thub(ctx, "THUB_Finalize", THUB_Finalize(&ctx));
  close(c.fd);
  return 0;
}

/* ---- trainer ----------------------------------------------------------------------------- */

enum pstate { P_SPAWNED, P_MEMBER, P_GONE };
enum outcome { O_WAIT, O_DONE, O_FAILED, O_KILLED, O_LOST };
static const char *outcome_name[] = {"wait", "done", "failed", "killed", "lost"};

struct proc {
  enum pstate state;
  int index, host, spot, pid, joined_step, steps_as_member;
  pid_t launcher;
  struct conn c;
  double t_spawn, join_s;
  /* the current step */
  int in_step;
  enum outcome out;
  double die_at, t_go, t_end, cpu, held_at_death, t_death;
  int64_t got, partial, failures, counter_reads, gets;
  uint64_t bad;
  int status;
  int kill_missed;
};

struct trainer {
  const struct options *o;
  struct proc procs[MAX_PROCS];
  int nprocs;
  int lfd;
  char exe[PATH_MAX], addr[96], registry[256];
  FILE *out;
  uint64_t rng;
};

static uint64_t next_rand(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double uniform(uint64_t *s) { return (double)(next_rand(s) >> 11) / 9007199254740992.0; }

static void cpu_ticks(double *busy, double *total) {
  unsigned long long u = 0, n = 0, sy = 0, id = 0, io = 0, irq = 0, sirq = 0;
  FILE *f = fopen("/proc/stat", "r");
  *busy = *total = 0;
  if (!f) return;
  if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &u, &n, &sy, &id, &io, &irq, &sirq) == 7) {
    *busy = (double)(u + n + sy + irq + sirq);
    *total = *busy + (double)(id + io);
  }
  fclose(f);
}

static double loadavg1(void) {
  double l = 0;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &l) != 1) l = 0;
    fclose(f);
  }
  return l;
}

/* Reaps launchers that have ended; with `block_s` > 0 waits up to that long for one. */
static void reap(struct trainer *T, double block_s) {
  double deadline = now_s() + block_s;
  for (;;) {
    int status, reaped = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
      for (int i = 0; i < T->nprocs; i++)
        if (T->procs[i].launcher == pid) T->procs[i].launcher = 0, reaped = 1;
    if (reaped || block_s <= 0 || now_s() >= deadline) return;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
}

static int host_free(const struct trainer *T, int h) {
  for (int i = 0; i < T->nprocs; i++)
    if (T->procs[i].host == h && (T->procs[i].state != P_GONE || T->procs[i].launcher)) return 0;
  return 1;
}

static struct proc *spawn(struct trainer *T, int step, int hosts) {
  const struct options *o = T->o;
  if (T->nprocs == MAX_PROCS) die("more than %d rollout processes", MAX_PROCS);
  int host = 0;
  for (double deadline = now_s() + 30; !host;) {
    for (int h = 1; h < hosts && !host; h++)
      if (host_free(T, h)) host = h;
    if (!host && now_s() > deadline) die("no free host for a new rollout (the lab has %d)", hosts);
    if (!host) reap(T, 1.0);
  }
  struct proc *p = &T->procs[T->nprocs];
  memset(p, 0, sizeof *p);
  p->index = T->nprocs++;
  p->host = host;
  p->spot = p->index >= o->standalone;
  p->joined_step = step;
  p->state = P_SPAWNED;
  p->c.fd = -1;
  char hs[16], idx[16], tmo[16], *argv[16 + 2 * MAX_INFO];
  int a = 0;
  snprintf(hs, sizeof hs, "%d", host);
  snprintf(idx, sizeof idx, "%d", p->index);
  snprintf(tmo, sizeof tmo, "%d", o->proc_timeout);
  argv[a++] = (char *)o->launcher, argv[a++] = "exec", argv[a++] = hs, argv[a++] = "--timeout", argv[a++] = tmo;
  argv[a++] = "--", argv[a++] = T->exe, argv[a++] = "--role", argv[a++] = "rollout";
  argv[a++] = "--trainer", argv[a++] = T->addr, argv[a++] = "--index", argv[a++] = idx;
  if (p->spot) argv[a++] = "--spot";
  for (int i = 0; i < o->nrinfo; i++) argv[a++] = "--info", argv[a++] = o->rinfo_kv[i];
  argv[a] = NULL;
  p->t_spawn = now_s();
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/rollout%d.log", o->log_dir ? o->log_dir : "/dev", p->index);
    int fd = open(o->log_dir ? path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    close(T->lfd);
    execv(o->launcher, argv);
    _exit(127);
  }
  p->launcher = pid;
  return p;
}

/* Accepts the connections of the spawned rollouts until each has said READY. */
static void await_ready(struct trainer *T, int want) {
  char line[LINE_MAX_LEN];
  for (int n = 0; n < want; n++) {
    struct pollfd pfd = {.fd = T->lfd, .events = POLLIN};
    if (poll(&pfd, 1, 120 * 1000) <= 0) die("a new rollout did not connect within 120 s (see its log)");
    int fd = accept(T->lfd, NULL, NULL), one = 1, pid = 0, idx = -1;
    if (fd < 0) die("accept: %s", strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn c = {.fd = fd};
    send_line(&c, "HELLO %s %" PRIu64 " %d", T->registry, T->o->bytes, T->o->tensors);
    if (read_line_within(&c, line, sizeof line, 120.0) != 1 || sscanf(line, "READY %d %d", &pid, &idx) != 2 || idx < 0 ||
        idx >= T->nprocs || T->procs[idx].state != P_SPAWNED || T->procs[idx].c.fd >= 0)
      die("a new rollout: expected READY with the index of a starting rollout, got '%s'", line);
    struct proc *p = &T->procs[idx];
    p->c = c;
    p->pid = pid;
    p->state = P_MEMBER;
    p->join_s = now_s() - p->t_spawn;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(double *v, int n, double q) { /* linear interpolation; sorts v */
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double pos = q * (n - 1);
  int i = (int)pos;
  return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* Handles one line (or the end) of a member's connection during step v. */
static void on_line(struct proc *p, const char *line, int64_t v) {
  int64_t lv = -1;
  if (line == NULL) { /* the connection ended */
    p->out = p->out == O_KILLED || p->die_at > 0 ? O_KILLED : O_LOST;
    if (p->t_death == 0) p->t_death = now_s();
    p->state = P_GONE;
    close(p->c.fd);
    p->c.fd = -1;
  } else if (sscanf(line, "DYING %" SCNd64 " %lf %lf", &lv, &p->held_at_death, &p->t_death) == 3) {
    p->out = O_KILLED; /* its EOF follows */
  } else if (sscanf(line, "DONE %" SCNd64 " %lf %lf %lf %" SCNd64 " %" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64,
                    &lv, &p->t_go, &p->t_end, &p->cpu, &p->got, &p->bad, &p->partial, &p->failures, &p->counter_reads,
                    &p->gets) == 10) {
    p->out = O_DONE;
  } else if (sscanf(line, "FAIL %" SCNd64 " %lf %lf %d", &lv, &p->t_go, &p->t_end, &p->status) == 4) {
    p->out = O_FAILED;
  } else {
    die("rollout %d: unexpected '%s'", p->index, line);
  }
  if (line && lv != v) die("rollout %d: answered version %" PRId64 " in step %" PRId64, p->index, lv, v);
}

static void write_rollout_line(struct trainer *T, int step, int64_t v, const struct proc *p, double t0, int members) {
  FILE *f = T->out;
  fprintf(f,
          "{\"bench\":\"thub_elastic\",\"mode\":\"%s\",\"rep\":%d,\"step\":%d,\"version\":%" PRId64 ",\"rollout\":%d,\"host\":%d,"
          "\"spot\":%s,\"members\":%d,\"joined_step\":%d,\"new\":%s,\"join_s\":%.4f,\"event\":\"%s\"",
          T->o->mode, T->o->rep, step, v, p->index, p->host, p->spot ? "true" : "false", members, p->joined_step,
          p->steps_as_member == 1 ? "true" : "false", p->steps_as_member == 1 ? p->join_s : 0.0, outcome_name[p->out]);
  if (p->out == O_DONE || p->out == O_FAILED)
    fprintf(f, ",\"latency_s\":%.6f,\"update_s\":%.6f,\"go_s\":%.6f", p->t_end - t0, p->t_end - p->t_go, p->t_go - t0);
  if (p->out == O_DONE)
    fprintf(f,
            ",\"got\":%" PRId64 ",\"check\":\"%s\",\"partial_sources\":%" PRId64 ",\"source_failures\":%" PRId64
            ",\"counter_reads\":%" PRId64 ",\"gets\":%" PRId64 ",\"cpu_s\":%.4f,\"kill_missed\":%s",
            p->got, p->got == v && p->bad == 0 ? "ok" : "bad", p->partial, p->failures, p->counter_reads, p->gets, p->cpu,
            p->kill_missed ? "true" : "false");
  if (p->out == O_FAILED) fprintf(f, ",\"status\":%d", p->status);
  if (p->out == O_KILLED || p->out == O_LOST) {
    fprintf(f, ",\"gone_s\":%.6f", p->t_death - t0);
    if (p->die_at > 0) fprintf(f, ",\"kill_fraction\":%.4f", p->die_at);
    if (p->held_at_death > 0) fprintf(f, ",\"held_fraction\":%.4f", p->held_at_death / (double)T->o->bytes);
  }
  fputs("}\n", f);
}

static void trainer_quit(struct trainer *T) {
  char line[LINE_MAX_LEN];
  for (int i = 0; i < T->nprocs; i++)
    if (T->procs[i].state == P_MEMBER) send_line(&T->procs[i].c, "QUIT");
  for (int i = 0; i < T->nprocs; i++) {
    struct proc *p = &T->procs[i];
    if (p->state != P_MEMBER) continue;
    if (read_line_within(&p->c, line, sizeof line, 30.0) != 1 || strcmp(line, "BYE") != 0)
      fprintf(stderr, "thub_elastic: rollout %d: no BYE\n", p->index);
    close(p->c.fd);
    p->state = P_GONE;
  }
  for (double deadline = now_s() + 30;;) { /* every launcher ends once its rollout has */
    int left = 0;
    reap(T, 0);
    for (int i = 0; i < T->nprocs; i++) left += T->procs[i].launcher != 0;
    if (!left) break;
    if (now_s() > deadline) {
      for (int i = 0; i < T->nprocs; i++)
        if (T->procs[i].launcher) kill(T->procs[i].launcher, SIGKILL);
      reap(T, 5);
      break;
    }
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  }
}

static int trainer_main(const struct options *o) {
  static struct step_plan plan[MAX_STEPS];
  static struct trainer T;
  int nsteps = parse_schedule(o->schedule, o, plan), max_members = 0;
  for (int k = 0, alive = 0; k < nsteps; k++) {
    int m = members_of(&plan[k], alive, NULL);
    if (m > max_members) max_members = m;
    alive = plan[k].target;
  }
  if (o->print_hosts) {
    printf("%d\n", max_members + 1);
    return 0;
  }
  const char *hosts_env = getenv("NETLAB_HOSTS"), *rate_env = getenv("NETLAB_RATE_BPS");
  int hosts = hosts_env ? atoi(hosts_env) : 0;
  if (hosts < max_members + 1) die("the schedule needs %d hosts, the lab has %d", max_members + 1, hosts);
  if (!o->launcher) die("--launcher (netlab.sh) is required");
  double rate = rate_env ? strtod(rate_env, NULL) : 0, ideal = rate > 0 ? (double)o->bytes * 8.0 / rate : 0;
  double train_s = o->train_s >= 0 ? o->train_s : ideal > 0 ? 1.5 * ideal : 1.0;

  T.o = o;
  T.rng = o->seed * 0x2545F4914F6CDD1Dull + 1;
  ssize_t n = readlink("/proc/self/exe", T.exe, sizeof T.exe - 1);
  if (n <= 0) die("readlink /proc/self/exe: %s", strerror(errno));
  T.exe[n] = '\0';
  T.out = o->out ? fopen(o->out, "a") : stdout;
  if (!T.out) die("cannot open %s: %s", o->out, strerror(errno));
  snprintf(T.addr, sizeof T.addr, "%s:%d", o->listen_ip, o->control_port);

  char listen[96];
  snprintf(listen, sizeof listen, "%s:%d", o->listen_ip, o->registry_port);
  THUB_Context ctx = init_context(o->ninfo, (const char *const *)o->info_kv, NULL, listen);
  check_thub(ctx, "THUB_Registry_address", THUB_Registry_address(ctx, T.registry, sizeof T.registry));
  struct shard s;
  make_shard(&s, o->bytes, o->tensors);
  THUB_Model m = open_shard(ctx, "trainer", &s, "1", 0);
  T.lfd = tcp_listen(o->listen_ip, o->control_port, MAX_HOSTS);

  fprintf(T.out, "{\"bench\":\"thub_elastic_run\",\"mode\":\"%s\",\"rep\":%d,\"schedule\":\"%s\",\"steps\":%d,\"bytes\":%" PRIu64
                 ",\"tensors\":%d,\"standalone\":%d,\"train_s\":%.4f,\"link_bps\":%.0f,\"ideal_s\":%.6f,\"hosts\":%d,"
                 "\"seed\":%llu,\"kill_range\":[%.3f,%.3f],\"info\":[",
          o->mode, o->rep, o->schedule, nsteps, o->bytes, o->tensors, o->standalone, train_s, rate, ideal, hosts, o->seed,
          o->kill_lo, o->kill_hi);
  for (int i = 0; i < o->ninfo; i++) fprintf(T.out, "%s\"%s\"", i ? "," : "", o->info_kv[i]);
  fputs("],\"rollout_info\":[", T.out);
  for (int i = 0; i < o->nrinfo; i++) fprintf(T.out, "%s\"%s\"", i ? "," : "", o->rinfo_kv[i]);
  fputs("]}\n", T.out);
  fflush(T.out);
  printf("%s: %d steps (%s), %.1f MiB, train %.3f s%s\n", o->mode, nsteps, o->schedule, (double)o->bytes / 1048576.0,
         train_s, ideal > 0 ? "" : " (no NETLAB_RATE_BPS: no ideal)");

  int errors = 0;
  for (int k = 0; k < nsteps; k++) {
    const int64_t v = k + 1;
    int alive = 0, kills = 0;
    for (int i = 0; i < T.nprocs; i++) alive += T.procs[i].state == P_MEMBER;
    const int members = members_of(&plan[k], alive, &kills), joins = members - alive;

    /* Membership change: new rollouts first (each in a free host), then the victims. */
    double tj = now_s();
    reap(&T, 0);
    for (int j = 0; j < joins; j++) spawn(&T, k + 1, hosts);
    await_ready(&T, joins);
    double join_wall = now_s() - tj;
    /* Victims: spot members, older ones first (a joiner is preempted only when the older
     * ones do not suffice), in a seeded random order within each group. */
    struct proc *cand[MAX_PROCS];
    int nc = 0, nkill = 0;
    for (int pass = 0; pass < 2; pass++) {
      int lo = nc;
      for (int i = 0; i < T.nprocs; i++) {
        struct proc *p = &T.procs[i];
        if (p->state == P_MEMBER && p->spot && (p->joined_step == k + 1) == pass) cand[nc++] = p;
      }
      for (int i = nc - 1; i > lo; i--) {
        int j = lo + (int)(next_rand(&T.rng) % (uint64_t)(i - lo + 1));
        struct proc *t = cand[i];
        cand[i] = cand[j], cand[j] = t;
      }
    }
    for (int i = 0; i < T.nprocs; i++) {
      struct proc *p = &T.procs[i];
      p->in_step = p->state == P_MEMBER;
      p->out = O_WAIT, p->die_at = 0, p->t_death = 0, p->held_at_death = 0, p->kill_missed = 0;
      p->steps_as_member += p->in_step;
    }
    for (; nkill < kills && nkill < nc; nkill++)
      cand[nkill]->die_at = o->kill_lo + (o->kill_hi - o->kill_lo) * uniform(&T.rng);
    if (nkill < kills) fprintf(stderr, "thub_elastic: step %d: only %d spot rollouts to preempt, %d asked\n", k + 1, nkill, kills);

    /* The step. */
    double b0, tot0, b1, tot1, cpu0 = cpu_s();
    int64_t off0 = stat_of(m, "offloads");
    cpu_ticks(&b0, &tot0);
    double tf = now_s();
    fill_shard(&s, v);
    double fill_s = now_s() - tf, t0 = now_s();
    check_thub(ctx, "THUB_Publish", THUB_Publish(m, v));
    double publish_s = now_s() - t0, unpublish_s = -1;
    for (int i = 0; i < T.nprocs; i++)
      if (T.procs[i].in_step) send_line(&T.procs[i].c, "GO %" PRId64 " %.6f %.4f", v, t0, T.procs[i].die_at);
    const int silent_s = 60 + (int)(3.0 * members * (ideal > 0 ? ideal : 1.0)); /* p2p: members x S/R */
    for (;;) {
      struct pollfd pfd[MAX_PROCS];
      struct proc *who[MAX_PROCS];
      int np = 0, waiting = 0;
      char line[LINE_MAX_LEN];
      for (int i = 0; i < T.nprocs; i++) {
        struct proc *p = &T.procs[i];
        if (!p->in_step || p->c.fd < 0) continue;
        while (p->c.fd >= 0 && take_line(&p->c, line, sizeof line)) on_line(p, line, v);
        if (p->c.fd >= 0 && p->c.eof) on_line(p, NULL, v);
        if (p->c.fd < 0 || (p->out != O_WAIT && p->out != O_KILLED)) continue; /* a victim: wait for its end */
        waiting++;
        pfd[np] = (struct pollfd){.fd = p->c.fd, .events = POLLIN};
        who[np++] = p;
      }
      double now = now_s();
      if (unpublish_s < 0 && now >= t0 + train_s) {
        /* Training is done: the optimizer wants to write the next version. */
        double tu = now_s();
        check_thub(ctx, "THUB_Unpublish", THUB_Unpublish(m));
        unpublish_s = now_s() - tu;
        continue;
      }
      if (!waiting && unpublish_s >= 0) break;
      int ms = unpublish_s < 0 ? (int)((t0 + train_s - now) * 1000.0) + 1 : silent_s * 1000;
      int r = poll(pfd, (nfds_t)np, ms);
      if (r < 0 && errno != EINTR) die("poll: %s", strerror(errno));
      if (r == 0 && unpublish_s >= 0) die("step %d: no rollout answered for %d s", k + 1, silent_s);
      for (int i = 0; i < np; i++)
        if (pfd[i].revents) fill_conn(&who[i]->c);
    }
    double step_s = now_s() - t0, trainer_cpu = cpu_s() - cpu0;
    cpu_ticks(&b1, &tot1);
    int64_t offloads = stat_of(m, "offloads") - off0;

    /* A victim whose transfer outran its kill mark still leaves: killed after the step. */
    for (int i = 0; i < T.nprocs; i++) {
      struct proc *p = &T.procs[i];
      if (!p->in_step || p->die_at <= 0 || p->state == P_GONE) continue;
      p->kill_missed = 1;
      kill(p->pid, SIGKILL);
      close(p->c.fd);
      p->c.fd = -1;
      p->state = P_GONE;
    }

    double lat[MAX_PROCS];
    int nd = 0, nkilled = 0, nfail = 0, nlost = 0, nbad = 0;
    for (int i = 0; i < T.nprocs; i++) {
      struct proc *p = &T.procs[i];
      if (!p->in_step) continue;
      write_rollout_line(&T, k + 1, v, p, t0, members);
      if (p->out == O_DONE) {
        lat[nd++] = p->t_end - t0;
        nbad += p->got != v || p->bad != 0;
      }
      nkilled += p->out == O_KILLED || p->kill_missed;
      nfail += p->out == O_FAILED;
      nlost += p->out == O_LOST;
    }
    errors += nfail + nlost + nbad;
    double med = quantile(lat, nd, 0.5), p90 = quantile(lat, nd, 0.9), mx = nd ? lat[nd - 1] : 0;
    double busy = tot1 > tot0 ? (b1 - b0) / (tot1 - tot0) : 0;
    fprintf(T.out,
            "{\"bench\":\"thub_elastic_step\",\"mode\":\"%s\",\"rep\":%d,\"step\":%d,\"version\":%" PRId64 ",\"target\":%d,"
            "\"members\":%d,\"joined\":%d,\"killed\":%d,\"done\":%d,\"failed\":%d,\"lost\":%d,\"bad\":%d,"
            "\"join_wall_s\":%.4f,\"fill_s\":%.4f,\"publish_s\":%.6f,\"unpublish_s\":%.6f,\"trainer_stall_s\":%.6f,"
            "\"train_s\":%.4f,\"step_s\":%.4f,\"offloads\":%" PRId64 ",\"trainer_cpu_s\":%.4f,\"lat_median_s\":%.6f,"
            "\"lat_p90_s\":%.6f,\"lat_max_s\":%.6f,\"ideal_s\":%.6f,\"machine_busy\":%.3f,\"loadavg_1m\":%.2f}\n",
            o->mode, o->rep, k + 1, v, plan[k].target, members, joins, nkilled, nd, nfail, nlost, nbad, join_wall, fill_s,
            publish_s, unpublish_s, publish_s + unpublish_s, train_s, step_s, offloads, trainer_cpu, med, p90, mx, ideal,
            busy, loadavg1());
    fflush(T.out);
    printf("%s step %2d: %2d members (+%d, -%d killed), %2d done: update latency median %.3f p90 %.3f max %.3f s "
           "(%.2fx S/R); trainer stall %.1f ms (publish %.1f + unpublish %.1f); busy %.0f%%%s\n",
           o->mode, k + 1, members, joins, nkilled, nd, med, p90, mx, ideal > 0 ? mx / ideal : 0, 1e3 * (publish_s + unpublish_s),
           1e3 * publish_s, 1e3 * unpublish_s, 100 * busy, nfail + nlost + nbad ? " ERRORS" : "");
    fflush(stdout);
  }

  trainer_quit(&T);
  check_thub(ctx, "THUB_Close", THUB_Close(&m));
  check_thub(ctx, "THUB_Finalize", THUB_Finalize(&ctx));
  fprintf(T.out, "{\"bench\":\"thub_elastic_end\",\"mode\":\"%s\",\"rep\":%d,\"steps\":%d,\"rollout_processes\":%d,\"errors\":%d}\n",
          o->mode, o->rep, nsteps, T.nprocs, errors);
  if (T.out != stdout) fclose(T.out);
  close(T.lfd);
  return errors ? 1 : 0;
}

int main(int argc, char **argv) {
  struct options o;
  parse_options(argc, argv, &o);
  signal(SIGPIPE, SIG_IGN);
  return o.trainer ? trainer_main(&o) : rollout_main(&o);
}
