// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nvlink_inference on the cloud NCCL XML files of tests/data: NVLink inferred
// where the file names an SXM board, a warning where it names no GPU model, nothing for PCIe
// cards or files that carry NVLink.
#include "topo/nvlink_inference.h"

#include <gtest/gtest.h>

#include "test_data.h"
#include "topo/link_tables.h"
#include "topo/loader.h"

namespace torch_topo::topo {
namespace {

HostTopology load(const std::string& name) {
  return loadTopologyFile(testing::dataPath("nccl_topo_xml/" + name));
}

bool warned(const HostTopology& host) {
  for (const std::string& w : host.warnings)
    if (w.rfind(kNoNvlinkWarning, 0) == 0) return true;
  return false;
}

TEST(NvlinkInferenceTest, NebiusH100GetsNvSwitchLinks) {
  // Its GPUs are PCI device 0x2330 (H100 SXM5) behind one PCIe switch each; no <nvlink>.
  const HostTopology host = load("nebius_h100_vm_8xH100_8xIB_topo_v1.xml");
  ASSERT_EQ(host.gpuCount(), 8);
  for (int a = 0; a < 8; ++a) {
    EXPECT_EQ(host.gpus[a].sm, 90);
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_EQ(host.path(a, b).cls, PathClass::NV);
      EXPECT_EQ(host.path(a, b).nvlinks, 18);
      EXPECT_DOUBLE_EQ(host.path(a, b).bandwidth_gbps, 18 * nvlinkLaneGBps(90));
    }
  }
  EXPECT_TRUE(warned(host));
}

TEST(NvlinkInferenceTest, AzureFilesWithoutGpuModelsWarn) {
  // ND H100 v5 and ND A100 v4 list GPUs by class only: the paths stay PCI, with a warning.
  for (const char* name : {"azure_ndv5_8xH100_topo.xml", "azure_ndv4_8xA100_topo.xml"}) {
    const HostTopology host = load(name);
    ASSERT_EQ(host.gpuCount(), 8) << name;
    EXPECT_TRUE(warned(host)) << name;
    for (const PathInfo& p : host.gpu_paths) EXPECT_NE(p.cls, PathClass::NV) << name;
  }
}

TEST(NvlinkInferenceTest, PcieCardsAndNvlinkDumpsAreLeftAlone) {
  EXPECT_FALSE(warned(load("azure_ncv4_4xA100pcie_topo.xml")));  // A100 PCIe, 0x20b5
  const HostTopology dump = load("PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml");
  EXPECT_FALSE(warned(dump));
  EXPECT_EQ(dump.path(0, 1).cls, PathClass::NV);
}

TEST(NvlinkInferenceTest, BoardTableHoldsKnownParts) {
  int rows = 0;
  sxmBoardTable(&rows);
  EXPECT_EQ(rows, 4);
  ASSERT_NE(findSxmBoard("0x2330"), nullptr);
  EXPECT_EQ(findSxmBoard("0x2330")->nvlinks, 18);
  EXPECT_EQ(findSxmBoard("0x20B2")->sm, 80);
  EXPECT_EQ(findSxmBoard("0x20b5"), nullptr);  // A100 PCIe
  EXPECT_EQ(findSxmBoard(""), nullptr);
}

}  // namespace
}  // namespace torch_topo::topo
