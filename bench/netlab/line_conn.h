/* line_conn.h: the control channel of the netlab benchmarks that drive processes in several
 * hosts of the cluster in a box: plain TCP, one text line per message, a poll over many
 * peers. Header-only (static functions) so that each benchmark stays one C file; it holds no
 * TensorHub call and no benchmark logic. thub_elastic and thub_fanout use it.
 */
#ifndef THUB_BENCH_NETLAB_LINE_CONN_H
#define THUB_BENCH_NETLAB_LINE_CONN_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_LEN 512

static void lc_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void lc_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("netlab bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

/* CLOCK_MONOTONIC: every network namespace of the machine shares it (no time namespaces). */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_size(const char *s, uint64_t *out) { /* 256M, 4MiB, 1G, 4096 */
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
  else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
  else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
  if (*end == 'i') end++;
  if (*end == 'B') end++;
  if (*end != '\0') return -1;
  *out = (uint64_t)v * mul;
  return 0;
}

static int parse_int(const char *s, long lo, long hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

struct conn {
  int fd;
  char buf[LINE_MAX_LEN * 4];
  size_t len;
  int eof;
};

static void send_line(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_line(struct conn *c, const char *fmt, ...) {
  char line[LINE_MAX_LEN];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof line - 1) lc_die("control message too long");
  line[n++] = '\n';
  for (int off = 0; off < n;) {
    ssize_t w = send(c->fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* the peer is gone: its EOF is noticed when reading */
    off += (int)w;
  }
}

/* Takes one complete line out of the buffer (without '\n'); 1 when there was one. */
static int take_line(struct conn *c, char *out, size_t cap) {
  char *nl = memchr(c->buf, '\n', c->len);
  if (!nl) return 0;
  size_t n = (size_t)(nl - c->buf);
  snprintf(out, cap, "%.*s", (int)n, c->buf);
  memmove(c->buf, nl + 1, c->len - n - 1);
  c->len -= n + 1;
  return 1;
}

/* Reads what is there into the buffer; sets eof on end of file or error. */
static void fill_conn(struct conn *c) {
  if (c->len == sizeof c->buf) lc_die("control line too long");
  ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
  if (r < 0 && errno == EINTR) return;
  if (r <= 0) c->eof = 1;
  else c->len += (size_t)r;
}

/* Blocking: the next line, or 0 at end of file. */
static int read_line(struct conn *c, char *out, size_t cap) {
  while (!take_line(c, out, cap)) {
    if (c->eof) return 0;
    fill_conn(c);
  }
  return 1;
}

/* Like read_line, but gives up after `timeout_s` (returns -1). (inline: not every includer uses it.) */
static inline int read_line_within(struct conn *c, char *out, size_t cap, double timeout_s) {
  double deadline = now_s() + timeout_s;
  while (!take_line(c, out, cap)) {
    if (c->eof) return 0;
    int ms = (int)((deadline - now_s()) * 1000.0);
    if (ms <= 0) return -1;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, ms) > 0) fill_conn(c);
  }
  return 1;
}

static int tcp_listen(const char *ip, int port, int backlog) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) lc_die("bad IPv4 address '%s'", ip);
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (fd < 0) lc_die("socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0)
    lc_die("cannot listen on %s:%d: %s", ip, port, strerror(errno));
  return fd;
}

/* Connects to IP:PORT, retrying for up to 60 s while nobody listens yet (the peer is started
 * alongside). */
static int tcp_connect(const char *addr) {
  char ip[64];
  int port = 0;
  const char *colon = strrchr(addr, ':');
  if (!colon || colon - addr >= (long)sizeof ip || parse_int(colon + 1, 1, 65535, &port))
    lc_die("bad address '%s'", addr);
  snprintf(ip, sizeof ip, "%.*s", (int)(colon - addr), addr);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) lc_die("bad IPv4 address '%s'", ip);
  double deadline = now_s() + 60.0;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0) lc_die("socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    int err = errno;
    close(fd);
    if ((err != ECONNREFUSED && err != ENETUNREACH && err != EHOSTUNREACH) || now_s() > deadline)
      lc_die("cannot connect to %s: %s", addr, strerror(err));
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL); /* not listening yet */
  }
}

#endif /* THUB_BENCH_NETLAB_LINE_CONN_H */
