// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/probe: built sysfs trees with hwloc and NVML answering from real files, the
// H200 VM's GPU -> NIC path against its own lstopo export, one fault per source (the others must
// still give their facts), and the live probe of this machine checked against /sys.
#include "topo/probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "fake_apis.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/nvml_probe.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

namespace fs = std::filesystem;
using testing::FaultyNvml;

const std::string kH200 = "hwloc/hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml";
const std::string kDgx2 = "hwloc/hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml";

HostTopology readFile(const std::string& rel) {
  std::string path = testing::dataFile(rel);
  return readHwlocXml(testing::slurp(path), path);
}

// The warnings of failed sources ("probe:<source> failed: ..."); the hwloc reader adds notes of
// its own ("probe:hwloc: no NVLinkBandwidth matrix; ...").
std::vector<std::string> failures(const HostTopology& host) {
  std::vector<std::string> out;
  for (const std::string& w : host.warnings) {
    size_t colon = w.find(": ");
    if (w.compare(0, 6, "probe:") == 0 && colon != std::string::npos && colon >= 7 &&
        w.compare(colon - 7, 7, " failed") == 0) {
      out.push_back(w);
    }
  }
  return out;
}

bool anyWarning(const HostTopology& host, const std::string& text) {
  for (const std::string& w : host.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// Two NUMA nodes, an Ethernet port on NUMA 0, an InfiniBand HCA on NUMA 1, loopback.
class TwoNodeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    sys_.write("devices/system/node/node0/cpulist", "0-3\n");
    sys_.write("devices/system/node/node1/cpulist", "4-7\n");
    sys_.netdev("lo", "", "");
    sys_.netdev("eth0", sys_.pciFunction("0000:01:00.0", "0"), "25000");
    sys_.rdma("mlx5_0", sys_.pciFunction("0000:3b:00.0", "1"), "200 Gb/sec (4X HDR)");
  }
  testing::SysfsTree sys_;
};

TEST_F(TwoNodeSysfs, WithoutHwlocOrNvmlReportsNumaAndNicsAndZeroGpus) {
  testing::AbsentNvml nvml;
  HostTopology host = probeHost(nullptr, &nvml, sys_.root());
  EXPECT_EQ(host.gpuCount(), 0);
  ASSERT_EQ(host.numa_nodes.size(), 2u);
  EXPECT_EQ(host.numa_nodes[1].cpus, "4-7");
  ASSERT_EQ(host.nics.size(), 2u);  // lo is not a NIC
  EXPECT_EQ(host.nics[0].name, "eth0");
  EXPECT_DOUBLE_EQ(host.nics[0].speed_gbps, 25.0);
  EXPECT_EQ(host.nics[0].bus_id, "0000:01:00.0");
  EXPECT_EQ(host.nics[1].name, "mlx5_0");
  EXPECT_DOUBLE_EQ(host.nics[1].speed_gbps, 200.0);
  EXPECT_EQ(host.nics[1].bus_id, "0000:3b:00.0");
  EXPECT_EQ(host.nics[1].numa_node, 1);
  EXPECT_EQ(host.source, "probe:sysfs");
  ASSERT_EQ(host.warnings.size(), 2u);
  EXPECT_EQ(host.warnings[0].find("probe:hwloc: no hwloc given; NUMA nodes and CPUs from"), 0u);
  EXPECT_EQ(host.warnings[1],
            "probe:nvml: libnvidia-ml.so.1: not found (fake); reporting zero GPUs");
  EXPECT_FALSE(host.hostname.empty());
}

TEST_F(TwoNodeSysfs, HwlocAndNvmlFromTheDgx2FileGiveItsGpusAndPaths) {
  testing::FileHwloc hwloc(testing::dataFile(kDgx2));
  testing::FakeNvml nvml(readFile(kDgx2));
  HostTopology host = probeHost(&hwloc, &nvml, sys_.root());
  ASSERT_EQ(host.gpuCount(), 16);
  EXPECT_EQ(host.source, "probe:hwloc+nvml");
  EXPECT_EQ(host.gpus[9].numa_node, 1);
  EXPECT_EQ(host.gpus[9].cpu_affinity, "24-25");
  ASSERT_EQ(host.gpu_paths.size(), 256u);
  EXPECT_EQ(host.path(0, 8).cls, PathClass::NV);  // across boards through the switch fabric
  EXPECT_EQ(host.path(0, 8).nvlinks, 6);
  EXPECT_EQ(host.path(3, 3).cls, PathClass::X);
  EXPECT_EQ(host.nics.size(), 2u);
  EXPECT_TRUE(host.warnings.empty()) << host.warnings.front();
  // The file's own NICs are not on this sysfs tree: their graph nodes go with them.
  EXPECT_EQ(host.graph.nodesOfKind(NodeKind::Nic).size(), 2u);
}

TEST_F(TwoNodeSysfs, HwlocGpusWithoutNvmlAreDroppedWithAWarning) {
  testing::FileHwloc hwloc(testing::dataFile(kDgx2));
  testing::AbsentNvml nvml;
  HostTopology host = probeHost(&hwloc, &nvml, sys_.root());
  EXPECT_EQ(host.gpuCount(), 0);
  EXPECT_TRUE(host.graph.nodesOfKind(NodeKind::Gpu).empty());
  EXPECT_EQ(host.numa_nodes.size(), 2u);
  // NVIDIA GPUs on the bus and no NVML is a fault, with its fix.
  EXPECT_TRUE(anyWarning(host, "probe:nvml failed: libnvidia-ml.so.1: not found (fake); reporting "
                               "zero GPUs (hwloc saw 16 NVIDIA PCI GPUs); install the NVIDIA"));
}

// hwloc in a container lists only the NUMA nodes of its cpuset (here the H200 VM's one node),
// while /sys places mlx5_0 on node 1: the node is listed with unknown CPUs, so the host's JSON,
// which ranks exchange, reads back.
TEST_F(TwoNodeSysfs, ADeviceOnANodeHwlocLeftOutListsThatNode) {
  testing::FileHwloc hwloc(testing::dataFile(kH200));
  testing::AbsentNvml nvml;
  HostTopology host = probeHost(&hwloc, &nvml, sys_.root());
  ASSERT_EQ(host.nics.size(), 2u);
  EXPECT_EQ(host.nics[1].numa_node, 1);
  ASSERT_EQ(host.numa_nodes.size(), 2u);
  EXPECT_EQ(host.numa_nodes[0].id, 0);
  EXPECT_EQ(host.numa_nodes[0].cpus, readFile(kH200).numa_nodes.at(0).cpus);
  EXPECT_EQ(host.numa_nodes[1].id, 1);
  EXPECT_EQ(host.numa_nodes[1].cpus, "");
  EXPECT_NO_THROW(hostFromJson(hostToJson(host), "exchanged.json"));
}

TEST_F(TwoNodeSysfs, RequiredGpusWithoutNvmlNameTheFix) {
  testing::AbsentNvml nvml;
  try {
    probeHost(nullptr, &nvml, sys_.root(), /*require_gpus=*/true);
    FAIL() << "no error without GPUs";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("TORCH_TOPO_FILE"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not found (fake)"), std::string::npos);
  }
}

// The H200 Firecracker VM (tests/data/ATTRIBUTION.md, e): virtio eth0 at 0000:00:03.0 whose
// `device` link ends at virtio2, speed -1; ifb0/ifb1 of the traffic shaper; one NUMA node.
class H200Sysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    sys_.write("devices/system/node/node0/cpulist", "0-15\n");
    sys_.netdev("lo", "", "");
    sys_.netdev("ifb0", "", "");
    sys_.netdev("ifb1", "", "");
    sys_.netdev("eth0", sys_.pciFunction("0000:00:03.0", "-1") + "/virtio2", "-1");
    sys_.pciFunction("0000:00:06.0", "-1");  // the GPU
  }
  // The live probe must give what the reader gives for the same host's XML.
  void expectTheFilesPaths(const HostTopology& live) {
    HostTopology file = readFile(kH200);
    ASSERT_EQ(file.gpuCount(), 1);
    ASSERT_EQ(file.nics.size(), 1u);
    ASSERT_EQ(file.gpu_nic_paths.size(), 1u);
    EXPECT_EQ(file.gpu_nic_paths[0].cls, PathClass::PHB);
    ASSERT_EQ(live.gpuCount(), 1);
    EXPECT_EQ(live.gpus[0].bus_id, file.gpus[0].bus_id);
    EXPECT_EQ(live.gpus[0].numa_node, 0);
    ASSERT_EQ(live.nics.size(), 1u);  // not ifb0/ifb1
    EXPECT_EQ(live.nics[0].name, "eth0");
    EXPECT_EQ(live.nics[0].bus_id, file.nics[0].bus_id);
    EXPECT_EQ(live.nics[0].numa_node, 0);
    ASSERT_EQ(live.gpu_nic_paths.size(), 1u);
    EXPECT_EQ(live.gpu_nic_paths[0].cls, file.gpu_nic_paths[0].cls);
    EXPECT_DOUBLE_EQ(live.gpu_nic_paths[0].bandwidth_gbps, file.gpu_nic_paths[0].bandwidth_gbps);
  }
  testing::SysfsTree sys_;
};

TEST_F(H200Sysfs, GpuToNicIsPhbAsInTheHostsLstopoExport) {
  testing::FileHwloc hwloc(testing::dataFile(kH200));
  testing::FakeNvml nvml(readFile(kH200));
  HostTopology live = probeHost(&hwloc, &nvml, sys_.root());
  expectTheFilesPaths(live);
  EXPECT_EQ(live.source, "probe:hwloc+nvml");
}

TEST_F(H200Sysfs, SysfsGivesTheSpeedHwlocsNicLacks) {
  // NCCL's dump of that VM says speed="10000" (Mbit/s) for eth0; hwloc's XML has no speed.
  sys_.write("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/speed", "10000\n");
  testing::FileHwloc hwloc(testing::dataFile(kH200));
  testing::FakeNvml nvml(readFile(kH200));
  HostTopology live = probeHost(&hwloc, &nvml, sys_.root());
  ASSERT_EQ(live.nics.size(), 1u);
  EXPECT_DOUBLE_EQ(live.nics[0].speed_gbps, 10.0);
  EXPECT_EQ(readFile(kH200).nics[0].speed_gbps, 0.0);
  // The line rate caps the GPU -> NIC path: 10 Gbit/s is 1.25 GB/s.
  EXPECT_DOUBLE_EQ(live.gpu_nic_paths.at(0).bandwidth_gbps, 1.25);
}

#if TORCH_TOPO_WITH_HWLOC
TEST_F(H200Sysfs, LibhwlocLoadingTheExportGivesTheSamePaths) {
  // libhwloc itself reads the file and exports it again: the probe's own hwloc calls.
  std::unique_ptr<HwlocApi> hwloc = loadHwloc(testing::dataFile(kH200));
  testing::FakeNvml nvml(readFile(kH200));
  expectTheFilesPaths(probeHost(hwloc.get(), &nvml, sys_.root()));
}

TEST_F(H200Sysfs, LibhwlocThatCannotLoadIsAnHwlocFailure) {
  std::unique_ptr<HwlocApi> hwloc = loadHwloc(sys_.path("no-such.xml"));
  testing::FakeNvml nvml(readFile(kH200));
  HostTopology host = probeHost(hwloc.get(), &nvml, sys_.root());
  EXPECT_TRUE(anyWarning(host, "probe:hwloc failed: hwloc: hwloc_topology_set_xml("));
  EXPECT_EQ(host.source, "probe:sysfs+nvml");
  EXPECT_EQ(host.gpuCount(), 1);
}
#endif

// One fault per source: the faulty source's facts are missing, with one warning naming the
// source, the reason and the fix; everything the other sources know is there.
TEST_F(H200Sysfs, HwlocThatThrowsOrExportsGarbageLeavesSysfsAndNvml) {
  testing::ThrowingHwloc throwing("hwloc_topology_load: Input/output error (fake)");
  testing::TextHwloc garbage("<?xml version=\"1.0\"?><topology><object type=");
  testing::FakeNvml nvml(readFile(kH200));
  for (HwlocApi* hwloc : std::vector<HwlocApi*>{&throwing, &garbage}) {
    HostTopology host = probeHost(hwloc, &nvml, sys_.root());
    ASSERT_EQ(host.warnings.size(), 1u);
    const std::string& w = host.warnings[0];
    EXPECT_EQ(w.find("probe:hwloc failed: "), 0u) << w;
    EXPECT_NE(w.find("NUMA nodes and CPUs from " + sys_.root()), std::string::npos) << w;
    EXPECT_NE(w.find("TORCH_TOPO_FILE"), std::string::npos) << w;
    EXPECT_EQ(host.source, "probe:sysfs+nvml");
    ASSERT_EQ(host.numa_nodes.size(), 1u);
    EXPECT_EQ(host.numa_nodes[0].cpus, "0-15");
    EXPECT_EQ(host.gpuCount(), 1);
    ASSERT_EQ(host.nics.size(), 1u);
    EXPECT_EQ(host.nics[0].bus_id, "0000:00:03.0");
    // Without the PCI tree both hang off the one CPU: still PHB.
    EXPECT_EQ(host.gpu_nic_paths.at(0).cls, PathClass::PHB);
  }
  EXPECT_TRUE(anyWarning(probeHost(&throwing, &nvml, sys_.root()), "Input/output error (fake)"));
}

TEST_F(H200Sysfs, NvmlFailingAtLoadInitOrOnADeviceLeavesHwlocAndSysfs) {
  HostTopology file = readFile(kH200);
  testing::FileHwloc hwloc(testing::dataFile(kH200));
  std::unique_ptr<NvmlApi> missing = loadNvml("libtorch-topo-no-such-nvml.so.1");
  FaultyNvml init(file, FaultyNvml::Fault::Init);
  FaultyNvml lost(file, FaultyNvml::Fault::Throw);
  const std::vector<std::pair<NvmlApi*, std::string>> cases = {
      {missing.get(), "probe:nvml failed: libtorch-topo-no-such-nvml.so.1"},
      {&init, "probe:nvml failed: nvmlInit_v2 failed with NVML error 3 (fake)"},
      {&lost, "probe:nvml failed: NVML_ERROR_GPU_IS_LOST (fake); reporting zero GPUs"}};
  for (const auto& [nvml, warning] : cases) {
    HostTopology host = probeHost(&hwloc, nvml, sys_.root());
    EXPECT_EQ(host.gpuCount(), 0);
    EXPECT_TRUE(host.graph.nodesOfKind(NodeKind::Gpu).empty());
    std::vector<std::string> warnings = failures(host);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].find(warning), 0u) << warnings[0];
    // hwloc saw the H200, so its absence is a fault with a fix.
    EXPECT_NE(warnings[0].find("(hwloc saw 1 NVIDIA PCI GPUs); install the NVIDIA driver"),
              std::string::npos)
        << warnings[0];
    EXPECT_EQ(host.source, "probe:hwloc");
    ASSERT_EQ(host.nics.size(), 1u);
    EXPECT_EQ(host.nics[0].name, "eth0");
    EXPECT_EQ(host.graph.nodesOfKind(NodeKind::Nic).size(), 1u);
    EXPECT_THROW(probeHost(&hwloc, nvml, sys_.root(), /*require_gpus=*/true), Unavailable);
  }
}

TEST(NvmlDeviceFaults, ABadDeviceCostsThatGpuOnly) {
  HostTopology file = readFile(kDgx2);
  testing::SysfsTree sys;
  sys.write("devices/system/node/node0/cpulist", "0\n");
  sys.netdev("lo", "", "");
  testing::FileHwloc hwloc(testing::dataFile(kDgx2));
  // FakeNvml lists the GPUs in reverse: NVML device 15 is CUDA GPU 0 (0000:34:00.0).
  const std::vector<std::pair<FaultyNvml::Fault, std::string>> cases = {
      {FaultyNvml::Fault::NoBusId, "unreadable, got '', expected dddd:bb:dd.f"},
      {FaultyNvml::Fault::BadBusId, "unreadable, got 'GPU-0000:zz'"},
      {FaultyNvml::Fault::RepeatBusId, "PCI bus id 0000:e7:00.0 repeats an earlier device's"}};
  for (const auto& [fault, text] : cases) {
    FaultyNvml nvml(file, fault, 15);
    HostTopology host = probeHost(&hwloc, &nvml, sys.root());
    ASSERT_EQ(host.gpuCount(), 15);
    EXPECT_EQ(host.gpus[0].bus_id, "0000:36:00.0");  // the file's second GPU is now CUDA 0
    EXPECT_EQ(host.graph.nodesOfKind(NodeKind::Gpu).size(), 15u);
    EXPECT_EQ(host.path(0, 14).cls, PathClass::NV);
    ASSERT_EQ(host.warnings.size(), 1u);
    EXPECT_EQ(host.warnings[0].find("probe:nvml failed: NVML device 15: PCI bus id "), 0u);
    EXPECT_NE(host.warnings[0].find(text), std::string::npos) << host.warnings[0];
    EXPECT_NE(host.warnings[0].find("GPU skipped; check the GPUs with nvidia-smi"),
              std::string::npos);
  }
}

TEST_F(H200Sysfs, UnreadableSysfsLeavesHwlocNicsAndNvml) {
  testing::FileHwloc hwloc(testing::dataFile(kH200));
  testing::FakeNvml nvml(readFile(kH200));
  HostTopology host = probeHost(&hwloc, &nvml, sys_.path("not-mounted"));
  std::vector<std::string> warnings = failures(host);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].find("probe:sysfs failed: "), 0u);
  EXPECT_NE(warnings[0].find("not-mounted/class/net: cannot be listed"), std::string::npos);
  EXPECT_NE(warnings[0].find("NICs from hwloc only, line rates unknown"), std::string::npos);
  EXPECT_EQ(host.gpuCount(), 1);
  ASSERT_EQ(host.nics.size(), 1u);
  EXPECT_EQ(host.nics[0].bus_id, "0000:00:03.0");
  EXPECT_EQ(host.gpu_nic_paths.at(0).cls, PathClass::PHB);
}

TEST_F(H200Sysfs, GarbageSysfsWithoutHwlocStillGivesAHostWithNvmlGpus) {
  sys_.write("devices/system/node/node0/cpulist", "0-15,\xff\n");
  testing::FakeNvml nvml(readFile(kH200));
  HostTopology host = probeHost(nullptr, &nvml, sys_.root());
  ASSERT_EQ(host.warnings.size(), 2u);
  EXPECT_EQ(host.warnings[0].find("probe:hwloc: no hwloc given"), 0u);
  EXPECT_EQ(host.warnings[1].find("probe:sysfs failed: "), 0u);
  EXPECT_NE(host.warnings[1].find("node0/cpulist"), std::string::npos) << host.warnings[1];
  EXPECT_NE(host.warnings[1].find("one NUMA node with unknown CPUs"), std::string::npos);
  ASSERT_EQ(host.numa_nodes.size(), 1u);
  EXPECT_EQ(host.numa_nodes[0].cpus, "");
  EXPECT_EQ(host.source, "probe:nvml");
  ASSERT_EQ(host.gpuCount(), 1);
  EXPECT_EQ(host.nics.size(), 1u);
}

TEST(AllSourcesFail, TheProbeStillReturnsAHostAndOneWarningPerSource) {
  testing::ThrowingHwloc hwloc("boom (fake)");
  testing::AbsentNvml nvml;
  HostTopology host = probeHost(&hwloc, &nvml, "/nonexistent-torch-topo-sysfs");
  EXPECT_EQ(host.source, "probe:none");
  EXPECT_EQ(host.gpuCount(), 0);
  EXPECT_TRUE(host.nics.empty());
  ASSERT_EQ(host.numa_nodes.size(), 1u);
  ASSERT_EQ(host.warnings.size(), 4u);
  EXPECT_EQ(host.warnings[0].find("probe:hwloc failed: boom (fake)"), 0u);
  EXPECT_EQ(host.warnings[1].find("probe:sysfs failed: "), 0u);  // NUMA nodes
  EXPECT_EQ(host.warnings[2].find("probe:nvml: "), 0u);
  EXPECT_EQ(host.warnings[3].find("probe:sysfs failed: "), 0u);  // NICs
}

TEST(LiveProbeTest, MatchesSysOfThisMachine) {
  HostTopology host = probeThisHost();
  size_t nodes = 0;
  for (const auto& entry : fs::directory_iterator("/sys/devices/system/node")) {
    std::string name = entry.path().filename();
    nodes += name.size() > 4 && name.compare(0, 4, "node") == 0 &&
             name.find_first_not_of("0123456789", 4) == std::string::npos;
  }
  EXPECT_EQ(host.numa_nodes.size(), std::max<size_t>(nodes, 1));
  // Physical interfaces are the ones with a device link; each is a NIC with a PCI bus id.
  std::set<std::string> physical;
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    if (fs::exists(entry.path() / "device")) physical.insert(entry.path().filename());
  }
  std::set<std::string> probed;
  for (const Nic& nic : host.nics) {
    probed.insert(nic.name);
    EXPECT_EQ(nic.bus_id.size(), 12u) << nic.name;
  }
  if (!fs::exists("/sys/class/infiniband")) EXPECT_EQ(probed, physical);
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  EXPECT_EQ(host.hostname, hostname);
  EXPECT_EQ(host.gpu_paths.size(), host.gpus.size() * host.gpus.size());
  EXPECT_EQ(host.gpu_nic_paths.size(), host.gpus.size() * host.nics.size());
}

}  // namespace
}  // namespace torch_topo::topo
