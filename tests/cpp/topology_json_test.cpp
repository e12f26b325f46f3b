// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/topology_json: exact round trips of every readable file, clusters,
// hand-written shorthand and the field-naming errors.
#include "topo/topology_json.h"

#include <gtest/gtest.h>
#include <algorithm>

#include <nlohmann/json.hpp>

#include "test_data.h"
#include "topo/error.h"
#include "topo/cpulist.h"
#include "topo/loader.h"
#include "topo/nccl_xml.h"
#include "topo/nvsmi_reader.h"

namespace torch_topo::topo {
namespace {

using testing::dataFiles;
using testing::textPosition;

void expectSameHost(const HostTopology& a, const HostTopology& b) {
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    EXPECT_EQ(a.gpus[i].bus_id, b.gpus[i].bus_id);
    EXPECT_EQ(a.gpus[i].numa_node, b.gpus[i].numa_node);
    EXPECT_EQ(a.gpus[i].memory_numa_node, b.gpus[i].memory_numa_node);
    EXPECT_EQ(a.gpus[i].nvlink_domain, b.gpus[i].nvlink_domain);
  }
  ASSERT_EQ(a.gpu_paths.size(), b.gpu_paths.size());
  for (size_t i = 0; i < a.gpu_paths.size(); ++i) {
    EXPECT_EQ(a.gpu_paths[i].cls, b.gpu_paths[i].cls);
    EXPECT_EQ(a.gpu_paths[i].nvlinks, b.gpu_paths[i].nvlinks);
    EXPECT_EQ(a.gpu_paths[i].bandwidth_gbps, b.gpu_paths[i].bandwidth_gbps);  // exact
    EXPECT_EQ(a.gpu_paths[i].latency_us, b.gpu_paths[i].latency_us);
  }
  ASSERT_EQ(a.graph.nodes.size(), b.graph.nodes.size());
  for (size_t i = 0; i < a.graph.nodes.size(); ++i) {
    EXPECT_EQ(a.graph.nodes[i].id, b.graph.nodes[i].id);
    EXPECT_EQ(a.graph.nodes[i].attrs, b.graph.nodes[i].attrs);
  }
  ASSERT_EQ(a.graph.links.size(), b.graph.links.size());
  for (size_t i = 0; i < a.graph.links.size(); ++i) {
    EXPECT_EQ(a.graph.links[i].bandwidth_gbps, b.graph.links[i].bandwidth_gbps);
  }
  ASSERT_EQ(a.nics.size(), b.nics.size());
  for (size_t i = 0; i < a.nics.size(); ++i) EXPECT_EQ(a.nics[i].attrs, b.nics[i].attrs);
  EXPECT_EQ(a.warnings, b.warnings);
  EXPECT_EQ(a.source, b.source);
}

TEST(TopologyJsonTest, EveryFileRoundTripsExactly) {
  int checked = 0;
  for (const char* dir : {"nvidia_smi_topo", "nccl_topo_xml", "hwloc"}) {
    for (const std::string& path : dataFiles(dir)) {
      if (path.find("_graph.xml") != std::string::npos) continue;
      if (path.find(".console.txt") != std::string::npos) continue;  // lstopo's text, no input
      if (path.find("_notTopoM.") != std::string::npos) continue;     // other nvidia-smi output
      SCOPED_TRACE(path);
      HostTopology h = loadTopologyFile(path);
      h.hostname = "node-a";
      std::string text = hostToJson(h);
      HostTopology back = hostFromJson(text, "back.json");
      expectSameHost(h, back);
      EXPECT_EQ(hostToJson(back), text);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 46);
}

// A source without GPU-to-NIC paths (e.g. a live probe whose NICs came from hwloc only) must
// still write JSON the reader takes back, with the paths derived again from the graph.
TEST(TopologyJsonTest, MissingNicPathsRoundTrip) {
  HostTopology h =
      loadTopologyFile(testing::dataPath("nccl_topo_xml/aws_p4d.24xlarge_8xA100_topo.xml"));
  ASSERT_FALSE(h.nics.empty());
  const std::vector<PathInfo> derived = h.gpu_nic_paths;
  h.gpu_nic_paths.clear();
  HostTopology back = hostFromJson(hostToJson(h), "no-nic-paths.json");
  ASSERT_EQ(back.gpu_nic_paths.size(), derived.size());
}

TEST(TopologyJsonTest, ClusterRoundTrip) {
  ClusterTopology c;
  c.hosts.push_back(
      loadTopologyFile(testing::dataPath("nvidia_smi_topo/2xgpu_NV2_bridge_mlengineering.txt")));
  c.hosts.push_back(c.hosts[0]);
  c.hosts[1].hostname = "b";
  // Both hosts in one multi-node NVLink domain; a GPU without one writes no field.
  c.hosts[0].gpus[0].nvlink_domain = c.hosts[1].gpus[0].nvlink_domain = "0f1e/7";
  c.hosts[1].gpus[1].nvlink_domain = "0f1e/7";
  c.ranks = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0}, {1, 1, 1}};
  c.inter_host_bandwidth_gbps = 0.1 + 0.2;  // not representable in short decimal
  c.inter_host_latency_us = 1000.0;
  std::string text = clusterToJson(c, 2);
  ClusterTopology back = clusterFromJson(text, "c.json");
  ASSERT_EQ(back.hosts.size(), 2u);
  EXPECT_EQ(back.hosts[1].hostname, "b");
  ASSERT_EQ(back.ranks.size(), 4u);
  EXPECT_EQ(back.ranks[3].host, 1);
  EXPECT_EQ(back.ranks[3].local_gpu, 1);
  EXPECT_EQ(back.inter_host_bandwidth_gbps, 0.1 + 0.2);
  EXPECT_EQ(back.hosts[1].gpus[1].nvlink_domain, "0f1e/7");
  EXPECT_EQ(back.hosts[0].gpus[1].nvlink_domain, "");
  EXPECT_EQ(nlohmann::json::parse(text)["hosts"][0]["gpus"][1].count("nvlink_domain"), 0u);
  EXPECT_EQ(clusterToJson(back, 2), text);
  // A network of 1e-300 GB/s would price every exchange between hosts at infinite seconds.
  nlohmann::json doc = nlohmann::json::parse(text);
  doc["inter_host_bandwidth_gbps"] = 1e-300;
  try {
    clusterFromJson(doc.dump(), "c.json");
    ADD_FAILURE() << "1e-300 GB/s accepted";
  } catch (const ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("(root).inter_host_bandwidth_gbps: got 1e-300"),
              std::string::npos)
        << e.what();
  }
  // No hosts (doctor indexed the first), and a whole document given as a host (the error fell
  // on the first rank placed on it).
  auto clusterError = [](const nlohmann::json& d) -> std::string {
    try {
      clusterFromJson(d.dump(), "c.json");
    } catch (const ParseError& e) {
      return e.what();
    }
    return "no error";
  };
  nlohmann::json empty = {{"schema", "torch-topo/1"}, {"kind", "cluster"}};
  EXPECT_NE(clusterError(empty).find("field hosts: got none, expected at least one host"),
            std::string::npos)
      << clusterError(empty);
  nlohmann::json nested = nlohmann::json::parse(text);
  nested["hosts"][0]["kind"] = "cluster";
  EXPECT_NE(
      clusterError(nested).find("field hosts[0].kind: got 'cluster', expected 'host' or none"),
      std::string::npos)
      << clusterError(nested);
}

TEST(TopologyJsonTest, HandWrittenShorthand) {
  HostTopology h = hostFromJson(
      R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{"sm": 90}, {"sm": 90}],
          "gpu_paths": [["X", "NV18"], ["NV18", "X"]]})",
      "h.json");
  ASSERT_EQ(h.gpuCount(), 2);
  EXPECT_EQ(h.gpus[1].index, 1);
  EXPECT_EQ(h.path(0, 1).nvlinks, 18);
  EXPECT_DOUBLE_EQ(h.path(0, 1).bandwidth_gbps, 18 * 20.6);
  // Without gpu_paths or a graph the pairs are a guess, and the warnings say which.
  HostTopology bare = hostFromJson(
      R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{"sm": 90}, {"sm": 90}]})", "h.json");
  EXPECT_EQ(bare.path(0, 1).cls, PathClass::SYS);
  EXPECT_NE(std::find(bare.warnings.begin(), bare.warnings.end(),
                      "no gpu_paths and no graph: every GPU pair taken as SYS (across the CPU "
                      "sockets)"),
            bare.warnings.end());
}

// A cell that states its numbers keeps them where other cells are class strings; only the
// strings are priced from their class (NV2 at the sm80 lane rate of docs/topology.md, 20 GB/s).
// The stated 5 GB/s and 3 us were replaced by the PIX estimate (24 GB/s, 2 us).
TEST(TopologyJsonTest, StatedNumbersBesideClassStringsStay) {
  HostTopology h = hostFromJson(
      R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{}, {}, {}],
          "gpu_paths": [["X", "NV2", {"cls": "PIX", "bandwidth_gbps": 5, "latency_us": 3}],
                        ["NV2", "X", "SYS"],
                        [{"cls": "PIX", "bandwidth_gbps": 5, "latency_us": 3}, "SYS", "X"]]})",
      "h.json");
  EXPECT_EQ(h.path(0, 2).bandwidth_gbps, 5.0);
  EXPECT_EQ(h.path(2, 0).latency_us, 3.0);
  EXPECT_EQ(h.path(0, 1).bandwidth_gbps, 2 * 20.0);
  EXPECT_EQ(h.path(1, 0).bandwidth_gbps, 2 * 20.0);
}

std::string jsonError(const std::string& text) {
  return testing::parseErrorOf([&] { hostFromJson(text, "h.json"); });
}

// "line:col" where `field` ("gpus[1].index") of `doc` starts in doc.dump(1), found by writing a
// marker in its place: the bytes before it stay the same.
std::string positionIn(nlohmann::json doc, const std::string& field) {
  std::string pointer = "/";
  for (char c : field) {
    if (c == '[' || c == '.') {
      pointer += '/';
    } else if (c != ']') {
      pointer += c;
    }
  }
  doc[nlohmann::json::json_pointer(pointer)] = "@here@";
  const std::string text = doc.dump(1);
  return textPosition(text, text.find("\"@here@\""));
}

TEST(TopologyJsonTest, ErrorsNameTheField) {
  const std::string sm_text =
      "{\"schema\": \"torch-topo/1\",\n \"kind\": \"host\", \"gpus\": [{\"sm\": \"x\"}]}";
  EXPECT_EQ(jsonError(sm_text), "h.json:" + textPosition(sm_text, sm_text.find("\"x\"")) +
                                    ": field (root).gpus[0].sm: got \"x\", expected an integer");
  EXPECT_NE(jsonError("{\"schema\": \"torch-topo/2\", \"kind\": \"host\"}")
                .find("expected 'torch-topo/1'"),
            std::string::npos);
  EXPECT_NE(jsonError("{\n  \"schema\": ,\n}").find("h.json:2:13: malformed JSON"),
            std::string::npos);
  // A number no double holds: a parse error at the number, not a bare out_of_range.
  EXPECT_EQ(jsonError("{\"schema\": \"torch-topo/1\",\n \"kind\": \"host\", \"x\": 1e400}"),
            "h.json:2:23: malformed JSON: number overflow parsing '1e400'");
  EXPECT_NE(jsonError(R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{}],
                          "gpu_paths": [["X", "X"]]})")
                .find("expected an array of 1 cells"),
            std::string::npos);
  EXPECT_NE(jsonError(R"({"schema": "torch-topo/1", "kind": "host",
                          "graph": {"nodes": [], "links": [{"a": 0, "b": 1, "kind": "pci"}]}})")
                .find("links[0].a: got 0, expected an integer in [0, -1]"),
            std::string::npos);
  EXPECT_NE(jsonError(R"({"schema": "torch-topo/1", "kind": "cluster"})").find("expected 'host'"),
            std::string::npos);
  EXPECT_NE(jsonError(R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{"numa_nod": 0}]})")
                .find("field (root).gpus[0].numa_nod: unknown field (did you mean 'numa_node'?), "
                      "expected one of index, bus_id, name, sm, numa_node, cpu_affinity, "
                      "memory_numa_node, nvlink_domain"),
            std::string::npos);
  // No hint where no known key is near.
  EXPECT_NE(jsonError(R"({"schema": "torch-topo/1", "kind": "host", "comment": "x"})")
                .find("field (root).comment: unknown field, expected one of schema, kind, "),
            std::string::npos);
}

// Hand edits of a real file's JSON that the readers never produce: each must be refused with
// the field named, not read into a topology whose answers depend on which cell is consulted.
TEST(TopologyJsonTest, InconsistentHandEditsAreRefused) {
  const HostTopology real =
      loadTopologyFile(testing::dataPath("nccl_topo_xml/azure_ndv4_8xA100_topo.xml"));
  const nlohmann::json base = nlohmann::json::parse(hostToJson(real));
  ASSERT_GE(base["gpus"].size(), 2u);
  ASSERT_GE(base["numa_nodes"].size(), 2u);
  ASSERT_GE(base["nics"].size(), 1u);
  EXPECT_NO_THROW(hostFromJson(base.dump(), "h.json"));
  struct Case {
    const char* field;
    void (*edit)(nlohmann::json&);
  };
  const Case cases[] = {
      {"gpus[1].index", [](nlohmann::json& d) { d["gpus"][1]["index"] = d["gpus"][0]["index"]; }},
      {"gpus[1].bus_id",
       [](nlohmann::json& d) { d["gpus"][1]["bus_id"] = d["gpus"][0]["bus_id"]; }},
      {"numa_nodes[1].id",
       [](nlohmann::json& d) { d["numa_nodes"][1]["id"] = d["numa_nodes"][0]["id"]; }},
      {"numa_nodes[0].cpus", [](nlohmann::json& d) { d["numa_nodes"][0]["cpus"] = "0-"; }},
      {"numa_nodes[1].id", [](nlohmann::json& d) { d["numa_nodes"][1]["id"] = -1; }},
      {"gpus[0].cpu_affinity", [](nlohmann::json& d) { d["gpus"][0]["cpu_affinity"] = "x"; }},
      {"gpu_paths[0][1]", [](nlohmann::json& d) { d["gpu_paths"][0][1]["cls"] = "X"; }},
      {"gpu_paths[1][1]", [](nlohmann::json& d) { d["gpu_paths"][1][1]["cls"] = "PIX"; }},
      {"gpu_paths[0][1]",
       [](nlohmann::json& d) {
         d["gpu_paths"][0][1]["cls"] = "NV";
         d["gpu_paths"][0][1]["nvlinks"] = 12;
       }},
      {"gpu_paths[0][1]",
       [](nlohmann::json& d) {
         d["gpu_paths"][0][1]["cls"] = "NV";
         d["gpu_paths"][0][1]["nvlinks"] = 0;
       }},
      {"gpu_paths[0][1]",
       [](nlohmann::json& d) {
         d["gpu_paths"][0][1]["cls"] = "PIX";
         d["gpu_paths"][0][1]["nvlinks"] = 2;
       }},
      {"gpu_paths[0][1]", [](nlohmann::json& d) { d["gpu_paths"][0][1] = "NV"; }},
      {"gpu_paths[0][1].bandwidth_gbps",
       [](nlohmann::json& d) { d["gpu_paths"][0][1]["bandwidth_gbps"] = 1e-300; }},
      {"gpu_paths[0][1].latency_us",
       [](nlohmann::json& d) { d["gpu_paths"][0][1]["latency_us"] = 1e300; }},
      {"nics[0].speed_gbps", [](nlohmann::json& d) { d["nics"][0]["speed_gbps"] = 1e-9; }},
      {"gpus[2].bus_id", [](nlohmann::json& d) { d["gpus"][2]["bus_id"] = "x"; }},
      {"nics[0].bus_id", [](nlohmann::json& d) { d["nics"][0]["bus_id"] = "mlx5_0"; }},
      {"gpus[1].numa_node", [](nlohmann::json& d) { d["gpus"][1]["numa_node"] = 7; }},
      {"nics[0].numa_node", [](nlohmann::json& d) { d["nics"][0]["numa_node"] = 7; }},
      {"gpu_paths[0][1]",
       [](nlohmann::json& d) {
         const double gbps = d["gpu_paths"][0][1]["bandwidth_gbps"];
         d["gpu_paths"][1][0]["bandwidth_gbps"] = 2 * gbps;
       }},
      {"gpu_paths[0][1]",
       [](nlohmann::json& d) {
         d["gpu_paths"][0][1]["latency_us"] = d["gpu_paths"][1][0]["latency_us"].get<double>() + 1;
       }},
  };
  for (const Case& c : cases) {
    nlohmann::json doc = base;
    c.edit(doc);
    // One value a line: the error points at the line and column of the field it names.
    const std::string what = jsonError(doc.dump(1));
    EXPECT_EQ(what.rfind("h.json:" + positionIn(doc, c.field) + ": field (root)." +
                             std::string(c.field) + ":", 0),
              0u)
        << c.field << ": " << what;
  }
  nlohmann::json no_id = base;
  no_id["numa_nodes"][1].erase("id");
  EXPECT_NE(jsonError(no_id.dump())
                .find("field (root).numa_nodes[1].id: missing, expected the NUMA node's id"),
            std::string::npos)
      << jsonError(no_id.dump());
  // A number past the signed 64-bit range is quoted as written, not as the wrapped value.
  nlohmann::json doc = base;
  doc["gpus"][0]["sm"] = 18446744073709551615ull;
  EXPECT_NE(jsonError(doc.dump()).find("got 18446744073709551615, expected an integer in"),
            std::string::npos)
      << jsonError(doc.dump());
}

// A GPU's or NIC's bus id in JSON and in NCCL XML takes the form hwloc writes (sysfs's, lower-case
// hex, domain of 4 to 8 digits); "" is unknown in JSON.
TEST(TopologyJsonTest, BusIdsHaveThePciForm) {
  const HostTopology real =
      loadTopologyFile(testing::dataPath("nccl_topo_xml/azure_ndv4_8xA100_topo.xml"));
  const nlohmann::json base = nlohmann::json::parse(hostToJson(real));
  const struct {
    std::string text;
    bool ok;
  } cases[] = {
      {"0000:07:00.0", true},   {"10000:e1:00.0", true},  {"fffffff:ff:ff.7", true},
      {"0000:07:00.8", false},  {"0000:0A:00.0", false},  {"07:00.0", false},
      {"000:07:00.0", false},   {"0000:07:00.0 ", false}, {"000000000:07:00.0", false},
      {"0000:07:00", false},    {"0000-07-00.0", false},  {"mlx5_0", false},
  };
  for (const auto& c : cases) {
    for (const char* list : {"gpus", "nics"}) {
      nlohmann::json doc = base;
      doc[list][0]["bus_id"] = c.text;
      const std::string what = jsonError(doc.dump(1));
      const std::string field = std::string(list) + "[0].bus_id";
      if (c.ok) {
        EXPECT_EQ(what, "no error") << c.text;
      } else {
        EXPECT_EQ(what, "h.json:" + positionIn(doc, field) + ": field (root)." + field +
                            ": got '" + c.text +
                            "', expected \"\" (unknown) or a PCI bus id in lower-case hex such "
                            "as 0000:07:00.0");
      }
    }
    const std::string xml = "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"" + c.text +
                            "\" class=\"0x030200\" vendor=\"0x10de\"><gpu dev=\"0\" sm=\"80\"/>"
                            "</pci></cpu></system>\n";
    bool xml_ok = true;
    try {
      HostTopology h = readNcclXml(xml, "t.xml");
      EXPECT_NO_THROW(hostFromJson(hostToJson(h), "t.json")) << c.text;
    } catch (const ParseError&) {
      xml_ok = false;
    }
    // NCCL XML is read in lower case, as NCCL writes it.
    EXPECT_EQ(xml_ok, c.ok || c.text == "0000:0A:00.0") << c.text;
  }
  nlohmann::json doc = base;
  doc["gpus"][0]["bus_id"] = "";
  EXPECT_EQ(jsonError(doc.dump()), "no error");
}

// A GPU or NIC on a node numa_nodes does not list is named with the ids that are listed.
TEST(TopologyJsonTest, DeviceNumaNodesMustBeListed) {
  const std::string none =
      R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{"numa_node": 0}]})";
  EXPECT_EQ(jsonError(none),
            "h.json:" + textPosition(none, none.find("0}")) +
                ": field (root).gpus[0].numa_node: got 0, expected -1 (unknown) or the id of an "
                "entry of numa_nodes (none listed)");
  const std::string two = R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{"numa_node": 1}],
                          "numa_nodes": [{"id": 0, "cpus": "0-3"}, {"id": 2, "cpus": ""}]})";
  EXPECT_EQ(jsonError(two),
            "h.json:" + textPosition(two, two.find("1}")) +
                ": field (root).gpus[0].numa_node: got 1, expected -1 (unknown) or the id of an "
                "entry of numa_nodes (0, 2)");
  EXPECT_EQ(jsonError(R"({"schema": "torch-topo/1", "kind": "host",
                          "gpus": [{"numa_node": 2}, {"numa_node": -1}],
                          "nics": [{"name": "eth0", "numa_node": 0}],
                          "numa_nodes": [{"id": 0, "cpus": "0-3"}, {"id": 2, "cpus": ""}]})"),
            "no error");
}

// A field error points at the value it names in a hand-written file of many lines (or at the
// object that lacks a key), as a syntax error does, rather than at 1:1.
TEST(TopologyJsonTest, FieldErrorsPointAtTheValue) {
  const std::string host = R"({
  "schema": "torch-topo/1",
  "kind": "host",
  "gpus": [
    {"sm": 90, "bus_id": "0000:07:00.0", "numa_node": 0},
    {"sm": 90, "bus_id": "0000:08:00.0", "numa_node": 0}
  ],
  "numa_nodes": [{"id": 0, "cpus": "0-7"}],
  "graph": {
    "nodes": [{"kind": "gpu", "id": "g0", "index": 0}, {"kind": "gpu", "id": "g1", "index": 1}],
    "links": [{"a": 0, "b": 1, "kind": "pci"}]
  },
  "gpu_paths": [["X", "NV4"],
                ["NV4", "X"]],
  "warnings": ["none"]
})";
  const std::string cluster = R"({
  "schema": "torch-topo/1",
  "kind": "cluster",
  "hosts": [
    {"gpus": [{"sm": 90}, {"sm": 90}]},
    {"gpus": [{"sm": 80}]}
  ],
  "ranks": [
    {"host": 0, "local_gpu": 0},
    {"host": 0, "local_gpu": 1},
    {"host": 1, "local_gpu": 0}
  ],
  "inter_host_bandwidth_gbps": 25
})";
  ASSERT_NO_THROW(hostFromJson(host, "h.json"));
  ASSERT_NO_THROW(clusterFromJson(cluster, "h.json"));
  const struct {
    const std::string& base;
    const char* from;
    const char* to;
    const char* value;  // the edited text from the offending value on
    const char* field;
  } cases[] = {
      {host, R"("sm": 90, "bus_id": "0000:08)", R"("sm": "90", "bus_id": "0000:08)", R"("90")",
       "(root).gpus[1].sm"},
      // The escape makes the text longer than the value; it is upper-case hex once decoded.
      {host, R"("0000:08:00.0")", R"("\u0030000:0A:00.0")", R"("\u0030)", "(root).gpus[1].bus_id"},
      {host, R"("0000:08:00.0", "numa_node": 0)", R"("0000:08:00.0", "numa_node": 3)", "3}",
       "(root).gpus[1].numa_node"},
      {host, R"("cpus": "0-7")", R"("cpus": "7-0")", R"("7-0")", "(root).numa_nodes[0].cpus"},
      {host, R"({"kind": "gpu", "id": "g1")", R"({"kind": "gpx", "id": "g1")", R"("gpx")",
       "(root).graph.nodes[1].kind"},
      {host, R"({"a": 0, "b": 1)", R"({"b": 1)", R"({"b": 1)", "(root).graph.links[0]"},
      {host, R"(["NV4", "X"])", R"(["NV2", "X"])", R"("NV4")", "(root).gpu_paths[0][1]"},
      {host, R"(["none"])", R"(["none", 7])", "7]", "(root).warnings[1]"},
      {host, R"("torch-topo/1")", R"("torch-topo/9")", R"("torch-topo/9")", "schema"},
      {cluster, R"({"host": 0, "local_gpu": 1})", R"({"local_gpu": 0, "host": 0})", R"(0, "host")",
       "ranks[1].local_gpu"},
      {cluster, R"({"host": 1, "local_gpu": 0})", R"({"local_gpu": 0})", R"({"local_gpu": 0})",
       "ranks[2].host"},
      {cluster, R"([{"sm": 80}])", R"([{"sm": -80}])", "-80", "hosts[1].gpus[0].sm"},
      {cluster, R"({"gpus": [{"sm": 80}]})", R"("b")", R"("b")", "hosts[1]"},
      {cluster, "25\n", "1e-9\n", "1e-9", "(root).inter_host_bandwidth_gbps"},
      // Misspelt keys, at every level of both documents.
      {host, "\"numa_node\": 0}\n  ]", "\"numa_nod\": 0}\n  ]", "0}\n  ]",
       "(root).gpus[1].numa_nod"},
      {host, R"("kind": "pci"})", R"("kind": "pci", "lane": 2})", "2}",
       "(root).graph.links[0].lane"},
      {host, R"(["NV4", "X"])", R"([{"cls": "NV", "nvlink": 4}, "X"])", "4}",
       "(root).gpu_paths[1][0].nvlink"},
      {host, R"("warnings")", R"("warning")", R"(["none"])", "(root).warning"},
      {cluster, "\"inter_host_bandwidth_gbps\"", "\"inter_host_bandwith_gbps\"", "25\n",
       "(root).inter_host_bandwith_gbps"},
      {cluster, R"({"host": 1, "local_gpu": 0})", R"({"host": 1, "gpu": 2, "local_gpu": 0})",
       R"(2, "local_gpu")", "ranks[2].gpu"},
      {cluster, R"([{"sm": 80}])", R"([{"sm": 80}], "schema": "torch-topo/0")", R"("torch-topo/0")",
       "hosts[1].schema"},
  };
  for (const auto& c : cases) {
    std::string text = c.base;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, std::string(c.from).size(), c.to);
    const size_t value = text.find(c.value);
    ASSERT_NE(value, std::string::npos) << c.value;
    std::string what = "no error";
    try {
      if (&c.base == &host) {
        hostFromJson(text, "h.json");
      } else {
        clusterFromJson(text, "h.json");
      }
    } catch (const ParseError& e) {
      what = e.what();
    }
    EXPECT_EQ(what.rfind("h.json:" + textPosition(text, value) + ": field " + c.field + ": ", 0),
              0u)
        << c.field << ": " << what;
  }
}

// Paths computed from a graph are the same both ways, so a host written and read back (as ranks
// exchange theirs) passes the reader's pair-agreement check. Searched from each end, the hops
// 0.1 + 0.2 + 0.3 us summed as 0.6000000000000001 one way and 0.6 the other.
TEST(TopologyJsonTest, ComputedPathsAgreeBothWays) {
  const HostTopology h = hostFromJson(
      R"({"schema": "torch-topo/1", "kind": "host", "gpus": [{}, {}],
          "graph": {"nodes": [{"kind": "gpu", "id": "a", "index": 0},
                              {"kind": "pci", "id": "s1"}, {"kind": "pci", "id": "s2"},
                              {"kind": "gpu", "id": "b", "index": 1}],
                    "links": [{"a": 0, "b": 1, "kind": "pci", "latency_us": 0.1},
                              {"a": 1, "b": 2, "kind": "pci", "latency_us": 0.2},
                              {"a": 2, "b": 3, "kind": "pci", "latency_us": 0.3}]}})",
      "h.json");
  EXPECT_EQ(h.path(0, 1).latency_us, h.path(1, 0).latency_us);  // exact
  EXPECT_DOUBLE_EQ(h.path(0, 1).latency_us, 0.1 + 0.2 + 0.3);
  EXPECT_NO_THROW(hostFromJson(hostToJson(h), "back.json"));
}

// The JSON reader, the nvidia-smi reader and the sysfs/binding parser share one cpulist check:
// a text one of them accepts, the others accept, so a file converted between formats (or bound
// to CPUs later) is never refused after it was read.
TEST(TopologyJsonTest, EveryReaderAcceptsTheSameCpulists) {
  const HostTopology real =
      loadTopologyFile(testing::dataPath("nccl_topo_xml/azure_ndv4_8xA100_topo.xml"));
  const nlohmann::json base = nlohmann::json::parse(hostToJson(real));
  const std::string top = std::to_string(kMaxCpuId);
  const struct {
    std::string text;
    bool ok;
  } cases[] = {
      {"0-3,8", true},       {"100000-100003," + top, false},
      {"0-3," + top, true},  {"0-" + std::to_string(kMaxCpuId + 1), false},
      {"0-3,", false},       {",0-3", false},
      {"0-3,,8", false},     {"3-1", false},
      {"1-2-3", false},      {"0-", false},
      {"x", false},          {"99999999", false},
  };
  for (const auto& c : cases) {
    bool json_ok = true, nvsmi_ok = true, sysfs_ok = true;
    nlohmann::json doc = base;
    doc["gpus"][0]["cpu_affinity"] = c.text;
    try {
      hostFromJson(doc.dump(), "h.json");
    } catch (const ParseError&) {
      json_ok = false;
    }
    try {
      readNvidiaSmi("GPU0 CPU Affinity\nGPU0 X " + c.text + "\n", "t.txt");
    } catch (const ParseError&) {
      nvsmi_ok = false;
    }
    try {
      parseCpulist(c.text, "cpulist");
    } catch (const InvalidArgument& e) {
      sysfs_ok = false;
      EXPECT_NE(std::string(e.what()).find("'" + c.text + "'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(json_ok, c.ok) << c.text;
    EXPECT_EQ(nvsmi_ok, c.ok) << c.text;
    EXPECT_EQ(sysfs_ok, c.ok) << c.text;
  }
}

}  // namespace
}  // namespace torch_topo::topo
