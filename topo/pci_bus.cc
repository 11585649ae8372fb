#include "topo/pci_bus.h"

#include <cstdio>

namespace thub::topo {
namespace {

// Parses hex digits into *out; false if empty, too long or not hex.
bool parse_hex(std::string_view s, unsigned* out) {
  if (s.empty() || s.size() > 8) return false;
  unsigned v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = v * 16 + static_cast<unsigned>(d);
  }
  *out = v;
  return true;
}

}  // namespace

std::string format_pci_bus(unsigned domain, unsigned bus, unsigned dev, unsigned fn) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain & 0xffffu, bus & 0xffu, dev & 0x1fu,
                fn & 0x7u);
  return buf;
}

std::string normalize_pci_bus(std::string_view id) {
  const size_t dot = id.rfind('.');
  if (dot == std::string_view::npos) return {};
  const size_t colon2 = id.rfind(':', dot);
  if (colon2 == std::string_view::npos) return {};
  const size_t colon1 = colon2 == 0 ? std::string_view::npos : id.rfind(':', colon2 - 1);
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  const size_t bus_begin = colon1 == std::string_view::npos ? 0 : colon1 + 1;
  if (colon1 != std::string_view::npos && !parse_hex(id.substr(0, colon1), &domain)) return {};
  if (!parse_hex(id.substr(bus_begin, colon2 - bus_begin), &bus) || bus > 0xff) return {};
  if (!parse_hex(id.substr(colon2 + 1, dot - colon2 - 1), &dev) || dev > 0x1f) return {};
  if (!parse_hex(id.substr(dot + 1), &fn) || fn > 7) return {};
  if (domain > 0xffff) return {};
  return format_pci_bus(domain, bus, dev, fn);
}

}  // namespace thub::topo
