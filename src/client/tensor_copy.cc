#include "src/client/tensor_copy.h"

#include <cstring>

#include "src/transport/cuda_staging.h"

namespace thub::client {

namespace {
constexpr int kMemCuda = 1;
}

TensorCopier::TensorCopier() = default;
TensorCopier::~TensorCopier() = default;

transport::CopyStream& TensorCopier::cuda() {
  if (!cuda_) cuda_ = transport::CopyStream::create();
  return *cuda_;
}

void TensorCopier::from_tensor(char* dst, const Tensor& t, uint64_t in, uint64_t n) {
  if (n == 0) return;
  if (t.memtype == kMemCuda) {
    cuda().to_host(dst, t.addr + in, n);
    pending_ = true;
  } else {
    std::memcpy(dst, t.addr + in, n);
  }
}

void TensorCopier::to_tensor(const Tensor& t, uint64_t in, const char* src, uint64_t n) {
  if (n == 0) return;
  if (t.memtype == kMemCuda) {
    cuda().to_device(t.addr + in, src, n);
    pending_ = true;
  } else {
    std::memcpy(t.addr + in, src, n);
  }
}

void TensorCopier::finish() {
  if (pending_ && cuda_) cuda_->synchronize();
  pending_ = false;
}

}  // namespace thub::client
