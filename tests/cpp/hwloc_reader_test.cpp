// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/hwloc_reader against the real hwloc XML files in tests/data/hwloc. Expected
// counts, bus ids and cpulists were read from the files by hand.
#include "topo/hwloc_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "test_data.h"
#include "topo/error.h"
#include "topo/nccl_xml.h"

namespace torch_topo::topo {
namespace {

std::string dataPath(const std::string& name) {
  return std::string(TORCH_TOPO_TEST_DATA) + "/hwloc/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

HostTopology readData(const std::string& name) {
  std::string path = dataPath(name);
  return readHwlocXml(slurp(path), path);
}

int countLinks(const HostTopology& host, LinkKind kind, int lanes) {
  int n = 0;
  for (const Link& link : host.graph.links) n += link.kind == kind && link.lanes == lanes;
  return n;
}

TEST(HwlocReaderTest, Dgx2Has16V100And12NvSwitchesOnTwoNumaNodes) {
  HostTopology host = readData("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  ASSERT_EQ(host.gpuCount(), 16);
  EXPECT_EQ(host.graph.nodesOfKind(NodeKind::NvSwitch).size(), 12u);
  ASSERT_EQ(host.numa_nodes.size(), 2u);
  EXPECT_EQ(host.numa_nodes[0].cpus, "0-1");    // cpuset 0x00000003
  EXPECT_EQ(host.numa_nodes[1].cpus, "24-25");  // cpuset 0x03000000
  EXPECT_EQ(host.gpus[0].bus_id, "0000:34:00.0");
  EXPECT_EQ(host.gpus[1].bus_id, "0000:36:00.0");
  EXPECT_EQ(host.gpus[15].bus_id, "0000:e7:00.0");
  EXPECT_EQ(host.gpus[0].name, "Tesla V100-SXM3-32GB-H");
  EXPECT_EQ(host.gpus[0].sm, 70);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(host.gpus[i].numa_node, i < 8 ? 0 : 1) << i;
  EXPECT_EQ(host.gpus[9].cpu_affinity, "24-25");
  // Each V100 has 6 links of 25000 MB/s to the switches of its board; the switches form one
  // fabric, so each GPU gets one 6-lane NVLink edge.
  EXPECT_EQ(countLinks(host, LinkKind::NvLink, 6), 16);
  EXPECT_EQ(countLinks(host, LinkKind::NvLink, 1), 0);
  EXPECT_TRUE(host.nics.empty());
  EXPECT_EQ(host.graph.nodesOfKind(NodeKind::Cpu).size(), 2u);
}

TEST(HwlocReaderTest, Dgx2PcieTreeFoldsSwitchPorts) {
  HostTopology host = readData("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  // GPU0 (34:00.0) and GPU1 (36:00.0) sit behind downstream ports 33:00.0 and 33:10.0 of the
  // switch whose upstream port is 32:00.0: both hang from that one PciSwitch node.
  int gpu0 = host.graph.findNode(NodeKind::Gpu, "0000:34:00.0");
  int gpu1 = host.graph.findNode(NodeKind::Gpu, "0000:36:00.0");
  int sw = host.graph.findNode(NodeKind::PciSwitch, "0000:32:00.0");
  ASSERT_GE(gpu0, 0);
  ASSERT_GE(sw, 0);
  EXPECT_EQ(host.graph.findNode(NodeKind::PciSwitch, "0000:33:00.0"), -1);
  EXPECT_EQ(host.graph.findNode(NodeKind::PciSwitch, "0000:2b:00.0"), -1);  // CPU root port
  int parents = 0;
  for (const Link& link : host.graph.links) {
    if (link.kind != LinkKind::Pci) continue;
    if ((link.a == sw && (link.b == gpu0 || link.b == gpu1))) ++parents;
  }
  EXPECT_EQ(parents, 2);
}

TEST(HwlocReaderTest, Power8HasNvlinkPairsAndCpuLinks) {
  HostTopology host = readData("hwloc_power8_gpu_nvlink_distances.xml");
  ASSERT_EQ(host.gpuCount(), 4);
  EXPECT_EQ(host.hostname, "drac-12.grenoble.grid5000.fr");
  ASSERT_EQ(host.numa_nodes.size(), 2u);
  EXPECT_EQ(host.numa_nodes[0].cpus, "0-1,8-9,16-17,24-25");         // 0x03030303
  EXPECT_EQ(host.numa_nodes[1].cpus, "80-81,88-89,96-97,104-105");   // 0x00000303,0x03030000,,0x0
  EXPECT_EQ(host.gpus[0].bus_id, "0002:01:00.0");
  EXPECT_EQ(host.gpus[3].bus_id, "000b:01:00.0");
  EXPECT_EQ(host.gpus[2].numa_node, 1);
  EXPECT_EQ(host.gpus[0].sm, 60);
  // 40000 MB/s = 2 NVLink1 lanes: GPU0-GPU1, GPU2-GPU3 and each GPU to its POWER8 package.
  EXPECT_EQ(countLinks(host, LinkKind::NvLink, 2), 6);
  int gpu0 = host.graph.findNode(NodeKind::Gpu, "0002:01:00.0");
  int gpu1 = host.graph.findNode(NodeKind::Gpu, "0003:01:00.0");
  int cpu0 = host.graph.findNode(NodeKind::Cpu, "numa0");
  bool pair = false, to_cpu = false;
  for (const Link& link : host.graph.links) {
    if (link.kind != LinkKind::NvLink) continue;
    pair |= (link.a == gpu0 && link.b == gpu1) || (link.a == gpu1 && link.b == gpu0);
    to_cpu |= (link.a == gpu0 && link.b == cpu0) || (link.a == cpu0 && link.b == gpu0);
  }
  EXPECT_TRUE(pair);
  EXPECT_TRUE(to_cpu);
}

TEST(HwlocReaderTest, Gb10HasNoPciGpusAndOneNode) {
  HostTopology host = readData("hwloc_nvidia_DGX-GB10.xml");
  EXPECT_EQ(host.gpuCount(), 0);
  ASSERT_EQ(host.numa_nodes.size(), 1u);
  EXPECT_EQ(host.numa_nodes[0].cpus, "0-19");  // cpuset 0x000fffff
  EXPECT_EQ(host.hostname, "cfarm107");
}

TEST(HwlocReaderTest, GpuPathsAreFilledByThePathsStage) {
  HostTopology host = readData("hwloc_power8_gpu_nvlink_distances.xml");
  ASSERT_EQ(host.gpu_paths.size(), 16u);
  EXPECT_EQ(host.path(0, 1).cls, PathClass::NV);
  EXPECT_EQ(host.path(0, 1).nvlinks, 2);
  EXPECT_EQ(host.path(0, 0).cls, PathClass::X);
}

TEST(HwlocReaderTest, LstopoConsoleTextIsRefusedWithTheFix) {
  std::string path = dataPath("lstopo_power9_AC922_gpu_numanodes.console.txt");
  try {
    readHwlocXml(slurp(path), path);
    FAIL() << "console text was accepted";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("lstopo console output is not supported"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lstopo FILE.xml"), std::string::npos);
    EXPECT_EQ(e.line(), 1);
  }
}

TEST(HwlocReaderTest, MalformedInputNamesFileAndLine) {
  std::string good = slurp(dataPath("hwloc_power8_gpu_nvlink_distances.xml"));
  try {
    readHwlocXml(good.substr(0, good.size() / 2), "half.xml");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("half.xml:", 0), 0u) << e.what();
    EXPECT_GT(e.line(), 1);
  }
  std::string bad = good;
  bad.replace(bad.find("0302 [10de:15f9]"), 16, "03zz [10de:15f9]");
  EXPECT_THROW(readHwlocXml(bad, "bad.xml"), ParseError);
  std::string matrix = good;
  matrix.replace(matrix.find("0 0 40000 40000 0 1000000"), 25, "0 0 40000 40000");
  EXPECT_THROW(readHwlocXml(matrix, "matrix.xml"), ParseError);
  EXPECT_THROW(readHwlocXml("<nccl_topo/>", "nccl.xml"), ParseError);
}

std::string parseErrorOf(const std::string& text) {
  return testing::parseErrorOf([&] { readHwlocXml(text, "h200.xml"); });
}

TEST(HwlocReaderTest, BadNumbersAreParseErrorsAtTheirObject) {
  const std::string good = slurp(dataPath("hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml"));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  // Columns point at the element name (one past its '<'). A bad nodeset was an
  // InvalidArgument without a line (found by fuzzing the hwloc files).
  EXPECT_EQ(parseErrorOf(with("nodeset=\"0x00000001\"", "nodeset=\"0Rx00000001\"")),
            "h200.xml:4:4: nodeset: bad hwloc bitmap word: got '0Rx00000001' in '0Rx00000001', "
            "expected 0x followed by up to 8 hex digits");
  EXPECT_EQ(parseErrorOf(with("0180 [1af4:1042]", "0180 [1af4:10420]")),
            "h200.xml:222:8: bad pci_type: got '0180 [1af4:10420] [1af4:1042] 01', expected e.g. "
            "'0302 [10de:1db8] [10de:131d] a1 00'");
  EXPECT_EQ(parseErrorOf(with("pci_link_speed=\"63.015385\"", "pci_link_speed=\"63,015385\"")),
            "h200.xml:241:8: bad pci_link_speed: got '63,015385', expected GB/s between 0 and "
            "10000");
  EXPECT_EQ(parseErrorOf(with("osdev_type=\"2\"", "osdev_type=\"2x\"")),
            "h200.xml:237:10: bad osdev_type: got '2x', expected an unsigned 32-bit integer");
  EXPECT_EQ(parseErrorOf(with("\"NUMANode\" os_index=\"0\"", "\"NUMANode\" os_index=\"+0\"")),
            "h200.xml:20:8: bad NUMANode os_index: got '+0', expected 0..4095");
}

// A repeated object in the NVLink matrix took the second's rows for the first's: GPU 1 lost
// every NVLink (NV6 to all peers read as PCIe) without a warning.
TEST(HwlocReaderTest, NvlinkMatrixObjectGivenTwiceIsRefused) {
  std::string text = slurp(dataPath("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml"));
  const size_t at = text.find("OSDev:803 ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 9, "OSDev:802");
  const size_t line = 1 + std::count(text.begin(), text.begin() + at, '\n');
  const std::string what = parseErrorOf(text);
  EXPECT_EQ(what.rfind("h200.xml:" + std::to_string(line) + ":", 0), 0u) << what;
  EXPECT_NE(what.find("NVLinkBandwidth object OSDev:802 appears twice in <indexes>"),
            std::string::npos)
      << what;
}

// Two GPUs under one bus id were read as one device seen twice (an X path between GPU 0 and 1);
// the error now points at the second device's object.
TEST(HwlocReaderTest, DuplicateGpuBusIdIsAParseErrorAtTheSecondDevice) {
  const std::string path = dataPath("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  const HostTopology host = readData("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  ASSERT_GE(host.gpuCount(), 2);
  const std::string a = "pci_busid=\"" + host.gpus[0].bus_id + "\"";
  const std::string b = "pci_busid=\"" + host.gpus[1].bus_id + "\"";
  std::string text = slurp(path);
  const size_t at = text.find(a);
  ASSERT_NE(at, std::string::npos);
  text.replace(at, a.size(), b);
  const size_t first = text.find(b);
  const size_t second = text.find(b, first + 1);
  ASSERT_NE(second, std::string::npos);
  const size_t line = 1 + std::count(text.begin(), text.begin() + second, '\n');
  const std::string what = parseErrorOf(text);
  EXPECT_EQ(what.rfind("h200.xml:" + std::to_string(line) + ":", 0), 0u) << what;
  EXPECT_NE(what.find("pci_busid " + host.gpus[1].bus_id + " appears twice"), std::string::npos)
      << what;
}

/// `text` with every `from` replaced by `to`, each of them found.
std::string replacedEach(std::string text,
                         const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
  }
  return text;
}

TEST(HwlocReaderTest, MemoryOnlyNodesOfAPackageLeaveItsIoOnTheNodeOfItsCpus) {
  // A persistent-memory (DAX) or CXL node hangs off its package with the package's cpuset:
  // the package's nodeset then names two nodes, and its GPUs were read as on no node.
  const std::string path = dataPath("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  const HostTopology plain = readData("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  auto memoryOnly = [](int os, const std::string& cpuset, const std::string& nodeset) {
    return "\n      <object type=\"NUMANode\" os_index=\"" + std::to_string(os) + "\" cpuset=\"" +
           cpuset + "\" complete_cpuset=\"" + cpuset + "\" nodeset=\"" + nodeset +
           "\" complete_nodeset=\"" + nodeset + "\" gp_index=\"90" + std::to_string(os) +
           "\" local_memory=\"268435456000\"><info name=\"DAXDevice\" value=\"dax" +
           std::to_string(os) + ".0\"/></object>";
  };
  const std::string node0 = "gp_index=\"294\" id=\"obj294\" local_memory=\"810234351616\"/>";
  const std::string node1 = "gp_index=\"295\" id=\"obj295\" local_memory=\"811737923584\"/>";
  const std::string text = replacedEach(
      slurp(path),
      {{"nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" allowed_nodeset=\"0x00000003\"",
        "nodeset=\"0x0000000f\" complete_nodeset=\"0x0000000f\" allowed_nodeset=\"0x0000000f\""},
       {"nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"3\"",
        "nodeset=\"0x00000005\" complete_nodeset=\"0x00000005\" gp_index=\"3\""},
       {"nodeset=\"0x00000002\" complete_nodeset=\"0x00000002\" gp_index=\"125\"",
        "nodeset=\"0x0000000a\" complete_nodeset=\"0x0000000a\" gp_index=\"125\""},
       {node0, node0 + memoryOnly(2, "0x00000003", "0x00000004")},
       {node1, node1 + memoryOnly(3, "0x03000000", "0x00000008")}});
  const HostTopology h = readHwlocXml(text, path);
  ASSERT_EQ(h.numa_nodes.size(), 4u);
  ASSERT_EQ(h.gpuCount(), plain.gpuCount());
  for (int i = 0; i < h.gpuCount(); ++i) {
    EXPECT_EQ(h.gpus[i].numa_node, plain.gpus[i].numa_node) << i;
    EXPECT_EQ(h.gpus[i].cpu_affinity, plain.gpus[i].cpu_affinity) << i;
    for (int j = 0; j < h.gpuCount(); ++j) {
      EXPECT_EQ(h.path(i, j).cls, plain.path(i, j).cls) << i << "," << j;
      EXPECT_EQ(h.path(i, j).bandwidth_gbps, plain.path(i, j).bandwidth_gbps) << i << "," << j;
    }
  }
}

TEST(HwlocReaderTest, NcclXmlWrittenFromHwlocKeepsTheCpuThatPricesTheSocketLink) {
  // NCCL prices the link between sockets by the <cpu>'s arch, vendor and model: written
  // without them, an AMD host read back at Intel's rate.
  const std::string path = dataPath("hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml");
  for (const std::string vendor : {"GenuineIntel", "AuthenticAMD"}) {
    SCOPED_TRACE(vendor);
    const HostTopology h = readHwlocXml(
        replacedEach(slurp(path), {{"value=\"GenuineIntel\"", "value=\"" + vendor + "\""}}), path);
    const HostTopology back = readNcclXml(writeNcclXml(h), "written.xml");
    auto socketLink = [](const HostTopology& t) {
      for (const Link& l : t.graph.links)
        if (l.kind == LinkKind::Smp) return l.bandwidth_gbps;
      return 0.0;
    };
    ASSERT_GT(socketLink(h), 0.0);
    EXPECT_EQ(socketLink(back), socketLink(h));
    const Node& cpu = back.graph.nodes[back.graph.nodesOfKind(NodeKind::Cpu)[0]];
    EXPECT_EQ(findAttr(cpu.attrs, "vendor", ""), vendor);
    EXPECT_EQ(findAttr(cpu.attrs, "modelid", ""), "85");
  }
}

TEST(HwlocReaderTest, SmFromGpuNamePrefersLongerFamilies) {
  EXPECT_EQ(smFromGpuName("NVIDIA A100-SXM4-80GB"), 80);
  EXPECT_EQ(smFromGpuName("NVIDIA A10G"), 86);
  EXPECT_EQ(smFromGpuName("NVIDIA GH200 480GB"), 90);
  EXPECT_EQ(smFromGpuName("NVIDIA RTX 5000 Ada Generation"), 89);
  EXPECT_EQ(smFromGpuName("NVIDIA GeForce RTX 5090"), 120);
  EXPECT_EQ(smFromGpuName("NVIDIA GB300"), 103);
  EXPECT_EQ(smFromGpuName("Matrox G200"), 0);
}

TEST(HwlocReaderTest, H200FirecrackerVmHasOneGpuAndEth0BehindOneHostBridge) {
  // The live export on which the probe crashed: virtio devices "0180 [1af4:1042] ..." and GPU,
  // NIC and disks straight under one host bridge (bridge_pci 0000:[00-00]) of one NUMA node.
  HostTopology host = readData("hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml");
  ASSERT_EQ(host.gpuCount(), 1);
  EXPECT_EQ(host.gpus[0].bus_id, "0000:00:06.0");  // pci_type 0302 [10de:2335], line 241
  EXPECT_EQ(host.gpus[0].numa_node, 0);
  EXPECT_EQ(host.gpus[0].cpu_affinity, "0-15");  // cpuset 0x0000ffff
  ASSERT_EQ(host.numa_nodes.size(), 1u);
  EXPECT_TRUE(host.graph.nodesOfKind(NodeKind::PciSwitch).empty());
  ASSERT_EQ(host.nics.size(), 1u);  // the class 0180 disks vda and vdb are no NICs
  EXPECT_EQ(host.nics[0].name, "eth0");
  EXPECT_EQ(host.nics[0].bus_id, "0000:00:03.0");
  ASSERT_EQ(host.gpu_nic_paths.size(), 1u);
  EXPECT_EQ(host.gpu_nic_paths[0].cls, PathClass::PHB);
  // eth0's pci_link_speed="0.000000" (virtio reports none) does not make the path 0 GB/s.
  EXPECT_GT(host.gpu_nic_paths[0].bandwidth_gbps, 0.0);
}

TEST(HwlocReaderTest, InfinibandHcaOfSerialBusClassIsANic) {
  // hwloc's SL390s G7 export: 3 Tesla M2070 and a ConnectX-2 VPI HCA whose class is the
  // serial-bus InfiniBand 0c06 ("0c06 [15b3:6746]", line 93), with eth2, ib0 and mlx4_0.
  HostTopology host = readData("hwloc_HP-SL390sG7_3xTeslaM2070_ConnectX2-IB-class0c06.xml");
  ASSERT_EQ(host.gpuCount(), 3);  // the ATI ES1000 (0300 [1002:515e]) is no GPU
  ASSERT_EQ(host.nics.size(), 3u);
  EXPECT_EQ(host.nics[0].name, "eth0");
  EXPECT_EQ(host.nics[1].name, "eth1");
  EXPECT_EQ(host.nics[2].name, "mlx4_0");  // the RDMA device, as NCCL_IB_HCA names it
  EXPECT_EQ(host.nics[2].bus_id, "0000:05:00.0");
  EXPECT_EQ(host.nics[2].numa_node, 0);
  EXPECT_EQ(host.gpus[0].numa_node, 0);
  // GPU0 (06:00.0) and the HCA sit on two root ports of package 0's I/O hub.
  EXPECT_EQ(host.gpu_nic_paths[0 * 3 + 2].cls, PathClass::PHB);
  EXPECT_EQ(host.gpu_nic_paths[1 * 3 + 2].cls, PathClass::SYS);
}

}  // namespace
}  // namespace torch_topo::topo
