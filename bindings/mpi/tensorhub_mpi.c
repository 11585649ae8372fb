/* libtensorhub_mpi: THUB_MPI_Init / THUB_MPI_Finalize over the public C API of tensorhub.h.
 * MPI carries only the registry address and the agreement on outcomes; this file knows no
 * TensorHub internals and the core library never sees MPI. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensorhub/tensorhub_mpi.h>

#define ADDR_LEN 1024
#define DETAIL_LEN 1024

/* What the root tells every rank after its THUB_Init. */
struct root_report {
  int status;
  char addr[ADDR_LEN];
  char detail[DETAIL_LEN];
};

static _Thread_local char last_error[DETAIL_LEN];

static void set_last_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

/* The contexts whose registry this process hosts (roots of THUB_MPI_Init), so that
 * THUB_MPI_Finalize knows to go last. A short list: one entry per live root context. */
struct hosted {
  THUB_Context ctx;
  struct hosted *next;
};
static struct hosted *hosted_list = NULL;
static pthread_mutex_t hosted_mu = PTHREAD_MUTEX_INITIALIZER;

static int hosted_add(THUB_Context ctx) {
  struct hosted *h = malloc(sizeof *h);
  if (!h) return THUB_ERR_NO_MEMORY;
  h->ctx = ctx;
  pthread_mutex_lock(&hosted_mu);
  h->next = hosted_list;
  hosted_list = h;
  pthread_mutex_unlock(&hosted_mu);
  return THUB_SUCCESS;
}

static int hosted_contains(THUB_Context ctx) {
  int found = 0;
  pthread_mutex_lock(&hosted_mu);
  for (struct hosted *h = hosted_list; h && !found; h = h->next) found = h->ctx == ctx;
  pthread_mutex_unlock(&hosted_mu);
  return found;
}

static void hosted_remove(THUB_Context ctx) {
  pthread_mutex_lock(&hosted_mu);
  for (struct hosted **p = &hosted_list; *p; p = &(*p)->next) {
    if ((*p)->ctx == ctx) {
      struct hosted *h = *p;
      *p = h->next;
      free(h);
      break;
    }
  }
  pthread_mutex_unlock(&hosted_mu);
}

static int mpi_usable(void) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  return inited && !finalized;
}

/* Writes "<what>: <THUB_Last_error of the failure>" (it names the code) into out. */
static void init_failure_detail(const char *what, THUB_Context ctx, int st, char *out, size_t len) {
  char d[DETAIL_LEN] = "";
  if (THUB_Last_error(ctx, d, sizeof d) != THUB_SUCCESS || d[0] == '\0') snprintf(d, sizeof d, "%s", THUB_Error_string(st));
  snprintf(out, len, "%s: %s", what, d);
}

/* The first host of "host:port[,host:port...]" is a loopback address. */
static int is_loopback(const char *addr) {
  return strncmp(addr, "127.", 4) == 0 || strncmp(addr, "localhost:", 10) == 0 ||
         strncmp(addr, "[::1]", 5) == 0 || strncmp(addr, "::1", 3) == 0;
}

/* Whether the ranks of comm live on more than one host (collective). */
static int spans_hosts(MPI_Comm comm, int size) {
  MPI_Comm node;
  int node_size = 0, min_node_size = 0;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  MPI_Allreduce(&node_size, &min_node_size, 1, MPI_INT, MPI_MIN, comm);
  return min_node_size < size;
}

/* Finalize the contexts of a failed call: the others first, the root's after a barrier. */
static void undo(MPI_Comm comm, int is_root, THUB_Context *mine) {
  if (!is_root && *mine != THUB_CONTEXT_NULL) (void)THUB_Finalize(mine);
  MPI_Barrier(comm);
  if (is_root && *mine != THUB_CONTEXT_NULL) (void)THUB_Finalize(mine);
}

/* This rank's THUB_Init with registry=addr (unless info names registries itself). */
static int init_member(THUB_Info info, const char *addr, THUB_Context *mine, char *detail, size_t len) {
  THUB_Info mi = THUB_INFO_NULL;
  int flag = 0;
  char probe[2];
  int st = info == THUB_INFO_NULL ? THUB_Info_create(&mi) : THUB_Info_dup(info, &mi);
  if (st == THUB_SUCCESS && info != THUB_INFO_NULL) st = THUB_Info_get(info, "registry", sizeof probe, probe, &flag);
  if (st == THUB_SUCCESS && !flag) st = THUB_Info_set(mi, "registry", addr);
  if (st != THUB_SUCCESS) {
    snprintf(detail, len, "copying the info for THUB_Init: %s", THUB_Error_string(st));
  } else {
    st = THUB_Init(mi, mine);
    if (st != THUB_SUCCESS) init_failure_detail("THUB_Init", THUB_CONTEXT_NULL, st, detail, len);
  }
  if (mi != THUB_INFO_NULL) (void)THUB_Info_free(&mi);
  return st;
}

int THUB_MPI_Init(MPI_Comm comm, int root, THUB_Info info, THUB_Context *ctx) {
  struct root_report rep;
  char detail[DETAIL_LEN] = "";
  THUB_Context mine = THUB_CONTEXT_NULL;
  int rank = 0, size = 0, st = THUB_SUCCESS;
  struct {
    int rank; /* the failing rank, or size when this one did not fail */
    int code;
  } mine_out, first;

  if (!mpi_usable()) {
    set_last_error("THUB_MPI_Init: MPI is not initialized (or already finalized)");
    return THUB_ERR_STATE;
  }
  if (comm == MPI_COMM_NULL) {
    set_last_error("THUB_MPI_Init: comm is MPI_COMM_NULL");
    return THUB_ERR_ARG;
  }
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (root < 0 || root >= size) {
    set_last_error("THUB_MPI_Init: root %d is not a rank of the communicator (size %d)", root, size);
    return THUB_ERR_ARG;
  }
  if (!ctx) {
    st = THUB_ERR_ARG;
    snprintf(detail, sizeof detail, "THUB_MPI_Init: ctx is NULL");
  }

  /* 1. the root starts (or joins) the registry and tells everyone its address or failure */
  memset(&rep, 0, sizeof rep);
  if (rank == root) {
    if (st == THUB_SUCCESS) {
      st = THUB_Init(info, &mine);
      if (st != THUB_SUCCESS) {
        init_failure_detail("THUB_Init", THUB_CONTEXT_NULL, st, detail, sizeof detail);
      } else if ((st = THUB_Registry_address(mine, rep.addr, sizeof rep.addr)) != THUB_SUCCESS) {
        init_failure_detail("THUB_Registry_address", mine, st, detail, sizeof detail);
        (void)THUB_Finalize(&mine);
      }
    }
    rep.status = st;
    memcpy(rep.detail, detail, sizeof rep.detail);
  }
  MPI_Bcast(&rep, (int)sizeof rep, MPI_BYTE, root, comm);
  if (rep.status != THUB_SUCCESS) {
    set_last_error("rank %d: %s", root, rep.detail);
    return rep.status;
  }
  if (is_loopback(rep.addr) && spans_hosts(comm, size)) {
    if (rank == root) (void)THUB_Finalize(&mine);
    set_last_error("rank %d: the registry advertises %s, a loopback address, but the communicator spans "
                   "several hosts: set registry_listen (or TENSORHUB_REGISTRY_LISTEN) on the root to an "
                   "address the other hosts reach",
                   root, rep.addr);
    return THUB_ERR_REGISTRY;
  }

  /* 2. every other rank connects to it; the root remembers to finalize last */
  if (rank != root && st == THUB_SUCCESS) st = init_member(info, rep.addr, &mine, detail, sizeof detail);
  if (rank == root && (st = hosted_add(mine)) != THUB_SUCCESS) snprintf(detail, sizeof detail, "out of memory");

  /* 3. agree: the lowest failing rank's code and detail, everywhere */
  mine_out.rank = st != THUB_SUCCESS ? rank : size;
  mine_out.code = st;
  MPI_Allreduce(&mine_out, &first, 1, MPI_2INT, MPI_MINLOC, comm);
  if (first.rank < size) {
    MPI_Bcast(detail, (int)sizeof detail, MPI_CHAR, first.rank, comm);
    detail[sizeof detail - 1] = '\0';
    set_last_error("rank %d: %s", first.rank, detail);
    if (rank == root) hosted_remove(mine);
    undo(comm, rank == root, &mine);
    return first.code;
  }
  *ctx = mine;
  return THUB_SUCCESS;
}

int THUB_MPI_Finalize(MPI_Comm comm, THUB_Context *ctx) {
  int hosts, st = THUB_ERR_ARG;
  if (!mpi_usable()) return THUB_ERR_STATE;
  if (comm == MPI_COMM_NULL) return THUB_ERR_ARG;
  hosts = ctx && *ctx != THUB_CONTEXT_NULL && hosted_contains(*ctx);
  if (!hosts && ctx) st = THUB_Finalize(ctx);
  MPI_Barrier(comm); /* every other rank is done with the registry */
  if (hosts) {
    THUB_Context c = *ctx;
    st = THUB_Finalize(ctx);
    if (st == THUB_SUCCESS) hosted_remove(c);
  }
  return st;
}

int THUB_MPI_Last_error(char *buf, size_t len) {
  if (!buf || len == 0) return THUB_ERR_ARG;
  snprintf(buf, len, "%s", last_error);
  return THUB_SUCCESS;
}
