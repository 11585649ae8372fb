/* trainer_rollout: a co-located trainer and rollout in C; the minimal rollout loop of docs/api.md
 * made complete.
 *
 *   trainer_rollout trainer [STEPS [MIB [ROLLOUT_PROGRAM]]]
 *       starts the embedded registry, publishes version 1, starts a rollout on this machine
 *       (this program in rollout mode, or ROLLOUT_PROGRAM, e.g. the Fortran rollout, run as
 *       `ROLLOUT_PROGRAM STEPS MIB`) with TENSORHUB_REGISTRY in its environment, and for each
 *       version waits until the rollout says "holding V", then unpublishes (returns once
 *       nobody reads the buffers), computes the next version and publishes it.
 *   trainer_rollout rollout [STEPS [MIB]]
 *       a standalone rollout: TENSORHUB_REGISTRY=host:port tells it where the registry is.
 *       THUB_Replicate(latest), then generation batches with THUB_Update(latest) between
 *       them, until it holds version STEPS. Prints "holding V" for every version it gets.
 *
 * The model (same in rollout.f90): int32 tensors embed.weight and head.weight (MIB MiB
 * together, less 64 bytes) and head.bias (16 elements); element i of tensor t at version v
 * is (v*1000003 + t*7919 + i*31) mod 2147483647.
 *
 * TensorHub lines this integration adds (lines that name THUB_ or tensorhub): 24 in all;
 * the co-located trainer loop 16 (trainer() 8, the shared open/register and error helpers 6,
 * the include and the context 2), the standalone rollout loop 16 (rollout() 8, the same 8
 * shared).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tensorhub/tensorhub.h>

#define NTENSORS 3

extern char **environ;

struct model {
  const char *names[NTENSORS];
  int32_t *data[NTENSORS];
  size_t count[NTENSORS]; /* elements */
};

static THUB_Context ctx = THUB_CONTEXT_NULL;

static void die(const char *who, const char *what, int st) {
  char detail[1024] = "";
  if (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
  fprintf(stderr, "%s: %s: %s | %s\n", who, what, THUB_Error_string(st), detail);
  exit(1);
}

static void make_model(struct model *m, long mib) {
  size_t half = (size_t)mib * 262144 / 2; /* 262144 int32 per MiB */
  int t;
  m->names[0] = "embed.weight";
  m->names[1] = "head.weight";
  m->names[2] = "head.bias";
  m->count[0] = half;
  m->count[1] = half - 16;
  m->count[2] = 16;
  for (t = 0; t < NTENSORS; t++) {
    m->data[t] = calloc(m->count[t], sizeof(int32_t));
    if (!m->data[t]) {
      fprintf(stderr, "out of memory\n");
      exit(1);
    }
  }
}

static int32_t value(int64_t v, int t, size_t i) {
  return (int32_t)((v * 1000003 + (int64_t)t * 7919 + (int64_t)i * 31) % 2147483647);
}

static void open_and_register(const char *who, const char *replica, const struct model *w, THUB_Model *m) {
  int t, st;
  if ((st = THUB_Open(ctx, "policy", replica, 0, 1, THUB_INFO_NULL, m)) != THUB_SUCCESS) die(who, "THUB_Open", st);
  for (t = 0; t < NTENSORS; t++) {
    st = THUB_Register(*m, w->names[t], w->data[t], w->count[t] * sizeof(int32_t), THUB_MEM_HOST);
    if (st != THUB_SUCCESS) die(who, "THUB_Register", st);
  }
}

/* ---- rollout ------------------------------------------------------------------------- */

/* Stands in for a generation batch: reads every weight (and checks it against version v). */
static int generate(const struct model *w, int64_t v) {
  int t;
  for (t = 0; t < NTENSORS; t++) {
    size_t i;
    for (i = 0; i < w->count[t]; i++) {
      if (w->data[t][i] != value(v, t, i)) {
        fprintf(stderr, "rollout: version %" PRId64 ": %s[%zu] is %d, expected %d\n", v, w->names[t], i,
                w->data[t][i], value(v, t, i));
        return -1;
      }
    }
  }
  return 0;
}

static int rollout(int64_t steps, long mib) {
  struct model w;
  THUB_Model m = THUB_MODEL_NULL;
  char replica[64];
  int64_t v = -1;
  int st;

  /* no info: the registry comes from TENSORHUB_REGISTRY */
  if ((st = THUB_Init(THUB_INFO_NULL, &ctx)) != THUB_SUCCESS) die("rollout", "THUB_Init", st);
  make_model(&w, mib);
  snprintf(replica, sizeof replica, "rollout-%ld", (long)getpid());
  open_and_register("rollout", replica, &w, &m);

  if ((st = THUB_Replicate(m, THUB_LATEST, &v)) != THUB_SUCCESS) die("rollout", "THUB_Replicate", st);
  printf("holding %" PRId64 "\n", v);
  fflush(stdout);
  while (v < steps) {
    if (generate(&w, v) != 0) return 1;
    st = THUB_Update(m, THUB_LATEST, &v);
    if (st < 0) die("rollout", "THUB_Update", st);
    if (st == THUB_SUCCESS) { /* THUB_NOT_UPDATED: keep generating with what we hold */
      printf("holding %" PRId64 "\n", v);
      fflush(stdout);
    }
  }
  if (generate(&w, v) != 0) return 1;
  if ((st = THUB_Close(&m)) != THUB_SUCCESS) die("rollout", "THUB_Close", st);
  if ((st = THUB_Finalize(&ctx)) != THUB_SUCCESS) die("rollout", "THUB_Finalize", st);
  fprintf(stderr, "rollout: done, held versions 1..%" PRId64 " and checked every element\n", steps);
  return 0;
}

/* ---- trainer ------------------------------------------------------------------------- */

static void train_step(struct model *w, int64_t v) {
  int t;
  for (t = 0; t < NTENSORS; t++) {
    size_t i;
    for (i = 0; i < w->count[t]; i++) w->data[t][i] = value(v, t, i);
  }
}

/* Start the rollout with TENSORHUB_REGISTRY=addr; its stdout comes back through a pipe. */
static FILE *start_rollout(const char *program, int own, int64_t steps, long mib, const char *addr, pid_t *pid) {
  static char env_reg[300], a_steps[32], a_mib[32];
  char **envp;
  char *argv[5];
  int fds[2], n = 0, i = 0;
  snprintf(env_reg, sizeof env_reg, "TENSORHUB_REGISTRY=%s", addr);
  snprintf(a_steps, sizeof a_steps, "%" PRId64, steps);
  snprintf(a_mib, sizeof a_mib, "%ld", mib);
  /* the environment is built before fork: the child may only call async-signal-safe code */
  while (environ[n]) n++;
  envp = calloc((size_t)n + 2, sizeof *envp);
  if (!envp) return NULL;
  for (n = 0; environ[n]; n++) {
    if (strncmp(environ[n], "TENSORHUB_REGISTRY=", 19) != 0) envp[i++] = environ[n];
  }
  envp[i++] = env_reg;
  envp[i] = NULL;
  n = 0;
  argv[n++] = (char *)program;
  if (own) argv[n++] = (char *)"rollout";
  argv[n++] = a_steps;
  argv[n++] = a_mib;
  argv[n] = NULL;
  if (pipe(fds) != 0) return NULL;
  *pid = fork();
  if (*pid < 0) return NULL;
  if (*pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execve(program, argv, envp);
    _exit(127);
  }
  free(envp);
  close(fds[1]);
  return fdopen(fds[0], "r");
}

static int trainer(int64_t steps, long mib, const char *rollout_program) {
  struct model w;
  THUB_Model m = THUB_MODEL_NULL;
  char addr[256], self[4096], line[256];
  int64_t v;
  int st, status = 0;
  pid_t pid = 0;
  ssize_t n;
  FILE *from_rollout;

  /* no `registry` info (and no TENSORHUB_REGISTRY): an embedded registry in this process */
  if ((st = THUB_Init(THUB_INFO_NULL, &ctx)) != THUB_SUCCESS) die("trainer", "THUB_Init", st);
  if ((st = THUB_Registry_address(ctx, addr, sizeof addr)) != THUB_SUCCESS) die("trainer", "THUB_Registry_address", st);
  make_model(&w, mib);
  open_and_register("trainer", "trainer", &w, &m);

  train_step(&w, 1);
  if ((st = THUB_Publish(m, 1)) != THUB_SUCCESS) die("trainer", "THUB_Publish", st);

  n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  from_rollout = start_rollout(rollout_program ? rollout_program : self, !rollout_program, steps, mib, addr, &pid);
  if (!from_rollout) {
    fprintf(stderr, "trainer: cannot start the rollout\n");
    return 1;
  }
  printf("trainer: registry %s, model %ld MiB, rollout pid %ld (%s)\n", addr, mib, (long)pid,
         rollout_program ? rollout_program : "trainer_rollout rollout");
  for (v = 1; v <= steps; v++) {
    int64_t held = -1;
    while (held != v && fgets(line, sizeof line, from_rollout)) {
      if (sscanf(line, "holding %" SCNd64, &held) != 1) held = -1;
    }
    if (held != v) {
      fprintf(stderr, "trainer: the rollout stopped before holding version %" PRId64 "\n", v);
      kill(pid, SIGTERM);
      waitpid(pid, NULL, 0);
      return 1;
    }
    printf("trainer: rollout holds version %" PRId64 "\n", v);
    if (v == steps) break;
    /* the rollout has it: withdraw it (waits for any reader still at it) and train on */
    if ((st = THUB_Unpublish(m)) != THUB_SUCCESS) die("trainer", "THUB_Unpublish", st);
    train_step(&w, v + 1);
    if ((st = THUB_Publish(m, v + 1)) != THUB_SUCCESS) die("trainer", "THUB_Publish", st);
  }
  fclose(from_rollout);
  waitpid(pid, &status, 0);
  if ((st = THUB_Close(&m)) != THUB_SUCCESS) die("trainer", "THUB_Close", st);
  if ((st = THUB_Finalize(&ctx)) != THUB_SUCCESS) die("trainer", "THUB_Finalize", st);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "trainer: the rollout failed\n");
    return 1;
  }
  printf("trainer: done, %" PRId64 " versions\n", steps);
  return 0;
}

int main(int argc, char **argv) {
  int64_t steps = argc > 2 ? atoll(argv[2]) : 3;
  long mib = argc > 3 ? atol(argv[3]) : 8;
  if (argc < 2 || steps < 1 || mib < 1 || (strcmp(argv[1], "trainer") != 0 && strcmp(argv[1], "rollout") != 0)) {
    fprintf(stderr, "usage: %s trainer [STEPS [MIB [ROLLOUT_PROGRAM]]]\n"
                    "       %s rollout [STEPS [MIB]]   (with TENSORHUB_REGISTRY=host:port)\n", argv[0], argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  return argv[1][0] == 't' ? trainer(steps, mib, argc > 4 ? argv[4] : NULL) : rollout(steps, mib);
}
