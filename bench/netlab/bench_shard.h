/* bench_shard.h: what the netlab benchmarks (thub_fanout, thub_elastic, thub_crossdc) share
 * beside their control channel (line_conn.h): the shard, T equal tensors in page multiples
 * (the last takes the remainder) whose word w of tensor t at version v is a hash of (v, t, w);
 * and the TensorHub calls around it: a context from KEY=VALUE info, a shard registered on a
 * model, a counter. Header-only (static functions), so that each benchmark stays one C file.
 * The includer declares die(fmt, ...) (noreturn) before including it.
 */
#ifndef THUB_BENCH_NETLAB_BENCH_SHARD_H
#define THUB_BENCH_NETLAB_BENCH_SHARD_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorhub/tensorhub.h>

#define SHARD_MAX_TENSORS 1024
#define SHARD_FN static __attribute__((unused)) /* each benchmark uses a part */

struct shard {
  int n;
  uint64_t total;
  uint64_t sizes[SHARD_MAX_TENSORS];
  unsigned char *bufs[SHARD_MAX_TENSORS];
};

SHARD_FN void make_shard(struct shard *s, uint64_t bytes, int tensors) {
  if (tensors < 1 || tensors > SHARD_MAX_TENSORS) die("%d tensors: 1 to %d", tensors, SHARD_MAX_TENSORS);
  uint64_t each = (bytes / (uint64_t)tensors) & ~(uint64_t)4095;
  s->n = tensors;
  s->total = bytes;
  for (int i = 0; i < tensors; i++) {
    s->sizes[i] = i == tensors - 1 ? bytes - each * (uint64_t)(tensors - 1) : each;
    void *p = NULL;
    if (posix_memalign(&p, 4096, s->sizes[i]) != 0) die("cannot allocate %" PRIu64 " bytes", s->sizes[i]);
    memset(p, 0, s->sizes[i]); /* fault the pages in now, not during a transfer */
    s->bufs[i] = p;
  }
}

SHARD_FN void free_shard(struct shard *s) {
  for (int i = 0; i < s->n; i++) free(s->bufs[i]);
}

SHARD_FN uint64_t word_of(int64_t v, int t, uint64_t w) {
  uint64_t x = ((uint64_t)v * 0x94D049BB133111EBull) ^ ((uint64_t)t + 1) * 0x9E3779B97F4A7C15ull ^
               (w * 0xD1B54A32D192ED03ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

SHARD_FN void fill_shard(struct shard *s, int64_t v) {
  for (int t = 0; t < s->n; t++) {
    uint64_t nw = s->sizes[t] / 8;
    for (uint64_t w = 0; w < nw; w++) memcpy(s->bufs[t] + 8 * w, &(uint64_t){word_of(v, t, w)}, 8);
  }
}

/* The wrong words of version v: every word (all), or 4096 per tensor spread over it and its
 * last one. */
SHARD_FN uint64_t check_shard(const struct shard *s, int64_t v, int all) {
  uint64_t bad = 0, x;
  for (int t = 0; t < s->n; t++) {
    uint64_t nw = s->sizes[t] / 8, step = all || nw <= 4096 ? 1 : nw / 4096;
    for (uint64_t w = 0; w < nw; w += step) {
      memcpy(&x, s->bufs[t] + 8 * w, 8);
      bad += x != word_of(v, t, w);
    }
    if (nw > 0) {
      memcpy(&x, s->bufs[t] + 8 * (nw - 1), 8);
      bad += x != word_of(v, t, nw - 1);
    }
  }
  return bad;
}

SHARD_FN void check_thub(THUB_Context ctx, const char *what, int st) {
  if (st >= 0) return;
  char detail[1024] = "";
  if (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
  die("%s: %s | %s", what, THUB_Error_string(st), detail);
}

/* An info object holding `n` KEY=VALUE strings (each checked for a '=' when parsed). */
SHARD_FN THUB_Info make_info(int n, const char *const *kv) {
  THUB_Info info = THUB_INFO_NULL;
  check_thub(THUB_CONTEXT_NULL, "THUB_Info_create", THUB_Info_create(&info));
  for (int i = 0; i < n; i++) {
    char key[128];
    const char *eq = strchr(kv[i], '=');
    if (!eq) die("bad info '%s' (KEY=VALUE)", kv[i]);
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv[i]), kv[i]);
    if (THUB_Info_set(info, key, eq + 1) != THUB_SUCCESS) die("bad info '%s'", kv[i]);
  }
  return info;
}

/* A context with those keys, reading the registry at `registry` or running it on `listen`
 * (either may be NULL). */
SHARD_FN THUB_Context init_context(int n, const char *const *kv, const char *registry, const char *listen) {
  THUB_Info info = make_info(n, kv);
  THUB_Context ctx = THUB_CONTEXT_NULL;
  if (registry) THUB_Info_set(info, "registry", registry);
  if (listen) THUB_Info_set(info, "registry_listen", listen);
  int st = THUB_Init(info, &ctx);
  THUB_Info_free(&info);
  check_thub(THUB_CONTEXT_NULL, "THUB_Init", st);
  return ctx;
}

/* Registers the shard's tensors on m as layers.<i>.weight. */
SHARD_FN void register_shard(THUB_Context ctx, THUB_Model m, const struct shard *s) {
  for (int i = 0; i < s->n; i++) {
    char name[48];
    snprintf(name, sizeof name, "layers.%d.weight", i);
    check_thub(ctx, "THUB_Register", THUB_Register(m, name, s->bufs[i], s->sizes[i], THUB_MEM_HOST));
  }
}

SHARD_FN int64_t stat_of(THUB_Model m, const char *key) {
  int64_t v = -1;
  return THUB_Model_stat(m, key, &v) == THUB_SUCCESS ? v : -1;
}

#endif /* THUB_BENCH_NETLAB_BENCH_SHARD_H */
