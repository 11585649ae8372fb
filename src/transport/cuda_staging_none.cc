// Build without CUDA: host buffers only; every CUDA entry point reports "unsupported".
#include <cstdlib>

#include "src/common/status.h"
#include "src/transport/cuda_staging.h"

namespace thub::transport {

bool cuda_usable(std::string* why) {
  if (why) *why = "this build of TensorHub has no CUDA support (configure with nvcc present)";
  return false;
}

bool cuda_is_device_pointer(const void*) { return false; }

bool pin_host_memory(void*, size_t) { return false; }
void unpin_host_memory(void*) {}

std::unique_ptr<HostBuffer> HostBuffer::allocate(size_t bytes, bool) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
    throw Error(Code::kNoMemory, "no host memory for a staging buffer of " + std::to_string(bytes) + " bytes");
  }
  return std::unique_ptr<HostBuffer>(new HostBuffer(static_cast<char*>(p), bytes, false));
}

HostBuffer::~HostBuffer() { std::free(data_); }

std::unique_ptr<CopyStream> CopyStream::create() {
  std::string why;
  (void)cuda_usable(&why);
  throw Error(Code::kUnsupported, why);
}

CopyStream::~CopyStream() = default;
void CopyStream::to_host(void*, const void*, size_t) { throw Error(Code::kUnsupported, "no CUDA"); }
void CopyStream::to_device(void*, const void*, size_t) { throw Error(Code::kUnsupported, "no CUDA"); }
void CopyStream::synchronize() {}

}  // namespace thub::transport
