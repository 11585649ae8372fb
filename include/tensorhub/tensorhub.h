/**
 * @file tensorhub.h
 * @brief TensorHub public C API: reference-oriented weight transfer between the
 *        workers of a reinforcement-learning job.
 *
 * A central registry records which worker holds which version of a model; workers
 * read weights straight out of each other's registered memory with one-sided RMA
 * gets (UCX). Nothing here is C++: the header is C99 and usable from C++ and, through
 * ISO_C_BINDING, from Fortran.
 *
 * Conventions (MPI/UCX style):
 *  - every function returns an `int` status (THUB_SUCCESS or a THUB_ERR_* code);
 *  - output arguments come last and are written only on success;
 *  - THUB_Context calls may be made from several threads at once; one THUB_Model
 *    must be used by one thread at a time (like an MPI communicator's requests).
 */
#ifndef TENSORHUB_TENSORHUB_H
#define TENSORHUB_TENSORHUB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @name Library version */
/**@{*/
#define THUB_VERSION_MAJOR 0 /**< the API's major version this header declares (THUB_Get_version) */
#define THUB_VERSION_MINOR 1 /**< the API's minor version: functions, keys and codes added */
#define THUB_VERSION_PATCH 0 /**< the API's patch level */
/**@}*/

/** @name Status codes (fixed numbers; never renumbered) */
/**@{*/
/* BEGIN GENERATED status-codes c-defines (from src/common/status.h: cmake --build build --target update-generated-lists) */
#define THUB_SUCCESS          0       /**< done */
#define THUB_IN_PROGRESS      1       /**< a nonblocking operation is not finished yet */
#define THUB_NOT_UPDATED      2       /**< THUB_Update: nothing newer than the held version is available (not an error) */
#define THUB_ERR_ARG          (-1)    /**< a bad argument (null handle, negative size, bad info key or value) */
#define THUB_ERR_STATE        (-2)    /**< not allowed now (register after publish, publish twice, ...) */
#define THUB_ERR_NOT_FOUND    (-3)    /**< no such model / version (never published, or dropped) */
#define THUB_ERR_LAYOUT       (-4)    /**< registered tensors do not match the source's */
#define THUB_ERR_TRANSPORT    (-5)    /**< the data plane failed and no other source could finish */
#define THUB_ERR_REGISTRY     (-6)    /**< no registry could be reached */
#define THUB_ERR_TIMEOUT      (-7)    /**< a deadline given in the info passed */
#define THUB_ERR_NO_MEMORY    (-8)    /**< allocation or registration failed */
#define THUB_ERR_UNSUPPORTED  (-9)    /**< e.g. CUDA memory in a build without CUDA */
#define THUB_ERR_AUTH         (-10)   /**< the registry refused this client's credentials */
#define THUB_ERR_VERSION_LOST (-11)   /**< every holder of the version is gone */
#define THUB_ERR_CANCELED     (-12)   /**< the request was canceled (THUB_Cancel) before it took effect */
#define THUB_ERR_INTERNAL     (-99)   /**< a bug: please report */
/* END GENERATED */
/**@}*/

/** @name Memory types of registered tensors */
/**@{*/
#define THUB_MEM_HOST 0 /**< host (CPU) memory */
#define THUB_MEM_CUDA 1 /**< CUDA device memory */
/**@}*/

/** @name Version specifiers */
/**@{*/
/** The newest available version. */
#define THUB_LATEST ((int64_t)-1)
/** The k-th version before the newest available one (k = 0 is THUB_LATEST). */
#define THUB_LATEST_MINUS(k) ((int64_t)(-1 - (int64_t)(k)))
/**@}*/

/** One per process (or per GPU): owns the data plane and the registry connection. */
typedef struct THUB_Context_s *THUB_Context;
/** This process's shard of one replica of one model. */
typedef struct THUB_Model_s *THUB_Model;
/** A nonblocking operation. */
typedef struct THUB_Request_s *THUB_Request;
/** Key/value hints, like MPI_Info. */
typedef struct THUB_Info_s *THUB_Info;

#define THUB_INFO_NULL ((THUB_Info)0)       /**< no hints */
#define THUB_CONTEXT_NULL ((THUB_Context)0) /**< no context */
#define THUB_MODEL_NULL ((THUB_Model)0)     /**< no model */
#define THUB_REQUEST_NULL ((THUB_Request)0) /**< no request */

/**
 * @brief Text of a status code, with a hint. Never returns NULL.
 * @param[in] status any status value (unknown values give a generic text)
 * @return a static, NUL-terminated string. Thread-safe.
 */
const char *THUB_Error_string(int status);

/**
 * @brief Detail of the last failure on a context (which tensor, peer, registry address).
 * @param[in]  ctx  the context (THUB_CONTEXT_NULL gives the detail of the last failed
 *                  THUB_Init of this thread)
 * @param[out] buf  receives a NUL-terminated text, truncated to @p len
 * @param[in]  len  size of @p buf in bytes (> 0)
 * @return THUB_SUCCESS, or THUB_ERR_ARG for a NULL @p buf or zero @p len.
 */
int THUB_Last_error(THUB_Context ctx, char *buf, size_t len);

/**
 * @brief Create an empty info object.
 * @param[out] info the new object; free it with THUB_Info_free
 * @return THUB_SUCCESS, THUB_ERR_ARG (NULL @p info), THUB_ERR_NO_MEMORY.
 */
int THUB_Info_create(THUB_Info *info);

/**
 * @brief Set (or replace) a key. Keys and values are copied.
 * @param[in] info  the info object
 * @param[in] key   a non-empty key
 * @param[in] value the value (may be empty)
 * @return THUB_SUCCESS, THUB_ERR_ARG (NULL handle, NULL or empty key, NULL value).
 * Not thread-safe on the same info object.
 */
int THUB_Info_set(THUB_Info info, const char *key, const char *value);

/**
 * @brief The value of a key (MPI_Info_get): copied into @p value, truncated to @p len - 1
 *        bytes and NUL-terminated; *flag says whether the key is set (@p value is untouched
 *        when not). Environment variables are not consulted: this is the object's own content.
 * @param[in]  info  the info object
 * @param[in]  key   the key
 * @param[in]  len   size of @p value in bytes (> 0)
 * @param[out] value receives the value
 * @param[out] flag  1 when the key is set, else 0
 * @return THUB_SUCCESS, THUB_ERR_ARG (invalid handle, NULL arguments, zero @p len).
 */
int THUB_Info_get(THUB_Info info, const char *key, size_t len, char *value, int *flag);

/**
 * @brief The length of a key's value, without the NUL (MPI_Info_get_valuelen).
 * @param[in]  info     the info object
 * @param[in]  key      the key
 * @param[out] valuelen the length when set
 * @param[out] flag     1 when the key is set, else 0
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 */
int THUB_Info_get_valuelen(THUB_Info info, const char *key, size_t *valuelen, int *flag);

/**
 * @brief Remove a key (MPI_Info_delete).
 * @return THUB_SUCCESS, THUB_ERR_ARG, THUB_ERR_NOT_FOUND (the key is not set).
 */
int THUB_Info_delete(THUB_Info info, const char *key);

/**
 * @brief A new info object with the same keys and values (MPI_Info_dup).
 * @param[in]  info    the info object
 * @param[out] newinfo the copy; free it with THUB_Info_free
 * @return THUB_SUCCESS, THUB_ERR_ARG, THUB_ERR_NO_MEMORY.
 */
int THUB_Info_dup(THUB_Info info, THUB_Info *newinfo);

/**
 * @brief The number of keys set (MPI_Info_get_nkeys).
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 */
int THUB_Info_get_nkeys(THUB_Info info, int *nkeys);

/**
 * @brief The n-th key, 0 <= n < nkeys, in lexicographic order (MPI_Info_get_nthkey): copied
 *        into @p key, truncated to @p len - 1 bytes and NUL-terminated.
 * @return THUB_SUCCESS, THUB_ERR_ARG (invalid handle, @p n out of range, NULL @p key, zero @p len).
 */
int THUB_Info_get_nthkey(THUB_Info info, int n, char *key, size_t len);

/**
 * @brief The library's version (MPI_Get_version): the THUB_VERSION_* of the library that
 *        runs, which may differ from the header's a program was compiled with.
 * @return THUB_SUCCESS, THUB_ERR_ARG (a NULL argument).
 */
int THUB_Get_version(int *major, int *minor, int *patch);

/**
 * @brief A one-line description of the library (MPI_Get_library_version): its version, the
 *        UCX it runs on and whether it was built with CUDA. Truncated to @p len - 1 bytes.
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 */
int THUB_Get_library_version(char *buf, size_t len);

/**
 * @brief Free an info object and set the handle to THUB_INFO_NULL.
 * @param[in,out] info the handle; freeing THUB_INFO_NULL is THUB_ERR_ARG
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 */
int THUB_Info_free(THUB_Info *info);

/**
 * @brief Create a context: the UCX data plane (one worker, one progress thread) and the
 *        registry connection.
 *
 * Info keys (each also read from `TENSORHUB_<KEY>` in upper case; an explicit value wins;
 * a key THUB_Init does not read is THUB_ERR_ARG, naming the nearest known key). The
 * registry's keys apply to the embedded registry, started when `registry` is unset:
 * <!-- BEGIN GENERATED info-keys:init c-comment (from src/common/info_keys.h) -->
 *  - `registry` (string, default unset): `host:port[,host:port...]`: the registry and its backups,
 *    in order of preference; `etcd://host:port[,host:port]/prefix`: the registry that leads in
 *    etcd; unset: an embedded registry in this process
 *  - `datacenter` (string, default `default`): a label; sources in the same datacenter are
 *    preferred
 *  - `auth_token` (string, default unset; registry): shared secret that clients prove to the
 *    registry (HMAC challenge-response; it never travels); prefer auth_token_file
 *  - `auth_token_file` (string, default unset; registry): a file holding auth_token: owner-only
 *    permissions (chmod 600, as ssh keys), one trailing newline stripped; not together with
 *    auth_token
 *  - `auth_mutual` (bool, default `true`): with a token, the registry must prove it knows it too
 *    (else THUB_ERR_AUTH); false also accepts a registry that asks for none
 *  - `verify` (bool, default `false`): hash every 1 MiB block (XXH3) at publish and check it on
 *    receipt
 *  - `chunk_size` (size, default `4M`, 4K..1G): transfer unit in bytes
 *  - `pipeline_chunk_size` (size, default `256K`, 4K..1G): transfer unit when the source is itself
 *    still receiving (a chain hop)
 *  - `parked_reads` (bool, default `true`): over the transport's own sockets, a chunk read waits at
 *    the source until its bytes are there and brings the source's counter with it (no counter
 *    polling, no round trip per hop); false: poll the counter
 *  - `max_inflight` (int, default `16`, 1..1024): gets in flight per transfer
 *  - `timeout_ms` (int, default `0`, 0..1099511627776): deadline of a blocking call in ms (0:
 *    none); a replicate still waiting at the registry is then withdrawn (THUB_ERR_TIMEOUT), a
 *    transfer under way, an unpublish or an update in place completes
 *  - `heartbeat_ms` (int, default `1000`, 10..3600000): client heartbeat period in ms
 *  - `reconnect_ms` (int, default `10000`, 0..3600000): after losing the registry, try the address
 *    list this long (ms); then calls fail at once while the list is still tried every second in the
 *    background
 *  - `registry_probe_ms` (int, default `2000`, 0..3600000): connected to a backup, ask the earlier
 *    registry addresses this often (ms) and move back to the first that answers (0: never)
 *  - `registry_timeout_ms` (int, default `5000`, 0..86400000): a registry that sends nothing this
 *    long (ms) is lost: fail over (0: never)
 *  - `registry_connect_timeout_ms` (int, default `5000`, 1..3600000): per registry address: connect
 *    and the HELLO answer (ms)
 *  - `registry_request_timeout_ms` (int, default `30000`, 0..86400000): deadline (ms) of requests
 *    the registry answers at once (open, publish, close, offload done), when timeout_ms is 0 (0:
 *    none)
 *  - `stall_timeout_ms` (int, default `10000`, 10..86400000): a source that makes no progress this
 *    long (ms) has failed
 *  - `progress_report_ms` (int, default `2000`, 10..3600000): a reader tells the registry its
 *    progress on a read at most this often (ms), when it made some (the registry's
 *    lease_progress_timeout_ms ends reads that make none)
 *  - `net_devices` (string, default unset): UCX_NET_DEVICES (default: the NICs nearest to `device`,
 *    from hwloc, up ports only)
 *  - `device` (string, default `auto`): where this context's tensors live, for the NIC choice:
 *    `cuda:N` (CUDA device N), `numa:N` (host memory on NUMA node N), `host` (any), `auto` (the
 *    NUMA node of the thread calling THUB_Init)
 *  - `tls` (string, default unset): UCX_TLS (default: UCX's choice)
 *  - `progress_spin_us` (int, default `20`, 0..1000000): how long (us) the progress thread spins
 *    after a UCX event before it sleeps
 *  - `compaction_threshold` (size, default `64K`, 0..1T): tensors below it travel packed into one
 *    buffer (0: never); part of the layout: every replica of a model must use the same
 *  - `transfer_mode` (auto|direct|copy|tcp, default `auto`): zero-copy gets, a registered staging
 *    copy, or TCP only
 *  - `offload_seeding` (size, default `0`, 0..1T): host memory a shard may take to seed new
 *    versions into its datacenter in the background (offload seeding: a relative THUB_Update then
 *    returns THUB_NOT_UPDATED at once while the version crosses); 0: off
 *  - `wan_transport` (socket|ucx|same, default `socket`): how sources in another datacenter are
 *    read: the transport's own TCP sockets, UCX gets, or the same path as a source inside
 *  - `registry_listen` (string, default unset; registry): `host:port` the registry listens on (port
 *    0: any free one; `0.0.0.0:port` for every interface); unset: the embedded registry's
 *    advertised address, port 0; tensorhub-registry requires it
 *  - `heartbeat_timeout_ms` (int, default `5000`, 20..86400000; registry): the registry drops
 *    clients silent this long (ms), with their replicas
 *  - `pipeline` (bool, default `true`; registry): the registry hands out partial sources (pipeline
 *    replication)
 *  - `seeding` (bool, default `true`; registry): a version crosses into a datacenter once: a
 *    replica reads from another datacenter only while no replica of its own holds or receives that
 *    version (the first is the seeder, the others read behind it); false: the nearest free holder,
 *    wherever it is
 *  - `smart_skipping` (bool, default `true`; registry): with seeding: while a replica of a
 *    datacenter receives a version, a latest request there does not fetch a newer one across (a
 *    replicate takes the version on its way; an update takes the newest version whole in the
 *    datacenter, or returns THUB_NOT_UPDATED while one is on its way); absolute versions are always
 *    served as asked
 *  - `seed_takes_slot` (bool, default `true`; registry): with seeding: a read across datacenters
 *    takes a reader slot of its source like any read; false: it takes none, so that the source's
 *    own datacenter does not wait for a read paced by a slow WAN (where the WAN is as fast as the
 *    source's NIC, the two then share it)
 *  - `max_readers` (int, default `1`, 1..1048576; registry): readers per source at a time
 *  - `round_hold_ms` (int, default `1000`, 0..86400000; registry): how long (ms) a round of a
 *    replica of several shards waits for all its shards: it keeps its source's buffers for a shard
 *    that has not asked yet (a trainer's unpublish waits that long at most), answers a shard's
 *    finished transfer once every shard has one, and holds a round's request while a shard of the
 *    replica is not open at the registry (after a failover: its round report comes with its open)
 *    (0: shards are answered alone)
 *  - `takeover_grace_ms` (int, default `0`, 0..86400000; registry): for this long (ms) after its
 *    first open, the registry holds a replicate it would answer not found or version lost until a
 *    holder publishes (then answers it so): set on a backup registry, whose holders come back one
 *    by one after a failover (0: answered at once)
 *  - `lease_progress_timeout_ms` (int, default `60000`, 0..86400000; registry): a reader whose
 *    granted read reports no progress this long (ms) is dropped like a silent client, its reads
 *    ended, so that a trainer's unpublish waits for it this long at most; keep it above the
 *    readers' stall_timeout_ms (0: no bound)
 *  - `primary` (string, default unset; registry): `host:port` of the primary registry: this one is
 *    its backup, which serves only while the primary does not answer (asked every primary_probe_ms)
 *    and otherwise refuses clients, naming it
 *  - `primary_probe_ms` (int, default `500`, 50..3600000; registry): how often (ms) a backup asks
 *    its primary whether it answers (a whole handshake)
 *  - `election` (string, default unset; registry): `etcd://host:port[,host:port]/prefix`: the
 *    registry serves only while it holds PREFIX/leader in etcd (leader election; clients use
 *    registry=etcd://... to follow the leader)
 *  - `election_ttl_s` (int, default `5`, 2..3600; registry): the etcd lease's TTL (s): a leader
 *    that cannot renew it stops serving within this, and a standby takes over after it
 *  - `max_connections` (int, default `8192`, 1..1048576; registry): connections the registry
 *    accepts in all; more are refused
 *  - `max_connections_per_host` (int, default `1024`, 1..1048576; registry): connections the
 *    registry accepts from one peer address
 *  - `hello_timeout_ms` (int, default `10000`, 1..86400000; registry): a new connection must
 *    complete its HELLO within this (ms)
 *  - `frame_timeout_ms` (int, default `30000`, 1..86400000; registry): a partial frame or unread
 *    replies that make no progress this long (ms) close the connection
 *  - `output_pause_bytes` (size, default `4M`, 1..1T; registry): replies queued for one client
 *    beyond this pause reading its requests
 *  - `max_output_bytes` (size, default `128M`, 1..1T; registry): replies queued for one client
 *    beyond this close its connection
 *  - `max_descriptor_bytes_per_client` (size, default `256M`, 0..1T; registry): descriptors the
 *    registry stores for one client (its holdings, reads and host copies); a publish, replicate or
 *    update beyond it is refused with THUB_ERR_ARG (0: no bound)
 *  - `max_descriptor_bytes` (size, default `4G`, 0..1T; registry): descriptors the registry stores
 *    for all its clients together; beyond it as above (0: no bound)
 * <!-- END GENERATED -->
 * @param[in]  info hints or THUB_INFO_NULL
 * @param[out] ctx  the new context
 * @return THUB_SUCCESS, THUB_ERR_ARG (bad value), THUB_ERR_REGISTRY (none reachable),
 *         THUB_ERR_AUTH, THUB_ERR_TRANSPORT (UCX could not start), THUB_ERR_NO_MEMORY.
 * Thread-safe.
 */
int THUB_Init(THUB_Info info, THUB_Context *ctx);

/**
 * @brief Close every model still open on the context, stop the progress thread and the
 *        embedded registry (if any), and free the context. Nonblocking requests still
 *        outstanding are canceled first (as THUB_Cancel: one still waiting at the registry
 *        ends with THUB_ERR_CANCELED, a transfer under way completes) and waited for; their
 *        handles stay valid for THUB_Wait or THUB_Test.
 * @param[in,out] ctx the handle, set to THUB_CONTEXT_NULL on success
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 * No other call may use the context concurrently.
 */
int THUB_Finalize(THUB_Context *ctx);

/**
 * @brief The registry address this context uses (the embedded one when it started one).
 * @param[in]  ctx the context
 * @param[out] buf receives `host:port`, NUL-terminated
 * @param[in]  len size of @p buf
 * @return THUB_SUCCESS, THUB_ERR_ARG (NULL, or @p buf too small).
 * Thread-safe.
 */
int THUB_Registry_address(THUB_Context ctx, char *buf, size_t len);

/**
 * @brief Allocate host memory for tensors (like MPI_Alloc_mem). The memory is allocated and
 *        registered through UCX as shared memory: a reader on the same host maps it and copies
 *        from it itself, while memory from malloc is served by this process's progress thread
 *        (UCX 1.13 emulates such reads with messages). Register tensors anywhere inside it
 *        with THUB_Register as usual; tensors elsewhere work as before.
 * @param[in]  ctx     the context
 * @param[in]  bytes   size (> 0)
 * @param[in]  info    THUB_INFO_NULL (no keys yet)
 * @param[out] baseptr the memory, page-aligned, contents undefined
 * @return THUB_SUCCESS, THUB_ERR_ARG, THUB_ERR_NO_MEMORY.
 * Thread-safe.
 */
int THUB_Alloc_mem(THUB_Context ctx, size_t bytes, THUB_Info info, void **baseptr);

/**
 * @brief Free memory from THUB_Alloc_mem.
 * @param[in] ctx  the context that allocated it
 * @param[in] base the address THUB_Alloc_mem returned
 * @return THUB_SUCCESS, THUB_ERR_ARG (not from THUB_Alloc_mem of @p ctx), THUB_ERR_STATE (a
 *         model still registers tensors in it: close the model first).
 * Memory still allocated is freed by THUB_Finalize. Thread-safe.
 */
int THUB_Free_mem(THUB_Context ctx, void *base);

/**
 * @brief Open this process's shard of one replica of a model.
 *
 * Info keys (an unknown one is THUB_ERR_ARG):
 * <!-- BEGIN GENERATED info-keys:open c-comment (from src/common/info_keys.h) -->
 *  - `retain` (int, default `0`, 0..1048576): keep the latest k versions available (retention
 *    copies in host memory)
 *  - `spot` (bool, default `false`): this replica may vanish at any time; it never counts for
 *    retention
 * <!-- END GENERATED -->
 * @param[in]  ctx        the context
 * @param[in]  model      model name (non-empty)
 * @param[in]  replica    name of the model-parallel group (non-empty)
 * @param[in]  shard      this rank in the group, 0 <= shard < num_shards
 * @param[in]  num_shards size of the group (>= 1), the same on every shard
 * @param[in]  info       hints or THUB_INFO_NULL
 * @param[out] m          the model handle
 * A shard held by another session of the registry (e.g. this program's own before it was
 * restarted, not yet dropped by the registry) makes the call wait until that session goes,
 * at most the registry's heartbeat timeout (`heartbeat_timeout_ms`), and the context's
 * `timeout_ms`.
 * @return THUB_SUCCESS, THUB_ERR_ARG, THUB_ERR_STATE (shard already open, also by another
 *         live process after that wait, or num_shards differs from the other shards'),
 *         THUB_ERR_REGISTRY, THUB_ERR_TIMEOUT.
 */
int THUB_Open(THUB_Context ctx, const char *model, const char *replica, int shard,
              int num_shards, THUB_Info info, THUB_Model *m);

/**
 * @brief Register one tensor of this shard. Register every tensor, in the same order on
 *        every replica, before the first publish or replicate.
 *
 * Re-pointing (copy mode): after the first publish or replicate of a model served through a
 * staging copy (`transfer_mode=copy`, or `auto` where it chose copy: stat `copy_mode` 1), a
 * call with a registered name and the same @p bytes and @p memtype points that tensor at
 * new memory, for frameworks that allocate a tensor anew for each version. The next publish
 * stages from the new memory and the next replicate or update copies into it; nothing is
 * registered again (stat `repoints` counts them). Allowed between operations, not while a
 * request of the model is in flight; where a published version is still being staged from
 * the old memory (staging runs behind THUB_Publish), the call waits for that copy to end.
 * The old memory is not touched after a successful call: it may be freed.
 * @param[in] m       the model
 * @param[in] tensor  a name unique within the shard
 * @param[in] addr    start of the tensor's memory (may be NULL only when @p bytes is 0)
 * @param[in] bytes   size in bytes
 * @param[in] memtype THUB_MEM_HOST or THUB_MEM_CUDA
 * @return THUB_SUCCESS, THUB_ERR_ARG (bad pointer, duplicate name before the first
 *         publish/replicate, unknown memtype, a re-pointing of another size or memtype),
 *         THUB_ERR_STATE (a new name after the first publish/replicate; a re-pointing outside
 *         copy mode or while a request is in flight), THUB_ERR_NO_MEMORY
 *         (registration failed), THUB_ERR_UNSUPPORTED (CUDA memory in this build).
 */
int THUB_Register(THUB_Model m, const char *tensor, void *addr, size_t bytes, int memtype);

/**
 * @brief Declare that this shard's registered tensors hold @p version and will not be
 *        modified until THUB_Unpublish returns. No data moves; returns at once.
 * @param[in] m       the model
 * @param[in] version an absolute version (>= 0)
 * @return THUB_SUCCESS, THUB_ERR_ARG (negative version), THUB_ERR_STATE (already
 *         published, or no tensor registered), THUB_ERR_LAYOUT (another replica
 *         published this shard with another layout), THUB_ERR_REGISTRY.
 */
int THUB_Publish(THUB_Model m, int64_t version);

/**
 * @brief Fetch @p version from any peer that holds it into this shard's tensors. On
 *        success this replica holds the version and serves it until THUB_Unpublish.
 *        The shards of a replica call it in lockstep; every shard of one call (a round)
 *        returns the same outcome: it returns once every shard holds the version (or the
 *        registry's `round_hold_ms` passed), and a relative @p version lost on one shard
 *        moves every shard to the newest one inside the call.
 * @param[in]  m       the model (not published)
 * @param[in]  version absolute (>= 0), THUB_LATEST or THUB_LATEST_MINUS(k)
 * @param[out] got     the absolute version now held (may be NULL)
 * @return THUB_SUCCESS, THUB_ERR_NOT_FOUND, THUB_ERR_LAYOUT, THUB_ERR_STATE,
 *         THUB_ERR_TRANSPORT, THUB_ERR_VERSION_LOST, THUB_ERR_TIMEOUT, THUB_ERR_REGISTRY.
 */
int THUB_Replicate(THUB_Model m, int64_t version, int64_t *got);

/**
 * @brief Nonblocking THUB_Replicate. Complete it with THUB_Test, THUB_Wait, THUB_Waitall or
 *        THUB_Testany. Requests are carried out by the context's engine (one thread per
 *        context, whatever the number of requests); many requests on different models of
 *        one context may be outstanding at once.
 * @param[in]  m       the model
 * @param[in]  version as for THUB_Replicate
 * @param[out] req     the request
 * @return THUB_SUCCESS (started; the operation's own outcome comes with its completion).
 * At most one operation per model at a time (else THUB_ERR_STATE).
 */
int THUB_Ireplicate(THUB_Model m, int64_t version, THUB_Request *req);

/**
 * @brief Nonblocking THUB_Update. Its completion's status is THUB_SUCCESS, THUB_NOT_UPDATED
 *        or an error, as THUB_Update's.
 */
int THUB_Iupdate(THUB_Model m, int64_t version, THUB_Request *req);

/**
 * @brief Nonblocking THUB_Unpublish: completes once no peer reads this shard's buffers.
 */
int THUB_Iunpublish(THUB_Model m, THUB_Request *req);

/**
 * @brief Move to a newer version in one step: if a version newer than the one held and
 *        matching @p version is available, unpublish the old one (draining readers) and
 *        replicate the new one.
 * @param[in]  m       the model
 * @param[in]  version THUB_LATEST, THUB_LATEST_MINUS(k) or an absolute version
 * @param[out] got     the version held afterwards (may be NULL)
 * @return THUB_SUCCESS (moved), THUB_NOT_UPDATED (nothing newer; still holding the old
 *         one), or the errors of THUB_Replicate.
 */
int THUB_Update(THUB_Model m, int64_t version, int64_t *got);

/**
 * @brief Withdraw the promise of THUB_Publish (or of a completed replicate). Returns only
 *        when no peer reads this shard's buffers any more; then they may be overwritten.
 * @param[in] m the model
 * @return THUB_SUCCESS, THUB_ERR_STATE (nothing published), THUB_ERR_REGISTRY.
 */
int THUB_Unpublish(THUB_Model m);

/**
 * @brief Unpublish if needed, deregister the tensors and free the handle.
 * @param[in,out] m the handle, set to THUB_MODEL_NULL
 * @return THUB_SUCCESS, THUB_ERR_ARG, THUB_ERR_STATE (a request is still outstanding).
 */
int THUB_Close(THUB_Model *m);

/**
 * @brief Check a nonblocking request. When done, the request is freed and set to
 *        THUB_REQUEST_NULL, and the operation's status is returned.
 * @param[in,out] req  the request
 * @param[out]    done 1 when finished, else 0
 * @param[out]    got  on completion, the version now held (may be NULL)
 * @return THUB_SUCCESS or the operation's error when done; THUB_SUCCESS with *done = 0
 *         while it runs; THUB_ERR_ARG for a null request.
 */
int THUB_Test(THUB_Request *req, int *done, int64_t *got);

/**
 * @brief Wait for a nonblocking request, free it and set it to THUB_REQUEST_NULL.
 * @param[in,out] req the request
 * @param[out]    got the version now held (may be NULL)
 * @return the operation's status; THUB_ERR_ARG for a null or invalid request handle.
 */
int THUB_Wait(THUB_Request *req, int64_t *got);

/**
 * @brief Wait for every request of an array (MPI_Waitall); each is freed and set to
 *        THUB_REQUEST_NULL (null entries are skipped).
 * @param[in]     count    the number of requests
 * @param[in,out] reqs     the requests
 * @param[out]    gots     per request, the version held afterwards, -1 on error (may be NULL)
 * @param[out]    statuses per request, its status (may be NULL)
 * @return THUB_SUCCESS when none ended with an error, else the first error in array order;
 *         THUB_ERR_ARG (and nothing waited for) when an entry is not a valid request or
 *         the same request appears twice.
 */
int THUB_Waitall(int count, THUB_Request *reqs, int64_t *gots, int *statuses);

/**
 * @brief Test whether any request of an array has finished (MPI_Testany): the first one
 *        found is freed, set to THUB_REQUEST_NULL, and its status returned.
 * @param[in]     count the number of requests
 * @param[in,out] reqs  the requests
 * @param[out]    index the finished one's index, -1 when none (or none active)
 * @param[out]    done  1 when one finished or none is active, else 0
 * @param[out]    got   the finished one's version (may be NULL)
 * @return the finished request's status; THUB_SUCCESS when none finished.
 */
int THUB_Testany(int count, THUB_Request *reqs, int *index, int *done, int64_t *got);

/**
 * @brief Free a request handle without waiting (MPI_Request_free): the operation goes on
 *        and completes; its outcome is not reported. The model counts it as in progress
 *        until then.
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 */
int THUB_Request_free(THUB_Request *req);

/**
 * @brief Ask for a request to be canceled (MPI_Cancel). It still has to be completed with
 *        THUB_Wait or THUB_Test: it then ends with THUB_ERR_CANCELED if the cancellation took
 *        effect (a replicate given back before any byte was overwritten), or as it would have.
 * @return THUB_SUCCESS, THUB_ERR_ARG.
 */
int THUB_Cancel(THUB_Request *req);

/**
 * @brief Read one counter of a model (an addition to the first contract, in the spirit of MPI_T).
 *
 * Keys (an unknown one is THUB_ERR_ARG, naming the nearest known key):
 * <!-- BEGIN GENERATED stat-keys c-comment (from src/common/stat_keys.h) -->
 *  - `held_version`: the version this shard holds, -1 when none
 *  - `bytes_held`: bytes of the current or last transfer this shard holds (its progress counter,
 *    live during a transfer)
 *  - `total_bytes`: size of the shard (every registered tensor)
 *  - `replications`: completed replicates and updates
 *  - `partial_sources`: grants whose source was itself still receiving (pipeline replication)
 *  - `source_failures`: sources that failed mid-transfer and were replaced
 *  - `counter_reads`: remote progress-counter reads in the last transfer
 *  - `gets`: RMA gets in the last transfer
 *  - `offloads`: retention copies made in host memory (retain)
 *  - `republished`: holdings published again to a new registry after a failover
 *  - `compact_bytes`: bytes of the packed tiny tensors (compaction_threshold)
 *  - `compacted_tensors`: tensors packed because they are below compaction_threshold
 *  - `copy_mode`: 1 when the shard is served through a staging copy, else 0
 *  - `copy_mode_reason`: why it is: 0 not, 1 transfer_mode=copy, 2 auto with CUDA tensors this UCX
 *    cannot move, 3 auto with CUDA tensors and verify=true
 *  - `registrations`: memory regions this shard serves its stream from (tensors back to back in
 *    host memory share one)
 *  - `pack_us`: time spent packing (and staging) at the last publish, in us
 *  - `unpack_us`: time spent copying out the last transfer to the tensors, in us
 *  - `bytes_ucx_get`: bytes of the last transfer read with UCX gets (ucp_get_nbx)
 *  - `bytes_socket`: bytes of the last transfer read over the transport's own sockets (TCP)
 *  - `bytes_process_vm_readv`: bytes of the last transfer read from a same-host source with
 *    process_vm_readv
 *  - `bytes_ucx_mapped`: bytes of the last transfer copied from a same-host source's UCX
 *    shared-memory segment
 *  - `source_across`: 1 when the last transfer's source was in another datacenter (read over
 *    wan_transport), 0 when inside, -1 before any transfer
 *  - `wan_bytes`: bytes read from sources in other datacenters, all transfers of this shard
 *  - `offload_seed_bytes`: host memory of this shard's seed buffer (offload_seeding), 0 when it has
 *    none
 *  - `offload_seed_version`: the version this shard's seed buffer holds (whole or arriving), -1
 *    when none
 *  - `offload_seeds`: versions this shard's seed buffer fetched across datacenters
 *    (offload_seeding)
 *  - `repoints`: tensors pointed at new memory after the first publish or replicate (copy mode:
 *    THUB_Register of a registered name); nothing is registered again
 * <!-- END GENERATED -->
 * @param[in]  m     the model
 * @param[in]  key   one of the keys above
 * @param[out] value the counter
 * @return THUB_SUCCESS, THUB_ERR_ARG (invalid handle, NULL, unknown key).
 * May be called from any thread, also while a nonblocking request runs on @p m.
 */
int THUB_Model_stat(THUB_Model m, const char *key, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* TENSORHUB_TENSORHUB_H */
