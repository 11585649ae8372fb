// How to read one replica-shard: what the registry hands a requester about its source.
// Opaque to the registry; encoded with src/common/codec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/client/layout.h"

namespace thub::client {

struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  std::string rkey;  // packed UCX rkey ("" for 0-byte regions)
};

struct RemoteTensor {  // the layout: a tensor's name and size (the segments say where it is)
  std::string name;
  uint64_t bytes = 0;
};

struct Descriptor {
  std::string host;                  // host_identity() of the holder's process
  int64_t pid = 0;                   // its pid (watched when on this host)
  std::string worker_address;        // packed UCP worker address
  std::vector<RemoteTensor> tensors; // registration order: names and sizes (the layout)
  uint64_t compaction_threshold = 0; // tensors below it travel packed first (stream.h)
  bool staged = false;               // the counter leads even though published: the holder
                                     // still stages its tensors into the stream (copy mode)
  std::vector<RemoteRegion> segments; // the stream as registered regions, in stream order
  RemoteRegion counter;              // 8 bytes: fill epoch and bytes held (progress_counter.h)
  uint32_t epoch = 0;                // the fill this descriptor promises (counter's epoch)
  RemoteRegion hashes;               // u64 valid flag + one XXH3 per kHashBlock of the stream
};

// The registry refuses larger descriptors (they travel in its replies); a shard whose
// descriptor could exceed it is refused at its first publish/replicate (THUB_ERR_ARG).
constexpr uint64_t kMaxDescriptorBytes = 32u << 20;
// Room counted per registered segment for its packed rkey (UCX's are tens to hundreds of bytes).
constexpr uint64_t kRkeyBound = 1024;
constexpr uint64_t kWorkerAddressBound = 64u << 10;

// Where encode_descriptor put the fields that change from one fill to the next: a holder
// encodes its descriptor once per mapping and patches them at each publish (Holding::descriptor).
struct DescriptorPatch {
  size_t epoch_at = 0;
  size_t staged_at = 0;
};

std::string encode_descriptor(const Descriptor& d, DescriptorPatch* at = nullptr);
// The same, listing `table`'s tensors instead of d.tensors: a holder encodes its own table
// without a copy of it.
std::string encode_descriptor(const Descriptor& d, const TensorTable& table, DescriptorPatch* at);
// Sets the fill epoch and the staged flag of an encoding made with `at`.
void patch_descriptor(std::string* bytes, const DescriptorPatch& at, uint32_t epoch, bool staged);
Descriptor decode_descriptor(const std::string& bytes);  // throws Error(kTransport) if malformed

}  // namespace thub::client
