// How to read one replica-shard: what the registry hands a requester about its source.
// Opaque to the registry; encoded with src/common/codec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace thub::client {

struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  std::string rkey;  // packed UCX rkey ("" for 0-byte regions)
};

struct RemoteTensor {
  std::string name;
  RemoteRegion region;
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
  RemoteRegion counter;              // 8 bytes: bytes of the stream this holder has
  RemoteRegion hashes;               // u64 valid flag + one XXH3 per kHashBlock of the stream
};

std::string encode_descriptor(const Descriptor& d);
Descriptor decode_descriptor(const std::string& bytes);  // throws Error(kTransport) if malformed

}  // namespace thub::client
