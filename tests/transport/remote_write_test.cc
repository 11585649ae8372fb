// Peers only ever read what a worker serves: Worker::map registers memory for remote read
// only. Where the transport enforces registration rights (an RDMA NIC checks them on every
// access), a peer's put into a served region is refused. UCX 1.13's shared-memory and TCP
// transports serve puts in software without looking at the rights (and same-host processes
// of one user can write each other's memory through the kernel anyway): there the test skips
// with that explanation. docs/security.md says what this means for a deployment.
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/transport/worker.h"

namespace thub::transport {
namespace {

// An attacker with plain UCX: its own context, an endpoint to the worker, the packed rkey it
// was handed (as any reader is, by the registry).
struct RawPeer {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_ep_h ep = nullptr;
  ucp_rkey_h rkey = nullptr;
  ucs_status_t status = UCS_OK;  // of making the endpoint and unpacking the rkey
  // `tls`: the attacker's own UCX_TLS ("" = UCX chooses), e.g. "tcp" for a peer on another host.
  RawPeer(const std::string& address, const std::string& packed_rkey, const char* tls = "") {
    ucp_config_t* cfg = nullptr;
    EXPECT_EQ(ucp_config_read(nullptr, nullptr, &cfg), UCS_OK);
    if (*tls) {
      EXPECT_EQ(ucp_config_modify(cfg, "TLS", tls), UCS_OK);
    }
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_RMA;
    EXPECT_EQ(ucp_init(&p, cfg, &ctx), UCS_OK);
    ucp_config_release(cfg);
    ucp_worker_params_t wp{};
    EXPECT_EQ(ucp_worker_create(ctx, &wp, &worker), UCS_OK);
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
    status = ucp_ep_create(worker, &ep_params, &ep);
    if (status != UCS_OK) {
      ep = nullptr;
      return;
    }
    status = ucp_ep_rkey_unpack(ep, packed_rkey.data(), &rkey);
    if (status != UCS_OK) rkey = nullptr;
  }
  // Gets `len` bytes at `remote` into `dst`; returns the get's status after a flush. The
  // request is given up after `budget` (a peer that no longer answers), status TIMED_OUT.
  ucs_status_t get(std::vector<char>* dst, uint64_t remote,
                   std::chrono::milliseconds budget = std::chrono::milliseconds(10000)) {
    if (status != UCS_OK) return status;
    ucp_request_param_t prm{};
    ucs_status_ptr_t r = ucp_get_nbx(ep, dst->data(), dst->size(), remote, rkey, &prm);
    ucs_status_t st = UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : UCS_OK;
    if (UCS_PTR_IS_PTR(r)) st = wait(r, budget);
    if (st != UCS_OK) return st;
    ucs_status_ptr_t f = ucp_ep_flush_nbx(ep, &prm);
    if (UCS_PTR_IS_ERR(f)) return UCS_PTR_STATUS(f);
    return UCS_PTR_IS_PTR(f) ? wait(f, budget) : UCS_OK;
  }
  // Puts `src` at `remote`; returns the put's status after a flush.
  ucs_status_t put(const std::vector<char>& src, uint64_t remote) {
    if (status != UCS_OK) return status;
    ucp_request_param_t prm{};
    ucs_status_ptr_t r = ucp_put_nbx(ep, src.data(), src.size(), remote, rkey, &prm);
    ucs_status_t st = UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : UCS_OK;
    if (UCS_PTR_IS_PTR(r)) st = wait(r);
    if (st != UCS_OK) return st;
    ucs_status_ptr_t f = ucp_ep_flush_nbx(ep, &prm);
    if (UCS_PTR_IS_ERR(f)) return UCS_PTR_STATUS(f);
    return UCS_PTR_IS_PTR(f) ? wait(f) : UCS_OK;
  }
  ucs_status_t wait(void* r, std::chrono::milliseconds budget = std::chrono::milliseconds(10000)) {
    ucs_status_t st;
    auto until = std::chrono::steady_clock::now() + budget;
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS) {
      ucp_worker_progress(worker);
      if (std::chrono::steady_clock::now() > until) {
        ucp_request_cancel(worker, r);
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
        st = UCS_ERR_TIMED_OUT;
        break;
      }
    }
    ucp_request_free(r);
    return st;
  }
  ~RawPeer() {
    if (rkey) ucp_rkey_destroy(rkey);
    // The endpoint is left to ucp_worker_destroy (a flush towards the other worker at exit
    // is not this test's concern).
    if (worker) ucp_worker_destroy(worker);
    if (ctx) ucp_cleanup(ctx);
  }
};

bool rdma_in_use(const std::string& describe) {
  for (const char* t : {"rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5"}) {
    if (describe.find(t) != std::string::npos) return true;
  }
  return false;
}

TEST(RemoteWriteTest, PeersCannotWriteServedMemoryWhereTheTransportChecks) {
  auto w = Worker::create(WorkerOptions{});
  std::vector<char> served(1 << 20, 'a');
  auto region = w->map(served.data(), served.size());
  RawPeer attacker(ucx_worker_address(w->address()), ucx_rkey(region->packed_rkey()));
  ucs_status_t st = attacker.put(std::vector<char>(served.size(), 'X'), region->address());
  // Over shared memory and TCP the worker's progress thread wrote the bytes, and told the
  // attacker through UCX (which ThreadSanitizer does not see); a no-op run on that thread
  // orders this thread's reads after its writes.
  w->call([] {});
  bool written = served[0] == 'X' || served.back() == 'X';
  if (written && !rdma_in_use(w->describe())) {
    GTEST_SKIP() << "no RDMA transport here: UCX " << ucx_version()
                 << "'s shared-memory and TCP transports carry out a put without checking the region's rights "
                    "(the put returned " << ucs_status_string(st) << " and wrote the bytes)";
  }
  EXPECT_NE(st, UCS_OK) << "a put into memory mapped for remote read only succeeded";
  EXPECT_FALSE(written) << "a peer wrote into memory mapped for remote read only";
}

// A peer on another host reads with UCX's tcp transport. UCX 1.13 serves a get over tcp in
// software, in the source's worker, from whatever address it names: one rkey of the source
// would let such a peer read all of the source's memory. Where sockets serve other hosts
// (no RDMA device) the worker leaves tcp out, and the attacker cannot reach it at all.
struct TcpAttack {
  std::string secret = std::string(4096, 's');  // never registered, never served
  std::vector<char> served = std::vector<char>(1 << 16, 'a');
  std::unique_ptr<Worker> w = Worker::create(WorkerOptions{});
  std::unique_ptr<MemoryRegion> region = w->map(served.data(), served.size());
  // The bytes of `secret` as the attacker got them ("" when the get failed), and the status.
  std::pair<std::string, ucs_status_t> attack() {
    RawPeer attacker(ucx_worker_address(w->address()), ucx_rkey(region->packed_rkey()), "tcp");
    std::vector<char> got(secret.size(), 0);
    ucs_status_t st = attacker.get(&got, reinterpret_cast<uint64_t>(secret.data()), std::chrono::milliseconds(3000));
    return {st == UCS_OK ? std::string(got.begin(), got.end()) : std::string(), st};
  }
};

TEST(RemoteReadTest, APeerOverTcpCannotReadMemoryTheWorkerDoesNotServe) {
  const char* sr = std::getenv("THUB_SOCKET_READS");
  if (sr && std::string(sr) == "0") GTEST_SKIP() << "THUB_SOCKET_READS=0 keeps UCX's tcp transport (the control below)";
  TcpAttack t;
  if (rdma_in_use(t.w->describe())) GTEST_SKIP() << "an RDMA device carries reads to other hosts; its NIC checks an rkey's bounds";
  auto [bytes, st] = t.attack();
  EXPECT_NE(st, UCS_OK) << "a get over tcp of memory the worker never served completed";
  EXPECT_NE(bytes, t.secret) << "a peer over tcp read memory the worker never served";
  EXPECT_EQ(t.w->describe().find("tcp/"), std::string::npos) << "the worker still opened UCX's tcp transport:\n"
                                                             << t.w->describe();
}

// The control: the same attack on a worker that keeps UCX's tcp transport (THUB_SOCKET_READS=0)
// reads the secret, so the test above fails where the worker keeps tcp.
TEST(RemoteReadTest, TheTcpAttackReadsUnservedMemoryWhereTheWorkerKeepsTcp) {
  const char* old = std::getenv("THUB_SOCKET_READS");
  std::string saved = old ? old : "";
  setenv("THUB_SOCKET_READS", "0", 1);
  std::pair<std::string, ucs_status_t> got;
  std::string secret, described;
  {
    TcpAttack t;
    got = t.attack();
    secret = t.secret;
    described = t.w->describe();
  }
  EXPECT_NE(described.find("tcp/"), std::string::npos) << "the worker should keep UCX's tcp transport here:\n" << described;
  if (old) setenv("THUB_SOCKET_READS", saved.c_str(), 1); else unsetenv("THUB_SOCKET_READS");
  if (got.first != secret) {
    GTEST_SKIP() << "UCX " << ucx_version() << " refused the get over tcp (" << ucs_status_string(got.second)
                 << "): this transport checks an rkey's bounds, and the test above proves nothing more";
  }
  SUCCEED() << "UCX " << ucx_version() << "'s tcp transport served a get outside every served region";
}

TEST(RemoteReadTest, TheTransportListLosesTcpOnly) {
  EXPECT_EQ(tls_without_tcp(""), "^tcp");
  EXPECT_EQ(tls_without_tcp("all"), "^tcp");
  EXPECT_EQ(tls_without_tcp("tcp"), "self");
  EXPECT_EQ(tls_without_tcp("tcp,self"), "self");
  EXPECT_EQ(tls_without_tcp("sm,tcp,self"), "sm,self");
  EXPECT_EQ(tls_without_tcp("rc,sm,self"), "rc,sm,self");
  EXPECT_EQ(tls_without_tcp("^sm"), "^sm,tcp");
  EXPECT_EQ(tls_without_tcp("^sm,tcp"), "^sm,tcp");
  EXPECT_EQ(tls_without_tcp("sm,all"), "^tcp");
}

}  // namespace
}  // namespace thub::transport
