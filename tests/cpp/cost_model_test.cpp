// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/cost_model: closed-form alpha-beta times on uniform groups, NIC and socket
// link sharing, order independence, algorithm choice and hierarchical thresholds.
#include "topo/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "planner_fixtures.h"
#include "topo/error.h"

namespace torch_topo::topo {
namespace {

using testing::expectRangesFollowTheScan;
using testing::makeCluster;
using testing::makeHost;

constexpr double kLaneGBps = 25.0;
constexpr double kLatencyUs = 2.0;

// 4 GPUs behind NVSwitch, NV12 to every peer: 300 GB/s per pair, shared per GPU.
ClusterTopology uniformSwitched(int hosts = 1) {
  return makeCluster(makeHost({"X NV12 NV12 NV12", "NV12 X NV12 NV12", "NV12 NV12 X NV12",
                               "NV12 NV12 NV12 X"},
                              kLaneGBps, 12.0, kLatencyUs),
                     hosts, 12.5, 5.0);
}

// The closed forms below are the alpha-beta schedules'; GPU groups are otherwise priced with
// NCCL's algorithms (nccl_model_test.cpp).
CostOptions alphaBeta() {
  CostOptions o;
  o.model = ModelKind::AlphaBeta;
  return o;
}

constexpr double kB = 12 * kLaneGBps * 1e9;  // bytes/s
constexpr double kA = kLatencyUs * 1e-6;     // s
constexpr double kS = 64.0 * (1 << 20);      // bytes

TEST(CostModelTest, RingMatchesClosedForms) {
  const CostModel model(uniformSwitched(), alphaBeta());
  const std::vector<int> g{0, 1, 2, 3};
  const double n = 4;
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllReduce, kS, g, Algorithm::Ring).seconds,
              2 * (n - 1) / n * kS / kB + 2 * (n - 1) * kA, 1e-12);
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllGather, kS, g, Algorithm::Ring).seconds,
              (n - 1) / n * kS / kB + (n - 1) * kA, 1e-12);
  EXPECT_NEAR(
      model.estimateCollective(CollectiveOp::ReduceScatter, kS, g, Algorithm::Ring).seconds,
      (n - 1) / n * kS / kB + (n - 1) * kA, 1e-12);
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::Broadcast, kS, g, Algorithm::Ring).seconds,
              kS / kB + (n - 1) * kA, 1e-12);
}

TEST(CostModelTest, OtherAlgorithmsMatchClosedForms) {
  const CostModel model(uniformSwitched(), alphaBeta());
  const std::vector<int> g{0, 1, 2, 3};
  const double n = 4;
  // Recursive halving-doubling: same volume as the ring, log2(n) steps each way.
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllReduce, kS, g,
                                       Algorithm::HalvingDoubling).seconds,
              2 * (n - 1) / n * kS / kB + 2 * std::log2(n) * kA, 1e-12);
  // Double binary tree: the root of one tree sends S/2 up and 3 x S/2 down over its shared
  // NVSwitch lanes: 2S at B, and 2 x depth latency steps.
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllReduce, kS, g, Algorithm::Tree).seconds,
              2 * kS / kB + 2 * 2 * kA, 1e-12);
  // Direct all-to-all: each rank sends (n-1)/n of its buffer through its shared lanes.
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllToAll, kS, g, Algorithm::Direct).seconds,
              (n - 1) / n * kS / kB + kA, 1e-12);
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::SendRecv, kS, {0, 1}, Algorithm::Direct)
                  .seconds,
              kS / kB + kA, 1e-12);
  EXPECT_FALSE(
      model.estimateCollective(CollectiveOp::AllToAll, kS, g, Algorithm::Ring).applicable);
  EXPECT_FALSE(model.estimateCollective(CollectiveOp::AllReduce, kS, {0, 1, 2},
                                        Algorithm::HalvingDoubling).applicable);
}

TEST(CostModelTest, ReduceIsItsBroadcastReversed) {
  // Every edge of the reversed schedule has the bandwidth and latency of the edge it mirrors,
  // so each algorithm prices a reduce as its broadcast; one host's ring is the chain's closed
  // form, the tensor once over each edge after n - 1 latency steps.
  const CostModel model(uniformSwitched(2), alphaBeta());
  const std::vector<int> g{0, 1, 2, 3, 4, 5, 6, 7};
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct,
                      Algorithm::Hierarchical, Algorithm::HalvingDoubling}) {
    const CostEstimate reduce = model.estimateCollective(CollectiveOp::Reduce, kS, g, a);
    const CostEstimate broadcast = model.estimateCollective(CollectiveOp::Broadcast, kS, g, a);
    EXPECT_EQ(reduce.applicable, broadcast.applicable) << toString(a);
    if (broadcast.applicable) EXPECT_NEAR(reduce.seconds, broadcast.seconds, 1e-12) << toString(a);
  }
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::Reduce, kS, {0, 1, 2, 3}, Algorithm::Ring)
                  .seconds,
              kS / kB + 3 * kA, 1e-12);
  EXPECT_EQ(parseCollectiveOp("reduce"), CollectiveOp::Reduce);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveOp::Reduce, 8), 1.0);
}

TEST(CostModelTest, BusBandwidthFollowsNcclTests) {
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveOp::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveOp::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveOp::AllToAll, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(busBandwidthFactor(CollectiveOp::Broadcast, 4), 1.0);
  const CostModel model(uniformSwitched(), alphaBeta());
  const CostEstimate e =
      model.estimateCollective(CollectiveOp::AllReduce, kS, {0, 1, 2, 3}, Algorithm::Ring);
  EXPECT_NEAR(e.bus_bandwidth_gbps, kS / e.seconds / 1e9 * 1.5, 1e-9);
}

TEST(CostModelTest, RingEdgesThroughOneNicShareIt) {
  // 2 hosts x 4 GPUs, one 12.5 GB/s network per host. A host-major ring crosses each host's
  // NIC once per direction; an interleaved ring (given as is) crosses it four times.
  CostOptions fixed = alphaBeta();
  fixed.search_ring_order = false;
  const CostModel model(uniformSwitched(2), fixed);
  const double net = 12.5e9, net_lat = 5e-6, n = 8;
  const double per_edge = 2 * (n - 1) / n * kS;
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllReduce, kS, {0, 1, 2, 3, 4, 5, 6, 7},
                                       Algorithm::Ring).seconds,
              per_edge / net + 2 * (n - 1) * net_lat, 1e-9);
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllReduce, kS, {0, 4, 1, 5, 2, 6, 3, 7},
                                       Algorithm::Ring).seconds,
              4 * per_edge / net + 2 * (n - 1) * net_lat, 1e-9);
  // With the order search on, the interleaved group gets the host-major cost back.
  const CostModel searching(uniformSwitched(2), alphaBeta());
  EXPECT_NEAR(searching.estimateCollective(CollectiveOp::AllReduce, kS, {0, 4, 1, 5, 2, 6, 3, 7},
                                           Algorithm::Ring).seconds,
              per_edge / net + 2 * (n - 1) * net_lat, 1e-9);
}

TEST(CostModelTest, HierarchicalMatchesPipelinedLevels) {
  CostOptions one_chunk = alphaBeta();
  one_chunk.chunk_bytes = int64_t{1} << 40;
  const CostModel model(uniformSwitched(2), one_chunk);
  const double net = 12.5e9, net_lat = 5e-6, L = 4;
  // Intra reduce-scatter + 4 rails all-reducing S/4 across 2 hosts through one NIC + intra
  // all-gather.
  const double intra = (L - 1) / L * kS / kB + (L - 1) * kA;
  const double inter = 4 * (2 * 0.5 * kS / L) / net + 2 * net_lat;
  EXPECT_NEAR(model.estimateCollective(CollectiveOp::AllReduce, kS, {0, 1, 2, 3, 4, 5, 6, 7},
                                       Algorithm::Hierarchical).seconds,
              2 * intra + inter, 1e-9);
  EXPECT_EQ(model.chooseAlgorithm(CollectiveOp::AllReduce, kS, {0, 1, 2, 3, 4, 5, 6, 7})
                .algorithm,
            Algorithm::Hierarchical);
}

TEST(CostModelTest, HierarchicalThresholds) {
  const CostModel single(uniformSwitched(1), alphaBeta());
  for (const auto& t : computeHierarchicalThresholds(single, {0, 1, 2, 3}))
    EXPECT_TRUE(t.ranges.empty()) << toString(t.op);
  const CostModel two(uniformSwitched(2), alphaBeta());
  const auto thresholds = computeHierarchicalThresholds(two, {0, 1, 2, 3, 4, 5, 6, 7});
  ASSERT_EQ(thresholds.size(), 5u);
  EXPECT_EQ(thresholds[0].op, CollectiveOp::AllReduce);
  // On links alike both ways a reduce turns hierarchical where its broadcast does.
  EXPECT_EQ(thresholds[4].op, CollectiveOp::Reduce);
  EXPECT_EQ(thresholds[4].ranges, thresholds[3].ranges);
  EXPECT_FALSE(thresholds[0].ranges.empty());
  expectRangesFollowTheScan(two, {0, 1, 2, 3, 4, 5, 6, 7}, 1.0);
}

TEST(CostModelTest, SysTransfersShareTheSocketLink) {
  // Two GPUs per NUMA node: PHB inside a node (12 GB/s), SYS across it (10 GB/s per path, and
  // the socket link carries no more than its fastest SYS path).
  HostTopology host = makeHost({"X PHB SYS SYS", "PHB X SYS SYS", "SYS SYS X PHB",
                                "SYS SYS PHB X"},
                               kLaneGBps, 12.0, kLatencyUs);
  for (int a = 0; a < 4; ++a) {
    host.gpus[a].numa_node = a / 2;
    for (int b = 0; b < 4; ++b)
      if (host.path(a, b).cls == PathClass::SYS) host.path(a, b).bandwidth_gbps = 10.0;
  }
  const double two_steps = 2 * kA;  // a pair's ring all-reduce: 2 (n-1) latency steps
  auto pairs = [&](const HostTopology& h, std::vector<std::vector<int>> groups) {
    return CostModel(makeCluster(h, 1), alphaBeta())
        .estimateConcurrent(CollectiveOp::AllReduce, kS, groups, Algorithm::Ring)
        .seconds;
  };
  // Each ring edge of a pair carries S. Two cross pairs at once put 2S on each direction of
  // the socket link; one alone, or pairs inside the nodes, do not share it.
  EXPECT_NEAR(pairs(host, {{0, 2}}), kS / 10e9 + two_steps, 1e-12);
  EXPECT_NEAR(pairs(host, {{0, 2}, {1, 3}}), 2 * kS / 10e9 + two_steps, 1e-12);
  EXPECT_NEAR(pairs(host, {{0, 1}, {2, 3}}), kS / 12e9 + two_steps, 1e-12);
  // Without NUMA nodes the model does not know which link a SYS path takes: paths only.
  for (Gpu& g : host.gpus) g.numa_node = -1;
  EXPECT_NEAR(pairs(host, {{0, 2}, {1, 3}}), kS / 10e9 + two_steps, 1e-12);
}

TEST(CostModelTest, GroupOrderDoesNotChangeCost) {
  // Placement prices each grouping once, whatever order its groups and members come in: the
  // ring order search starts from the sorted members. DGX-1 links are all different, so a
  // position-dependent tie would show.
  const CostModel model(makeCluster(makeHost(testing::dgx1Rows()), 1), alphaBeta());
  const std::vector<std::vector<int>> a{{0, 1, 5, 4}, {2, 3, 7, 6}}, b{{6, 2, 7, 3}, {4, 0, 5, 1}};
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather,
                          CollectiveOp::ReduceScatter, CollectiveOp::AllToAll}) {
    for (Algorithm alg : {Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling,
                          Algorithm::Direct}) {
      const CostEstimate x = model.estimateConcurrent(op, kS, a, alg);
      const CostEstimate y = model.estimateConcurrent(op, kS, b, alg);
      EXPECT_EQ(x.applicable, y.applicable) << toString(op) << " " << toString(alg);
      if (x.applicable) EXPECT_EQ(x.seconds, y.seconds) << toString(op) << " " << toString(alg);
    }
  }
}

TEST(CostModelTest, RejectsBadGroups) {
  const CostModel model(uniformSwitched());
  EXPECT_THROW(model.chooseAlgorithm(CollectiveOp::AllReduce, 8, {}), InvalidArgument);
  EXPECT_THROW(model.chooseAlgorithm(CollectiveOp::AllReduce, 8, {0, 0}), InvalidArgument);
  EXPECT_THROW(model.chooseAlgorithm(CollectiveOp::AllReduce, 8, {0, 9}), InvalidArgument);
  EXPECT_THROW(model.chooseAlgorithm(CollectiveOp::AllReduce, -1, {0, 1}), InvalidArgument);
  EXPECT_THROW(parseCollectiveOp("allreduce"), InvalidArgument);
  EXPECT_EQ(parseAlgorithm("tree"), Algorithm::Tree);
}

}  // namespace
}  // namespace torch_topo::topo
