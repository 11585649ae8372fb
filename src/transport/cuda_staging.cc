// CUDA build of cuda_staging.h: the CUDA runtime API, linked statically.
#include "src/transport/cuda_staging.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <new>

#include "src/common/status.h"

namespace thub::transport {

namespace {
std::string cuda_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(Code::kTransport, std::string(what) + ": " + cuda_text(e));
}
}  // namespace

bool cuda_usable(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) {
      *why = e != cudaSuccess ? "no CUDA device is usable (cudaGetDeviceCount: " + cuda_text(e) + ")"
                              : std::string("no CUDA device is visible to this process");
    }
    (void)cudaGetLastError();  // clear the error so that later calls start clean
    return false;
  }
  return true;
}

bool cuda_is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

bool pin_host_memory(void* p, size_t n) {
  if (!cuda_usable(nullptr)) return false;
  if (cudaHostRegister(p, n, cudaHostRegisterPortable) == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

void unpin_host_memory(void* p) {
  if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
}

std::unique_ptr<HostBuffer> HostBuffer::allocate(size_t bytes, bool pinned) {
  size_t n = bytes ? bytes : 1;
  if (pinned && cuda_usable(nullptr)) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, n, cudaHostAllocPortable) == cudaSuccess) {
      return std::unique_ptr<HostBuffer>(new HostBuffer(static_cast<char*>(p), bytes, true));
    }
    (void)cudaGetLastError();  // fall back to pageable memory: slower copies, still correct
  }
  void* p = nullptr;
  if (posix_memalign(&p, 4096, n) != 0) {
    throw Error(Code::kNoMemory, "no host memory for a staging buffer of " + std::to_string(bytes) + " bytes");
  }
  return std::unique_ptr<HostBuffer>(new HostBuffer(static_cast<char*>(p), bytes, false));
}

HostBuffer::~HostBuffer() {
  if (pinned_) {
    (void)cudaFreeHost(data_);
  } else {
    std::free(data_);
  }
}

std::unique_ptr<CopyStream> CopyStream::create() {
  std::string why;
  if (!cuda_usable(&why)) throw Error(Code::kUnsupported, why);
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) throw Error(Code::kUnsupported, "cudaStreamCreate: " + cuda_text(e));
  return std::unique_ptr<CopyStream>(new CopyStream(s));
}

CopyStream::~CopyStream() {
  (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void CopyStream::to_host(void* host_dst, const void* dev_src, size_t n) {
  check(cudaMemcpyAsync(host_dst, dev_src, n, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream_)),
        "cudaMemcpyAsync device->host");
}

void CopyStream::to_device(void* dev_dst, const void* host_src, size_t n) {
  check(cudaMemcpyAsync(dev_dst, host_src, n, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_)),
        "cudaMemcpyAsync host->device");
}

void CopyStream::synchronize() { check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize"); }

}  // namespace thub::transport
