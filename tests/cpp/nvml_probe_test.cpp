// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nvml_probe: GPUs and NVLinks from an NVML whose answers come from real hwloc
// files (tests/data/hwloc), and the dlopen path on a machine without the driver.
#include "topo/nvml_probe.h"

#include <gtest/gtest.h>

#include "fake_apis.h"
#include "topo/hwloc_reader.h"

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

TEST(NvmlProbeTest, MissingLibraryIsUnavailableWithAReasonAndAddsNothing) {
  std::unique_ptr<NvmlApi> nvml = loadNvml("libtorch-topo-no-such-nvml.so.1");
  EXPECT_FALSE(nvml->available());
  EXPECT_NE(nvml->unavailableReason().find("libtorch-topo-no-such-nvml.so.1"), std::string::npos);
  EXPECT_EQ(nvml->deviceCount(), 0);
  std::string bus;
  EXPECT_FALSE(nvml->pciBusId(0, &bus));
  HostTopology host;
  addNvmlGpus(nvml.get(), &host);
  EXPECT_EQ(host.gpuCount(), 0);
  EXPECT_TRUE(host.graph.nodes.empty());
}

}  // namespace
}  // namespace torch_topo::topo
