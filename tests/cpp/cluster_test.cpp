// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/cluster: records of ranks playing GPUs of a real hwloc file on two hosts.
#include "topo/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "fake_apis.h"
#include "test_data.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/paths.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

// The POWER8 file (4 GPUs) with NICs of the given Gbit/s speeds on NUMA node 0.
HostTopology power8(const std::vector<double>& nic_gbit) {
  std::string path = testing::dataFile("hwloc/hwloc_power8_gpu_nvlink_distances.xml");
  HostTopology host = readHwlocXml(testing::slurp(path), path);
  for (size_t i = 0; i < nic_gbit.size(); ++i) {
    Nic nic;
    nic.name = "mlx5_" + std::to_string(i);
    nic.numa_node = 0;
    nic.speed_gbps = nic_gbit[i];
    host.nics.push_back(nic);
    Node node;
    node.kind = NodeKind::Nic;
    node.id = nic.name;
    node.index = static_cast<int>(i);
    int idx = host.graph.addNode(node);
    host.graph.addLink({host.graph.findNode(NodeKind::Cpu, "numa0"), idx, LinkKind::Pci, 16, 24.0,
                        1.0});
  }
  computePaths(&host);
  return host;
}

std::vector<RankRecord> twoByTwo(const std::string& json_a, const std::string& json_b) {
  return {{0, "nodeA", 0, 0, json_a}, {1, "nodeA", 1, 1, json_a},
          {2, "nodeB", 0, 0, json_b}, {3, "nodeB", 1, 1, json_b}};
}

template <typename Exc>
std::string messageOf(const std::vector<RankRecord>& records) {
  try {
    assembleCluster(records);
  } catch (const Exc& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ClusterTest, GroupsRanksByHostInRankOrder) {
  std::string a = hostToJson(power8({25.0, 100.0}));
  std::string b = hostToJson(power8({200.0}));
  std::vector<RankRecord> records = twoByTwo(a, b);
  std::reverse(records.begin(), records.end());  // arrival order must not matter
  ClusterTopology cluster = assembleCluster(records);
  ASSERT_EQ(cluster.hosts.size(), 2u);
  EXPECT_EQ(cluster.hosts[0].hostname, "nodeA");
  EXPECT_EQ(cluster.hosts[1].hostname, "nodeB");
  EXPECT_EQ(cluster.hosts[1].gpuCount(), 4);
  ASSERT_EQ(cluster.ranks.size(), 4u);
  EXPECT_EQ(cluster.ranks[3].host, 1);
  EXPECT_EQ(cluster.ranks[3].local_gpu, 1);
  EXPECT_EQ(cluster.ranks[2].local_rank, 0);
  // Best NIC of A is 100 Gbit/s, of B 200 Gbit/s: the slower host sets 100 / 8 = 12.5 GB/s.
  EXPECT_DOUBLE_EQ(cluster.inter_host_bandwidth_gbps, 12.5);
  EXPECT_GT(cluster.inter_host_latency_us, 0.0);
  EXPECT_EQ(clusterToJson(cluster), clusterToJson(assembleCluster(twoByTwo(a, b))));
}

TEST(ClusterTest, PinnedBandwidthWinsAndOneHostHasNoNetwork) {
  std::string a = hostToJson(power8({25.0}));
  ClusterOptions options;
  options.inter_host_bandwidth_gbps = 0.119;  // e.g. a measured 1 Gbit/s link
  EXPECT_DOUBLE_EQ(assembleCluster(twoByTwo(a, a), options).inter_host_bandwidth_gbps, 0.119);
  ClusterTopology one = assembleCluster({{0, "solo", 0, 0, a}, {1, "solo", 1, 3, a}});
  EXPECT_EQ(one.hosts.size(), 1u);
  EXPECT_EQ(one.inter_host_bandwidth_gbps, 0.0);
  EXPECT_EQ(one.ranks[1].local_gpu, 3);
}

TEST(ClusterTest, RanksOfOneHostThatDisagreeAreNamedWithTheDifference) {
  HostTopology host = power8({25.0});
  std::string a = hostToJson(host);
  host.gpus[3].bus_id = "000c:01:00.0";
  std::string changed = hostToJson(host);
  std::vector<RankRecord> records = twoByTwo(a, a);
  records[1].host_json = changed;
  std::string what = messageOf<Mismatch>(records);
  EXPECT_NE(what.find("ranks 0 and 1 on host 'nodeA'"), std::string::npos) << what;
  EXPECT_NE(what.find("/gpus/3/bus_id"), std::string::npos) << what;
  EXPECT_NE(what.find("000b:01:00.0"), std::string::npos) << what;
  EXPECT_NE(what.find("000c:01:00.0"), std::string::npos) << what;
}

TEST(ClusterTest, BadRecordsGetClearErrors) {
  std::string a = hostToJson(power8({25.0}));
  std::vector<RankRecord> missing = twoByTwo(a, a);
  missing.erase(missing.begin() + 2);
  EXPECT_NE(messageOf<InvalidArgument>(missing).find("got rank 3 at position 2"), std::string::npos);
  std::vector<RankRecord> twice = twoByTwo(a, a);
  twice[1].local_device = 0;
  EXPECT_NE(messageOf<InvalidArgument>(twice).find("both claim GPU 0"), std::string::npos);
  std::vector<RankRecord> range = twoByTwo(a, a);
  range[3].local_device = 4;
  EXPECT_NE(messageOf<InvalidArgument>(range).find("the host has 4 GPUs"), std::string::npos);
  std::vector<RankRecord> unnamed = twoByTwo(a, a);
  unnamed[0].hostname = "";
  EXPECT_NE(messageOf<InvalidArgument>(unnamed).find("empty hostname"), std::string::npos);
  std::vector<RankRecord> garbage = twoByTwo(a, "{\"schema\": ");
  EXPECT_NE(messageOf<ParseError>(garbage).find("rank 2 host record"), std::string::npos);
  EXPECT_THROW(assembleCluster({}), InvalidArgument);
}

// A rank's host record of many lines: a field error and a syntax error both point at the
// line and column of the offending text in it.
TEST(ClusterTest, RecordErrorsPointIntoTheRecord) {
  const std::string good = hostToJson(power8({25.0}), 2);
  std::string field = good;
  const size_t value = field.find("\"format\": ") + std::string("\"format\": ").size();
  field.replace(value, field.find(',', value) - value, "7");
  EXPECT_EQ(messageOf<ParseError>(twoByTwo(field, good)),
            "rank 0 host record:" + testing::textPosition(field, value) +
                ": field (root).format: got number, expected a string");
  // Rank 3's record differs from rank 2's, on the same host: it is parsed to compare the two.
  std::string broken = good;
  const size_t line3 = broken.find('\n', broken.find('\n') + 1) + 1;
  broken.insert(line3, "@");
  std::vector<RankRecord> records = twoByTwo(good, good);
  records[3].host_json = broken;
  const std::string what = messageOf<ParseError>(records);
  EXPECT_EQ(what.rfind("rank 3 host record:" + testing::textPosition(broken, line3) +
                           ": malformed JSON: ", 0),
            0u)
      << what;
}

TEST(ClusterTest, HostDocumentsByReferenceAssembleLikeWholeRecords) {
  // The exchange publishes each distinct host document once; ranks refer to it by index.
  std::string a = hostToJson(power8({25.0, 100.0}));
  std::string b = hostToJson(power8({200.0}));
  std::vector<RankRecord> by_ref = twoByTwo("", "");
  for (RankRecord& record : by_ref) record.host_doc = record.hostname == "nodeA" ? 1 : 0;
  ClusterTopology cluster = assembleCluster(by_ref, {b, a});
  EXPECT_EQ(clusterToJson(cluster), clusterToJson(assembleCluster(twoByTwo(a, b))));
  // Two documents for one host: named like two records that disagree.
  HostTopology host = power8({25.0});
  host.gpus[3].bus_id = "000c:01:00.0";
  std::string changed_text = hostToJson(host);
  by_ref[1].host_doc = 2;
  try {
    assembleCluster(by_ref, {b, a, changed_text});
    ADD_FAILURE() << "no error";
  } catch (const Mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0 and 1 on host 'nodeA'"), std::string::npos);
  }
  by_ref[1].host_doc = 3;
  EXPECT_THROW(assembleCluster(by_ref, {b, a, changed_text}), InvalidArgument);
}

TEST(ClusterTest, HostsWithoutNicsTravelToo) {
  // A pinned hwloc or nvidia-smi file often lists no NIC; its record must still assemble.
  std::string a = hostToJson(power8({}));
  ClusterTopology cluster = assembleCluster(twoByTwo(a, a));
  EXPECT_EQ(cluster.hosts[0].gpuCount(), 4);
  EXPECT_EQ(cluster.inter_host_bandwidth_gbps, 0.0);  // nobody knows a NIC speed
}

}  // namespace
}  // namespace torch_topo::topo
