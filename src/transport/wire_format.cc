#include "src/transport/wire_format.h"

#include <algorithm>
#include <cstring>

#include "src/common/status.h"

namespace thub::transport {

namespace {
constexpr char kAddressMagic1[4] = {'T', 'H', 'W', '1'};
constexpr char kAddressMagic2[4] = {'T', 'H', 'W', '2'};
constexpr char kAddressMagic3[4] = {'T', 'H', 'W', '3'};
constexpr char kRkeyMagic1[4] = {'T', 'H', 'K', '1'};
constexpr char kRkeyMagic2[4] = {'T', 'H', 'K', '2'};
constexpr char kRkeyMagic3[4] = {'T', 'H', 'K', '3'};

template <typename T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads a T at *p, or throws when `a` is too short.
template <typename T>
T take(const std::string& a, size_t* p, const char* what) {
  T v;
  if (a.size() < sizeof v || *p > a.size() - sizeof v) throw Error(Code::kTransport, std::string("malformed ") + what);
  std::memcpy(&v, a.data() + *p, sizeof v);
  *p += sizeof v;
  return v;
}
}  // namespace

std::string encode_address(const std::string& ucx, const SocketEndpoint& ep, const ProcessIdentity& id,
                           const std::string& datacenter) {
  if (datacenter.size() > kMaxDatacenterLabel) {
    throw Error(Code::kArg, "datacenter label longer than " + std::to_string(kMaxDatacenterLabel) + " bytes");
  }
  std::string out(kAddressMagic3, 4);
  put(&out, static_cast<uint32_t>(ucx.size()));
  out.append(ucx);
  put(&out, ep.port);
  const size_t n = std::min<size_t>(ep.ipv4.size(), 255);
  out.push_back(static_cast<char>(n));
  for (size_t i = 0; i < n; ++i) put(&out, ep.ipv4[i]);
  put(&out, id.pid);
  put(&out, id.nonce_addr);
  put(&out, id.nonce);
  out.push_back(static_cast<char>(datacenter.size()));
  out.append(datacenter);
  return out;
}

DecodedAddress decode_address(const std::string& a) {
  DecodedAddress d;
  const bool v1 = a.size() >= 4 && a.compare(0, 4, kAddressMagic1, 4) == 0;
  const bool v3 = a.size() >= 4 && a.compare(0, 4, kAddressMagic3, 4) == 0;
  const bool v2 = v3 || (a.size() >= 4 && a.compare(0, 4, kAddressMagic2, 4) == 0);
  if (!v1 && !v2) {
    d.ucx = a;
    return d;
  }
  const char* what = "worker address";
  size_t p = 4;
  const auto len = take<uint32_t>(a, &p, what);
  if (len > a.size() - p) throw Error(Code::kTransport, "malformed worker address");
  d.ucx = a.substr(p, len);
  p += len;
  d.sock.port = take<uint16_t>(a, &p, what);
  const size_t n = take<uint8_t>(a, &p, what);
  for (size_t i = 0; i < n; ++i) d.sock.ipv4.push_back(take<uint32_t>(a, &p, what));
  if (v2) {
    d.proc.pid = take<uint32_t>(a, &p, what);
    d.proc.nonce_addr = take<uint64_t>(a, &p, what);
    d.proc.nonce = take<uint64_t>(a, &p, what);
  }
  if (v3) {
    const size_t dl = take<uint8_t>(a, &p, what);
    if (dl > a.size() - p) throw Error(Code::kTransport, "malformed worker address: datacenter label past the end");
    d.datacenter = a.substr(p, dl);
    p += dl;
  }
  // Nothing after the fields: a peer's address means exactly what it says, no more.
  if (p != a.size()) throw Error(Code::kTransport, "malformed worker address: trailing bytes");
  return d;
}

std::string encode_rkey(const std::string& ucx, uint64_t token, uint64_t addr, uint64_t len, bool ucx_mapped,
                        ServedSlotRef slot) {
  std::string out(kRkeyMagic3, 4);
  put(&out, token);
  put(&out, addr);
  put(&out, len);
  put(&out, static_cast<uint8_t>((ucx_mapped ? 1 : 0) | (slot.has ? 2 : 0)));
  if (slot.has) {
    put(&out, slot.slot);
    put(&out, slot.key);
  }
  return out.append(ucx);
}

DecodedRkey decode_rkey(const std::string& packed) {
  DecodedRkey d;
  const char* what = "rkey";
  size_t p = 4;
  if (packed.size() >= 4 && packed.compare(0, 4, kRkeyMagic1, 4) == 0) {
    d.token = take<uint64_t>(packed, &p, what);
  } else if (packed.size() >= 4 && (packed.compare(0, 4, kRkeyMagic2, 4) == 0 ||
                                     packed.compare(0, 4, kRkeyMagic3, 4) == 0)) {
    const bool v3 = packed.compare(0, 4, kRkeyMagic3, 4) == 0;
    d.token = take<uint64_t>(packed, &p, what);
    d.addr = take<uint64_t>(packed, &p, what);
    d.len = take<uint64_t>(packed, &p, what);
    if (d.len > UINT64_MAX - d.addr) throw Error(Code::kTransport, "malformed rkey: the region wraps around");
    d.has_region = true;
    const auto flags = take<uint8_t>(packed, &p, what);
    if (flags & ~3u || (!v3 && (flags & 2))) throw Error(Code::kTransport, "malformed rkey: unknown flags");
    d.ucx_mapped = (flags & 1) != 0;
    if (flags & 2) {
      d.has_slot = true;
      d.slot = take<uint32_t>(packed, &p, what);
      d.slot_key = take<uint64_t>(packed, &p, what);
      if (d.slot_key == 0) throw Error(Code::kTransport, "malformed rkey: a served slot without a key");
    }
  } else {
    d.ucx = packed;
    return d;
  }
  d.ucx = packed.substr(p);
  return d;
}

}  // namespace thub::transport
