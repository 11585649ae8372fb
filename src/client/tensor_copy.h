// Moves bytes between a shard's tensors and host staging memory: memcpy for host tensors,
// cudaMemcpyAsync on one CUDA stream for device tensors (batched: one copy per tensor piece,
// one synchronization per finish()).
#pragma once

#include <cstdint>
#include <memory>

#include "src/client/layout.h"

namespace thub::transport {
class CopyStream;
}

namespace thub::client {

class TensorCopier {
 public:
  TensorCopier();
  ~TensorCopier();
  TensorCopier(const TensorCopier&) = delete;
  TensorCopier& operator=(const TensorCopier&) = delete;
  // tensor bytes [in, in + n) -> host `dst`
  void from_tensor(char* dst, const Tensor& t, uint64_t in, uint64_t n);
  // host `src` -> tensor bytes [in, in + n)
  void to_tensor(const Tensor& t, uint64_t in, const char* src, uint64_t n);
  // Wait for every copy issued so far (throws Error(kTransport) on a CUDA error).
  void finish();

 private:
  transport::CopyStream& cuda();
  std::unique_ptr<transport::CopyStream> cuda_;
  bool pending_ = false;
};

}  // namespace thub::client
