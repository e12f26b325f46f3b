// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/sysfs_probe on sysfs trees built the kernel's way: which interfaces are NICs,
// their PCI functions, speeds and NUMA nodes, and the NUMA readers' errors on bad trees.
#include "topo/sysfs_probe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "fake_apis.h"
#include "topo/error.h"

namespace torch_topo::topo {
namespace {

using testing::SysfsTree;

std::string errorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(SysfsProbeTest, VirtualInterfacesAreNotNicsAndOnePciFunctionIsOneNic) {
  SysfsTree sys;
  // The H200 Firecracker VM's interfaces (virtio eth0; ifb0/1 of the traffic shaper; lo), plus
  // the virtual kinds container hosts add, a bond over a physical port and its RDMA device.
  std::string virtio = sys.pciFunction("0000:00:03.0", "-1");
  sys.netdev("eth0", virtio + "/virtio2", "-1");
  for (const char* name : {"lo", "ifb0", "ifb1", "veth1a2b", "docker0", "br0", "virbr0", "cni0",
                           "flannel.1", "tap0", "tun0", "dummy0", "bond0"}) {
    sys.netdev(name, "", "10000");  // veth and bridges do report a speed: it must not count
  }
  std::string cx7 = sys.pciFunction("0000:3b:00.0", "1");
  sys.netdev("ens1f0np0", cx7, "400000");
  sys.rdma("mlx5_0", cx7, "400 Gb/sec (4X NDR)");
  std::vector<Nic> nics = readSysfsNics(sys.root());
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics[0].name, "eth0");
  EXPECT_EQ(nics[0].bus_id, "0000:00:03.0");  // the PCI function above virtio2
  EXPECT_EQ(nics[0].numa_node, -1);
  EXPECT_EQ(nics[0].speed_gbps, 0.0);  // virtio says -1: unknown
  EXPECT_EQ(nics[1].name, "mlx5_0");  // the RDMA device names the port, as in hwloc's reader
  EXPECT_EQ(nics[1].bus_id, "0000:3b:00.0");
  EXPECT_EQ(nics[1].numa_node, 1);
  EXPECT_DOUBLE_EQ(nics[1].speed_gbps, 400.0);
}

TEST(SysfsProbeTest, SpeedsInMbitPerSecondAndUnknownsAreZero) {
  SysfsTree sys;
  const std::vector<std::pair<std::string, double>> cases = {
      {"25000", 25.0}, {"100", 0.1}, {"-1", 0.0}, {"garbage", 0.0}, {"", 0.0}, {"0", 0.0}};
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string bus = "0000:0" + std::to_string(i) + ":00.0";
    sys.netdev("eth" + std::to_string(i), sys.pciFunction(bus, ""), cases[i].first);
  }
  // A speed that cannot be read at all (the kernel answers EINVAL while the link is down).
  std::string down = sys.pciFunction("0000:09:00.0", "0");
  sys.netdev("eth9", down, "");
  std::filesystem::create_directories(sys.path(down + "/net/eth9/speed"));
  // An RDMA device whose rate is unreadable keeps its netdev's speed.
  std::string roce = sys.pciFunction("0000:0a:00.0", "0");
  sys.netdev("ens10", roce, "100000");
  sys.rdma("rocep10s0", roce, "n/a");
  std::vector<Nic> nics = readSysfsNics(sys.root());
  ASSERT_EQ(nics.size(), cases.size() + 2);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_DOUBLE_EQ(nics[i].speed_gbps, cases[i].second) << "speed '" << cases[i].first << "'";
    EXPECT_EQ(nics[i].numa_node, -1);
  }
  EXPECT_EQ(nics[cases.size()].speed_gbps, 0.0);
  EXPECT_EQ(nics[cases.size()].numa_node, 0);
  EXPECT_EQ(nics[cases.size() + 1].name, "rocep10s0");
  EXPECT_DOUBLE_EQ(nics[cases.size() + 1].speed_gbps, 100.0);
}

TEST(SysfsProbeTest, UnlistableClassNetIsUnavailableAndMissingInfinibandIsNot) {
  SysfsTree sys;
  EXPECT_NE(errorOf([&] { readSysfsNics(sys.root() + "/nowhere"); })
                .find("nowhere/class/net: cannot be listed"),
            std::string::npos);
  EXPECT_THROW(readSysfsNics(sys.root() + "/nowhere"), Unavailable);
  sys.netdev("lo", "", "");
  EXPECT_TRUE(readSysfsNics(sys.root()).empty());
}

TEST(SysfsProbeTest, NumaNodesFromNodeDirectoriesElseTheOnlineCpus) {
  SysfsTree sys;
  sys.write("devices/system/cpu/online", "0-15\n");
  std::vector<NumaNode> one = readSysfsNumaNodes(sys.root());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].id, 0);
  EXPECT_EQ(one[0].cpus, "0-15");
  sys.write("devices/system/node/node1/cpulist", "8-15\n");
  sys.write("devices/system/node/node0/cpulist", "0-7\n");
  sys.write("devices/system/node/possible", "0-1\n");
  std::vector<NumaNode> two = readSysfsNumaNodes(sys.root());
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].id, 1);
  EXPECT_EQ(two[1].cpus, "8-15");
}

TEST(SysfsProbeTest, GarbageOrMissingCpuListsNameTheFile) {
  SysfsTree sys;
  EXPECT_NE(errorOf([&] { readSysfsNumaNodes(sys.root()); }).find("cpu/online: unreadable"),
            std::string::npos);
  sys.write("devices/system/node/node0/cpulist", "0-3,x\n");
  std::string what = errorOf([&] { readSysfsNumaNodes(sys.root()); });
  EXPECT_NE(what.find("node0/cpulist"), std::string::npos) << what;
}

TEST(SysfsProbeTest, PciNumaNodeAndBusIdShape) {
  SysfsTree sys;
  sys.pciFunction("0000:65:00.0", "3");
  sys.pciFunction("0000:66:00.0", "-1");
  sys.pciFunction("0000:67:00.0", "node");
  EXPECT_EQ(readSysfsPciNumaNode(sys.root(), "0000:65:00.0"), 3);
  EXPECT_EQ(readSysfsPciNumaNode(sys.root(), "0000:66:00.0"), -1);
  EXPECT_EQ(readSysfsPciNumaNode(sys.root(), "0000:67:00.0"), -1);
  EXPECT_EQ(readSysfsPciNumaNode(sys.root(), "0000:68:00.0"), -1);
  EXPECT_TRUE(isPciBusId("0000:00:03.0"));
  EXPECT_TRUE(isPciBusId("000b:ff:1f.7"));
  for (const char* bad : {"virtio2", "0000:00:03.8", "0000:00:03", "0000:0G:03.0", "0000:00:03.0 ",
                          "0000:AB:03.0", "pci0000:00"}) {
    EXPECT_FALSE(isPciBusId(bad)) << bad;
  }
  // hwloc's reader takes domains of up to 8 digits (VMD's 10000); sysfs names keep 4.
  EXPECT_TRUE(isPciBusId("10000:00:00.0", 8));
  EXPECT_FALSE(isPciBusId("10000:00:00.0"));
  EXPECT_FALSE(isPciBusId("100000000:00:00.0", 8));
}

}  // namespace
}  // namespace torch_topo::topo
