// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nvlink_inference on the cloud NCCL XML files of tests/data: the loader
// keeps them as written; completeNvlink merges a live probe of the same host, else infers from
// the GPU model where the file names an SXM board, else warns; PCIe cards and files with
// NVLink are left alone.
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

int ourWarnings(const HostTopology& host) {
  int n = 0;
  for (const std::string& w : host.warnings) n += w.rfind(kNoNvlinkWarning, 0) == 0;
  return n;
}

const std::string& ourWarning(const HostTopology& host) {
  for (const std::string& w : host.warnings)
    if (w.rfind(kNoNvlinkWarning, 0) == 0) return w;
  static const std::string none;
  return none;
}

bool samePath(const PathInfo& a, const PathInfo& b) {
  return a.cls == b.cls && a.nvlinks == b.nvlinks && a.bandwidth_gbps == b.bandwidth_gbps &&
         a.latency_us == b.latency_us;
}

/// A live probe of the host `file` describes, as NVML would see it: the paths of a DGX A100's
/// `nvidia-smi topo -m` (NV12 through NVSwitch) under the file's GPU bus ids, in reverse order
/// so that matching by position would be wrong.
HostTopology fakeLive(const HostTopology& file, const std::string& nvsmi) {
  HostTopology live = loadTopologyFile(testing::dataPath("nvidia_smi_topo/" + nvsmi));
  const int g = file.gpuCount();
  EXPECT_EQ(live.gpuCount(), g);
  for (int i = 0; i < g; ++i) live.gpus[i].bus_id = file.gpus[g - 1 - i].bus_id;
  live.source = "probe:fake";
  return live;
}

TEST(NvlinkInferenceTest, LoaderKeepsTheFileAsWritten) {
  const HostTopology host = load("nebius_h100_vm_8xH100_8xIB_topo_v1.xml");
  EXPECT_EQ(nvlinkOrigin(host), NvlinkOrigin::None);
  EXPECT_EQ(ourWarnings(host), 0);
  for (const PathInfo& p : host.gpu_paths) EXPECT_NE(p.cls, PathClass::NV);
}

TEST(NvlinkInferenceTest, NebiusH100GetsNvSwitchLinksFromTheModel) {
  // Its GPUs are PCI device 0x2330 (H100 SXM5) behind one PCIe switch each; no <nvlink>.
  HostTopology host = load("nebius_h100_vm_8xH100_8xIB_topo_v1.xml");
  const std::vector<PathInfo> nic_paths = host.gpu_nic_paths;
  ASSERT_EQ(completeNvlink(host, nullptr), NvlinkOrigin::Inferred);
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
  ASSERT_EQ(nic_paths.size(), host.gpu_nic_paths.size());
  for (size_t i = 0; i < nic_paths.size(); ++i) {
    EXPECT_TRUE(samePath(nic_paths[i], host.gpu_nic_paths[i]));
  }
  const std::string& w = ourWarning(host);
  EXPECT_NE(w.find("nebius_h100_vm_8xH100_8xIB_topo_v1.xml"), std::string::npos) << w;
  EXPECT_NE(w.find("NV18"), std::string::npos) << w;
  EXPECT_NE(w.find("H100 SXM5"), std::string::npos) << w;
  EXPECT_NE(w.find("0x2330"), std::string::npos) << w;
  EXPECT_EQ(nvlinkOrigin(host), NvlinkOrigin::Inferred);
  // A second call finds its own warning and changes nothing.
  EXPECT_EQ(completeNvlink(host, nullptr), NvlinkOrigin::Inferred);
  EXPECT_EQ(ourWarnings(host), 1);
}

TEST(NvlinkInferenceTest, AzureFilesWithoutGpuModelsAreUnknown) {
  // ND H100 v5 and ND A100 v4 list GPUs by PCI class only: the paths stay PCI, with a warning.
  for (const char* name : {"azure_ndv5_8xH100_topo.xml", "azure_ndv4_8xA100_topo.xml"}) {
    HostTopology host = load(name);
    const std::vector<PathInfo> before = host.gpu_paths;
    EXPECT_EQ(completeNvlink(host, nullptr), NvlinkOrigin::Unknown) << name;
    ASSERT_EQ(host.gpuCount(), 8) << name;
    EXPECT_EQ(ourWarnings(host), 1) << name;
    EXPECT_NE(ourWarning(host).find(name), std::string::npos) << ourWarning(host);
    EXPECT_NE(ourWarning(host).find("NVLink unknown"), std::string::npos) << ourWarning(host);
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_TRUE(samePath(before[i], host.gpu_paths[i])) << name;
    }
  }
}

TEST(NvlinkInferenceTest, AzureNdv4TakesNvlinkFromTheLiveProbeOfItsHost) {
  HostTopology host = load("azure_ndv4_8xA100_topo.xml");
  const HostTopology raw = host;
  const HostTopology live = fakeLive(host, "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt");
  ASSERT_TRUE(describesSameHost(host, live));
  ASSERT_EQ(completeNvlink(host, &live), NvlinkOrigin::LiveProbe);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      EXPECT_TRUE(samePath(host.path(a, b), live.path(7 - a, 7 - b))) << a << "," << b;
      EXPECT_EQ(host.path(a, b).nvlinks, 12);
    }
  }
  // The file's own tree and GPU-NIC paths are kept.
  EXPECT_EQ(host.graph.nodes.size(), raw.graph.nodes.size());
  EXPECT_EQ(host.graph.links.size(), raw.graph.links.size());
  ASSERT_EQ(host.gpu_nic_paths.size(), raw.gpu_nic_paths.size());
  for (size_t i = 0; i < raw.gpu_nic_paths.size(); ++i)
    EXPECT_TRUE(samePath(raw.gpu_nic_paths[i], host.gpu_nic_paths[i]));
  EXPECT_NE(ourWarning(host).find("probe:fake"), std::string::npos) << ourWarning(host);
  EXPECT_NE(ourWarning(host).find("28 GPU pairs"), std::string::npos) << ourWarning(host);
}

TEST(NvlinkInferenceTest, LiveProbeOfAnotherHostIsNotMerged) {
  HostTopology host = load("nebius_h100_vm_8xH100_8xIB_topo_v1.xml");
  HostTopology other = fakeLive(load("azure_ndv5_8xH100_topo.xml"),
                                "h100_8xSXM_NV18_2socket_mlengineering.txt");
  ASSERT_FALSE(describesSameHost(host, other));
  // Nebius names its GPUs, so the model still gives NV18, and says so.
  EXPECT_EQ(completeNvlink(host, &other), NvlinkOrigin::Inferred);

  // Azure's file names none: without its own host's probe NVLink stays unknown.
  HostTopology azure = load("azure_ndv4_8xA100_topo.xml");
  EXPECT_EQ(completeNvlink(azure, &other), NvlinkOrigin::Unknown);
}

TEST(NvlinkInferenceTest, LiveProbeOfTheSameHostWithoutNvlinkHasTheLastWord) {
  // NVML of this very host sees no NVLink (a VM without its fabric, say): nothing is inferred.
  HostTopology host = load("nebius_h100_vm_8xH100_8xIB_topo_v1.xml");
  const HostTopology live = load("nebius_h100_vm_8xH100_8xIB_topo_v1.xml");
  EXPECT_EQ(completeNvlink(host, &live), NvlinkOrigin::None);
  EXPECT_EQ(ourWarnings(host), 0);
  for (const PathInfo& p : host.gpu_paths) EXPECT_NE(p.cls, PathClass::NV);
}

TEST(NvlinkInferenceTest, SameHostnameIsTheSameHost) {
  HostTopology file = load("azure_ndv5_8xH100_topo.xml");
  HostTopology live = loadTopologyFile(
      testing::dataPath("nvidia_smi_topo/h100_8xSXM_NV18_2socket_mlengineering.txt"));
  EXPECT_FALSE(describesSameHost(file, live));
  file.hostname = live.hostname = "node7";
  EXPECT_TRUE(describesSameHost(file, live));
  // No bus ids to match in nvidia-smi text: GPUs pair up by position.
  EXPECT_EQ(completeNvlink(file, &live), NvlinkOrigin::LiveProbe);
  EXPECT_TRUE(samePath(file.path(0, 7), live.path(0, 7)));
}

TEST(NvlinkInferenceTest, PcieCardsAndNvlinkDumpsAreLeftAlone) {
  HostTopology pcie = load("azure_ncv4_4xA100pcie_topo.xml");  // A100 PCIe, 0x20b5
  EXPECT_EQ(completeNvlink(pcie, nullptr), NvlinkOrigin::None);
  EXPECT_EQ(ourWarnings(pcie), 0);
  HostTopology dump = load("PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml");
  EXPECT_EQ(completeNvlink(dump, nullptr), NvlinkOrigin::File);
  EXPECT_EQ(ourWarnings(dump), 0);
  // Not an NCCL XML: nvidia-smi text says what it says.
  HostTopology text = loadTopologyFile(
      testing::dataPath("nvidia_smi_topo/2xgpu_PHB_noNVLink_mlengineering.txt"));
  EXPECT_EQ(completeNvlink(text, nullptr), NvlinkOrigin::None);
  EXPECT_EQ(ourWarnings(text), 0);
}

TEST(NvlinkInferenceTest, BoardTableHoldsKnownParts) {
  int rows = 0;
  sxmBoardTable(&rows);
  EXPECT_EQ(rows, 4);
  ASSERT_NE(findSxmBoard("0x2330"), nullptr);
  EXPECT_EQ(findSxmBoard("0x2330")->nvlinks, 18);
  EXPECT_EQ(findSxmBoard("0x20B2")->sm, 80);
  EXPECT_EQ(findSxmBoard("0x20b0")->nvlinks, 12);
  EXPECT_EQ(findSxmBoard("0x20b5"), nullptr);  // A100 PCIe
  EXPECT_EQ(findSxmBoard(""), nullptr);
}

}  // namespace
}  // namespace torch_topo::topo
