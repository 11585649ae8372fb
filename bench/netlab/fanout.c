/* thub_fanout: one trainer fans a shard out to N rollouts through TensorHub, in the cluster
 * in a box (tools/netlab/): the trainer in one host, each rollout in a host of its own.
 *
 *   thub_fanout --role trainer --listen IP [--rollouts N] [--bytes S] [--tensors T]
 *               [--registry-port P] [--control-port Q] [--label L] [--stagger]
 *               [--info KEY=VALUE]...
 *   thub_fanout --role rollout --trainer IP:Q --index I [--die-at F] [--check-all]
 *               [--info KEY=VALUE]...
 *
 * The trainer starts the embedded registry on IP:P (info keys such as pipeline=false or
 * max_readers=8 go to it with --info) and listens for its rollouts on IP:Q (plain TCP, one
 * line per message). Each rollout connects (retrying while the trainer is not up yet),
 * learns the registry address and the layout (HELLO), initialises, registers its tensors
 * and says READY. When all N are ready, the trainer takes the common start t0, publishes
 * version 1 and sends GO to every rollout (--stagger: to rollout i+1 only once rollout i
 * holds its first bytes, so that it reads rollout i as a partial source). Each rollout
 * THUB_Replicate(THUB_LATEST)s, checks the bytes and reports DONE with its times and
 * counters; it keeps serving until QUIT, because later rollouts may read from it. After the
 * last DONE the trainer unpublishes (its stall = publish + this unpublish), sends QUIT,
 * waits for every BYE and prints a table and one JSON line.
 * --versions V: V training steps in the same processes, as an RL job runs them: after
 * version v's last DONE the trainer unpublishes, writes version v+1 into the same tensors,
 * publishes it and sends GO again; each rollout THUB_Update(THUB_LATEST)s into the same
 * tensors. The JSON's completion, stalls and the rollouts' detail are the median version's
 * (by completion), and "completions_s" lists every version's; the first version also pays
 * for the processes' first connections, as the first MPI_Bcast of an MPI job does.
 *
 * Times are CLOCK_MONOTONIC, which every namespace of the machine shares (no time
 * namespaces are used), so the trainer subtracts t0 from the rollouts' clock readings.
 * --die-at F: the rollout SIGKILLs itself once it holds F x the shard (failure benchmark).
 * --freeze-at F: the rollout says FROZEN and SIGSTOPs itself at F x the shard: a silent
 * failure (no connection is closed); the trainer SIGKILLs it once the others are done.
 * --watch: rollouts poll their own bytes_held (every 0.5 ms) and report when their first
 * bytes arrived (first_bytes_s): where a chain's per-hop delay comes from.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tensorhub/tensorhub.h>

#include "line_conn.h" /* the control channel: lines over TCP, sizes, the clock */

#define MODEL_NAME "fanout"
#define MAX_ROLLOUTS 64
#define MAX_INFO 16

struct options {
  int trainer;
  uint64_t bytes;
  int tensors;
  int rollouts;
  const char *listen_ip;
  int registry_port;
  int control_port;
  const char *label;
  int stagger;
  int watch;
  const char *trainer_addr; /* rollout: IP:PORT of the trainer's control socket */
  int index;
  double die_at;
  double freeze_at;
  int check_all;
  int versions;
  int ninfo;
  char *info_kv[MAX_INFO];
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: thub_fanout --role trainer --listen IP [--rollouts N] [--bytes S[K|M|G]] [--tensors T]\n"
          "                   [--registry-port P] [--control-port Q] [--label L] [--stagger] [--watch]\n"
          "                   [--versions V] [--info KEY=VALUE]...\n"
          "       thub_fanout --role rollout --trainer IP:Q --index I [--die-at F | --freeze-at F] [--check-all]\n"
          "                   [--info KEY=VALUE]...\n"
          "  defaults: --rollouts 1, --bytes 256M, --tensors 4, --registry-port 29500,\n"
          "  --control-port 29501, --label tensorhub, --versions 1. --info sets a THUB_Init key (repeatable).\n");
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("thub_fanout: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void parse_options(int argc, char **argv, struct options *o) {
  enum { O_ROLE = 256, O_LISTEN, O_RPORT, O_CPORT, O_LABEL, O_STAGGER, O_WATCH, O_TRAINER, O_INDEX, O_DIE, O_FREEZE, O_CHECK, O_INFO, O_VERSIONS };
  static const struct option longopts[] = {
      {"role", required_argument, 0, O_ROLE},        {"bytes", required_argument, 0, 'b'},
      {"tensors", required_argument, 0, 't'},        {"rollouts", required_argument, 0, 'n'},
      {"listen", required_argument, 0, O_LISTEN},    {"registry-port", required_argument, 0, O_RPORT},
      {"control-port", required_argument, 0, O_CPORT}, {"label", required_argument, 0, O_LABEL},
      {"stagger", no_argument, 0, O_STAGGER},        {"watch", no_argument, 0, O_WATCH},
             {"trainer", required_argument, 0, O_TRAINER},
      {"index", required_argument, 0, O_INDEX},      {"die-at", required_argument, 0, O_DIE},
      {"freeze-at", required_argument, 0, O_FREEZE}, {"check-all", no_argument, 0, O_CHECK},        {"info", required_argument, 0, O_INFO},
      {"versions", required_argument, 0, O_VERSIONS},
      {"help", no_argument, 0, 'h'},                 {0, 0, 0, 0}};
  int c, bad = 0, role_set = 0;
  char *end;
  memset(o, 0, sizeof *o);
  o->bytes = 256ull << 20;
  o->tensors = 4;
  o->rollouts = 1;
  o->registry_port = 29500;
  o->control_port = 29501;
  o->label = "tensorhub";
  o->index = -1;
  o->versions = 1;
  while (!bad && (c = getopt_long(argc, argv, "b:t:n:h", longopts, NULL)) != -1) {
    switch (c) {
      case O_ROLE:
        role_set = 1;
        o->trainer = strcmp(optarg, "trainer") == 0;
        bad = !o->trainer && strcmp(optarg, "rollout") != 0;
        break;
      case 'b': bad = parse_size(optarg, &o->bytes) != 0 || o->bytes == 0; break;
      case 't': bad = parse_int(optarg, 1, 1024, &o->tensors); break;
      case 'n': bad = parse_int(optarg, 1, MAX_ROLLOUTS, &o->rollouts); break;
      case O_LISTEN: o->listen_ip = optarg; break;
      case O_RPORT: bad = parse_int(optarg, 1, 65535, &o->registry_port); break;
      case O_CPORT: bad = parse_int(optarg, 1, 65535, &o->control_port); break;
      case O_LABEL: o->label = optarg; break;
      case O_STAGGER: o->stagger = 1; break;
      case O_WATCH: o->watch = 1; break;
      case O_TRAINER: o->trainer_addr = optarg; break;
      case O_INDEX: bad = parse_int(optarg, 0, MAX_ROLLOUTS - 1, &o->index); break;
      case O_DIE:
        o->die_at = strtod(optarg, &end);
        bad = *end != '\0' || o->die_at <= 0.0 || o->die_at >= 1.0;
        break;
      case O_FREEZE:
        o->freeze_at = strtod(optarg, &end);
        bad = *end != '\0' || o->freeze_at <= 0.0 || o->freeze_at >= 1.0;
        break;
      case O_CHECK: o->check_all = 1; break;
      case O_VERSIONS: bad = parse_int(optarg, 1, 1000, &o->versions); break;
      case O_INFO:
        bad = o->ninfo == MAX_INFO || strchr(optarg, '=') == NULL;
        if (!bad) o->info_kv[o->ninfo++] = optarg;
        break;
      case 'h': usage(stdout); exit(0);
      default: bad = 1;
    }
  }
  if (!bad && role_set && o->trainer) bad = o->listen_ip == NULL;
  if (!bad && role_set && !o->trainer) bad = o->trainer_addr == NULL || o->index < 0;
  if (bad || !role_set || optind != argc) {
    usage(stderr);
    exit(2);
  }
  if (o->bytes < (uint64_t)o->tensors * 4096) die("--bytes must be at least 4 KiB per tensor");
}

#include "bench_shard.h"

static THUB_Model open_shard(THUB_Context ctx, const char *replica, struct shard *s) {
  THUB_Model m = THUB_MODEL_NULL;
  check_thub(ctx, "THUB_Open", THUB_Open(ctx, MODEL_NAME, replica, 0, 1, THUB_INFO_NULL, &m));
  register_shard(ctx, m, s);
  return m;
}

/* Waits until some connection of `cs` has a line (or ends); returns its index, or -1 when
 * every connection with want[i] set has ended. */
static int next_line(struct conn *cs, const int *want, int n, char *out, size_t cap) {
  for (;;) {
    struct pollfd pfd[MAX_ROLLOUTS];
    int idx[MAX_ROLLOUTS], np = 0;
    for (int i = 0; i < n; i++) {
      if (!want[i]) continue;
      if (take_line(&cs[i], out, cap)) return i;
      if (cs[i].eof) {
        out[0] = '\0';
        return i; /* an empty line: this peer ended */
      }
      pfd[np].fd = cs[i].fd;
      pfd[np].events = POLLIN;
      idx[np++] = i;
    }
    if (np == 0) return -1;
    if (poll(pfd, (nfds_t)np, -1) < 0 && errno != EINTR) die("poll: %s", strerror(errno));
    for (int k = 0; k < np; k++)
      if (pfd[k].revents) fill_conn(&cs[idx[k]]);
  }
}

/* ---- rollout ----------------------------------------------------------------------------- */

/* CPU seconds (user + system, all threads: the UCX progress thread included) of this process. */
static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)ru.ru_stime.tv_usec;
}

static int rollout_main(const struct options *o) {
  struct conn c = {.fd = tcp_connect(o->trainer_addr)};
  char line[LINE_MAX_LEN], registry[256], replica[32];
  uint64_t bytes = 0;
  int tensors = 0, monitor = 0;
  if (!read_line(&c, line, sizeof line) ||
      sscanf(line, "HELLO %255s %" SCNu64 " %d %d", registry, &bytes, &tensors, &monitor) != 4)
    die("rollout %d: bad HELLO '%s'", o->index, line);

  THUB_Context ctx = init_context(o->ninfo, (const char *const *)o->info_kv, registry, NULL);
  struct shard s;
  make_shard(&s, bytes, tensors);
  snprintf(replica, sizeof replica, "rollout-%d", o->index);
  THUB_Model m = open_shard(ctx, replica, &s);
  send_line(&c, "READY %d %d", (int)getpid(), o->index);
  if (!read_line(&c, line, sizeof line) || strcmp(line, "GO") != 0) die("rollout %d: expected GO, got '%s'", o->index, line);

  /* Version v + 1 after each GO: the first replicated, every later one by THUB_Update into
   * the same tensors (an RL step). */
  uint64_t bad = 0;
  int64_t got = -1, partial_before = 0, failures_before = 0; /* those two stats count the model's life */
  for (int64_t v = 1;; v++) {
    double t_go = now_s(), cpu_go = cpu_s();
    if (monitor || o->die_at > 0 || o->freeze_at > 0) {
      /* Watch our own progress counter while the transfer runs: tell the trainer when the
       * first bytes are here (--stagger) and die at the requested fraction (--die-at). */
      THUB_Request req = THUB_REQUEST_NULL;
      int done = 0, started = 0, fresh = v == 1; /* bytes_held shows the last transfer's until the new one starts */
      uint64_t kill_at = (uint64_t)(o->die_at * (double)bytes), stop_at = (uint64_t)(o->freeze_at * (double)bytes);
      if (v == 1) check_thub(ctx, "THUB_Ireplicate", THUB_Ireplicate(m, THUB_LATEST, &req));
      else check_thub(ctx, "THUB_Iupdate", THUB_Iupdate(m, THUB_LATEST, &req));
      while (!done) {
        int64_t held = stat_of(m, "bytes_held");
        fresh = fresh || held < (int64_t)bytes;
        if (!fresh) held = 0;
        if (!started && held > 0) {
          started = 1;
          send_line(&c, "STARTED %.6f", now_s());
        }
        if (kill_at > 0 && held >= (int64_t)kill_at) {
          fprintf(stderr, "thub_fanout: rollout %d: SIGKILL at %" PRId64 " of %" PRIu64 " bytes\n", o->index, held, bytes);
          kill(getpid(), SIGKILL);
        }
        if (stop_at > 0 && held >= (int64_t)stop_at) {
          fprintf(stderr, "thub_fanout: rollout %d: SIGSTOP at %" PRId64 " of %" PRIu64 " bytes\n", o->index, held, bytes);
          send_line(&c, "FROZEN %.6f", now_s());
          kill(getpid(), SIGSTOP);
        }
        check_thub(ctx, "THUB_Test", THUB_Test(&req, &done, &got));
        if (!done) nanosleep(&(struct timespec){0, 500 * 1000}, NULL); /* sampling period of the counter */
      }
      if (!started) send_line(&c, "STARTED %.6f", now_s());
    } else if (v == 1) {
      check_thub(ctx, "THUB_Replicate", THUB_Replicate(m, THUB_LATEST, &got));
    } else {
      check_thub(ctx, "THUB_Update", THUB_Update(m, THUB_LATEST, &got));
    }
    double t_end = now_s(), cpu = cpu_s() - cpu_go;
    uint64_t bad_v = check_shard(&s, v - 1, o->check_all) + (got != v);
    bad += bad_v;
    const int64_t partial = stat_of(m, "partial_sources"), failures = stat_of(m, "source_failures");
    send_line(&c, "DONE %.6f %.6f %.6f %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRIu64 " %s", t_go, t_end,
              cpu, got, partial - partial_before, failures - failures_before, stat_of(m, "counter_reads"),
              stat_of(m, "gets"), bad_v, o->check_all ? "all" : "sample");
    partial_before = partial;
    failures_before = failures;
    /* Keep serving: rollouts still transferring may read from this one. GO: the next version. */
    if (!read_line(&c, line, sizeof line) || strcmp(line, "QUIT") == 0) break;
    if (strcmp(line, "GO") != 0) die("rollout %d: expected GO or QUIT, got '%s'", o->index, line);
  }
  check_thub(ctx, "THUB_Close", THUB_Close(&m));
  send_line(&c, "BYE");
  check_thub(ctx, "THUB_Finalize", THUB_Finalize(&ctx));
  free_shard(&s);
  close(c.fd);
  return bad == 0 && got >= 1 ? 0 : 1;
}

/* ---- trainer ----------------------------------------------------------------------------- */

struct result {
  int alive;
  int frozen;
  int pid;
  double t_go, t_started, t_end, cpu;
  int64_t got, partial, failures, counter_reads, gets;
  uint64_t bad;
  char check[16];
};

static const char *info_value(const struct options *o, const char *key, const char *dflt) {
  size_t kl = strlen(key);
  for (int i = 0; i < o->ninfo; i++)
    if (strncmp(o->info_kv[i], key, kl) == 0 && o->info_kv[i][kl] == '=') return o->info_kv[i] + kl + 1;
  const char *env = NULL;
  char name[64];
  snprintf(name, sizeof name, "TENSORHUB_%s", key);
  for (char *p = name; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
  env = getenv(name);
  return env ? env : dflt;
}

static int trainer_main(const struct options *o) {
  char listen[96], registry[256], line[LINE_MAX_LEN];
  int n = o->rollouts;
  snprintf(listen, sizeof listen, "%s:%d", o->listen_ip, o->registry_port);
  THUB_Context ctx = init_context(o->ninfo, (const char *const *)o->info_kv, NULL, listen);
  check_thub(ctx, "THUB_Registry_address", THUB_Registry_address(ctx, registry, sizeof registry));
  struct shard s;
  make_shard(&s, o->bytes, o->tensors);
  fill_shard(&s, 0); /* version 1's content: the words of (0, t, w) */
  THUB_Model m = open_shard(ctx, "trainer", &s);

  int lfd = tcp_listen(o->listen_ip, o->control_port, MAX_ROLLOUTS);
  static struct conn cs[MAX_ROLLOUTS];
  struct result res[MAX_ROLLOUTS];
  int want[MAX_ROLLOUTS];
  memset(res, 0, sizeof res);
  for (int i = 0; i < n; i++) {
    int fd = accept(lfd, NULL, NULL), one = 1;
    if (fd < 0) die("accept: %s", strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    cs[i] = (struct conn){.fd = fd};
    send_line(&cs[i], "HELLO %s %" PRIu64 " %d %d", registry, o->bytes, o->tensors, o->stagger || o->watch);
  }
  close(lfd);
  /* Order the connections by the rollouts' --index (--stagger starts them in that order). */
  static struct conn accepted[MAX_ROLLOUTS];
  int seen[MAX_ROLLOUTS] = {0};
  memcpy(accepted, cs, sizeof(struct conn) * (size_t)n);
  for (int i = 0; i < n; i++) {
    int pid = 0, idx = -1;
    if (!read_line(&accepted[i], line, sizeof line) || sscanf(line, "READY %d %d", &pid, &idx) != 2 || idx < 0 ||
        idx >= n || seen[idx]++)
      die("connection %d: expected READY with a unique index below %d, got '%s'", i, n, line);
    cs[idx] = accepted[i];
    res[idx].pid = pid;
    res[idx].alive = 1;
  }

  /* Version v: the common start t0[v], publish, GO, every DONE, unpublish. */
  const int nv = o->versions;
  struct result(*vres)[MAX_ROLLOUTS] = calloc((size_t)nv, sizeof *vres);
  double *t0s = calloc((size_t)nv, sizeof *t0s), *pubs = calloc((size_t)nv, sizeof *pubs),
         *unpubs = calloc((size_t)nv, sizeof *unpubs), *completions = calloc((size_t)nv, sizeof *completions);
  if (!vres || !t0s || !pubs || !unpubs || !completions) die("out of memory");
  int killed = 0, ran = 0;
  for (int v = 0; v < nv && killed == 0; v++, ran++) {
    if (v > 0) {
      fill_shard(&s, v); /* version v + 1's content, into the tensors the registry was told of */
      for (int i = 0; i < n; i++) vres[v][i] = (struct result){.alive = vres[v - 1][i].alive, .pid = vres[v - 1][i].pid};
    } else {
      memcpy(vres[0], res, sizeof vres[0]);
    }
    struct result *rv = vres[v];
    double t0 = t0s[v] = now_s();
    check_thub(ctx, "THUB_Publish", THUB_Publish(m, v + 1));
    pubs[v] = now_s() - t0;
    int next_go = 0;
    if (o->stagger) send_line(&cs[next_go++], "GO");
    else
      for (; next_go < n; next_go++) send_line(&cs[next_go], "GO");

    int pending = n;
    for (int i = 0; i < n; i++) want[i] = 1;
    while (pending > 0) {
      int i = next_line(cs, want, n, line, sizeof line);
      if (i < 0) break;
      struct result *r = &rv[i];
      if (line[0] == '\0') { /* the rollout ended without DONE (killed) */
        r->alive = 0;
        r->t_end = now_s(); /* when the trainer saw it gone */
        want[i] = 0;
        pending--;
        killed++;
        fprintf(stderr, "thub_fanout: connection %d (pid %d) ended before DONE\n", i, r->pid);
      } else if (strncmp(line, "FROZEN ", 7) == 0) { /* stopped itself: counts as failed */
        r->alive = 0;
        r->frozen = 1;
        r->t_end = strtod(line + 7, NULL);
        want[i] = 0;
        pending--;
        killed++;
      } else if (strncmp(line, "STARTED ", 8) == 0) {
        r->t_started = strtod(line + 8, NULL);
      } else if (sscanf(line, "DONE %lf %lf %lf %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNu64 " %15s",
                        &r->t_go, &r->t_end, &r->cpu, &r->got, &r->partial, &r->failures, &r->counter_reads, &r->gets,
                        &r->bad, r->check) == 10) {
        want[i] = 0;
        pending--;
      } else {
        die("connection %d: unexpected '%s'", i, line);
      }
      /* --stagger: the next rollout goes once this one holds data (or is finished/gone). */
      if (o->stagger && next_go < n && i == next_go - 1 && (r->t_started > 0 || !want[i])) send_line(&cs[next_go++], "GO");
    }

    for (int i = 0; i < n; i++)
      if (rv[i].frozen) kill(rv[i].pid, SIGKILL); /* same pid namespace as the lab's hosts */
    double t_u = now_s();
    check_thub(ctx, "THUB_Unpublish", THUB_Unpublish(m));
    unpubs[v] = now_s() - t_u;
    for (int i = 0; i < n; i++)
      if (rv[i].alive && rv[i].t_end - t0 > completions[v]) completions[v] = rv[i].t_end - t0;
    if (nv > 1) fprintf(stderr, "thub_fanout: version %d: completion %.3f s\n", v + 1, completions[v]);
  }
  /* The median version by completion (the lower middle of an even count). */
  int med = 0;
  for (int v = 0; v < ran; v++) {
    int below = 0;
    for (int u = 0; u < ran; u++) below += completions[u] < completions[v] || (completions[u] == completions[v] && u < v);
    if (below == (ran - 1) / 2) med = v;
  }
  memcpy(res, vres[ran - 1], sizeof vres[0]);
  for (int i = 0; i < n; i++)
    if (res[i].alive) send_line(&cs[i], "QUIT");
  for (int i = 0; i < n; i++) {
    if (!res[i].alive) continue;
    if (!read_line(&cs[i], line, sizeof line) || strcmp(line, "BYE") != 0)
      fprintf(stderr, "thub_fanout: connection %d: no BYE ('%s')\n", i, line);
  }
  uint64_t bad_all = 0;
  for (int v = 0; v < ran; v++)
    for (int i = 0; i < n; i++) bad_all += vres[v][i].alive && (vres[v][i].bad != 0 || vres[v][i].got != v + 1);
  memcpy(res, vres[med], sizeof vres[0]);
  double t0 = t0s[med], t_pub = pubs[med], t_unpub = unpubs[med];
  check_thub(ctx, "THUB_Close", THUB_Close(&m));
  check_thub(ctx, "THUB_Finalize", THUB_Finalize(&ctx));

  /* Report, in order of --index. */
  const char *rate = getenv("NETLAB_RATE_BPS");
  double link_bps = rate ? strtod(rate, NULL) : 0.0, ideal = link_bps > 0 ? (double)o->bytes * 8.0 / link_bps : 0.0;
  double completion = 0.0, rollout_stall = 0.0;
  int partial_rollouts = 0, done = 0, ok = bad_all == 0;
  int64_t failures = 0;
  for (int i = 0; i < n; i++) {
    struct result *r = &res[i];
    if (!r->alive) continue;
    done++;
    if (r->t_end - t0 > completion) completion = r->t_end - t0;
    rollout_stall += r->t_end - r->t_go;
    partial_rollouts += r->partial > 0;
    failures += r->failures;
    ok &= r->bad == 0 && r->got == med + 1;
    printf("rollout %d (pid %d): start %.3f s, done %.3f s, replicate %.3f s, partial_sources %" PRId64
           ", source_failures %" PRId64 ", counter_reads %" PRId64 ", gets %" PRId64 ", check %s %s\n",
           i, r->pid, r->t_go - t0, r->t_end - t0, r->t_end - r->t_go, r->partial, r->failures, r->counter_reads,
           r->gets, r->check, r->bad ? "BAD" : "ok");
  }
  printf("%s: %d rollouts, %.1f MiB, completion %.3f s", o->label, n, (double)o->bytes / (1 << 20), completion);
  if (ideal > 0) printf(" (%.2fx ideal %.3f s)", completion / ideal, ideal);
  printf(", rollout stall %.3f s, trainer stall %.4f s (publish %.4f + unpublish %.4f), %d partial, %d killed, data %s\n",
         rollout_stall, t_pub + t_unpub, t_pub, t_unpub, partial_rollouts, killed, ok ? "ok" : "BAD");

  printf("{\"bench\":\"thub_fanout\",\"method\":\"%s\",\"rollouts\":%d,\"bytes\":%" PRIu64 ",\"tensors\":%d,"
         "\"pipeline\":\"%s\",\"max_readers\":\"%s\",\"stagger\":%s,\"completion_s\":%.6f,\"rollout_stall_s\":%.6f,"
         "\"trainer_stall_s\":%.6f,\"publish_s\":%.6f,\"unpublish_s\":%.6f,\"partial_rollouts\":%d,"
         "\"source_failures\":%" PRId64 ",\"done\":%d,\"killed\":%d,\"check\":\"%s\"",
         o->label, n, o->bytes, o->tensors, info_value(o, "pipeline", "true"), info_value(o, "max_readers", "1"),
         o->stagger ? "true" : "false", completion, rollout_stall, t_pub + t_unpub, t_pub, t_unpub, partial_rollouts,
         failures, done, killed, ok ? "ok" : "bad");
  if (ideal > 0) printf(",\"link_gbps\":%.4f,\"ideal_s\":%.6f,\"vs_ideal\":%.4f", link_bps / 1e9, ideal, completion / ideal);
  printf(",\"versions\":%d,\"median_version\":%d,\"completions_s\":[", ran, med + 1);
  for (int v = 0; v < ran; v++) printf("%s%.6f", v ? "," : "", completions[v]);
  printf("]");
  printf(",\"rollouts_detail\":[");
  for (int k = 0, first = 1; k < n; k++) {
    struct result *r = &res[k];
    printf("%s{\"index\":%d,\"alive\":%s", first ? "" : ",", k, r->alive ? "true" : "false");
    if (r->alive)
      printf(",\"start_s\":%.6f,\"first_bytes_s\":%.6f,\"done_s\":%.6f,\"replicate_s\":%.6f,\"partial_sources\":%" PRId64
             ",\"source_failures\":%" PRId64 ",\"counter_reads\":%" PRId64 ",\"gets\":%" PRId64 ",\"check\":\"%s\""
             ",\"cpu_s\":%.3f",
             r->t_go - t0, r->t_started > 0 ? r->t_started - t0 : -1.0, r->t_end - t0, r->t_end - r->t_go, r->partial,
             r->failures, r->counter_reads, r->gets, r->bad ? "bad" : r->check, r->cpu);
    else
      printf(",\"first_bytes_s\":%.6f,\"gone_s\":%.6f,\"frozen\":%s", r->t_started > 0 ? r->t_started - t0 : -1.0,
             r->t_end - t0, r->frozen ? "true" : "false");
    printf("}");
    first = 0;
  }
  printf("]}\n");
  fflush(stdout);
  for (int i = 0; i < n; i++) close(cs[i].fd);
  free_shard(&s);
  free(vres);
  free(t0s);
  free(pubs);
  free(unpubs);
  free(completions);
  return ok && done + killed == n ? 0 : 1;
}

int main(int argc, char **argv) {
  struct options o;
  parse_options(argc, argv, &o);
  signal(SIGPIPE, SIG_IGN);
  return o.trainer ? trainer_main(&o) : rollout_main(&o);
}
