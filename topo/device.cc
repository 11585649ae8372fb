#include "topo/device.h"

#include <sched.h>

#include <cerrno>
#include <cstdlib>

namespace thub::topo {
namespace {

bool parse_index(const std::string& s, int* out) {
  if (s.empty() || s.size() > 6) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::atoi(s.c_str());
  return true;
}

}  // namespace

std::optional<DeviceSpec> parse_device(const std::string& text, std::string* why) {
  DeviceSpec d;
  if (text.empty() || text == "auto") return d;
  if (text == "host") {
    d.kind = DeviceSpec::Kind::kHost;
    return d;
  }
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (colon != std::string::npos && (kind == "numa" || kind == "cuda") &&
      parse_index(text.substr(colon + 1), &d.index)) {
    d.kind = kind == "numa" ? DeviceSpec::Kind::kNuma : DeviceSpec::Kind::kCuda;
    return d;
  }
  if (why) *why = "device '" + text + "' is not one of auto, host, numa:N, cuda:N";
  return std::nullopt;
}

Location buffer_location(const DeviceSpec& d, const Topology& t, int current_numa, std::string* note) {
  auto say = [&](const std::string& s) {
    if (note) *note = s;
  };
  switch (d.kind) {
    case DeviceSpec::Kind::kHost:
      say("host memory, any NUMA node");
      return Location::host(-1);
    case DeviceSpec::Kind::kNuma:
      say("host memory on NUMA node " + std::to_string(d.index));
      return Location::host(d.index);
    case DeviceSpec::Kind::kCuda:
      for (const Gpu& g : t.gpus()) {
        if (g.index == d.index) {
          say("CUDA device " + std::to_string(d.index) + " (" + g.pci_bus + ")");
          return Location::gpu_at(g.pci_bus);
        }
      }
      say("CUDA device " + std::to_string(d.index) + " is not in the topology (" + std::to_string(t.gpus().size()) +
          " GPUs): host memory on NUMA node " + std::to_string(current_numa));
      return Location::host(current_numa);
    case DeviceSpec::Kind::kAuto:
      break;
  }
  say(current_numa < 0 ? std::string("host memory, any NUMA node")
                       : "host memory on NUMA node " + std::to_string(current_numa) + " (this thread's)");
  return Location::host(current_numa);
}

int current_numa_node() {
  unsigned cpu = 0, node = 0;
  if (getcpu(&cpu, &node) != 0) return -1;
  return static_cast<int>(node);
}

}  // namespace thub::topo
