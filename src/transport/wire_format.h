// What a worker hands out besides UCX's own bytes: its worker address carries the socket
// endpoint (socket_reads.h) and the process identity (process_reads.h) beside the UCX
// address, and a region's packed rkey carries the socket token and the region's bounds
// beside the UCX rkey. Both are read from peers: every length is checked before use.
#pragma once

#include <cstdint>
#include <string>

#include "src/transport/process_reads.h"
#include "src/transport/socket_reads.h"

namespace thub::transport {

struct DecodedAddress {
  std::string ucx;        // the bare UCX worker address
  SocketEndpoint sock;    // port 0: no socket reads
  ProcessIdentity proc;   // pid 0: no process reads
  std::string datacenter; // the source's `datacenter` label ("": not said, taken as ours)
};

// The longest datacenter label an address carries (a longer one is refused when encoded).
inline constexpr size_t kMaxDatacenterLabel = 255;

// "THW3", u32 length, UCX address, u16 port, u8 count, IPv4s, u32 pid, u64 nonce address,
// u64 nonce, u8 length, datacenter label (issue 22 item 4: a reader picks the path per source
// by it). "THW2" (the same without the label) and "THW1" (without the last four, before
// process reads) still decode; anything without a magic is a bare UCX address. Throws
// Error(kTransport) when malformed (short, a length past the end, or bytes after the last
// field), and encoding a label over kMaxDatacenterLabel bytes is Error(kArg).
std::string encode_address(const std::string& ucx, const SocketEndpoint& ep, const ProcessIdentity& id,
                           const std::string& datacenter = "");
DecodedAddress decode_address(const std::string& a);

struct DecodedRkey {
  std::string ucx;        // the bare UCX rkey
  uint64_t token = 0;     // what a socket read presents (0: not served over sockets)
  bool has_region = false;
  uint64_t addr = 0;      // the region a process read must stay inside
  uint64_t len = 0;
  // UCX allocated the region (Worker::allocate): a reader on this host maps UCX's segment and
  // copies from it itself, nothing sent to the source, and faster than a process read.
  bool ucx_mapped = false;
  // The slot of the source's table of served regions (served_regions.h) that lists it, and
  // the slot's key: what a process reader checks every read against.
  bool has_slot = false;
  uint32_t slot = 0;
  uint64_t slot_key = 0;
};

// "THK3", u64 token, u64 address, u64 length, u8 flags (1: ucx_mapped, 2: a slot follows),
// [u32 slot, u64 key,] UCX rkey. "THK2" (the same without the slot) and "THK1" (u64 token, UCX
// rkey: no region) still decode; anything without a magic is a bare UCX rkey.
struct ServedSlotRef {
  bool has = false;
  uint32_t slot = 0;
  uint64_t key = 0;
};
std::string encode_rkey(const std::string& ucx, uint64_t token, uint64_t addr, uint64_t len, bool ucx_mapped = false,
                        ServedSlotRef slot = {});
DecodedRkey decode_rkey(const std::string& packed);

}  // namespace thub::transport
