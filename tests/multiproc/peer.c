/* thub_peer: a TensorHub process driven line by line over stdin/stdout, so that tests can
 * start real processes and order their steps without sleeps. Written in C99 against the
 * public header only (it doubles as an outside program written against the installed header).
 *
 * Commands (one per line; each answers one line "ok ..." or "err <code> <detail>"):
 *   init [key=value ...]            THUB_Init with those info keys; ok <registry address>
 *   open MODEL REPLICA SHARD N [k=v ...]
 *   memory host|cuda                where later `tensors` and `register` allocate: host memory
 *                                   (the default) or CUDA device memory (cudaMalloc; only in
 *                                   thub_peer_cuda, built with THUB_PEER_CUDA; fill and check
 *                                   copy through the host)
 *   tensors SIZE[,SIZE...]          allocate and register tensors t0, t1, ...
 *   flat SIZE[,SIZE...]             the same, back to back in one allocation (as a flat
 *                                   parameter buffer lays them out)
 *   register NAME SIZE              register one more tensor
 *   fill SEED                       fill every tensor with a pattern of SEED
 *   check SEED                      compare every byte with the pattern of SEED
 *   scribble SEED                   fill, meant to break the contract (bytes changed while
 *                                   published; the library may be reading them: a race by design)
 *   publish V | replicate V | update V | unpublish | close | finalize
 *   ireplicate V | test | wait      the nonblocking variant
 *   stat KEY                        THUB_Model_stat
 *   quit
 * V is a number, "latest" or "latest-K".
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorhub/tensorhub.h>
#ifdef THUB_PEER_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_TENSORS 4096

static THUB_Context ctx = THUB_CONTEXT_NULL;
static THUB_Model model = THUB_MODEL_NULL;
static THUB_Request req = THUB_REQUEST_NULL;
static unsigned char *bufs[MAX_TENSORS];
static size_t sizes[MAX_TENSORS];
static char *names[MAX_TENSORS];
static int owned[MAX_TENSORS]; /* bufs[t] is ours to free (not part of a "flat" block) */
static int on_gpu[MAX_TENSORS]; /* bufs[t] is CUDA device memory */
static int ntensors = 0;
static int use_gpu = 0; /* "memory cuda": later tensors on the current CUDA device */

/* Zeroed memory of `size` bytes where `memory` says; NULL for 0 bytes or when it fails. */
static unsigned char *peer_alloc(size_t size, int gpu) {
  if (!size) return NULL;
#ifdef THUB_PEER_CUDA
  if (gpu) {
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess) return NULL;
    if (cudaMemset(p, 0, size) != cudaSuccess) {
      cudaFree(p);
      return NULL;
    }
    return (unsigned char *)p;
  }
#else
  (void)gpu;
#endif
  return calloc(1, size);
}

static void peer_free(unsigned char *p, int gpu) {
#ifdef THUB_PEER_CUDA
  if (gpu) {
    if (p) cudaFree(p);
    return;
  }
#else
  (void)gpu;
#endif
  free(p);
}

/* Copies n bytes between a tensor and host memory (to_host: out of the tensor). */
static int tensor_copy(int t, unsigned char *host, size_t n, int to_host) {
#ifdef THUB_PEER_CUDA
  if (on_gpu[t])
    return cudaMemcpy(to_host ? (void *)host : (void *)bufs[t], to_host ? (void *)bufs[t] : (void *)host, n,
                      to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice) == cudaSuccess;
#endif
  if (to_host) memcpy(host, bufs[t], n);
  else memcpy(bufs[t], host, n);
  return 1;
}

static void reply_status(int st, const char *extra) {
  if (st >= 0) {
    printf("ok%s%s\n", extra && *extra ? " " : "", extra ? extra : "");
  } else {
    char detail[1024];
    if (THUB_Last_error(ctx, detail, sizeof detail) != THUB_SUCCESS) detail[0] = '\0';
    printf("err %d %s | %s\n", st, THUB_Error_string(st), detail);
  }
  fflush(stdout);
}

/* A refusal of the peer's own ("err CODE TEXT"), not the library's. */
static void reply_error(int code, const char *text, const char *arg) {
  printf("err %d %s%s\n", code, text, arg ? arg : "");
  fflush(stdout);
}

static int64_t parse_version(const char *s) {
  if (!s) return THUB_LATEST;
  if (strcmp(s, "latest") == 0) return THUB_LATEST;
  if (strncmp(s, "latest-", 7) == 0) return THUB_LATEST_MINUS(atoll(s + 7));
  return (int64_t)atoll(s);
}

static unsigned char pattern(uint64_t seed, int t, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)t * 0xBF58476D1CE4E5B9ull + i;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  return (unsigned char)(x >> 32);
}

static int info_from_args(char *rest, THUB_Info *info) {
  char *kv;
  *info = THUB_INFO_NULL;
  while ((kv = strtok(rest, " \n")) != NULL) {
    char *eq = strchr(kv, '=');
    rest = NULL;
    if (!eq) continue;
    *eq = '\0';
    if (*info == THUB_INFO_NULL) THUB_Info_create(info);
    THUB_Info_set(*info, kv, eq + 1);
  }
  return 0;
}

/* Allocates, zeroes and registers one tensor; returns the THUB status. */
static int add_tensor(const char *name, size_t size) {
  unsigned char *p = peer_alloc(size, use_gpu);
  int st;
  if (size && !p) return THUB_ERR_NO_MEMORY;
  if (ntensors >= MAX_TENSORS) {
    peer_free(p, use_gpu);
    return THUB_ERR_ARG;
  }
  st = THUB_Register(model, name, p, size, use_gpu ? THUB_MEM_CUDA : THUB_MEM_HOST);
  if (st == THUB_SUCCESS) {
    bufs[ntensors] = p;
    sizes[ntensors] = size;
    names[ntensors] = strdup(name);
    owned[ntensors] = 1;
    on_gpu[ntensors] = use_gpu;
    ntensors++;
  } else {
    peer_free(p, use_gpu);
  }
  return st;
}

/* Overwrites published tensors on purpose (BadInputTest): the library's staging or a peer's get
 * may be reading them, so ThreadSanitizer reports a race here, which tools/ci/tsan_reports.py
 * accepts by this function's name and nowhere else. Not inlined, so that it names the frame. */
__attribute__((noinline)) static void break_the_contract(uint64_t seed) {
  int t;
  for (t = 0; t < ntensors; t++) {
    size_t i;
    for (i = 0; i < sizes[t]; i++) bufs[t][i] = pattern(seed, t, i);
  }
}

int main(void) {
  char line[65536];
  setvbuf(stdout, NULL, _IOLBF, 0);
  while (fgets(line, sizeof line, stdin)) {
    char *cmd = strtok(line, " \n");
    char out[512];
    if (!cmd) continue;
    if (strcmp(cmd, "init") == 0) {
      THUB_Info info;
      info_from_args(strtok(NULL, ""), &info);
      int st = THUB_Init(info, &ctx);
      if (info != THUB_INFO_NULL) THUB_Info_free(&info);
      char addr[256] = "";
      if (st == THUB_SUCCESS) THUB_Registry_address(ctx, addr, sizeof addr);
      reply_status(st, addr);
    } else if (strcmp(cmd, "open") == 0) {
      char *m = strtok(NULL, " \n"), *r = strtok(NULL, " \n"), *s = strtok(NULL, " \n"), *n = strtok(NULL, " \n");
      THUB_Info info;
      info_from_args(strtok(NULL, ""), &info);
      int st = THUB_Open(ctx, m ? m : "", r ? r : "", s ? atoi(s) : 0, n ? atoi(n) : 1, info, &model);
      if (info != THUB_INFO_NULL) THUB_Info_free(&info);
      reply_status(st, NULL);
    } else if (strcmp(cmd, "memory") == 0) {
      char *kind = strtok(NULL, " \n");
      if (kind && strcmp(kind, "host") == 0) {
        use_gpu = 0;
        reply_status(THUB_SUCCESS, NULL);
      } else if (kind && strcmp(kind, "cuda") == 0) {
#ifdef THUB_PEER_CUDA
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n == 0) {
          reply_error(THUB_ERR_UNSUPPORTED, "no CUDA device: ",
                      e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount is 0");
        } else {
          use_gpu = 1;
          reply_status(THUB_SUCCESS, NULL);
        }
#else
        reply_error(THUB_ERR_UNSUPPORTED, "this peer was built without CUDA (thub_peer_cuda has it)", NULL);
#endif
      } else {
        reply_error(THUB_ERR_ARG, "memory host|cuda", NULL);
      }
    } else if (use_gpu && (strcmp(cmd, "flat") == 0 || strcmp(cmd, "repoint") == 0 || strcmp(cmd, "scribble") == 0)) {
      reply_error(THUB_ERR_ARG, "host memory only: ", cmd);
    } else if (strcmp(cmd, "tensors") == 0) {
      char *list = strtok(NULL, " \n");
      char *tok, *save = NULL;
      int st = THUB_SUCCESS;
      for (tok = strtok_r(list, ",", &save); tok && st == THUB_SUCCESS; tok = strtok_r(NULL, ",", &save)) {
        char name[32];
        snprintf(name, sizeof name, "t%d", ntensors);
        st = add_tensor(name, (size_t)strtoull(tok, NULL, 10));
      }
      reply_status(st, NULL);
    } else if (strcmp(cmd, "flat") == 0) {
      char *list = strtok(NULL, " \n");
      char *tok, *save = NULL;
      size_t total = 0, off = 0;
      unsigned char *block;
      int st = THUB_SUCCESS;
      char copy[65536];
      snprintf(copy, sizeof copy, "%s", list ? list : "");
      for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) total += (size_t)strtoull(tok, NULL, 10);
      block = total ? calloc(1, total) : NULL; /* kept until the process ends */
      if (total && !block) st = THUB_ERR_NO_MEMORY;
      save = NULL;
      for (tok = strtok_r(list, ",", &save); tok && st == THUB_SUCCESS; tok = strtok_r(NULL, ",", &save)) {
        char name[32];
        size_t size = (size_t)strtoull(tok, NULL, 10);
        if (ntensors >= MAX_TENSORS) {
          st = THUB_ERR_ARG;
          break;
        }
        snprintf(name, sizeof name, "t%d", ntensors);
        st = THUB_Register(model, name, size ? block + off : NULL, size, THUB_MEM_HOST);
        if (st == THUB_SUCCESS) {
          bufs[ntensors] = size ? block + off : NULL;
          sizes[ntensors] = size;
          names[ntensors] = strdup(name);
          ntensors++;
          off += size;
        }
      }
      reply_status(st, NULL);
    } else if (strcmp(cmd, "register") == 0) {
      char *name = strtok(NULL, " \n"), *size = strtok(NULL, " \n");
      reply_status(add_tensor(name ? name : "", size ? (size_t)strtoull(size, NULL, 10) : 0), NULL);
    } else if (strcmp(cmd, "repoint") == 0) {
      /* Every tensor to new memory (filled with 0x5A) through THUB_Register of its name, the
       * old memory freed at once (AddressSanitizer then catches any later use of it).
       * "repoint +N": N bytes more than registered (a refused re-pointing). */
      char *s = strtok(NULL, " \n");
      size_t extra = s && s[0] == '+' ? (size_t)strtoull(s + 1, NULL, 10) : 0;
      int t, st = THUB_SUCCESS;
      for (t = 0; t < ntensors && st == THUB_SUCCESS; t++) {
        unsigned char *p = sizes[t] + extra ? malloc(sizes[t] + extra) : NULL;
        if (sizes[t] + extra && !p) {
          st = THUB_ERR_NO_MEMORY;
          break;
        }
        if (p) memset(p, 0x5A, sizes[t] + extra);
        st = THUB_Register(model, names[t], p, sizes[t] + extra, THUB_MEM_HOST);
        if (st != THUB_SUCCESS) {
          free(p);
          break;
        }
        if (owned[t]) peer_free(bufs[t], on_gpu[t]);
        bufs[t] = p;
        owned[t] = 1;
        on_gpu[t] = 0;
      }
      reply_status(st, NULL);
    } else if (strcmp(cmd, "scribble") == 0) {
      char *s = strtok(NULL, " \n");
      break_the_contract(s ? strtoull(s, NULL, 10) : 0);
      reply_status(THUB_SUCCESS, NULL);
    } else if (strcmp(cmd, "fill") == 0 || strcmp(cmd, "check") == 0) {
      char *s = strtok(NULL, " \n");
      uint64_t seed = s ? strtoull(s, NULL, 10) : 0;
      int t, bad = 0;
      for (t = 0; t < ntensors && !bad; t++) {
        size_t i;
        /* Device memory is filled and checked through a host copy. */
        unsigned char *h = on_gpu[t] && sizes[t] ? malloc(sizes[t]) : bufs[t];
        if (on_gpu[t] && sizes[t] && !h) {
          snprintf(out, sizeof out, "err %d no host memory to copy tensor %d through", THUB_ERR_NO_MEMORY, t);
          bad = 1;
          break;
        }
        if (cmd[0] == 'c' && on_gpu[t] && sizes[t] && !tensor_copy(t, h, sizes[t], 1)) {
          snprintf(out, sizeof out, "err 1 tensor %d could not be copied out of the device", t);
          bad = 1;
        }
        for (i = 0; i < sizes[t] && !bad; i++) {
          if (cmd[0] == 'f') {
            h[i] = pattern(seed, t, i);
          } else if (h[i] != pattern(seed, t, i)) {
            snprintf(out, sizeof out, "err 1 mismatch tensor %d byte %zu", t, i);
            bad = 1;
            break;
          }
        }
        if (cmd[0] == 'f' && on_gpu[t] && sizes[t] && !tensor_copy(t, h, sizes[t], 0)) {
          snprintf(out, sizeof out, "err 1 tensor %d could not be copied into the device", t);
          bad = 1;
        }
        if (h != bufs[t]) free(h);
      }
      if (bad) {
        printf("%s\n", out);
        fflush(stdout);
      } else {
        reply_status(THUB_SUCCESS, NULL);
      }
    } else if (strcmp(cmd, "publish") == 0) {
      reply_status(THUB_Publish(model, parse_version(strtok(NULL, " \n"))), NULL);
    } else if (strcmp(cmd, "replicate") == 0 || strcmp(cmd, "update") == 0) {
      int64_t got = -1;
      int64_t v = parse_version(strtok(NULL, " \n"));
      int st = cmd[0] == 'r' ? THUB_Replicate(model, v, &got) : THUB_Update(model, v, &got);
      snprintf(out, sizeof out, "%d %" PRId64, st, got);
      reply_status(st, out);
    } else if (strcmp(cmd, "ireplicate") == 0) {
      reply_status(THUB_Ireplicate(model, parse_version(strtok(NULL, " \n")), &req), NULL);
    } else if (strcmp(cmd, "test") == 0) {
      int done = 0;
      int64_t got = -1;
      int st = THUB_Test(&req, &done, &got);
      snprintf(out, sizeof out, "%d %" PRId64, done, got);
      reply_status(st, out);
    } else if (strcmp(cmd, "wait") == 0) {
      int64_t got = -1;
      int st = THUB_Wait(&req, &got);
      snprintf(out, sizeof out, "%d %" PRId64, st, got);
      reply_status(st, out);
    } else if (strcmp(cmd, "unpublish") == 0) {
      reply_status(THUB_Unpublish(model), NULL);
    } else if (strcmp(cmd, "stat") == 0) {
      int64_t v = 0;
      int st = THUB_Model_stat(model, strtok(NULL, " \n"), &v);
      snprintf(out, sizeof out, "%" PRId64, v);
      reply_status(st, out);
    } else if (strcmp(cmd, "close") == 0) {
      reply_status(THUB_Close(&model), NULL);
    } else if (strcmp(cmd, "finalize") == 0) {
      reply_status(THUB_Finalize(&ctx), NULL);
    } else if (strcmp(cmd, "quit") == 0) {
      break;
    } else {
      printf("err -1 unknown command '%s'\n", cmd);
      fflush(stdout);
    }
  }
  if (ctx != THUB_CONTEXT_NULL) THUB_Finalize(&ctx);
  return 0;
}
