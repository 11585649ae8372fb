/* thub_soak_worker: one process of the fault soak (tools/soak/soak.cc), a trainer or a
 * rollout, driven line by line over stdin/stdout. Written in C99 against the public header
 * only; every info key comes from the environment (TENSORHUB_<KEY>).
 *
 *   thub_soak_worker trainer|rollout NAME BYTES TENSORS
 *
 * On start it initialises, opens replica NAME of model "soak" (one shard), registers TENSORS
 * tensors of BYTES in all (the first two tiny, so that compaction is exercised) and prints
 * "ready PID". Then, one reply line per command:
 *   step V   (trainer) unpublish what it holds, fill every byte with version V's content,
 *            publish V
 *   update   (rollout) THUB_Update(THUB_LATEST)
 *   check    compare every byte with the content of the version held
 *   quit
 * Every reply is "done STATUS HELD BAD MS DETAIL": STATUS the call's status (step: the
 * publish's; 0 for check), HELD the version this shard holds afterwards (THUB_Model_stat
 * held_version, -1 for none), BAD the number of bytes that differ from HELD's content (every
 * byte is compared whenever HELD >= 0), MS the call's wall time, DETAIL THUB_Last_error's
 * text on failure ("-" otherwise). The content of version V is a function of V alone, so any
 * process can check what any other holds.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tensorhub/tensorhub.h>

#define MAX_TENSORS 256

static THUB_Context ctx = THUB_CONTEXT_NULL;
static THUB_Model model = THUB_MODEL_NULL;
static unsigned char *bufs[MAX_TENSORS];
static size_t sizes[MAX_TENSORS];
static int ntensors = 0;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Version v's word at (tensor t, word w): a strong mix, so that a shifted, stale or foreign
 * block never matches by chance. */
static uint64_t content(int64_t v, int t, uint64_t w) {
  uint64_t x = (uint64_t)v * 0x9E3779B97F4A7C15ull ^ ((uint64_t)t << 48) ^ w;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static void fill(int64_t v) {
  for (int t = 0; t < ntensors; t++) {
    size_t n = sizes[t];
    for (size_t i = 0; i < n; i += 8) {
      uint64_t x = content(v, t, i / 8);
      size_t k = n - i < 8 ? n - i : 8;
      memcpy(bufs[t] + i, &x, k);
    }
  }
}

/* Bytes that differ from version v's content. */
static uint64_t count_bad(int64_t v) {
  uint64_t bad = 0;
  for (int t = 0; t < ntensors; t++) {
    size_t n = sizes[t];
    for (size_t i = 0; i < n; i += 8) {
      uint64_t x = content(v, t, i / 8), y = 0;
      size_t k = n - i < 8 ? n - i : 8;
      memcpy(&y, bufs[t] + i, k);
      if (k < 8) x &= (1ull << (8 * k)) - 1;
      if (x != y) {
        for (size_t b = 0; b < k; b++) bad += ((x >> (8 * b)) & 0xff) != ((y >> (8 * b)) & 0xff);
      }
    }
  }
  return bad;
}

static int64_t held_version(void) {
  int64_t v = -1;
  if (THUB_Model_stat(model, "held_version", &v) != THUB_SUCCESS) return -1;
  return v;
}

static void reply(int st, double t0) {
  char detail[1024] = "-";
  int64_t held = held_version();
  uint64_t bad = held >= 0 ? count_bad(held) : 0;
  if (st < 0 && (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS || !detail[0])) strcpy(detail, "-");
  for (char *p = detail; *p; p++) {
    if (*p == '\n') *p = ' ';
  }
  printf("done %d %" PRId64 " %" PRIu64 " %.1f %s\n", st, held, bad, now_ms() - t0, detail);
  fflush(stdout);
}

static int setup(const char *name, uint64_t bytes, int tensors) {
  int st = THUB_Init(THUB_INFO_NULL, &ctx);
  if (st == THUB_SUCCESS) st = THUB_Open(ctx, "soak", name, 0, 1, THUB_INFO_NULL, &model);
  if (st != THUB_SUCCESS) return st;
  if (tensors < 3) tensors = 3;
  if (tensors > MAX_TENSORS) tensors = MAX_TENSORS;
  /* Two tiny tensors (packed together below the compaction threshold), the rest large and of
   * odd sizes, so that chunks and tensors never line up. */
  uint64_t small = 1000 + 40000;
  uint64_t rest = bytes > small ? bytes - small : (uint64_t)(tensors - 2);
  for (int t = 0; t < tensors; t++) {
    char tname[32];
    size_t n = t == 0 ? 1000 : t == 1 ? 40000 : (size_t)(rest / (uint64_t)(tensors - 2));
    if (t == tensors - 1) n += (size_t)(rest % (uint64_t)(tensors - 2));
    bufs[t] = calloc(1, n ? n : 1);
    if (!bufs[t]) return THUB_ERR_NO_MEMORY;
    sizes[t] = n;
    snprintf(tname, sizeof tname, "w%d", t);
    st = THUB_Register(model, tname, bufs[t], n, THUB_MEM_HOST);
    if (st != THUB_SUCCESS) return st;
    ntensors++;
  }
  return THUB_SUCCESS;
}

int main(int argc, char **argv) {
  char line[256];
  if (argc != 5 || (strcmp(argv[1], "trainer") != 0 && strcmp(argv[1], "rollout") != 0)) {
    fprintf(stderr, "usage: %s trainer|rollout NAME BYTES TENSORS\n", argv[0]);
    return 2;
  }
  int trainer = argv[1][0] == 't';
  setvbuf(stdout, NULL, _IOLBF, 0);
  int st = setup(argv[2], strtoull(argv[3], NULL, 10), atoi(argv[4]));
  if (st != THUB_SUCCESS) {
    char detail[1024] = "";
    THUB_Last_error(ctx, detail, sizeof detail);
    printf("failed %d %s\n", st, detail);
    return 3;
  }
  printf("ready %ld\n", (long)getpid());
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {
    char *cmd = strtok(line, " \n");
    double t0 = now_ms();
    if (!cmd) continue;
    if (strcmp(cmd, "step") == 0 && trainer) {
      char *v = strtok(NULL, " \n");
      int64_t version = v ? strtoll(v, NULL, 10) : 0;
      if (held_version() >= 0) {
        st = THUB_Unpublish(model);
        if (st != THUB_SUCCESS) {
          reply(st, t0);
          continue;
        }
      }
      fill(version);
      reply(THUB_Publish(model, version), t0);
    } else if (strcmp(cmd, "update") == 0 && !trainer) {
      int64_t got = -1;
      reply(THUB_Update(model, THUB_LATEST, &got), t0);
    } else if (strcmp(cmd, "check") == 0) {
      reply(THUB_SUCCESS, t0);
    } else if (strcmp(cmd, "quit") == 0) {
      break;
    } else {
      printf("done %d -1 0 0 unknown-command\n", THUB_ERR_ARG);
      fflush(stdout);
    }
  }
  THUB_Finalize(&ctx);
  return 0;
}
