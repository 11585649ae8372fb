#include "topo/pci_bus.h"

#include <gtest/gtest.h>

namespace thub::topo {
namespace {

TEST(PciBusTest, KeepsCanonicalSpelling) {
  EXPECT_EQ(normalize_pci_bus("0000:3b:00.0"), "0000:3b:00.0");
}

TEST(PciBusTest, AcceptsNvidiaSmiAndCudaSpellings) {
  EXPECT_EQ(normalize_pci_bus("00000000:3B:00.0"), "0000:3b:00.0");  // nvidia-smi
  EXPECT_EQ(normalize_pci_bus("0000:3B:00.0"), "0000:3b:00.0");      // cudaDeviceGetPCIBusId
  EXPECT_EQ(normalize_pci_bus("3b:00.1"), "0000:3b:00.1");
  EXPECT_EQ(normalize_pci_bus("0001:c1:1f.7"), "0001:c1:1f.7");
}

TEST(PciBusTest, RejectsMalformedIds) {
  EXPECT_EQ(normalize_pci_bus(""), "");
  EXPECT_EQ(normalize_pci_bus("mlx5_0"), "");
  EXPECT_EQ(normalize_pci_bus("0000:3b:00"), "");
  EXPECT_EQ(normalize_pci_bus("0000:3b:20.0"), "");   // device > 0x1f
  EXPECT_EQ(normalize_pci_bus("0000:3b:00.8"), "");   // function > 7
  EXPECT_EQ(normalize_pci_bus("0000:13b:00.0"), "");  // bus > 0xff
  EXPECT_EQ(normalize_pci_bus("zz:00.0"), "");
}

}  // namespace
}  // namespace thub::topo
