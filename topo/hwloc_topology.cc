#include "topo/hwloc_topology.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace thub::topo {
namespace {

void set_err(std::string* err, std::string what) {
  if (err) *err = std::move(what);
}

// hwloc's own message for a missing file is a line on stderr; check first to say it here.
bool readable(const std::string& path, std::string* err) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    set_err(err, "cannot read topology XML '" + path + "': " + std::strerror(errno));
    return false;
  }
  std::fclose(f);
  return true;
}

}  // namespace

std::optional<HwlocTopology> HwlocTopology::load(const std::string& xml_path,
                                                 std::string* err) {
  if (!xml_path.empty() && !readable(xml_path, err)) return std::nullopt;
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    set_err(err, std::string("hwloc_topology_init failed: ") + std::strerror(errno));
    return std::nullopt;
  }
  Owner owner(raw);
  // KEEP_IMPORTANT keeps GPUs, NICs and the bridges above them, and drops the rest.
  if (hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    set_err(err, std::string("hwloc: cannot enable I/O devices: ") + std::strerror(errno));
    return std::nullopt;
  }
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
    set_err(err, "hwloc cannot use XML '" + xml_path + "': " + std::strerror(errno));
    return std::nullopt;
  }
  if (hwloc_topology_load(raw) != 0) {
    set_err(err, xml_path.empty()
                     ? std::string("hwloc cannot probe this machine: ") + std::strerror(errno)
                     : "hwloc cannot load '" + xml_path + "' (not a valid hwloc XML topology?)");
    return std::nullopt;
  }
  return HwlocTopology(std::move(owner));
}

}  // namespace thub::topo
