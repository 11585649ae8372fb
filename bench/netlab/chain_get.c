/* thub_chain_get: the static chain of raw UCX gets, a fan-out baseline (issue 11): host i
 * reads the shard from host i-1 in chunks with ucp_get_nbx, following host i-1's progress
 * counter (an 8-byte registered word it re-reads with a get), as veRL's NIXL ring does. No
 * registry, no TensorHub: plain UCP over the same links (UCX_TLS / UCX_NET_DEVICES as
 * netlab.sh exec sets them).
 *
 *   thub_chain_get --rank I --hosts H --listen IP --root IP [--prev IP] [--bytes S]
 *                  [--chunk C] [--window W] [--port P] [--check-all]
 *
 * Rank 0 (the trainer) holds the data from the start (its counter says S). Each rank r >= 1
 * connects to rank r-1 on IP:P (plain TCP, retrying while it is not up yet) and receives its
 * worker address, buffer address and rkey, counter address and rkey; rank r then serves the
 * same to rank r+1. Every rank says READY to rank 0 on root:P+1; rank 0 takes the common
 * start t0 and sends GO. Rank r issues gets of the chunks rank r-1 already holds (at most W
 * in flight), advances its own counter over the contiguous prefix it holds, and re-reads
 * rank r-1's counter when it has caught up (at most every 200 us while nothing is new). When
 * done it checks the bytes, sends DONE to rank 0 and BYE to rank r-1, and keeps serving until
 * rank r+1's BYE. Every process sleeps on the UCP worker's event fd when it has nothing to do
 * (no busy polling: all hosts of the box share the machine's cores).
 *
 * Rank 0 prints a table and one JSON line: completion (last rank done - t0) and the
 * trainer's stall, i.e. how long rank 0's buffer is pinned by the transfer: from t0 until
 * rank 1 has read its last byte. Times are CLOCK_MONOTONIC, shared by every namespace.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#define MAX_RANKS 65
#define MAX_WINDOW 256

struct options {
  int rank, hosts, port, window, check_all;
  uint64_t bytes, chunk;
  const char *listen_ip, *root_ip, *prev_ip;
};

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("thub_chain_get: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int parse_size(const char *s, uint64_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return -1;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end != '\0' || v == 0) return -1;
  *out = (uint64_t)v * mul;
  return 0;
}

static void parse_options(int argc, char **argv, struct options *o) {
  enum { O_RANK = 256, O_HOSTS, O_LISTEN, O_ROOT, O_PREV, O_BYTES, O_CHUNK, O_WINDOW, O_PORT, O_CHECK };
  static const struct option longopts[] = {
      {"rank", required_argument, 0, O_RANK},     {"hosts", required_argument, 0, O_HOSTS},
      {"listen", required_argument, 0, O_LISTEN}, {"root", required_argument, 0, O_ROOT},
      {"prev", required_argument, 0, O_PREV},     {"bytes", required_argument, 0, O_BYTES},
      {"chunk", required_argument, 0, O_CHUNK},   {"window", required_argument, 0, O_WINDOW},
      {"port", required_argument, 0, O_PORT},     {"check-all", no_argument, 0, O_CHECK},
      {"help", no_argument, 0, 'h'},              {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->rank = -1;
  o->bytes = 256ull << 20;
  o->chunk = 1ull << 20;
  o->window = 4;
  o->port = 29700;
  int c, bad = 0;
  while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
      case O_RANK: o->rank = atoi(optarg); break;
      case O_HOSTS: o->hosts = atoi(optarg); break;
      case O_LISTEN: o->listen_ip = optarg; break;
      case O_ROOT: o->root_ip = optarg; break;
      case O_PREV: o->prev_ip = optarg; break;
      case O_BYTES: bad = parse_size(optarg, &o->bytes); break;
      case O_CHUNK: bad = parse_size(optarg, &o->chunk); break;
      case O_WINDOW: o->window = atoi(optarg); break;
      case O_PORT: o->port = atoi(optarg); break;
      case O_CHECK: o->check_all = 1; break;
      case 'h':
        puts("usage: thub_chain_get --rank I --hosts H --listen IP --root IP [--prev IP] [--bytes 256M]\n"
             "                      [--chunk 1M] [--window 4] [--port 29700] [--check-all]");
        exit(0);
      default: bad = 1;
    }
  }
  if (bad || optind != argc || o->hosts < 2 || o->hosts > MAX_RANKS || o->rank < 0 || o->rank >= o->hosts ||
      !o->listen_ip || !o->root_ip || (o->rank > 0 && !o->prev_ip) || o->window < 1 || o->window > MAX_WINDOW ||
      o->port < 1 || o->port > 65534 || o->bytes % 8 != 0)
    die("bad arguments (see --help; --bytes must be a multiple of 8)");
}

/* ---- plain TCP with length-prefixed messages ------------------------------------------- */

static void send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("send: %s", strerror(errno));
    c += w;
    n -= (size_t)w;
  }
}

static int recv_all(int fd, void *p, size_t n) { /* 0 at end of file */
  char *c = p;
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return 0;
    if (r < 0) die("recv: %s", strerror(errno));
    c += r;
    n -= (size_t)r;
  }
  return 1;
}

static void send_msg(int fd, const void *p, uint32_t n) {
  send_all(fd, &n, sizeof n);
  send_all(fd, p, n);
}

static void *recv_msg(int fd, uint32_t *n) {
  if (!recv_all(fd, n, sizeof *n)) die("connection closed");
  void *p = malloc(*n ? *n : 1);
  if (!p || !recv_all(fd, p, *n)) die("short message");
  return p;
}

static int tcp_listen(const char *ip, int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) die("bad IPv4 address '%s'", ip);
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, MAX_RANKS) != 0)
    die("cannot listen on %s:%d: %s", ip, port, strerror(errno));
  return fd;
}

static int tcp_accept(int lfd) {
  int fd = accept(lfd, NULL, NULL), one = 1;
  if (fd < 0) die("accept: %s", strerror(errno));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static int tcp_connect(const char *ip, int port) { /* retries for 60 s while nobody listens */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) die("bad IPv4 address '%s'", ip);
  double deadline = now_s() + 60;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) die("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    int err = errno;
    close(fd);
    if ((err != ECONNREFUSED && err != ENETUNREACH && err != EHOSTUNREACH) || now_s() > deadline)
      die("cannot connect to %s:%d: %s", ip, port, strerror(err));
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  }
}

/* ---- UCX ----------------------------------------------------------------------------------- */

static void check(ucs_status_t st, const char *what) {
  if (st != UCS_OK) die("%s: %s", what, ucs_status_string(st));
}

struct ucx {
  ucp_context_h ctx;
  ucp_worker_h worker;
  int efd;
  ucp_mem_h buf_mh, ctr_mh;
  void *addr;
  size_t addr_len;
};

static void ucx_init(struct ucx *u, void *buf, uint64_t bytes, uint64_t *counter) {
  ucp_config_t *cfg;
  check(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read");
  ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP};
  ucs_status_t st = ucp_init(&p, cfg, &u->ctx);
  ucp_config_release(cfg);
  check(st, "ucp_init");
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
  check(ucp_worker_create(u->ctx, &wp, &u->worker), "ucp_worker_create");
  check(ucp_worker_get_efd(u->worker, &u->efd), "ucp_worker_get_efd");
  ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                             .address = buf, .length = bytes};
  check(ucp_mem_map(u->ctx, &mp, &u->buf_mh), "ucp_mem_map");
  mp.address = counter;
  mp.length = sizeof *counter;
  check(ucp_mem_map(u->ctx, &mp, &u->ctr_mh), "ucp_mem_map (counter)");
  check(ucp_worker_get_address(u->worker, (ucp_address_t **)&u->addr, &u->addr_len), "ucp_worker_get_address");
}

/* What a successor needs to read us: worker address, buffer and counter with their rkeys. */
static void send_info(int fd, struct ucx *u, void *buf, uint64_t *counter) {
  void *rk1, *rk2;
  size_t n1, n2;
  check(ucp_rkey_pack(u->ctx, u->buf_mh, &rk1, &n1), "ucp_rkey_pack");
  check(ucp_rkey_pack(u->ctx, u->ctr_mh, &rk2, &n2), "ucp_rkey_pack");
  uint64_t a[2] = {(uint64_t)(uintptr_t)buf, (uint64_t)(uintptr_t)counter};
  send_msg(fd, u->addr, (uint32_t)u->addr_len);
  send_msg(fd, a, sizeof a);
  send_msg(fd, rk1, (uint32_t)n1);
  send_msg(fd, rk2, (uint32_t)n2);
  ucp_rkey_buffer_release(rk1);
  ucp_rkey_buffer_release(rk2);
}

static int g_pred_done;

struct peer {
  ucp_ep_h ep;
  uint64_t buf, ctr;
  ucp_rkey_h buf_rk, ctr_rk;
};

/* The predecessor closing after our BYE is its normal end; before that it is a failure. */
static void err_cb(void *arg, ucp_ep_h ep, ucs_status_t st) {
  if (!g_pred_done) die("endpoint error: %s", ucs_status_string(st));
}

static void recv_info(int fd, struct ucx *u, struct peer *p) {
  uint32_t n;
  void *addr = recv_msg(fd, &n);
  uint64_t *a = recv_msg(fd, &n);
  void *rk1 = recv_msg(fd, &n);
  void *rk2 = recv_msg(fd, &n);
  ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
                        .address = addr,
                        .err_mode = UCP_ERR_HANDLING_MODE_PEER, /* another host, as TensorHub's endpoints */
                        .err_handler = {.cb = err_cb, .arg = NULL}};
  check(ucp_ep_create(u->worker, &ep, &p->ep), "ucp_ep_create");
  p->buf = a[0];
  p->ctr = a[1];
  check(ucp_ep_rkey_unpack(p->ep, rk1, &p->buf_rk), "ucp_ep_rkey_unpack");
  check(ucp_ep_rkey_unpack(p->ep, rk2, &p->ctr_rk), "ucp_ep_rkey_unpack");
  free(addr);
  free(a);
  free(rk1);
  free(rk2);
}

/* ---- the transfer -------------------------------------------------------------------------- */

/* A rollout's report to rank 0 (same binary on both ends). */
struct result {
  int rank;
  double t_end, cpu;
  uint64_t bad, gets, counter_reads;
};

struct xfer {
  unsigned char *buf;
  uint64_t bytes, chunk, nchunks;
  volatile uint64_t *counter;  /* our own: bytes held (contiguous prefix) */
  uint64_t issued, done_prefix; /* chunk indices */
  unsigned char *chunk_done;
  int inflight;
  uint64_t pred_bytes;          /* the predecessor's counter, last read */
  uint64_t ctr_value;           /* landing word of the counter get */
  int ctr_inflight, ctr_new;
  double ctr_last;
  uint64_t counter_reads, gets;
};

struct get_ctx {
  struct xfer *x;
  uint64_t chunk; /* UINT64_MAX: the counter */
};
static struct get_ctx *g_ctx; /* one per chunk, then one for the counter */

static void get_done(void *req, ucs_status_t st, void *arg) {
  struct get_ctx *g = arg;
  if (st != UCS_OK) die("get failed: %s", ucs_status_string(st));
  if (g->chunk == UINT64_MAX) {
    g->x->ctr_inflight = 0;
    if (g->x->ctr_value > g->x->pred_bytes) {
      g->x->pred_bytes = g->x->ctr_value;
      g->x->ctr_new = 1;
    }
  } else {
    g->x->chunk_done[g->chunk] = 1;
    g->x->inflight--;
  }
  if (req) ucp_request_free(req);
}

static void issue(struct ucx *u, struct peer *p, void *dst, size_t n, uint64_t raddr, ucp_rkey_h rk, struct get_ctx *g) {
  ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                             .cb.send = get_done, .user_data = g};
  ucs_status_ptr_t r = ucp_get_nbx(p->ep, dst, n, raddr, rk, &prm);
  if (UCS_PTR_IS_ERR(r)) die("ucp_get_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
  if (r == NULL) get_done(NULL, UCS_OK, g); /* completed in place */
}

/* One step of the reader's work; returns 1 when it did something. */
static int step(struct ucx *u, struct peer *p, struct xfer *x, int window) {
  int did = 0;
  /* Advance our counter over the contiguous prefix of finished chunks. */
  while (x->done_prefix < x->issued && x->chunk_done[x->done_prefix]) x->done_prefix++;
  uint64_t held = x->done_prefix == x->nchunks ? x->bytes : x->done_prefix * x->chunk;
  if (held != *x->counter) {
    __atomic_store_n(x->counter, held, __ATOMIC_RELEASE);
    did = 1;
  }
  /* Issue gets of the chunks the predecessor holds. */
  while (x->inflight < window && x->issued < x->nchunks) {
    uint64_t off = x->issued * x->chunk, n = x->bytes - off < x->chunk ? x->bytes - off : x->chunk;
    if (off + n > x->pred_bytes) break;
    struct get_ctx *g = &g_ctx[x->issued];
    *g = (struct get_ctx){x, x->issued};
    x->inflight++;
    x->issued++;
    x->gets++;
    issue(u, p, x->buf + off, n, p->buf + off, p->buf_rk, g);
    did = 1;
  }
  /* Caught up with what the predecessor holds: read its counter again (at once when the last
   * read brought news, else at most every 200 us). */
  if (x->pred_bytes < x->bytes && !x->ctr_inflight && x->issued * x->chunk >= x->pred_bytes &&
      (x->ctr_new || now_s() - x->ctr_last >= 200e-6)) {
    x->ctr_inflight = 1;
    x->ctr_new = 0;
    x->ctr_last = now_s();
    x->counter_reads++;
    g_ctx[x->nchunks] = (struct get_ctx){x, UINT64_MAX};
    issue(u, p, &x->ctr_value, sizeof x->ctr_value, p->ctr, p->ctr_rk, &g_ctx[x->nchunks]);
    did = 1;
  }
  return did;
}

/* Progress once; when that did nothing, sleep on the worker's event fd and `fds` (up to
 * timeout_s, < 0: until an event). Returns at once when progress ran a callback, so that the
 * caller sees its effect before anything sleeps (no lost wake-up). */
static void wait_events(struct ucx *u, struct pollfd *fds, int nfds, double timeout_s) {
  for (int i = 0; i < nfds; i++) fds[i].revents = 0;
  if (ucp_worker_progress(u->worker)) return;
  ucs_status_t st = ucp_worker_arm(u->worker);
  if (st == UCS_ERR_BUSY) return;
  check(st, "ucp_worker_arm");
  struct pollfd pfd[8];
  pfd[0] = (struct pollfd){u->efd, POLLIN, 0};
  for (int i = 0; i < nfds && i < 7; i++) pfd[i + 1] = fds[i];
  struct timespec ts, *tsp = NULL;
  if (timeout_s >= 0) {
    ts.tv_sec = (time_t)timeout_s;
    ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
    tsp = &ts;
  }
  if (ppoll(pfd, (nfds_t)(nfds + 1), tsp, NULL) < 0 && errno != EINTR) die("ppoll: %s", strerror(errno));
  for (int i = 0; i < nfds && i < 7; i++) fds[i].revents = pfd[i + 1].revents;
}

static uint64_t word_of(uint64_t w) {
  uint64_t x = (w + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

int main(int argc, char **argv) {
  struct options o;
  parse_options(argc, argv, &o);
  const int root = o.rank == 0, last = o.rank == o.hosts - 1;
  unsigned char *buf = NULL;
  if (posix_memalign((void **)&buf, 4096, o.bytes) != 0) die("cannot allocate %" PRIu64 " bytes", o.bytes);
  memset(buf, 0, o.bytes); /* fault the pages in now */
  static uint64_t counter_word __attribute__((aligned(64)));
  uint64_t *counter = &counter_word;
  if (root) {
    for (uint64_t w = 0; w < o.bytes / 8; w++) ((uint64_t *)buf)[w] = word_of(w);
    *counter = o.bytes;
  }
  struct ucx u;
  ucx_init(&u, buf, o.bytes, counter);

  int data_lfd = last ? -1 : tcp_listen(o.listen_ip, o.port);
  int ctrl_lfd = root ? tcp_listen(o.listen_ip, o.port + 1) : -1;
  struct peer pred = {0};
  int pred_fd = -1, succ_fd = -1, ctrl_fd = -1;
  if (!root) {
    pred_fd = tcp_connect(o.prev_ip, o.port);
    recv_info(pred_fd, &u, &pred);
  }
  if (!last) {
    succ_fd = tcp_accept(data_lfd);
    send_info(succ_fd, &u, buf, counter);
    close(data_lfd);
  }

  if (root) {
    int cfd[MAX_RANKS];
    for (int i = 1; i < o.hosts; i++) {
      cfd[i] = tcp_accept(ctrl_lfd);
      int r = 0;
      if (!recv_all(cfd[i], &r, sizeof r)) die("a rank left before READY");
    }
    close(ctrl_lfd);
    double t0 = now_s(), cpu0 = cpu_s();
    for (int i = 1; i < o.hosts; i++) send_all(cfd[i], &t0, sizeof t0);
    /* Serve until rank 1 says it has read everything (its BYE), collecting DONEs. */
    struct result res[MAX_RANKS];
    int ndone = 0, got_bye = 0;
    double t_stall = 0;
    while (ndone < o.hosts - 1 || !got_bye) {
      struct pollfd fds[1] = {{succ_fd, POLLIN, 0}};
      wait_events(&u, fds, got_bye ? 0 : 1, 0.05);
      if (!got_bye && (fds[0].revents & (POLLIN | POLLHUP))) {
        char b;
        if (recv(succ_fd, &b, 1, 0) <= 0 || b == 'B') {
          t_stall = now_s() - t0;
          got_bye = 1;
        }
      }
      /* DONE messages (fixed size) from any rank: poll them without blocking. */
      for (int i = 1; i < o.hosts; i++) {
        struct pollfd pc = {cfd[i], POLLIN, 0};
        if (cfd[i] >= 0 && poll(&pc, 1, 0) > 0) {
          struct result r;
          if (!recv_all(cfd[i], &r, sizeof r)) die("rank %d left before DONE", i);
          res[ndone++] = r;
          close(cfd[i]);
          cfd[i] = -1;
        }
      }
    }
    double cpu_root = cpu_s() - cpu0;
    const char *rate = getenv("NETLAB_RATE_BPS");
    double link = rate ? strtod(rate, NULL) : 0, ideal = link > 0 ? (double)o.bytes * 8 / link : 0, completion = 0;
    uint64_t bad = 0;
    for (int i = 0; i < ndone; i++) {
      if (res[i].t_end - t0 > completion) completion = res[i].t_end - t0;
      bad += res[i].bad;
    }
    printf("ucx_chain: %d rollouts, %.1f MiB, chunk %" PRIu64 " KiB, window %d: completion %.3f s", o.hosts - 1,
           (double)o.bytes / (1 << 20), o.chunk >> 10, o.window, completion);
    if (ideal > 0) printf(" (%.2fx ideal %.3f s)", completion / ideal, ideal);
    printf(", trainer stall %.3f s (until rank 1 read the last byte), data %s\n", t_stall, bad ? "BAD" : "ok");
    printf("{\"bench\":\"ucx_chain\",\"method\":\"ucx_chain\",\"rollouts\":%d,\"bytes\":%" PRIu64 ",\"chunk\":%" PRIu64
           ",\"window\":%d,\"completion_s\":%.6f,\"trainer_stall_s\":%.6f,\"trainer_cpu_s\":%.4f,\"check\":\"%s\"",
           o.hosts - 1, o.bytes, o.chunk, o.window, completion, t_stall, cpu_root, bad ? "bad" : "ok");
    if (ideal > 0) printf(",\"link_gbps\":%.4f,\"ideal_s\":%.6f,\"vs_ideal\":%.4f", link / 1e9, ideal, completion / ideal);
    printf(",\"rollouts_detail\":[");
    for (int i = 0; i < ndone; i++)
      printf("%s{\"index\":%d,\"done_s\":%.6f,\"cpu_s\":%.4f,\"gets\":%" PRIu64 ",\"counter_reads\":%" PRIu64 "}", i ? "," : "",
             res[i].rank - 1, res[i].t_end - t0, res[i].cpu, res[i].gets, res[i].counter_reads);
    printf("]}\n");
    fflush(stdout);
    return bad ? 1 : 0;
  }

  /* A rollout: READY, GO, then read from the predecessor while serving the successor. */
  ctrl_fd = tcp_connect(o.root_ip, o.port + 1);
  send_all(ctrl_fd, &o.rank, sizeof o.rank);
  double t0 = 0;
  if (!recv_all(ctrl_fd, &t0, sizeof t0)) die("rank 0 left before GO");
  double cpu0 = cpu_s();
  struct xfer x = {.buf = buf, .bytes = o.bytes, .chunk = o.chunk, .counter = counter};
  x.nchunks = (o.bytes + o.chunk - 1) / o.chunk;
  x.chunk_done = calloc(x.nchunks, 1);
  g_ctx = calloc(x.nchunks + 1, sizeof *g_ctx);
  if (!x.chunk_done || !g_ctx) die("calloc");
  while (*x.counter < o.bytes) {
    while (step(&u, &pred, &x, o.window)) ucp_worker_progress(u.worker);
    if (*x.counter >= o.bytes) break;
    /* Gets in flight: sleep until UCX has news (10 ms at most). Otherwise we wait for the
     * predecessor: until the next counter read is due. */
    double wait = x.ctr_inflight || x.inflight ? 0.01 : 200e-6 - (now_s() - x.ctr_last);
    wait_events(&u, NULL, 0, wait > 0 ? wait : 0);
  }
  double t_end = now_s(), cpu = cpu_s() - cpu0;
  g_pred_done = 1;
  send_all(pred_fd, "B", 1); /* we hold everything: the predecessor may stop serving us */
  uint64_t bad = 0, nw = o.bytes / 8, stepw = o.check_all || nw <= 65536 ? 1 : nw / 65536;
  for (uint64_t w = 0; w < nw; w += stepw) bad += ((uint64_t *)buf)[w] != word_of(w);
  bad += ((uint64_t *)buf)[nw - 1] != word_of(nw - 1);
  struct result r = {o.rank, t_end, cpu, bad, x.gets, x.counter_reads};
  send_all(ctrl_fd, &r, sizeof r);
  /* Keep serving the successor until it has everything. */
  while (!last) {
    struct pollfd fds[1] = {{succ_fd, POLLIN, 0}};
    wait_events(&u, fds, 1, 0.05);
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      char b;
      if (recv(succ_fd, &b, 1, 0) <= 0 || b == 'B') break;
    }
  }
  close(ctrl_fd);
  close(pred_fd);
  if (succ_fd >= 0) close(succ_fd);
  return bad ? 1 : 0;
}
