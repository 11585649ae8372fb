// Owns one loaded hwloc topology (hwloc_topology_t), with I/O devices kept.
#pragma once

#include <hwloc.h>

#include <memory>
#include <optional>
#include <string>

namespace thub::topo {

class HwlocTopology {
 public:
  // Probes this machine when `xml_path` is empty, else reads that hwloc XML file. Empty on
  // failure, with `err` (if not null) saying why.
  [[nodiscard]] static std::optional<HwlocTopology> load(const std::string& xml_path,
                                                         std::string* err);

  hwloc_topology_t get() const { return topo_.get(); }

 private:
  struct Destroy {
    void operator()(hwloc_topology_t t) const { hwloc_topology_destroy(t); }
  };
  using Owner = std::unique_ptr<hwloc_topology, Destroy>;
  explicit HwlocTopology(Owner t) : topo_(std::move(t)) {}

  Owner topo_;
};

}  // namespace thub::topo
