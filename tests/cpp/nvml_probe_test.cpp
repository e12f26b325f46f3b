// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nvml_probe: GPUs, NVLinks and multi-node NVLink domains from an NVML whose
// answers come from real hwloc files (tests/data/hwloc), and the dlopen path on a machine without
// the driver.
#include "topo/nvml_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "fake_apis.h"
#include "topo/hwloc_reader.h"
#include "topo/nvsmi_reader.h"

namespace torch_topo::topo {
namespace {

HostTopology fileHost(const std::string& name) {
  std::string path = testing::dataFile("hwloc/" + name);
  return readHwlocXml(testing::slurp(path), path);
}

std::vector<Link> nvlinks(const HostTopology& host) {
  std::vector<Link> out;
  for (const Link& link : host.graph.links) {
    if (link.kind == LinkKind::NvLink) out.push_back(link);
  }
  return out;
}

TEST(NvmlProbeTest, Dgx2GpusComeInBusOrderWithSixLanesIntoTheFabric) {
  testing::FakeNvml nvml(fileHost("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml"));
  HostTopology host;
  addNvmlGpus(&nvml, &host);
  ASSERT_EQ(host.gpuCount(), 16);
  EXPECT_EQ(host.gpus[0].bus_id, "0000:34:00.0");
  EXPECT_EQ(host.gpus[15].bus_id, "0000:e7:00.0");
  EXPECT_EQ(host.gpus[3].index, 3);
  EXPECT_EQ(host.gpus[0].sm, 70);
  EXPECT_EQ(host.gpus[12].numa_node, 1);
  // NVML only sees the switch ports GPUs reach; the file's fabric is one switch (65:00.0).
  ASSERT_EQ(host.graph.nodesOfKind(NodeKind::NvSwitch).size(), 1u);
  std::vector<Link> links = nvlinks(host);
  ASSERT_EQ(links.size(), 16u);
  for (const Link& link : links) {
    EXPECT_EQ(link.lanes, 6);
    EXPECT_DOUBLE_EQ(link.bandwidth_gbps, 6 * 20.0);  // NCCL SM70_NVLINK_BW = 20 GB/s per lane
  }
}

TEST(NvmlProbeTest, ALinkBackToTheGpuItselfIsIgnored) {
  HostTopology file = fileHost("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  testing::FaultyNvml nvml(file, testing::FaultyNvml::Fault::SelfLink, 15);
  HostTopology host;
  addNvmlGpus(&nvml, &host);
  ASSERT_EQ(host.gpuCount(), 16);
  std::vector<Link> links = nvlinks(host);
  ASSERT_EQ(links.size(), 16u);
  for (const Link& link : links) {
    EXPECT_NE(link.a, link.b);
    EXPECT_EQ(link.lanes, 6);
  }
}

TEST(NvmlProbeTest, Power8CountsGpuPairsOnceAndLinksGpusToTheirSocket) {
  testing::FakeNvml nvml(fileHost("hwloc_power8_gpu_nvlink_distances.xml"));
  HostTopology host;
  host.numa_nodes = {{0, "0-1"}, {1, "80-81"}};
  host.graph.addNode({NodeKind::Cpu, "numa0", "", 0, 0});
  host.graph.addNode({NodeKind::Cpu, "numa1", "", 1, 1});
  addNvmlGpus(&nvml, &host);
  ASSERT_EQ(host.gpuCount(), 4);
  EXPECT_EQ(host.gpus[2].cpu_affinity, "80-81");
  int gpu_gpu = 0, gpu_cpu = 0;
  for (const Link& link : nvlinks(host)) {
    EXPECT_EQ(link.lanes, 2);
    NodeKind a = host.graph.nodes[link.a].kind, b = host.graph.nodes[link.b].kind;
    gpu_gpu += a == NodeKind::Gpu && b == NodeKind::Gpu;
    gpu_cpu += (a == NodeKind::Cpu) != (b == NodeKind::Cpu);
    if (b == NodeKind::Cpu) {
      EXPECT_EQ(host.graph.nodes[link.b].index, host.graph.nodes[link.a].numa_node);
    }
  }
  EXPECT_EQ(gpu_gpu, 2);  // 0-1 and 2-3
  EXPECT_EQ(gpu_cpu, 4);
  EXPECT_TRUE(host.graph.nodesOfKind(NodeKind::NvSwitch).empty());
}

// The DGX-2 file's GPUs through a FakeNvml whose fabric query is set by `setup`.
template <typename Setup>
HostTopology dgx2WithFabric(Setup setup) {
  testing::FakeNvml nvml(fileHost("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml"));
  setup(&nvml);
  HostTopology host;
  addNvmlGpus(&nvml, &host);
  EXPECT_EQ(host.gpuCount(), 16);
  return host;
}

// A GB200 tray's fabric as nvidia-smi -q printed it (leptonai/gpud PR 1108): ClusterUUID
// 9c6f5af3-53bf-49b5-a436-b66766c413c3, CliqueId 4026.
NvmlFabricInfo gb200Fabric() {
  NvmlFabricInfo f;
  f.result = kNvmlSuccess;
  f.cluster_uuid = {0x9c, 0x6f, 0x5a, 0xf3, 0x53, 0xbf, 0x49, 0xb5,
                    0xa4, 0x36, 0xb6, 0x67, 0x66, 0xc4, 0x13, 0xc3};
  f.clique_id = 4026;
  f.state = NvmlFabricState::Completed;
  return f;
}

void expectNoDomainNorWarning(const HostTopology& host) {
  for (const Gpu& gpu : host.gpus) EXPECT_EQ(gpu.nvlink_domain, "") << gpu.bus_id;
  EXPECT_TRUE(host.warnings.empty()) << host.warnings.front();
}

TEST(NvmlProbeTest, ADriverWithoutTheFabricCallsGivesNoDomainAndNoWarning) {
  expectNoDomainNorWarning(dgx2WithFabric(
      [](testing::FakeNvml* n) { n->setFabric(testing::FakeNvml::kAllDevices, std::nullopt); }));
}

TEST(NvmlProbeTest, AFabricNotSupportedGivesNoDomainAndNoWarning) {
  expectNoDomainNorWarning(dgx2WithFabric([](testing::FakeNvml*) {}));  // the call's result
  NvmlFabricInfo f = gb200Fabric();
  f.state = NvmlFabricState::NotSupported;  // a successful call saying so (GB200, gpud PR 1108)
  expectNoDomainNorWarning(dgx2WithFabric(
      [&](testing::FakeNvml* n) { n->setFabric(testing::FakeNvml::kAllDevices, f); }));
}

TEST(NvmlProbeTest, ACompletedFabricGivesEachGpuItsClusterAndClique) {
  NvmlFabricInfo other = gb200Fabric();
  other.clique_id = 7;
  HostTopology host = dgx2WithFabric([&](testing::FakeNvml* n) {
    n->setFabric(testing::FakeNvml::kAllDevices, gb200Fabric());
    n->setFabric(15, other);  // NVML device 15 is GPU 0: FakeNvml lists GPUs in reverse
  });
  EXPECT_EQ(host.gpus[0].nvlink_domain, "9c6f5af353bf49b5a436b66766c413c3/7");
  for (int i = 1; i < 16; ++i) {
    EXPECT_EQ(host.gpus[i].nvlink_domain, "9c6f5af353bf49b5a436b66766c413c3/4026");
  }
  EXPECT_TRUE(host.warnings.empty());
}

TEST(NvmlProbeTest, AnUnfinishedOrFailedFabricQueryLeavesTheDomainEmptyWithAWarning) {
  NvmlFabricInfo in_progress = gb200Fabric();
  in_progress.state = NvmlFabricState::InProgress;
  NvmlFabricInfo failed;
  failed.result = 999;  // NVML_ERROR_UNKNOWN
  HostTopology host = dgx2WithFabric([&](testing::FakeNvml* n) {
    n->setFabric(testing::FakeNvml::kAllDevices, gb200Fabric());
    n->setFabric(15, in_progress);
    n->setFabric(0, failed);  // GPU 15
  });
  EXPECT_EQ(host.gpus[0].nvlink_domain, "");
  EXPECT_EQ(host.gpus[15].nvlink_domain, "");
  EXPECT_EQ(host.gpus[1].nvlink_domain, "9c6f5af353bf49b5a436b66766c413c3/4026");
  ASSERT_EQ(host.warnings.size(), 2u);
  EXPECT_EQ(host.warnings[0].rfind("probe:nvml failed: NVML device 15 (GPU 0, 0000:34:00.0): "
                                   "GPU fabric state: got 2 (in progress), expected 3 "
                                   "(completed); its NVLink domain is unknown",
                                   0),
            0u)
      << host.warnings[0];
  EXPECT_NE(host.warnings[1].find("NVML device 0 (GPU 15, 0000:e7:00.0): GPU fabric query: got "
                                  "NVML error 999"),
            std::string::npos)
      << host.warnings[1];
}

TEST(NvmlProbeTest, AZeroClusterUuidOrAFailedRegistrationIsNoDomain) {
  NvmlFabricInfo zero = gb200Fabric();
  zero.cluster_uuid = {};
  expectNoDomainNorWarning(dgx2WithFabric(
      [&](testing::FakeNvml* n) { n->setFabric(testing::FakeNvml::kAllDevices, zero); }));
  // Completed with an error status: what H100s without multi-node NVLink report
  // (meta-pytorch/torchcomms PR 936), so no warning either.
  NvmlFabricInfo failed = gb200Fabric();
  failed.status = 23;  // NVML_ERROR_INSUFFICIENT_RESOURCES
  expectNoDomainNorWarning(dgx2WithFabric(
      [&](testing::FakeNvml* n) { n->setFabric(testing::FakeNvml::kAllDevices, failed); }));
}

// The GB200 tray of sglang issue 11208 as `nvidia-smi topo -m` shows it: per GPU the CPUs and
// NUMA node of the Grace it hangs off (CPU Affinity, NUMA Affinity) and the NUMA node of its own
// memory (GPU NUMA ID). The file has no bus ids: each GPU gets its own PCI domain, as GB200's do.
HostTopology gb200File() {
  std::string path = testing::dataFile(
      "nvidia_smi_topo/PARTIAL_sglang11208_GB200_4xGPU_NV18_6xNIC_gpuNUMAid.txt");
  HostTopology file = readNvidiaSmi(testing::slurp(path), path);
  for (Gpu& gpu : file.gpus) {
    char bus_id[16];
    std::snprintf(bus_id, sizeof(bus_id), "%04x:01:00.0", 8 + gpu.index);
    gpu.bus_id = bus_id;
  }
  return file;
}

// What the probe holds before NVML on that tray: the file's Grace nodes with their CPUs and, with
// `memory_nodes_listed`, a node without CPUs per GPU memory as /sys lists them (hwloc leaves them
// out where this process's cpuset does), each a CPU node of the graph (as without hwloc). With
// `pci_tree`, each GPU's PCI function sits under the node of its NUMA Affinity, as hwloc's PCI
// tree places it.
HostTopology gb200BeforeNvml(const HostTopology& file, bool pci_tree, bool memory_nodes_listed) {
  HostTopology host;
  host.numa_nodes = file.numa_nodes;
  for (const Gpu& gpu : file.gpus) {
    if (memory_nodes_listed && gpu.memory_numa_node >= 0) {
      host.numa_nodes.push_back({gpu.memory_numa_node, ""});
    }
  }
  std::sort(host.numa_nodes.begin(), host.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  for (const NumaNode& numa : host.numa_nodes) host.graph.addNode(makeCpuNode(numa.id));
  for (const Gpu& gpu : file.gpus) {
    if (!pci_tree || gpu.numa_node < 0) continue;
    Node n;
    n.kind = NodeKind::Gpu;
    n.id = gpu.bus_id;
    n.numa_node = gpu.numa_node;
    int node = host.graph.addNode(n);
    int cpu = host.graph.findNode(NodeKind::Cpu, makeCpuNode(gpu.numa_node).id);
    host.graph.addLink({cpu, node, LinkKind::Pci, 0, 1.0, 1.0});
  }
  return host;
}

// NVML's answers for the tray (its NUMA query naming each GPU's memory node) added to the host.
HostTopology probeGb200(bool cpu_affinity_call, bool pci_tree, bool memory_nodes_listed = true) {
  HostTopology file = gb200File();
  testing::FakeNvml nvml(file);
  if (!cpu_affinity_call) nvml.withoutCpuAffinity();
  HostTopology host = gb200BeforeNvml(file, pci_tree, memory_nodes_listed);
  addNvmlGpus(&nvml, &host);
  EXPECT_EQ(host.gpuCount(), file.gpuCount());
  return host;
}

const Gpu& gpuWithBus(const HostTopology& host, const std::string& bus_id) {
  auto it = std::find_if(host.gpus.begin(), host.gpus.end(),
                         [&](const Gpu& g) { return g.bus_id == bus_id; });
  if (it == host.gpus.end()) throw std::runtime_error("no GPU " + bus_id);
  return *it;
}

// The NUMA index of the CPU node the GPU's PCI link ends at, -1 for none.
int pciParentNuma(const HostTopology& host, const std::string& bus_id) {
  int gpu = host.graph.findNode(NodeKind::Gpu, bus_id);
  for (const Link& link : host.graph.links) {
    if (link.kind != LinkKind::Pci || (link.a != gpu && link.b != gpu)) continue;
    const Node& other = host.graph.nodes[link.a == gpu ? link.b : link.a];
    if (other.kind == NodeKind::Cpu) return other.index;
  }
  return -1;
}

// The file's GPUs with a row (the fourth's is missing): those NVML gives a NUMA node for.
std::vector<Gpu> gb200Rows() {
  std::vector<Gpu> rows;
  for (const Gpu& gpu : gb200File().gpus) {
    if (gpu.memory_numa_node >= 0) rows.push_back(gpu);
  }
  EXPECT_EQ(rows.size(), 3u);
  return rows;
}

TEST(NvmlProbeTest, Gb200GpuWhoseNvmlNodeIsItsMemoryGetsTheGraceOfItsCpuAffinity) {
  for (bool memory_nodes_listed : {true, false}) {
    HostTopology host = probeGb200(true, false, memory_nodes_listed);
    for (const Gpu& want : gb200Rows()) {
      std::string where = want.bus_id + (memory_nodes_listed ? "" : ", memory nodes unlisted");
      const Gpu& got = gpuWithBus(host, want.bus_id);
      EXPECT_EQ(got.numa_node, want.numa_node) << where;  // NUMA Affinity's first node
      EXPECT_EQ(got.cpu_affinity, want.cpu_affinity) << where;
      EXPECT_EQ(got.memory_numa_node, want.memory_numa_node) << where;
      EXPECT_EQ(pciParentNuma(host, want.bus_id), want.numa_node) << where;
    }
    EXPECT_TRUE(host.warnings.empty());
  }
}

TEST(NvmlProbeTest, Gb200WithoutTheCpuAffinityCallTakesThePciTreesNodeElseNone) {
  HostTopology tree = probeGb200(false, true);
  HostTopology bare = probeGb200(false, false);
  for (const Gpu& want : gb200Rows()) {
    const Gpu& got = gpuWithBus(tree, want.bus_id);
    EXPECT_EQ(got.numa_node, want.numa_node) << want.bus_id;
    EXPECT_EQ(got.cpu_affinity, want.cpu_affinity) << want.bus_id;
    EXPECT_EQ(got.memory_numa_node, want.memory_numa_node) << want.bus_id;
    // Nothing says which Grace: unknown, left to sysfs by the probe, never the memory's node.
    const Gpu& unknown = gpuWithBus(bare, want.bus_id);
    EXPECT_EQ(unknown.numa_node, -1) << want.bus_id;
    EXPECT_EQ(unknown.cpu_affinity, "") << want.bus_id;
    EXPECT_EQ(unknown.memory_numa_node, want.memory_numa_node) << want.bus_id;
  }
}

TEST(NvmlProbeTest, AnX86GpuKeepsTheNvmlNodeWithItsCpus) {
  HostTopology file = fileHost("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  testing::FakeNvml nvml(file);
  HostTopology host = file;  // the probe's base: hwloc's nodes and PCI tree, GPUs from NVML
  host.gpus.clear();
  addNvmlGpus(&nvml, &host);
  ASSERT_EQ(host.gpuCount(), file.gpuCount());
  std::set<int> nodes;
  for (const Gpu& want : file.gpus) {
    const Gpu& got = gpuWithBus(host, want.bus_id);
    const NumaNode* numa = nullptr;
    for (const NumaNode& n : file.numa_nodes) {
      if (n.id == want.numa_node) numa = &n;
    }
    ASSERT_NE(numa, nullptr) << want.bus_id;
    ASSERT_NE(numa->cpus, "") << want.bus_id;
    EXPECT_EQ(got.numa_node, want.numa_node) << want.bus_id;
    EXPECT_EQ(got.cpu_affinity, numa->cpus) << want.bus_id;
    EXPECT_EQ(got.memory_numa_node, -1) << want.bus_id;
    nodes.insert(got.numa_node);
  }
  EXPECT_EQ(nodes.size(), 2u);  // both sockets have GPUs
}

TEST(NvmlProbeTest, MissingLibraryIsUnavailableWithAReasonAndAddsNothing) {
  std::unique_ptr<NvmlApi> nvml = loadNvml("libtorch-topo-no-such-nvml.so.1");
  EXPECT_FALSE(nvml->available());
  EXPECT_NE(nvml->unavailableReason().find("libtorch-topo-no-such-nvml.so.1"), std::string::npos);
  EXPECT_EQ(nvml->deviceCount(), 0);
  std::string bus;
  EXPECT_FALSE(nvml->pciBusId(0, &bus));
  NvmlFabricInfo fabric;
  EXPECT_FALSE(nvml->gpuFabric(0, &fabric));
  HostTopology host;
  addNvmlGpus(nvml.get(), &host);
  EXPECT_EQ(host.gpuCount(), 0);
  EXPECT_TRUE(host.graph.nodes.empty());
}

}  // namespace
}  // namespace torch_topo::topo
