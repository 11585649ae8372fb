/**
 * @file tensorhub_mpi.h
 * @brief The MPI bootstrap of TensorHub (`libtensorhub_mpi`): one collective call gives every
 *        rank of an `mpirun` job a context on one registry.
 *
 * The core library never links MPI; this small library does, and uses MPI only to carry the
 * registry address and to agree on outcomes: every weight byte still moves through TensorHub.
 *
 * @code
 *   MPI_Init(&argc, &argv);
 *   THUB_Context ctx;
 *   int st = THUB_MPI_Init(MPI_COMM_WORLD, 0, THUB_INFO_NULL, &ctx);  // same st on every rank
 *   ... THUB_Open, THUB_Register, THUB_Publish / THUB_Replicate ...
 *   THUB_MPI_Finalize(MPI_COMM_WORLD, &ctx);                         // the registry's host last
 *   MPI_Finalize();
 * @endcode
 *
 * Both calls are collective over the communicator, like MPI's own collectives: every rank of
 * it calls them, in the same order with respect to its other collectives, with the same
 * @p root. With MPI_THREAD_MULTIPLE they may run on several communicators at once.
 *
 * Link with `-ltensorhub_mpi -ltensorhub` (CMake: `TensorHub::tensorhub_mpi`).
 */
#ifndef TENSORHUB_TENSORHUB_MPI_H
#define TENSORHUB_TENSORHUB_MPI_H

#include <mpi.h>
#include <tensorhub/tensorhub.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Create a context on every rank of @p comm, all on one registry that rank @p root
 *        hosts (collective).
 *
 * Rank @p root calls THUB_Init(@p info): without a `registry` key (or `TENSORHUB_REGISTRY`)
 * that starts the embedded registry, listening on the address it advertises: `registry_listen`
 * when given, else the first non-loopback IPv4 interface that is up (so that ranks on other
 * hosts can reach it), port 0. It reads THUB_Registry_address and shares it with MPI_Bcast.
 * Every other rank calls THUB_Init with a copy of @p info whose `registry` key is set to that
 * address (unless @p info sets `registry` itself: then every rank uses the registries it
 * names). The other keys, `auth_token` included, apply on every rank as given.
 *
 * Outcomes agree: the call returns the same status on every rank. If any rank fails (the
 * root's THUB_Init, a bad info key, a registry another rank cannot reach), every rank returns
 * the code of the lowest failing rank, the contexts that were created are finalized again
 * (the root's last), and @p ctx is left unchanged everywhere; THUB_MPI_Last_error gives the
 * same detail on every rank. A registry that advertises a loopback address (127.0.0.0/8)
 * while @p comm spans more than one host is THUB_ERR_REGISTRY on every rank, before any other
 * rank tries to connect to it.
 *
 * @param[in]  comm a communicator (not MPI_COMM_NULL); MPI must be initialized
 * @param[in]  root the rank of @p comm that hosts the registry, 0 <= root < size of @p comm
 * @param[in]  info hints for THUB_Init (the info keys of tensorhub.h) or THUB_INFO_NULL; only
 *                  read, and only during the call
 * @param[out] ctx  the new context of this rank (written only on success)
 * @return THUB_SUCCESS on every rank, or on every rank the same error: THUB_ERR_ARG (NULL
 *         @p ctx, @p root out of range, bad info, MPI_COMM_NULL; for MPI_COMM_NULL or an
 *         uninitialized MPI only on the calling rank, since no collective can run),
 *         THUB_ERR_STATE (MPI not initialized or already finalized), or any error of
 *         THUB_Init (THUB_ERR_REGISTRY, THUB_ERR_AUTH, THUB_ERR_TRANSPORT, THUB_ERR_NO_MEMORY).
 */
int THUB_MPI_Init(MPI_Comm comm, int root, THUB_Info info, THUB_Context *ctx);

/**
 * @brief Finalize every rank's context so that the rank hosting the registry finalizes last
 *        (collective).
 *
 * The ranks that do not host the registry call THUB_Finalize first (closing their models
 * still talks to the registry); after a barrier over @p comm the host (the root of the
 * THUB_MPI_Init that created the context) calls THUB_Finalize. A rank whose @p ctx is NULL or
 * invalid still takes part in the barrier, so that no rank hangs.
 *
 * @param[in]     comm the communicator of THUB_MPI_Init (or one with the same ranks)
 * @param[in,out] ctx  this rank's context from THUB_MPI_Init, set to THUB_CONTEXT_NULL on
 *                     success
 * @return this rank's THUB_Finalize status: THUB_SUCCESS, THUB_ERR_ARG (NULL or invalid
 *         context, MPI_COMM_NULL), THUB_ERR_STATE (another thread still uses the context; it is
 *         then not freed), THUB_ERR_STATE also when MPI is not initialized.
 */
int THUB_MPI_Finalize(MPI_Comm comm, THUB_Context *ctx);

/**
 * @brief Detail of the last failed THUB_MPI_Init of this thread: which rank failed first and
 *        its THUB_Last_error text, e.g. `rank 0: THUB_Init: unknown info key 'registy' ...`.
 *        The same text on every rank of the failed call.
 * @param[out] buf receives a NUL-terminated text (empty when no THUB_MPI_Init failed),
 *                 truncated to @p len
 * @param[in]  len size of @p buf in bytes (> 0)
 * @return THUB_SUCCESS, or THUB_ERR_ARG for a NULL @p buf or zero @p len. Thread-safe.
 */
int THUB_MPI_Last_error(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* TENSORHUB_TENSORHUB_MPI_H */
