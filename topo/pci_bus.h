// PCI bus ids in one spelling, so ids from hwloc, CUDA and nvidia-smi compare equal.
#pragma once

#include <string>
#include <string_view>

namespace thub::topo {

// "dddd:bb:dd.f" in lower case from "[domain:]bus:dev.fn" in any case and with a domain of
// any width ("00000000:3B:00.0" from nvidia-smi, "0000:3b:00.0", "3b:00.0"); "" if malformed.
std::string normalize_pci_bus(std::string_view id);

std::string format_pci_bus(unsigned domain, unsigned bus, unsigned dev, unsigned fn);

}  // namespace thub::topo
