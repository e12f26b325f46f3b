// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nccl_xml: the variants of the real files, refusal of graph files, errors,
// and write -> read round trips of every XML input.
#include "topo/nccl_xml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "test_data.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/link_tables.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

using testing::dataFiles;
using testing::dataPath;
using testing::readText;

HostTopology readData(const std::string& name) {
  std::string path = dataPath("nccl_topo_xml/" + name);
  return readNcclXml(readText(path), path);
}

std::string parseError(const std::string& text) {
  return testing::parseErrorOf([&] { readNcclXml(text, "t.xml"); });
}

TEST(NcclXmlTest, NvswitchTargetsOfAnH200DumpGiveNv18) {
  HostTopology h = readData("PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml");
  ASSERT_EQ(h.gpuCount(), 3);
  EXPECT_EQ(h.path(0, 2).cls, PathClass::NV);
  EXPECT_EQ(h.path(0, 2).nvlinks, 18);  // 5 + 5 + 4 + 4 into 4 NVSwitches
  EXPECT_DOUBLE_EQ(h.path(0, 2).bandwidth_gbps, 18 * 20.6);
  EXPECT_EQ(h.gpu_nic_paths[0].cls, PathClass::PIX);
  EXPECT_DOUBLE_EQ(h.nics[0].speed_gbps, 400.0);
  EXPECT_NE(h.warnings[0].find("closing tags"), std::string::npos);
}

TEST(NcclXmlTest, ClassOnlyGpusUnderPlaceholderSwitches) {
  HostTopology h = readData("aws_p4d.24xlarge_8xA100_topo.xml");
  ASSERT_EQ(h.gpuCount(), 8);
  EXPECT_EQ(h.gpus[0].bus_id, "0000:10:1c.0");
  EXPECT_EQ(h.path(0, 1).cls, PathClass::PIX);
  EXPECT_DOUBLE_EQ(h.path(0, 1).bandwidth_gbps, 12.0);  // "8 GT/s" x16
  EXPECT_EQ(h.path(0, 2).cls, PathClass::PHB);
  EXPECT_EQ(h.path(0, 4).cls, PathClass::SYS);
  EXPECT_EQ(h.nics.size(), 4u);
}

TEST(NcclXmlTest, SelfNvlinkIsDroppedAndEmptyLinkSpeedIsGen3) {
  HostTopology h = readData("azure_ncv4_4xA100pcie_topo.xml");
  ASSERT_EQ(h.gpuCount(), 4);
  EXPECT_EQ(h.path(0, 1).nvlinks, 0);
  EXPECT_EQ(h.path(0, 1).cls, PathClass::SYS);
  EXPECT_DOUBLE_EQ(h.path(0, 1).bandwidth_gbps, 12.0);
  EXPECT_EQ(h.gpus[3].sm, 80);
  EXPECT_EQ(h.nics[0].name, "eth0");
}

TEST(NcclXmlTest, PlaceholderNvswitchOfAVm) {
  HostTopology h = readData("PARTIAL_ncclTests256_H200_VM_topo_dump_fragment.xml");
  ASSERT_EQ(h.gpuCount(), 1);
  int sw = h.graph.findNode(NodeKind::NvSwitch, "fffffff:ff:ff.0");
  ASSERT_GE(sw, 0);
  EXPECT_EQ(h.gpus[0].numa_node, -1);
}

// POWER hosts link GPUs to their CPU over NVLink; NCCL dumps such a link with tclass 0x068001
// and connects it to the GPU's own CPU. Reference: the hwloc reader's graph of a real POWER8
// host, written as NCCL XML with those CPU links added the way NCCL writes them.
TEST(NcclXmlTest, NvlinkToTheCpuJoinsTheGpusOwnCpu) {
  const std::string hw_path = dataPath("hwloc/hwloc_power8_gpu_nvlink_distances.xml");
  const HostTopology hw = readHwlocXml(readText(hw_path), hw_path);
  std::string xml = writeNcclXml(hw);
  int cpu_links = 0;
  for (const Link& l : hw.graph.links) {
    const Node& a = hw.graph.nodes[l.a];
    const Node& b = hw.graph.nodes[l.b];
    if (l.kind != LinkKind::NvLink) continue;
    if (a.kind != NodeKind::Cpu && b.kind != NodeKind::Cpu) continue;
    const Node& gpu = a.kind == NodeKind::Gpu ? a : b;
    const size_t at = xml.find("</gpu>", xml.find("busid=\"" + gpu.id + "\""));
    ASSERT_NE(at, std::string::npos) << gpu.id;
    // NCCL names the NPU's bus id as the target; any id not of a GPU stands for it here.
    xml.insert(at, "  <nvlink target=\"0007:00:00." + std::to_string(cpu_links) + "\" count=\"" +
                       std::to_string(l.lanes) + "\" tclass=\"0x068001\"/>\n      ");
    ++cpu_links;
  }
  ASSERT_GT(cpu_links, 0);
  const HostTopology h = readNcclXml(xml, "power8.xml");
  EXPECT_TRUE(h.graph.nodesOfKind(NodeKind::NvSwitch).empty());
  auto cpuLinks = [](const HostTopology& t) {
    std::multiset<std::tuple<int, std::string, int>> out;
    for (const Link& l : t.graph.links) {
      const Node& a = t.graph.nodes[l.a];
      const Node& b = t.graph.nodes[l.b];
      if (l.kind != LinkKind::NvLink) continue;
      if (a.kind == NodeKind::Cpu) out.insert({a.numa_node, b.id, l.lanes});
      if (b.kind == NodeKind::Cpu) out.insert({b.numa_node, a.id, l.lanes});
    }
    return out;
  };
  EXPECT_EQ(cpuLinks(h), cpuLinks(hw));
  ASSERT_EQ(h.gpuCount(), hw.gpuCount());
  for (int i = 0; i < h.gpuCount(); ++i) {
    for (int j = 0; j < h.gpuCount(); ++j) {
      EXPECT_EQ(h.path(i, j).cls, hw.path(i, j).cls) << i << "," << j;
      EXPECT_EQ(h.path(i, j).nvlinks, hw.path(i, j).nvlinks) << i << "," << j;
    }
  }
}

TEST(NcclXmlTest, GraphFileIsRefusedWithWhatItIs) {
  try {
    readData("azure_ncv4_4xA100pcie_graph.xml");
    FAIL() << "graph file accepted";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL graph file (NCCL_GRAPH_FILE"), std::string::npos);
    EXPECT_EQ(e.line(), 1);
  }
}

TEST(NcclXmlTest, ErrorsCarryLineAndColumn) {
  try {
    readNcclXml("<system version=\"1\">\n  <cpu numaid=\"x\"/>\n</system>\n", "t.xml");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()),
              "t.xml:2:3: <cpu> numaid: got 'x', expected an integer in [-1, 4095]");
  }
  EXPECT_THROW(readNcclXml("<system><cpu></system>", "t.xml"), ParseError);
  EXPECT_THROW(readNcclXml("<topology/>", "t.xml"), ParseError);
  EXPECT_THROW(readNcclXml("<system><cpu><pci busid=\"zz\"/></cpu></system>", "t.xml"), ParseError);
}

TEST(NcclXmlTest, NvidiaSmiSourcesCannotBeWritten) {
  HostTopology h;
  h.gpus.resize(2);
  EXPECT_THROW(writeNcclXml(h), InvalidArgument);
}

std::string comparable(HostTopology h) {
  h.source.clear();
  h.warnings.clear();
  return hostToJson(h, 1);
}

TEST(NcclXmlTest, H200FirecrackerVmDumpHasOneGpuAndAnEth0WithoutPciParent) {
  HostTopology h = readData("h200_1xGPU_firecracker-vm_nccl2.28.9_topo_dump.xml");
  ASSERT_EQ(h.gpuCount(), 1);
  EXPECT_EQ(h.gpus[0].bus_id, "0000:00:06.0");
  EXPECT_EQ(h.gpus[0].sm, 90);
  EXPECT_EQ(h.gpus[0].numa_node, -1);  // numaid="-1"
  ASSERT_EQ(h.nics.size(), 1u);
  EXPECT_EQ(h.nics[0].name, "eth0");
  EXPECT_EQ(h.nics[0].bus_id, "");
  EXPECT_DOUBLE_EQ(h.nics[0].speed_gbps, 10.0);  // speed="10000" Mbit/s
  ASSERT_EQ(h.gpu_nic_paths.size(), 1u);
  EXPECT_EQ(h.gpu_nic_paths[0].cls, PathClass::PHB);
  // link_width="0" is unknown, taken as x16 like NCCL does: 32 GT/s is Gen5.
  EXPECT_DOUBLE_EQ(h.graph.links[0].bandwidth_gbps, pcieGBps(5, 16));
  EXPECT_TRUE(h.warnings.empty());
}

TEST(NcclXmlTest, C2cOfAGraceGpuLinksItToItsCpu) {
  // DGX Spark (GB10) dump of NCCL 2.2x: the GPU's only link is <c2c bw="43125" count="8"/>;
  // NCCL's own log on that host reads "GPU/0 <-> CPU/0: C2C[345.0] GB/s".
  const std::string name = "nccl2202_DGX-Spark_GB10_1xGPU_c2c_wifi_topo_dump.xml";
  HostTopology h = readData(name);
  ASSERT_EQ(h.gpuCount(), 1);
  EXPECT_EQ(h.gpus[0].sm, 121);
  EXPECT_EQ(h.gpus[0].numa_node, -1);
  ASSERT_EQ(h.nics.size(), 2u);
  EXPECT_EQ(h.nics[1].name, "tailscale0");
  const int gpu = h.graph.findNode(NodeKind::Gpu, "000f:01:00.0");
  int c2c_links = 0;
  for (const Link& l : h.graph.links) {
    if (l.kind != LinkKind::C2C) continue;
    ++c2c_links;
    EXPECT_EQ(l.b, gpu);
    EXPECT_EQ(h.graph.nodes[l.a].kind, NodeKind::Cpu);
    EXPECT_EQ(l.lanes, 8);
    EXPECT_DOUBLE_EQ(l.bandwidth_gbps, 345.0);
  }
  EXPECT_EQ(c2c_links, 1);
  EXPECT_NE(writeNcclXml(h).find("<c2c bw=\"43125\" count=\"8\"/>"), std::string::npos);

  std::string text = readText(dataPath("nccl_topo_xml/" + name));
  const std::string c2c = "<c2c bw=\"43125\" count=\"8\"/>";
  text.replace(text.find(c2c), c2c.size(), "<c2c count=\"8\"/>");
  EXPECT_NE(parseError(text).find("t.xml:10:9: <c2c> has no bw attribute"), std::string::npos)
      << parseError(text);
}

// NCCL's reader requires an <nvlink>'s count; a default of one lane read a pair as slower.
TEST(NcclXmlTest, NvlinkNeedsItsCount) {
  std::string text = readText(
      dataPath("nccl_topo_xml/PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml"));
  const size_t nvlink = text.find("<nvlink ");
  ASSERT_NE(nvlink, std::string::npos);
  const size_t count = text.find(" count=\"", nvlink);
  text.erase(count, text.find('"', count + 8) + 1 - count);
  EXPECT_NE(parseError(text).find("<nvlink> has no count attribute, expected one"),
            std::string::npos)
      << parseError(text);
}

// The p5 file's <net> elements with the latency aws-ofi-nccl reports there (`value`).
std::string p5WithNetLatency(const std::string& value, int* nets) {
  std::string text = readText(dataPath("nccl_topo_xml/aws_p5.48xlarge_8xH100_topo_2026pr.xml"));
  const std::string from = "latency=\"0.0\"", to = "latency=\"" + value + "\"";
  *nets = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    ++*nets;
  }
  return text;
}

TEST(NcclXmlTest, NetLatencyIsReadKeptAndWritten) {
  int nets = 0;
  const HostTopology h = readNcclXml(p5WithNetLatency("75.000000", &nets), "p5.xml");
  ASSERT_GT(nets, 0);
  ASSERT_EQ(h.nics.size(), static_cast<size_t>(nets));
  for (const Nic& nic : h.nics) EXPECT_DOUBLE_EQ(nic.latency_us, 75.0) << nic.name;
  // Through the probe exchange's JSON and back to XML; JSON keeps the source's latency
  // attribute too, so it is dropped (a live probe's NICs have none) for the writer to
  // write the NIC's own.
  HostTopology j = hostFromJson(hostToJson(h), "p5.json");
  for (Nic& nic : j.nics) {
    EXPECT_DOUBLE_EQ(nic.latency_us, 75.0) << nic.name;
    nic.attrs.clear();
  }
  const HostTopology back = readNcclXml(writeNcclXml(j), "written.xml");
  for (const Nic& nic : back.nics) EXPECT_DOUBLE_EQ(nic.latency_us, 75.0) << nic.name;
}

// A NIC given its plugin's latency after it was read (the p5 file says latency="0.0") is written
// with that latency, not the file's stale attribute, as a NIC's speed is.
TEST(NcclXmlTest, WrittenNetLatencyIsTheNicsNotAStaleAttribute) {
  int nets = 0;
  HostTopology h = readNcclXml(p5WithNetLatency("0.0", &nets), "p5.xml");
  ASSERT_GT(nets, 0);
  for (Nic& nic : h.nics) {
    ASSERT_EQ(findAttr(nic.attrs, "latency", ""), "0.0") << nic.name;
    nic.latency_us = 35.5;
  }
  const std::string text = writeNcclXml(h);
  EXPECT_EQ(text.find("latency=\"0.0\""), std::string::npos) << text;
  const HostTopology back = readNcclXml(text, "written.xml");
  ASSERT_EQ(back.nics.size(), h.nics.size());
  for (const Nic& nic : back.nics) EXPECT_DOUBLE_EQ(nic.latency_us, 35.5) << nic.name;
}

TEST(NcclXmlTest, MalformedNetLatencyNamesItsLine) {
  for (const std::string bad : {"fast", "-1", "nan", "2e6"}) {
    int nets = 0;
    const std::string text = p5WithNetLatency(bad, &nets);
    const size_t at = text.find("latency=\"" + bad + "\"");
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
    try {
      readNcclXml(text, "t.xml");
      ADD_FAILURE() << "latency '" << bad << "' accepted";
    } catch (const ParseError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.line(), line) << what;
      EXPECT_NE(what.find("<net> latency: got '" + bad + "', expected us in [0, 1e6]"),
                std::string::npos)
          << what;
    }
  }
}

TEST(NcclXmlTest, ANicWithoutPciDeviceUnderEveryCpuIsOneNicReachedFromEach) {
  // As dumps of two-socket hosts over sockets have it (NCCL 2.27): eth0 under both <cpu>.
  auto dump = [](const std::string& second_speed) {
    std::string xml = "<system version=\"1\">\n";
    for (int s = 0; s < 2; ++s) {
      const std::string speed = s == 0 ? "10000" : second_speed;
      xml += "  <cpu numaid=\"" + std::to_string(s) + "\" affinity=\"0000000" + (s ? "c" : "3") +
             "\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n" +
             "    <pci busid=\"0000:" + (s ? "9" : "1") + "a:00.0\" class=\"0x030200\" " +
             "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n" + "      <gpu dev=\"" +
             std::to_string(s) + "\" sm=\"90\" rank=\"" + std::to_string(s) +
             "\" gdr=\"1\"/>\n    </pci>\n    <nic>\n" +
             "      <net name=\"eth0\" dev=\"0\" latency=\"0\" speed=\"" + speed +
             "\" port=\"0\" guid=\"0x0\" maxconn=\"65536\" gdr=\"0\"/>\n    </nic>\n  </cpu>\n";
    }
    return xml + "</system>\n";
  };
  const HostTopology h = readNcclXml(dump("10000"), "t.xml");
  ASSERT_EQ(h.gpuCount(), 2);
  ASSERT_EQ(h.nics.size(), 1u);
  EXPECT_EQ(h.nics[0].name, "eth0");
  EXPECT_EQ(h.nics[0].numa_node, -1);  // local to both sockets, to neither alone
  for (int g = 0; g < 2; ++g) EXPECT_EQ(h.gpu_nic_paths[g].cls, PathClass::PHB) << g;
  EXPECT_EQ(h.path(0, 1).cls, PathClass::SYS);
  ASSERT_EQ(h.warnings.size(), 1u);
  EXPECT_EQ(h.warnings[0],
            "NICs without a PCI device listed under several <cpu> (from line 15): eth0; each is "
            "one NIC, reached from every <cpu> that lists it");
  const std::string xml = writeNcclXml(h);
  const HostTopology again = readNcclXml(xml, "written.xml");
  EXPECT_EQ(comparable(h), comparable(again));
  EXPECT_EQ(writeNcclXml(again), xml);
  EXPECT_NE(parseError(dump("25000"))
                .find("t.xml:15:7: <net> name eth0 appears twice with different attributes"),
            std::string::npos)
      << parseError(dump("25000"));
}

TEST(NcclXmlTest, ADumpOfSeveralHostsSaysSo) {
  // NCCL's dump of an NVLink domain of GB300 trays: one <cpu> per host, each numaid 0.
  auto cpu = [](const std::string& hash, int rank) {
    return "  <cpu host_hash=\"" + hash +
           "\" numaid=\"0\" affinity=\"000000ff\" arch=\"arm64\">\n" +
           "    <pci busid=\"0008:06:00.0\" class=\"0x030200\" link_speed=\"64.0 GT/s PCIe\" " +
           "link_width=\"16\">\n      <gpu dev=\"0\" sm=\"103\" rank=\"" + std::to_string(rank) +
           "\" gdr=\"1\"/>\n    </pci>\n  </cpu>\n";
  };
  const std::string one = cpu("0xffa2647d9c5a65e8", 0);
  EXPECT_EQ(
      parseError("<system version=\"1\">\n" + one + cpu("0xb93bee07ef6f4564", 1) + "</system>\n"),
      "t.xml:7:3: <cpu> host_hash 0xb93bee07ef6f4564 after 0xffa2647d9c5a65e8 (line 2): the "
      "file holds several hosts (a multi-node NVLink dump?), expected one; keep one host's "
      "<cpu> elements");
  EXPECT_EQ(readNcclXml("<system version=\"1\">\n" + one + "</system>\n", "t.xml").gpuCount(), 1);
}

TEST(NcclXmlTest, WriteThenReadGivesTheSameGraphForEveryFile) {
  int checked = 0;
  for (const std::string& path : dataFiles("nccl_topo_xml")) {
    if (path.find("_graph.xml") != std::string::npos) continue;
    SCOPED_TRACE(path);
    HostTopology first = readNcclXml(readText(path), path);
    std::string xml = writeNcclXml(first);
    HostTopology second = readNcclXml(xml, "written.xml");
    EXPECT_EQ(comparable(first), comparable(second));
    EXPECT_EQ(writeNcclXml(second), xml);
    ++checked;
  }
  EXPECT_EQ(checked, 14);
}

}  // namespace
}  // namespace torch_topo::topo
