// The roofline of a transfer benchmark: raw UCP one-sided gets (ucp_get_nbx) of the same
// regions that TensorHub moves, without TensorHub's registry, threads or bookkeeping.
// Single-threaded: the caller's thread progresses the worker. (A benchmark baseline may
// include UCX itself; the library keeps UCX inside src/transport/.)
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>
#include <vector>

namespace thub::bench {

// A region to read: local destination, remote source address and its unpacked rkey.
struct GetRegion {
  void* local = nullptr;
  uint64_t remote = 0;
  size_t len = 0;
  ucp_rkey_h rkey = nullptr;
};

class UcxGetBaseline {
 public:
  UcxGetBaseline();  // ucp_init (RMA) + one single-threaded worker; throws std::runtime_error
  ~UcxGetBaseline();
  UcxGetBaseline(const UcxGetBaseline&) = delete;
  UcxGetBaseline& operator=(const UcxGetBaseline&) = delete;

  [[nodiscard]] const std::string& address() const { return address_; }

  // Register [addr, addr+len) with ucp_mem_map; returns the packed rkey.
  std::string map(void* addr, size_t len);
  // Memory UCX allocates itself (ucp_mem_map with UCP_MEM_MAP_ALLOCATE, as ucx_perftest's
  // buffers are): its address, and the packed rkey in *rkey. Freed by unmap_all().
  void* alloc(size_t len, std::string* rkey);
  void unmap_all();

  // peer_errors: UCP_ERR_HANDLING_MODE_PEER on the endpoint, as TensorHub's endpoints have
  // (UCX 1.13 then leaves out the shared-memory transports that cannot detect a dead peer).
  void connect(const std::string& worker_address, bool peer_errors);
  ucp_rkey_h unpack(const std::string& packed_rkey);  // on the connected endpoint
  void destroy_rkeys();

  // Read every region: split into `chunk`-byte gets (0: one get per region), at most
  // `window` in flight. Returns the number of gets. Throws on a failed get.
  uint64_t get_all(const std::vector<GetRegion>& regions, size_t chunk, int window);

  unsigned progress() { return ucp_worker_progress(worker_); }

 private:
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  std::string address_;
  std::vector<ucp_mem_h> memh_;
  std::vector<ucp_rkey_h> rkeys_;
};

}  // namespace thub::bench
