// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/loader: format sniffing of every data file and the unknown-format error.
#include "topo/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "test_data.h"
#include "topo/error.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

using testing::dataFiles;
using testing::dataPath;
using testing::readText;

TEST(LoaderTest, SniffsEveryDataFile) {
  for (const std::string& path : dataFiles("nvidia_smi_topo")) {
    EXPECT_EQ(sniffTopologyFormat(readText(path)), TopologyFormat::NvidiaSmi) << path;
  }
  for (const std::string& path : dataFiles("nccl_topo_xml")) {
    bool graph = path.find("_graph.xml") != std::string::npos;
    EXPECT_EQ(sniffTopologyFormat(readText(path)),
              graph ? TopologyFormat::NcclGraphXml : TopologyFormat::NcclXml)
        << path;
  }
  for (const std::string& path : dataFiles("hwloc")) {
    bool xml = path.size() > 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
    EXPECT_EQ(sniffTopologyFormat(readText(path)),
              xml ? TopologyFormat::HwlocXml : TopologyFormat::Unknown)
        << path;
  }
  EXPECT_EQ(sniffTopologyFormat(R"({"schema": "torch-topo/1", "kind": "host"})"),
            TopologyFormat::TopoJson);
  EXPECT_EQ(sniffTopologyFormat("{\"a\": 1}"), TopologyFormat::Unknown);
  EXPECT_EQ(sniffTopologyFormat("<?xml version=\"1.0\"?>\n<!-- c -->\n<system/>"),
            TopologyFormat::NcclXml);
}

TEST(LoaderTest, UnknownFormatNamesTheAcceptedOnes) {
  try {
    loadTopologyText("Machine (64GB)\n  Package L#0\n", "lstopo.txt");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 1);
    std::string what = e.what();
    EXPECT_EQ(what.rfind("lstopo.txt:1:1: unknown topology format: expected", 0), 0u);
    for (const char* format : {"nvidia-smi", "NCCL topology XML", "hwloc XML", "torch-topo"}) {
      EXPECT_NE(what.find(format), std::string::npos) << format;
    }
  }
}

// A NUL inside an XML attribute ended TinyXML-2's text: the error blamed a later line.
TEST(LoaderTest, NulByteIsRefusedWhereItIs) {
  std::string text = readText(dataPath("nccl_topo_xml/aws_p4d.24xlarge_8xA100_topo.xml"));
  const size_t at = text.find("busid=\"") + 7;
  text.insert(at, 1, '\0');
  try {
    loadTopologyText(text, "t.xml");
    FAIL();
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 1 + std::count(text.begin(), text.begin() + at, '\n'));
    EXPECT_NE(std::string(e.what()).find("byte \\x00 (NUL), expected text"), std::string::npos)
        << e.what();
  }
}

TEST(LoaderTest, ClusterFilesAreLoadedAsClusters) {
  ClusterTopology c;
  c.hosts.resize(2);
  std::string text = clusterToJson(c);
  EXPECT_THROW(loadTopologyText(text, "c.json"), ParseError);
  EXPECT_THROW(loadTopologyFile("/nonexistent/topo.xml"), InvalidArgument);
}

TEST(LoaderTest, UnreadableSourcesAreNamedAsSuch) {
  // A directory opens but cannot be read: the error says so instead of "unknown format".
  try {
    loadTopologyFile(dataPath("hwloc"));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(std::strerror(EISDIR)), std::string::npos) << e.what();
  }
  // An endless device stops at the size limit rather than exhausting memory.
  try {
    loadClusterFile("/dev/zero");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("expected at most"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace torch_topo::topo
