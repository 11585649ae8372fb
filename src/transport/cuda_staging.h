// Staging for memory UCX cannot touch (CUDA memory without a CUDA-enabled UCX >= 1.16):
// page-aligned host buffers (pinned when CUDA is present) and an ordered copy stream
// between host and device memory. Without CUDA in the build every CUDA entry point says
// "unsupported"; host buffers still work. No CUDA type appears in this header.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace thub::transport {

// True when CUDA memory can be used here: the build has CUDA and a device is visible.
// Otherwise false, and `why` (if given) says which of the two is missing.
bool cuda_usable(std::string* why);
// True when `p` is device (or managed) memory as the CUDA runtime sees it.
bool cuda_is_device_pointer(const void* p);

// Page-locks host memory that something else allocated (cudaHostRegister), for full-speed
// cudaMemcpyAsync. False when CUDA is not usable or the call failed (the memory still works,
// pageable). unpin_host_memory undoes a successful pin.
bool pin_host_memory(void* p, size_t n);
void unpin_host_memory(void* p);

// Host memory to stage through. Pinned (cudaHostAlloc) when asked and CUDA is usable, so
// that cudaMemcpyAsync runs at full speed; page-aligned malloc memory otherwise.
class HostBuffer {
 public:
  static std::unique_ptr<HostBuffer> allocate(size_t bytes, bool pinned);  // throws Error(kNoMemory)
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  [[nodiscard]] char* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool pinned() const { return pinned_; }

 private:
  HostBuffer(char* d, size_t n, bool pinned) : data_(d), size_(n), pinned_(pinned) {}
  char* data_;
  size_t size_;
  bool pinned_;
};

// Copies between host and device memory on one CUDA stream, in issue order. Copies are
// asynchronous; synchronize() waits for all of them and reports the first CUDA error.
class CopyStream {
 public:
  static std::unique_ptr<CopyStream> create();  // throws Error(kUnsupported) without CUDA
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  void to_host(void* host_dst, const void* dev_src, size_t n);    // throws Error(kTransport)
  void to_device(void* dev_dst, const void* host_src, size_t n);  // throws Error(kTransport)
  void synchronize();                                             // throws Error(kTransport)

 private:
  explicit CopyStream(void* s) : stream_(s) {}
  void* stream_;
};

}  // namespace thub::transport
