// SPDX-License-Identifier: Apache-2.0
// Tests of the net plugin's reported latency in csrc/topo/nccl_model (NCCL's latencyInter):
// NCCL's estimates add it per network step by tuning.cc's formula, the model's prices do not.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "planner_fixtures.h"
#include "topo/nccl_model.h"

namespace torch_topo::topo {
namespace {

using testing::addNics;
using testing::iota;
using testing::makeCluster;
using testing::switchedHost;

constexpr double kPluginUs = 75.0;  // aws-ofi-nccl on p4d, p4de and p5

// `hosts` H100 hosts with eight 400G NICs each, reporting `latency_us`.
ClusterTopology cluster(int hosts, double latency_us) {
  HostTopology host = switchedHost(90, 20.6);
  addNics(host, 8, 400);
  for (Nic& nic : host.nics) nic.latency_us = latency_us;
  return makeCluster(host, hosts, 0.0, 0.0);
}

// One rank per host: GPU 0 of each.
std::vector<int> firstGpus(int hosts) {
  std::vector<int> ranks;
  for (int h = 0; h < hosts; ++h) ranks.push_back(8 * h);
  return ranks;
}

struct Case {
  CollectiveOp op;
  NcclAlgo algo;
  bool one_per_host;
};

// NCCL's tuning.cc: interLat gains latencyInter once, twice with Simple (its flush), and each
// algorithm counts its network steps: the ring 2(n-1) for all-reduce and n-1 for all-gather and
// reduce-scatter (none for broadcast, priced per hop), the trees 2 log2(n), PAT log2(n) / 3.5.
double ncclAddition(const Case& c, NcclProto p, int hosts, double latency_us) {
  const double inter = latency_us * (p == NcclProto::Simple ? 2 : 1);
  const double log2n = std::floor(std::log2(hosts));
  switch (c.algo) {
    case NcclAlgo::Ring:
      return c.op == CollectiveOp::AllReduce ? 2 * (hosts - 1) * inter
             : c.op == CollectiveOp::Broadcast ? 0.0
                                               : (hosts - 1) * inter;
    case NcclAlgo::Tree:
    case NcclAlgo::NvlsTree: return 2 * log2n * inter;
    case NcclAlgo::Pat: return log2n * inter / 3.5;
    default: break;
  }
  ADD_FAILURE() << "no formula for " << toString(c.algo);
  return 0.0;
}

TEST(NcclPluginLatencyTest, TuningEntriesGainNcclsLatencyInterPerNetworkStep) {
  const Case cases[] = {{CollectiveOp::AllReduce, NcclAlgo::Ring, false},
                        {CollectiveOp::AllGather, NcclAlgo::Ring, false},
                        {CollectiveOp::ReduceScatter, NcclAlgo::Ring, false},
                        {CollectiveOp::Broadcast, NcclAlgo::Ring, false},
                        {CollectiveOp::AllReduce, NcclAlgo::Tree, false},
                        {CollectiveOp::AllReduce, NcclAlgo::NvlsTree, false},
                        {CollectiveOp::AllReduce, NcclAlgo::Ring, true},
                        {CollectiveOp::AllGather, NcclAlgo::Pat, true}};
  int compared = 0;
  for (int hosts : {2, 3, 4, 16}) {
    const CostModel plain(cluster(hosts, 0.0)), efa(cluster(hosts, kPluginUs));
    EXPECT_DOUBLE_EQ(NcclModel(efa).shapeOf({iota(8 * hosts)}).net_latency_us, kPluginUs);
    for (const Case& c : cases) {
      const std::vector<int> ranks = c.one_per_host ? firstGpus(hosts) : iota(8 * hosts);
      for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple}) {
        const auto without = NcclModel(plain).tuning(c.op, {ranks}, c.algo, p);
        const auto with = NcclModel(efa).tuning(c.op, {ranks}, c.algo, p);
        ASSERT_EQ(with.has_value(), without.has_value());
        if (!with) continue;
        SCOPED_TRACE(std::to_string(hosts) + " hosts " + toString(c.op) + " " + toString(c.algo) +
                     " " + toString(p));
        EXPECT_NEAR(with->latency_us - without->latency_us,
                    ncclAddition(c, p, hosts, kPluginUs), 1e-9);
        EXPECT_DOUBLE_EQ(with->alg_gbps, without->alg_gbps);
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 60);
}

TEST(NcclPluginLatencyTest, OneHostAndUnlistedLatencyAddNothing) {
  const CostModel plain(cluster(1, 0.0)), efa(cluster(1, kPluginUs));
  EXPECT_DOUBLE_EQ(NcclModel(efa).shapeOf({iota(8)}).net_latency_us, 0.0);
  for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple}) {
    const auto without = NcclModel(plain).tuning(CollectiveOp::AllReduce, {iota(8)}, NcclAlgo::Ring, p);
    const auto with = NcclModel(efa).tuning(CollectiveOp::AllReduce, {iota(8)}, NcclAlgo::Ring, p);
    ASSERT_TRUE(with && without);
    EXPECT_DOUBLE_EQ(with->latency_us, without->latency_us);
  }
}

TEST(NcclPluginLatencyTest, PricesStayAndNcclsPickKeepsTheTreeLongerOnManyHosts) {
  // 16 hosts: the ring pays 30 network steps of the plugin's latency in NCCL's estimate, the
  // tree 8, so NCCL takes the tree to larger sizes; the model's time of each algorithm is the
  // same with or without the reported latency.
  const int hosts = 16;
  const CostModel plain(cluster(hosts, 0.0)), efa(cluster(hosts, kPluginUs));
  const std::vector<int> all = iota(8 * hosts);
  int ring_to_tree = 0;
  for (int shift = 10; shift <= 34; ++shift) {
    const int64_t bytes = int64_t{1} << shift;
    for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::NvlsTree}) {
      const CostEstimate without = plain.estimateCollective(CollectiveOp::AllReduce, bytes, all, a);
      const CostEstimate with = efa.estimateCollective(CollectiveOp::AllReduce, bytes, all, a);
      ASSERT_EQ(with.applicable, without.applicable) << bytes;
      if (!with.applicable) continue;
      EXPECT_GE(with.choice_seconds, without.choice_seconds) << toString(a) << " " << bytes;
      if (with.protocol == without.protocol)
        EXPECT_DOUBLE_EQ(with.seconds, without.seconds) << toString(a) << " " << bytes;
    }
    const Algorithm before = plain.chooseFlat(CollectiveOp::AllReduce, bytes, {all}).algorithm;
    const Algorithm after = efa.chooseFlat(CollectiveOp::AllReduce, bytes, {all}).algorithm;
    if (before == Algorithm::Ring && after != Algorithm::Ring) ++ring_to_tree;
    EXPECT_FALSE(before != Algorithm::Ring && after == Algorithm::Ring) << bytes;
  }
  EXPECT_GT(ring_to_tree, 0);
}

}  // namespace
}  // namespace torch_topo::topo
