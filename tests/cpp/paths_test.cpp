// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/paths on a hand-built graph whose classes and numbers are known.
#include "topo/paths.h"

#include <gtest/gtest.h>

#include "topo/error.h"
#include "topo/link_tables.h"

namespace torch_topo::topo {
namespace {

// cpu0 -- sw0 -- sw1 -- gpu0, gpu1 ; sw0 -- sw2 -- gpu2 ; cpu0 -- gpu3 ; cpu1 -- gpu4
// gpu0/gpu1 through an NVSwitch fabric (6 and 4 lanes), gpu2-gpu3 a direct 2-lane bridge.
struct Fixture {
  Graph g;
  int cpu0, cpu1, sw0, sw1, sw2, gpu0, gpu1, gpu2, gpu3, gpu4, nvs, nic;
  Fixture() {
    cpu0 = g.addNode({NodeKind::Cpu, "numa0", "", 0, 0, {}});
    cpu1 = g.addNode({NodeKind::Cpu, "numa1", "", 1, 1, {}});
    sw0 = g.addNode({NodeKind::PciSwitch, "0000:10:00.0", "", 0, -1, {}});
    sw1 = g.addNode({NodeKind::PciSwitch, "0000:11:00.0", "", 0, -1, {}});
    sw2 = g.addNode({NodeKind::PciSwitch, "0000:12:00.0", "", 0, -1, {}});
    gpu0 = g.addNode({NodeKind::Gpu, "0000:20:00.0", "", 0, 0, {}});
    gpu1 = g.addNode({NodeKind::Gpu, "0000:21:00.0", "", 0, 1, {}});
    gpu2 = g.addNode({NodeKind::Gpu, "0000:22:00.0", "", 0, 2, {}});
    gpu3 = g.addNode({NodeKind::Gpu, "0000:23:00.0", "", 0, 3, {}});
    gpu4 = g.addNode({NodeKind::Gpu, "0000:90:00.0", "", 1, 4, {}});
    nvs = g.addNode({NodeKind::NvSwitch, "nvswitch", "", -1, -1, {}});
    nic = g.addNode({NodeKind::Nic, "0000:24:00.0", "", 0, 0, {}});
    g.addLink({cpu0, cpu1, LinkKind::Smp, 0, 10.0, 1.0});
    g.addLink({cpu0, sw0, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({sw0, sw1, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({sw1, gpu0, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({sw1, gpu1, LinkKind::Pci, 8, 12.0, 1.0});
    g.addLink({sw0, sw2, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({sw2, gpu2, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({sw2, nic, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({cpu0, gpu3, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({cpu1, gpu4, LinkKind::Pci, 16, 24.0, 1.0});
    g.addLink({gpu0, nvs, LinkKind::NvLink, 6, 120.0, 0.0});
    g.addLink({gpu1, nvs, LinkKind::NvLink, 4, 80.0, 0.0});
    g.addLink({gpu2, gpu3, LinkKind::NvLink, 2, 40.0, 0.0});
  }
};

TEST(PathsTest, ClassesFollowTheTree) {
  Fixture f;
  EXPECT_EQ(computePath(f.g, f.gpu0, f.gpu0).cls, PathClass::X);
  EXPECT_EQ(computePath(f.g, f.gpu2, f.nic).cls, PathClass::PIX);  // one switch between
  PathInfo pxb = computePath(f.g, f.gpu0, f.gpu2);                 // sw1 - sw0 - sw2
  EXPECT_EQ(pxb.cls, PathClass::PXB);
  EXPECT_DOUBLE_EQ(pxb.bandwidth_gbps, 24.0);
  EXPECT_DOUBLE_EQ(pxb.latency_us, 4.0);
  EXPECT_EQ(computePath(f.g, f.gpu0, f.gpu3).cls, PathClass::PHB);
  PathInfo sys = computePath(f.g, f.gpu1, f.gpu4);
  EXPECT_EQ(sys.cls, PathClass::SYS);
  EXPECT_DOUBLE_EQ(sys.bandwidth_gbps, 10.0);  // the SMP link is the bottleneck
  EXPECT_DOUBLE_EQ(sys.latency_us, 5.0);       // 4 PCIe hops + 1 SMP hop
}

TEST(PathsTest, NvlinkThroughTheFabricTakesTheNarrowerSide) {
  Fixture f;
  PathInfo nv = computePath(f.g, f.gpu0, f.gpu1);
  EXPECT_EQ(nv.cls, PathClass::NV);
  EXPECT_EQ(nv.nvlinks, 4);
  EXPECT_DOUBLE_EQ(nv.bandwidth_gbps, 80.0);
  EXPECT_DOUBLE_EQ(nv.latency_us, 2 * kNvlinkHopLatencyUs);
  PathInfo bridge = computePath(f.g, f.gpu3, f.gpu2);
  EXPECT_EQ(bridge.nvlinks, 2);
  EXPECT_DOUBLE_EQ(bridge.bandwidth_gbps, 40.0);
  EXPECT_DOUBLE_EQ(bridge.latency_us, kNvlinkHopLatencyUs);
}

TEST(PathsTest, ComputePathsFillsBothMatricesAndCapsNicsAtLineRate) {
  Fixture f;
  HostTopology host;
  host.graph = f.g;
  for (int i = 0; i < 5; ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.bus_id = host.graph.nodes[f.gpu0 + i].id;
    host.gpus.push_back(gpu);
  }
  host.nics.push_back({"mlx5_0", "0000:24:00.0", 0, 100.0, {}});
  computePaths(&host);
  ASSERT_EQ(host.gpu_paths.size(), 25u);
  EXPECT_EQ(host.path(0, 1).nvlinks, 4);
  EXPECT_EQ(host.path(1, 0).nvlinks, 4);
  ASSERT_EQ(host.gpu_nic_paths.size(), 5u);
  EXPECT_EQ(host.gpu_nic_paths[2].cls, PathClass::PIX);
  EXPECT_DOUBLE_EQ(host.gpu_nic_paths[2].bandwidth_gbps, 12.5);  // 100 Gbit/s
  host.gpus[0].bus_id = "0000:ff:00.0";
  EXPECT_THROW(computePaths(&host), InvalidArgument);
}

TEST(PathsTest, EstimatesFromClassesUseTheTables) {
  PathInfo nv{PathClass::NV, 18, 0, 0};
  estimatePathMetrics(&nv, 90);
  EXPECT_DOUBLE_EQ(nv.bandwidth_gbps, 18 * 20.6);
  PathInfo pix{PathClass::PIX, 0, 0, 0};
  estimatePathMetrics(&pix, 0);
  EXPECT_DOUBLE_EQ(pix.bandwidth_gbps, 24.0);
  PathInfo sys{PathClass::SYS, 0, 0, 0};
  estimatePathMetrics(&sys, 0);
  EXPECT_DOUBLE_EQ(sys.bandwidth_gbps, 10.0);
  EXPECT_GT(sys.latency_us, pix.latency_us);
}

}  // namespace
}  // namespace torch_topo::topo
