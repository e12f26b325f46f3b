// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/probe: a fake sysfs tree, hwloc and NVML answering from real files, and the
// live probe of this machine checked against /sys.
#include "topo/probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fake_apis.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"

namespace torch_topo::topo {
namespace {

namespace fs = std::filesystem;

// A sysfs tree with two NUMA nodes, one Ethernet port and one InfiniBand HCA on NUMA node 1.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/torch_topo_sysfs_XXXXXX";
    root_ = mkdtemp(tmpl);
    write("devices/system/node/node0/cpulist", "0-3\n");
    write("devices/system/node/node1/cpulist", "4-7\n");
    write("devices/system/node/online", "0-1\n");
    write("class/net/lo/speed", "");
    write("class/net/eth0/speed", "25000\n");
    std::string hca = "devices/pci0000:3a/0000:3b:00.0";
    write(hca + "/numa_node", "1\n");
    write("class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)\n");
    fs::create_directory_symlink(root_ + "/" + hca, root_ + "/class/infiniband/mlx5_0/device");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << text;
  }
  std::string root_;
};

TEST_F(FakeSysfs, WithoutHwlocOrNvmlReportsNumaAndNicsAndZeroGpus) {
  testing::AbsentNvml nvml;
  HostTopology host = probeHost(nullptr, &nvml, root_);
  EXPECT_EQ(host.gpuCount(), 0);
  ASSERT_EQ(host.numa_nodes.size(), 2u);
  EXPECT_EQ(host.numa_nodes[1].cpus, "4-7");
  ASSERT_EQ(host.nics.size(), 2u);  // eth0, mlx5_0; lo is not a NIC
  EXPECT_EQ(host.nics[0].name, "eth0");
  EXPECT_DOUBLE_EQ(host.nics[0].speed_gbps, 25.0);
  EXPECT_EQ(host.nics[0].bus_id, "");
  EXPECT_EQ(host.nics[1].name, "mlx5_0");
  EXPECT_DOUBLE_EQ(host.nics[1].speed_gbps, 200.0);
  EXPECT_EQ(host.nics[1].bus_id, "0000:3b:00.0");
  EXPECT_EQ(host.nics[1].numa_node, 1);
  EXPECT_EQ(host.source, "probe:sysfs");
  ASSERT_GE(host.warnings.size(), 2u);
  EXPECT_NE(host.warnings[0].find("hwloc unavailable"), std::string::npos);
  EXPECT_NE(host.warnings[1].find("zero GPUs"), std::string::npos);
  EXPECT_FALSE(host.hostname.empty());
}

TEST_F(FakeSysfs, HwlocAndNvmlFromTheDgx2FileGiveItsGpusAndPaths) {
  std::string path = testing::dataFile("hwloc/hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  testing::FileHwloc hwloc(path);
  testing::FakeNvml nvml(readHwlocXml(testing::slurp(path), path));
  HostTopology host = probeHost(&hwloc, &nvml, root_);
  ASSERT_EQ(host.gpuCount(), 16);
  EXPECT_EQ(host.source, "probe:hwloc+nvml");
  EXPECT_EQ(host.gpus[9].numa_node, 1);
  EXPECT_EQ(host.gpus[9].cpu_affinity, "24-25");
  ASSERT_EQ(host.gpu_paths.size(), 256u);
  EXPECT_EQ(host.path(0, 8).cls, PathClass::NV);  // across boards through the switch fabric
  EXPECT_EQ(host.path(0, 8).nvlinks, 6);
  EXPECT_EQ(host.path(3, 3).cls, PathClass::X);
  EXPECT_EQ(host.nics.size(), 2u);
}

TEST_F(FakeSysfs, HwlocGpusWithoutNvmlAreDroppedWithAWarning) {
  testing::FileHwloc hwloc(testing::dataFile("hwloc/hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml"));
  testing::AbsentNvml nvml;
  HostTopology host = probeHost(&hwloc, &nvml, root_);
  EXPECT_EQ(host.gpuCount(), 0);
  EXPECT_TRUE(host.graph.nodesOfKind(NodeKind::Gpu).empty());
  EXPECT_EQ(host.numa_nodes.size(), 2u);
  bool warned = false;
  for (const std::string& w : host.warnings) warned |= w.find("hwloc saw 16") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(FakeSysfs, RequiredGpusWithoutNvmlNameTheFix) {
  testing::AbsentNvml nvml;
  try {
    probeHost(nullptr, &nvml, root_, /*require_gpus=*/true);
    FAIL() << "no error without GPUs";
  } catch (const Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("TORCH_TOPO_FILE"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not found (fake)"), std::string::npos);
  }
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
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    if (entry.path().filename() != "lo") names.insert(entry.path().filename());
  }
  std::set<std::string> probed;
  for (const Nic& nic : host.nics) probed.insert(nic.name);
  for (const std::string& name : names) EXPECT_TRUE(probed.count(name)) << name;
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  EXPECT_EQ(host.hostname, hostname);
  EXPECT_EQ(host.gpu_paths.size(), host.gpus.size() * host.gpus.size());
}

}  // namespace
}  // namespace torch_topo::topo
