// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nccl_model and nccl_tuning: NCCL's tables, which algorithm exists where,
// the latency formulas on closed forms, NICs of every rail, and the 1.15x hierarchical margin.
// The model's agreement with published nccl-tests runs is pinned in tests/py/test_nccl_model.py.
#include "topo/nccl_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "planner_fixtures.h"
#include "test_data.h"
#include "topo/loader.h"

namespace torch_topo::topo {
namespace {

using testing::addNics;
using testing::iota;
using testing::expectRangesFollowTheScan;
using testing::makeCluster;
using testing::makeHost;
using testing::switchedHost;

TEST(NcclTuningTest, TablesHoldNcclsConstants) {
  EXPECT_DOUBLE_EQ(ncclBaseLatencyUs(NcclAlgo::Ring, NcclProto::LL), 6.6);
  EXPECT_DOUBLE_EQ(ncclBaseLatencyUs(NcclAlgo::Tree, NcclProto::Simple), 8.4);
  EXPECT_DOUBLE_EQ(ncclHopLatencyUs(NcclHop::NvLink, NcclAlgo::Ring, NcclProto::LL128), 1.9);
  EXPECT_DOUBLE_EQ(ncclHopLatencyUs(NcclHop::Pci, NcclAlgo::Ring, NcclProto::Simple), 5.7);
  EXPECT_DOUBLE_EQ(ncclHopLatencyUs(NcclHop::Net, NcclAlgo::Tree, NcclProto::Simple), 14.0);
  EXPECT_DOUBLE_EQ(ncclHopLatencyUs(NcclHop::NvLink, NcclAlgo::Nvls, NcclProto::Simple), 25.0);
  EXPECT_DOUBLE_EQ(ncclHopLatencyUs(NcclHop::Net, NcclAlgo::NvlsTree, NcclProto::Simple), 20.9);
  EXPECT_DOUBLE_EQ(ncclHopLatencyUs(NcclHop::Pci, NcclAlgo::Nvls, NcclProto::Simple), 0.0);
  EXPECT_DOUBLE_EQ(ncclLlMaxBusGBps(NcclGeneration::Ampere, false, 1), 87.7);
  EXPECT_DOUBLE_EQ(ncclLlMaxBusGBps(NcclGeneration::Hopper, true, 4), 19.0);
  EXPECT_DOUBLE_EQ(ncclNetOverheadUs(true, NcclProto::Simple), 6.0);
  EXPECT_EQ(ncclGeneration(0), NcclGeneration::Ampere);
  EXPECT_EQ(ncclGeneration(90), NcclGeneration::Hopper);
  EXPECT_EQ(ncclGeneration(100), NcclGeneration::Blackwell);
  EXPECT_DOUBLE_EQ(nvlsAlgFraction(NcclGeneration::Ampere), 0.0);
  EXPECT_GT(nvlsAlgFraction(NcclGeneration::Hopper), 0.0);
}

TEST(NcclTuningTest, BlackwellTreeCapsFollowTheRelease) {
  // NCCL 2.28.3 replaced Blackwell's tree caps (twice Hopper's until then) by its own figures,
  // which describe what the tree moves; Hopper's bound NCCL's estimate only.
  const NcclChannelCaps newest = ncclChannelCaps(NcclGeneration::Blackwell, 4);
  EXPECT_DOUBLE_EQ(newest.tree, 24.0);
  EXPECT_DOUBLE_EQ(newest.tree_ll128, 20.0);
  EXPECT_TRUE(newest.tree_bounds_transfers);
  EXPECT_DOUBLE_EQ(ncclChannelCaps(NcclGeneration::Blackwell, 2, 22803).tree, 42.8);
  const NcclChannelCaps older = ncclChannelCaps(NcclGeneration::Blackwell, 4, 22703);
  EXPECT_DOUBLE_EQ(older.tree, 72.0);
  EXPECT_DOUBLE_EQ(older.tree_ll128, 58.0);
  EXPECT_FALSE(older.tree_bounds_transfers);
  EXPECT_FALSE(ncclChannelCaps(NcclGeneration::Hopper, 4).tree_bounds_transfers);
  EXPECT_DOUBLE_EQ(ncclChannelCaps(NcclGeneration::Hopper, 4).tree, 36.0);
}

TEST(NcclTuningTest, TreeCorrectionIndexesBySizeAsNcclDoes) {
  // NCCL indexes treeCorrectionFactor by log2(bytes / 64), rounded down: 64-127 B is entry 0,
  // so are 0 and 8 B; 256 MiB the last entry (22); from 512 MiB no correction.
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::Simple, 0), 0.9);
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::LL, 127), 1.0);
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::LL, 256 << 10), 0.4);         // entry 12
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::LL, (256 << 10) - 1), 0.5);   // entry 11
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::Simple, 1 << 20), 0.5);       // entry 14
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::LL128, 4 << 20), 0.8);        // entry 16
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::Simple, 256 << 20), 0.9);     // entry 22
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::Simple, (512LL << 20) - 1), 0.9);
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::Simple, 512LL << 20), 1.0);
  EXPECT_DOUBLE_EQ(ncclTreeCorrection(NcclProto::LL128, 16LL << 30), 1.0);
}

TEST(NcclModelTest, TreeBandwidthTakesNcclsCorrection) {
  // Two hosts of 8 H100s, tree forced, LL128 at both sizes: the time per extra byte at 4 MiB
  // (NCCL's correction .8) is 1/.8 of what it is at 128 MiB (1.0); the latency is the same at
  // every size, so it cancels in the differences.
  const CostModel model(makeCluster(switchedHost(90), 2));
  auto seconds_per_byte = [&](int64_t bytes, int64_t extra) {
    double t[2];
    for (int k = 0; k < 2; ++k) {
      const CostEstimate e = model.estimateCollective(CollectiveOp::AllReduce, bytes + k * extra,
                                                      iota(16), Algorithm::Tree);
      EXPECT_EQ(e.protocol, "LL128") << bytes + k * extra;
      t[k] = e.seconds;
    }
    return (t[1] - t[0]) / extra;
  };
  // Each pair stays within one power of two (one entry of the table).
  const double mid = seconds_per_byte(4 << 20, 64 << 10), big = seconds_per_byte(128 << 20, 16 << 20);
  EXPECT_NEAR(mid / big, 1 / 0.8, 1e-6);
}

TEST(NcclModelTest, RingLatencyFollowsNcclsFormula) {
  // One NVSwitch host of 8 A100s: ring LL latency = base 6.6 + 14 steps x 0.6 us (NVLink), plus
  // the per-call overhead; 8 bytes move in no measurable time.
  const CostModel model(makeCluster(switchedHost(80), 1));
  const CostEstimate e = model.estimateCollective(CollectiveOp::AllReduce, 8, iota(8),
                                                  Algorithm::Ring);
  ASSERT_TRUE(e.applicable);
  EXPECT_EQ(e.protocol, "LL");
  EXPECT_NEAR(e.seconds, (kNcclCallOverheadUs + 6.6 + 14 * 0.6) * 1e-6, 1e-9);
  // Large: Simple at the ring's bus bandwidth, 18 lanes x 20 GB/s through the switch, after
  // the pipeline fill.
  const double bytes = 1 << 30;
  const CostEstimate big = model.estimateCollective(CollectiveOp::AllReduce, bytes, iota(8),
                                                    Algorithm::Ring);
  EXPECT_EQ(big.protocol, "Simple");
  const double latency = (kNcclCallOverheadUs + 8.4 + 14 * 3.4) * 1e-6;
  EXPECT_NEAR(big.seconds, latency + (bytes + kSimpleFillBytes) * 2 * 7 / 8 / (360e9), 1e-9);
}

TEST(NcclModelTest, ReduceIsTunedAsBroadcast) {
  // NCCL runs reduce and broadcast as rings only, with one latency and bandwidth formula for
  // both (src/graph/tuning.cc): every algorithm prices them alike, on one host and across two.
  for (int hosts : {1, 2}) {
    HostTopology host = switchedHost(90);
    addNics(host, 8, 400);
    const CostModel model(makeCluster(host, hosts));
    const std::vector<int> g = iota(8 * hosts);
    for (int64_t bytes : {int64_t{8}, int64_t{1} << 20, int64_t{1} << 30}) {
      for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Nvls, Algorithm::NvlsTree,
                          Algorithm::Pat, Algorithm::Hierarchical}) {
        const CostEstimate r = model.estimateCollective(CollectiveOp::Reduce, bytes, g, a);
        const CostEstimate b = model.estimateCollective(CollectiveOp::Broadcast, bytes, g, a);
        EXPECT_EQ(r.applicable, b.applicable) << toString(a) << " " << bytes;
        if (!b.applicable) continue;
        EXPECT_DOUBLE_EQ(r.seconds, b.seconds) << toString(a) << " " << bytes;
        // The two-level form runs its levels in the opposite order.
        std::string levels = b.protocol;
        if (a == Algorithm::Hierarchical) {
          const size_t cut = levels.find('/');
          levels = levels.substr(cut + 1) + "/" + levels.substr(0, cut);
        }
        EXPECT_EQ(r.protocol, levels) << toString(a) << " " << bytes;
      }
      EXPECT_EQ(model.chooseFlat(CollectiveOp::Reduce, bytes, {g}).algorithm, Algorithm::Ring);
    }
  }
}

TEST(NcclModelTest, NvlsOnlyOnHopperNvswitchHosts) {
  const std::vector<int> g = iota(8);
  const CostModel ampere(makeCluster(switchedHost(80), 1));
  const CostModel hopper(makeCluster(switchedHost(90, 20.6), 1));
  EXPECT_FALSE(ampere.estimateCollective(CollectiveOp::AllReduce, 1 << 30, g, Algorithm::Nvls)
                   .applicable);
  const CostEstimate nvls =
      hopper.estimateCollective(CollectiveOp::AllReduce, int64_t{16} << 30, g, Algorithm::Nvls);
  ASSERT_TRUE(nvls.applicable);
  EXPECT_NEAR(nvls.alg_bandwidth_gbps, nvlsAlgFraction(NcclGeneration::Hopper) * 18 * 20.6, 0.5);
  EXPECT_EQ(hopper.chooseAlgorithm(CollectiveOp::AllReduce, int64_t{16} << 30, g).algorithm,
            Algorithm::Nvls);
  // NVLS tree needs several hosts, PAT one GPU per host, CollNet a NIC declaring it.
  EXPECT_FALSE(hopper.estimateCollective(CollectiveOp::AllReduce, 1 << 20, g, Algorithm::NvlsTree)
                   .applicable);
  EXPECT_FALSE(hopper.estimateCollective(CollectiveOp::AllGather, 1 << 20, g, Algorithm::Pat)
                   .applicable);
  EXPECT_FALSE(hopper.estimateCollective(CollectiveOp::AllReduce, 1 << 20, g, Algorithm::CollNet)
                   .applicable);
  // Algorithms NCCL does not have for the op.
  EXPECT_FALSE(hopper.estimateCollective(CollectiveOp::AllGather, 1 << 20, g, Algorithm::Tree)
                   .applicable);
  EXPECT_FALSE(hopper.estimateCollective(CollectiveOp::AllReduce, 1 << 20, g,
                                         Algorithm::HalvingDoubling)
                   .applicable);
}

TEST(NcclModelTest, FlatRingUsesEveryRail) {
  // 2 hosts x 8 GPUs, one 50 GB/s NIC per GPU: NCCL's channels leave through all 8 NICs, so
  // the flat ring runs at the NVLink ring's pace (360 GB/s < 8 x 50), not one NIC's.
  HostTopology host = switchedHost(80);
  for (int k = 0; k < 8; ++k) host.nics.push_back({"mlx5_" + std::to_string(k), "", 0, 400.0, {}});
  host.gpu_nic_paths.assign(64, PathInfo{PathClass::SYS, 0, 0.0, 0.0});
  for (int i = 0; i < 8; ++i) host.gpu_nic_paths[i * 8 + i] = PathInfo{PathClass::PIX, 0, 0.0, 0.0};
  const CostModel model(makeCluster(host, 2, 0.0, 0.0));
  const NcclModel::Shape s = NcclModel(model).shapeOf({iota(16)});
  EXPECT_EQ(s.hosts, 2);
  EXPECT_EQ(s.per_host, 8);
  EXPECT_NEAR(s.net_gbps, 8 * 50.0, 1e-9);
  EXPECT_NEAR(s.intra_bus_gbps, 360.0, 1e-6);
  // The 8 rails of a hierarchical schedule share nothing: 50 GB/s each.
  std::vector<std::vector<int>> rails;
  for (int k = 0; k < 8; ++k) rails.push_back({k, 8 + k});
  EXPECT_NEAR(NcclModel(model).shapeOf(rails).net_gbps, 50.0, 1e-9);
  const CostEstimate ring =
      model.estimateCollective(CollectiveOp::AllReduce, int64_t{16} << 30, iota(16), Algorithm::Ring);
  EXPECT_NEAR(ring.bus_bandwidth_gbps, 360.0, 360.0 * 0.02);
}

TEST(NcclModelTest, AnNvlinkDomainSpanningHostsIsOneNode) {
  // 4 hosts x 8 GPUs, one 50 GB/s NIC per host; hosts 0-1 and 2-3 form two NVLink domains.
  // NCCL joins a domain's ranks over NVLink as one node: 2 nodes of 16, NVLink between hosts
  // of a domain, NICs only between domains.
  HostTopology host = switchedHost(90, 20.6);
  host.nics.push_back({"mlx5_0", "", 0, 400.0, {}});
  ClusterTopology cluster = makeCluster(host, 4, 0.0, 0.0);
  for (size_t h = 0; h < cluster.hosts.size(); ++h)
    for (Gpu& g : cluster.hosts[h].gpus) g.nvlink_domain = h < 2 ? "a/1" : "a/2";
  const CostModel model(cluster);
  EXPECT_TRUE(model.nvlinkDomainPair(0, 8));
  EXPECT_FALSE(model.nvlinkDomainPair(0, 1));  // one host: its own path
  EXPECT_FALSE(model.nvlinkDomainPair(0, 16));
  EXPECT_NEAR(model.pairBandwidth(0, 8), 18 * 20.6, 1e-9);
  EXPECT_NEAR(model.pairBandwidth(0, 16), 50.0, 1e-9);
  EXPECT_EQ(model.nodeOf(8), model.nodeOf(15));
  EXPECT_NE(model.nodeOf(15), model.nodeOf(16));
  const NcclModel::Shape one = NcclModel(model).shapeOf({iota(16)});
  EXPECT_EQ(one.hosts, 1);
  EXPECT_EQ(one.per_host, 16);
  EXPECT_TRUE(one.nvlink && one.nvswitch);
  EXPECT_NEAR(one.intra_bus_gbps, 18 * 20.6, 1e-6);
  const NcclModel::Shape both = NcclModel(model).shapeOf({iota(32)});
  EXPECT_EQ(both.hosts, 2);
  // Two NICs per node (one per host), each used by one group.
  EXPECT_NEAR(both.net_gbps, 2 * 50.0, 1e-9);
  // The domain's all-reduce is NVLink-fast; the same hosts without a domain are NIC-bound.
  const CostEstimate fast = model.chooseAlgorithm(CollectiveOp::AllReduce, int64_t{1} << 30, iota(16));
  ClusterTopology plain = makeCluster(host, 4, 0.0, 0.0);
  const CostEstimate slow =
      CostModel(plain).chooseAlgorithm(CollectiveOp::AllReduce, int64_t{1} << 30, iota(16));
  EXPECT_GT(fast.bus_bandwidth_gbps, 300.0);
  EXPECT_LT(slow.bus_bandwidth_gbps, 110.0);
}

TEST(NcclModelTest, GpusTiedBetweenNicsTakeThemInTurn) {
  // Every GPU sees both NICs at SYS (as on a GB200 tray): they alternate, so a ring across two
  // hosts leaves through both NICs; all on the first once halved the network.
  HostTopology host = switchedHost(90, 20.6);
  for (int k = 0; k < 2; ++k) host.nics.push_back({"mlx5_" + std::to_string(k), "", 0, 400.0, {}});
  host.gpu_nic_paths.assign(16, PathInfo{PathClass::SYS, 0, 0.0, 0.0});
  const CostModel model(makeCluster(host, 2, 0.0, 0.0));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(model.railOf(r), r % 2) << r;
  EXPECT_NEAR(NcclModel(model).shapeOf({iota(16)}).net_gbps, 2 * 50.0, 1e-9);
}

TEST(NcclModelTest, AGroupInsideOneHostTakesNoShareOfTheNics) {
  // A launcher's layout keeps some groups inside a host beside others across hosts: the pair
  // inside took a share of the NIC it never touches, and doubled the cross-host pair's time.
  HostTopology host = switchedHost(90, 20.6);
  for (int k = 0; k < 2; ++k) host.nics.push_back({"mlx5_" + std::to_string(k), "", 0, 400.0, {}});
  host.gpu_nic_paths.assign(16, PathInfo{PathClass::SYS, 0, 0.0, 0.0});
  const CostModel model(makeCluster(host, 2, 0.0, 0.0));
  ASSERT_EQ(model.railOf(2), model.railOf(0));  // the inside pair sits on the same rail
  const NcclModel nccl(model);
  EXPECT_NEAR(nccl.shapeOf({{0, 8}, {2, 4}}).net_gbps, nccl.shapeOf({{0, 8}}).net_gbps, 1e-9);
  // Two pairs across hosts on that rail do share it.
  EXPECT_NEAR(nccl.shapeOf({{0, 8}, {2, 10}}).net_gbps, nccl.shapeOf({{0, 8}}).net_gbps / 2, 1e-9);
  const int64_t bytes = int64_t{1} << 30;
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather}) {
    const double across = model.chooseConcurrent(op, bytes, {{0, 8}}).seconds;
    const double inside = model.chooseConcurrent(op, bytes, {{2, 4}}).seconds;
    ASSERT_LT(inside, across);
    EXPECT_NEAR(model.chooseConcurrent(op, bytes, {{0, 8}, {2, 4}}).seconds, across, across * 0.01)
        << toString(op);
  }
}

TEST(NcclModelTest, AGpuWithSeveralNearestNicsSpreadsOverThem) {
  // Hosts with more NICs than GPUs (OCI's 16 x 200G, AWS p5's 32 x 100G for 8 GPUs): NCCL
  // spreads a GPU's channels over its nearest NICs, so the same 400 GB/s per host reaches the
  // same bus bandwidth however it is cut; one NIC per GPU once left a half or a quarter of it.
  auto cluster_with = [](int nics, double gbit, bool paths) {
    HostTopology host = switchedHost(90, 20.6);
    for (int k = 0; k < nics; ++k)
      host.nics.push_back({"mlx5_" + std::to_string(k), "", 0, gbit, {}});
    if (paths) {  // each GPU behind one PCIe switch with its own nics / 8 NICs
      host.gpu_nic_paths.assign(static_cast<size_t>(8) * nics, PathInfo{PathClass::SYS, 0, 0.0, 0.0});
      for (int g = 0; g < 8; ++g)
        for (int k = g * nics / 8; k < (g + 1) * nics / 8; ++k)
          host.gpu_nic_paths[g * nics + k].cls = PathClass::PIX;
    }
    return makeCluster(host, 2, 0.0, 0.0);
  };
  const double one_per_gpu =
      NcclModel(CostModel(cluster_with(8, 400, false))).shapeOf({iota(16)}).net_gbps;
  EXPECT_NEAR(one_per_gpu, 400.0, 1e-9);
  for (bool paths : {false, true}) {
    for (auto [nics, gbit] : {std::pair{16, 200.0}, std::pair{32, 100.0}}) {
      const CostModel model(cluster_with(nics, gbit, paths));
      EXPECT_EQ(model.nicsOf(0).size(), static_cast<size_t>(nics / 8));
      EXPECT_NEAR(NcclModel(model).shapeOf({iota(16)}).net_gbps, one_per_gpu, 1e-9);
      // One rank per host leaves through its own NICs only.
      EXPECT_NEAR(NcclModel(model).shapeOf({{0, 8}}).net_gbps, one_per_gpu / 8, 1e-9);
      EXPECT_NEAR(model.pairBandwidth(0, 8), one_per_gpu / 8, 1e-9);
    }
  }
}

TEST(NcclModelTest, HierarchicalNeedsTheMargin) {
  // The ranges follow the definition with the margin: hierarchical x 1.15 beats NCCL's best.
  HostTopology host = switchedHost(90, 20.6);
  const CostModel model(makeCluster(host, 2, 12.5, 0.0));  // one 100 Gbit/s link per host
  const std::vector<int> g = iota(16);
  expectRangesFollowTheScan(model, g, kHierarchicalMarginOverNccl);
  // chooseAlgorithm agrees: hierarchical only with the margin.
  for (int64_t b : {int64_t{1} << 20, int64_t{1} << 30}) {
    const CostEstimate best = model.chooseAlgorithm(CollectiveOp::AllReduce, b, g);
    const double hier = model.estimateCollective(CollectiveOp::AllReduce, b, g,
                                                 Algorithm::Hierarchical).seconds;
    const double flat = model.chooseFlat(CollectiveOp::AllReduce, b, {g}).seconds;
    EXPECT_EQ(best.algorithm == Algorithm::Hierarchical, hier * kHierarchicalMarginOverNccl < flat);
  }
}

TEST(NcclModelTest, HierarchicalCanWinInABandOnly) {
  // Four DGX-1 hosts on one EDR NIC each: the two-level schedule beats NCCL's best from the
  // mid sizes, where its fewer network steps count, until the extra pass over the bytes costs
  // more than they save. The group takes it in that band, not from it up nor never.
  HostTopology host = makeHost(testing::dgx1Rows(), 20.0, 12.0, 1.0);
  for (Gpu& g : host.gpus) g.sm = 70;
  addNics(host, 1, 100.0);
  const CostModel model(makeCluster(host, 4, 12.5, 0.0));
  EXPECT_GT(expectRangesFollowTheScan(model, iota(32), kHierarchicalMarginOverNccl), 0);
}

TEST(NcclModelTest, CpuRanksKeepTheAlphaBetaModel) {
  ClusterTopology c = makeCluster(switchedHost(90), 2);
  c.ranks.push_back({0, -1, 8});
  const CostModel model(c);
  EXPECT_TRUE(model.usesNccl({{0, 1}}));
  EXPECT_FALSE(model.usesNccl({{0, 16}}));
  CostOptions alpha_beta;
  alpha_beta.model = ModelKind::AlphaBeta;
  EXPECT_FALSE(CostModel(c, alpha_beta).usesNccl({{0, 1}}));
  EXPECT_EQ(model.estimateCollective(CollectiveOp::AllReduce, 1 << 20, {0, 16}, Algorithm::Ring)
                .protocol,
            "");
}

TEST(NcclModelTest, CollNetWhereEveryNicDeclaresIt) {
  // The Nebius H100 file's NICs carry coll="1" (SHARP-capable InfiniBand): CollNet applies
  // across two such hosts of Hopper GPUs on NVSwitch.
  HostTopology host = loadTopologyFile(testing::dataPath("nccl_topo_xml/nebius_h100_vm_8xH100_8xIB_topo_v1.xml"));
  for (Gpu& g : host.gpus) g.sm = 90;
  ClusterTopology c = makeCluster(host, 2, 0.0, 0.0);
  const CostModel model(c);
  const NcclModel::Shape s = NcclModel(model).shapeOf({iota(16)});
  EXPECT_TRUE(s.collnet);
  for (HostTopology& h : c.hosts)
    for (Nic& n : h.nics) n.attrs.clear();
  EXPECT_FALSE(NcclModel(CostModel(c)).shapeOf({iota(16)}).collnet);
}

TEST(NcclModelTest, TuningEntriesMatchNcclsOwnLogs) {
  // NCCL 2.27.5's tuning table on H100 hosts with a 400G NIC per GPU (tests/data/nccl_tuning,
  // from NCCL's logs), 2 to 32 hosts, 1 to 8 ranks per host: the model's reading of NCCL's
  // search (channels per NIC, duplication, caps per channel, the simple-tree discount, the NVLS
  // tree's formula of that release) must give every entry. Latencies to 0.1 us, bandwidths to
  // 0.1 GB/s, as the logs round them.
  HostTopology host = switchedHost(90, 20.6);
  addNics(host, 8, 400);
  std::ifstream in(testing::dataPath("nccl_tuning/h100_8x400G_nccl2.27.5_tuning.tsv"));
  ASSERT_TRUE(in) << "tests/data/nccl_tuning/h100_8x400G_nccl2.27.5_tuning.tsv";
  CostOptions options;
  options.nccl_version = 22705;  // 2.27.5
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string op, algo;
    int nodes = 0, per_node = 0;
    fields >> op >> algo >> nodes >> per_node;
    const ClusterTopology cluster = makeCluster(host, nodes, 0.0, 0.0);
    const CostModel model(cluster, options);
    std::vector<int> ranks;
    for (int h = 0; h < nodes; ++h)
      for (int r = 0; r < per_node; ++r) ranks.push_back(8 * h + r);
    const CollectiveOp cop = op == "all_reduce" ? CollectiveOp::AllReduce : CollectiveOp::AllGather;
    const NcclAlgo a = algo == "ring" ? NcclAlgo::Ring : algo == "tree" ? NcclAlgo::Tree : NcclAlgo::NvlsTree;
    for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple}) {
      std::string lat_text, bw_text;
      fields >> lat_text >> bw_text;
      const auto entry = NcclModel(model).tuning(cop, {ranks}, a, p);
      const std::string where = line + " " + toString(p);
      if (lat_text == "-") {
        EXPECT_FALSE(entry.has_value()) << where;
        continue;
      }
      ASSERT_TRUE(entry.has_value()) << where;
      // The model's ring latency already holds NCCL's per-call plateau factor on several hosts.
      const double plateau = a == NcclAlgo::Ring && p == NcclProto::Simple &&
                                     cop == CollectiveOp::AllReduce
                                 ? kRingPlateauLatencyFactor
                                 : 1.0;
      EXPECT_NEAR(entry->latency_us, std::stod(lat_text) * plateau, 0.051 * plateau) << where;
      EXPECT_NEAR(entry->alg_gbps, std::stod(bw_text), 0.051) << where;
    }
    ++rows;
  }
  EXPECT_EQ(rows, 70);
}

TEST(NcclModelTest, UnlistedNicsCountAsFourHundredGigabitNics) {
  // A host file without NICs (nvidia-smi's GPU matrix) stands for its NICs with one aggregate
  // rate: 400 GB/s counts as eight 400G NICs, so NCCL's channels and picks are those of the same
  // host with its eight NICs listed.
  HostTopology listed = switchedHost(90, 20.6);
  addNics(listed, 8, 400);
  const CostModel with(makeCluster(listed, 4, 0.0, 0.0));
  const CostModel without(makeCluster(switchedHost(90, 20.6), 4, 400.0, 0.0));
  EXPECT_EQ(NcclModel(without).shapeOf({iota(32)}).nics, 8);
  for (NcclAlgo a : {NcclAlgo::Ring, NcclAlgo::Tree, NcclAlgo::NvlsTree}) {
    const auto expect = NcclModel(with).tuning(CollectiveOp::AllReduce, {iota(32)}, a, NcclProto::Simple);
    const auto got = NcclModel(without).tuning(CollectiveOp::AllReduce, {iota(32)}, a, NcclProto::Simple);
    ASSERT_TRUE(expect && got) << toString(a);
    EXPECT_DOUBLE_EQ(got->alg_gbps, expect->alg_gbps) << toString(a);
  }
  for (int64_t bytes : {int64_t{1} << 20, int64_t{16} << 20, int64_t{1} << 30})
    EXPECT_EQ(without.chooseFlat(CollectiveOp::AllReduce, bytes, {iota(32)}).algorithm,
              with.chooseFlat(CollectiveOp::AllReduce, bytes, {iota(32)}).algorithm)
        << bytes;
}

TEST(NcclModelTest, ChannelsWithoutNvswitchAreBoundInsideTheHost) {
  // Four PCIe GPUs (12 GB/s paths) with a 400G NIC each: NCCL's channels cross the host too, so
  // its ring estimate stays within the host's PCIe ring, not the NICs' 4 x 48 GB/s.
  HostTopology host = makeHost({"X PIX PIX PIX", "PIX X PIX PIX", "PIX PIX X PIX", "PIX PIX PIX X"},
                               25.0, 12.0, 1.0);
  for (Gpu& g : host.gpus) g.sm = 90;
  addNics(host, 4, 400);
  const CostModel model(makeCluster(host, 4, 0.0, 0.0));
  const NcclModel nccl(model);
  const NcclModel::Shape shape = nccl.shapeOf({iota(16)});
  ASSERT_FALSE(shape.nvswitch);
  const auto ring = nccl.tuning(CollectiveOp::AllGather, {iota(16)}, NcclAlgo::Ring, NcclProto::Simple);
  ASSERT_TRUE(ring.has_value());
  const double bus = ring->alg_gbps * busBandwidthFactor(CollectiveOp::AllGather, 16);
  EXPECT_LE(bus, shape.intra_bus_gbps + 1e-9);
  EXPECT_LT(bus, 4 * 48.0);
}

// A 4-GPU PCIe host from `rows` (NCCL's own 12 GB/s paths), compute capability `sm`.
HostTopology pcieHost(const std::vector<std::string>& rows, int sm) {
  HostTopology host = makeHost(rows, 25.0, 12.0, 1.0);
  for (Gpu& g : host.gpus) g.sm = sm;
  return host;
}

const std::vector<std::string> kPixPairsAcrossSockets = {
    "X PIX SYS SYS", "PIX X SYS SYS", "SYS SYS X PIX", "SYS SYS PIX X"};

double ringBusGBps(const HostTopology& host, const std::vector<int>& ranks) {
  return NcclModel(CostModel(makeCluster(host, 1, 0.0, 0.0))).shapeOf({ranks}).intra_bus_gbps;
}

TEST(NcclModelTest, PcieRingsRunAtEachGpusLinkThroughHostMemoryBeyondASwitch) {
  // NCCL takes peer access up to a PCIe switch (PIX, PXB) and stages anything farther in host
  // memory (SHM, kNcclShmEfficiency of the link): the GPU's own link sets the rate, Gen4 x16
  // at sm80/sm89 and Gen5 from sm90, not the 12 GB/s of the paths or NCCL's socket figures.
  const HostTopology all_pix = pcieHost({"X PIX PIX PIX", "PIX X PIX PIX", "PIX PIX X PIX",
                                          "PIX PIX PIX X"}, 89);
  EXPECT_DOUBLE_EQ(ringBusGBps(all_pix, {0, 1, 2, 3}), 24.0);
  const HostTopology split = pcieHost(kPixPairsAcrossSockets, 89);
  EXPECT_DOUBLE_EQ(ringBusGBps(split, {0, 1}), 24.0);
  EXPECT_DOUBLE_EQ(ringBusGBps(split, {0, 1, 2, 3}), 24.0 * kNcclShmEfficiency);
  EXPECT_DOUBLE_EQ(ringBusGBps(pcieHost(kPixPairsAcrossSockets, 120), {0, 1, 2, 3}),
                   48.0 * kNcclShmEfficiency);
  // GeForce cards have no peer access, even behind one switch.
  HostTopology geforce = all_pix;
  for (Gpu& g : geforce.gpus) g.name = "NVIDIA GeForce RTX 4090";
  EXPECT_DOUBLE_EQ(ringBusGBps(geforce, {0, 1, 2, 3}), 24.0 * kNcclShmEfficiency);
  // On AMD hosts NCCL allows peer access through the CPU between two GPUs, not among more.
  HostTopology amd = split;
  Node cpu;
  cpu.kind = NodeKind::Cpu;
  cpu.id = "numa0";
  cpu.attrs = {{"vendor", "AuthenticAMD"}};
  amd.graph.addNode(cpu);
  EXPECT_DOUBLE_EQ(ringBusGBps(amd, {0, 2}), 24.0 * kNcclShmEfficiency);
  HostTopology amd_pair = pcieHost({"X SYS", "SYS X"}, 89);
  amd_pair.graph.addNode(cpu);
  EXPECT_DOUBLE_EQ(ringBusGBps(amd_pair, {0, 1}), 24.0);
}

TEST(NcclModelTest, AGpusPcieLinkComesFromTheSourceWhereItGivesOne) {
  // A Gen3 slot holds an sm80 GPU to 12 GB/s; a dump with an empty link_speed (VMs) carries
  // NCCL's Gen3 placeholder there, so the GPU's own generation stands (Gen4, 24 GB/s).
  auto host_with_links = [](const std::string& speed) {
    HostTopology host = pcieHost({"X PIX", "PIX X"}, 80);
    Node sw;
    sw.kind = NodeKind::PciSwitch;
    sw.id = "switch";
    const int parent = host.graph.addNode(sw);
    for (Gpu& g : host.gpus) {
      g.bus_id = "0000:0" + std::to_string(g.index) + ":00.0";
      Node n;
      n.kind = NodeKind::Gpu;
      n.id = g.bus_id;
      n.attrs = {{"link_speed", speed}};
      host.graph.addLink({parent, host.graph.addNode(n), LinkKind::Pci, 16, 12.0, 1.0});
    }
    return host;
  };
  EXPECT_DOUBLE_EQ(ringBusGBps(host_with_links("8.0 GT/s PCIe"), {0, 1}), 12.0);
  EXPECT_DOUBLE_EQ(ringBusGBps(host_with_links(""), {0, 1}), 24.0);
}

TEST(NcclModelTest, ANvlinkRingThatClosesKeepsNvlinkRates) {
  // The DGX-1 cube closes a ring of eight over NVLink alone: no PCIe bound (V100's Gen3 link
  // through host memory would be 7.2 GB/s). Bridged pairs cannot close one: PCIe binds.
  const HostTopology dgx1 = makeHost(testing::dgx1Rows(), 20.0, 12.0, 1.0);
  EXPECT_GT(ringBusGBps(dgx1, iota(8)), 12.0);
  HostTopology bridged = pcieHost({"X NV12 SYS SYS", "NV12 X SYS SYS", "SYS SYS X NV12",
                                   "SYS SYS NV12 X"}, 80);
  EXPECT_DOUBLE_EQ(ringBusGBps(bridged, {0, 1, 2, 3}), 24.0 * kNcclShmEfficiency);
  EXPECT_GT(ringBusGBps(bridged, {0, 1}), 24.0);
}

TEST(NcclModelTest, OneGpuPerHostInAnNvlinkDomainIsNoPcieHost) {
  // GH200 NVL32-like: one GPU per host, the hosts one NVLink domain. NCCL's node is the domain
  // and its pairs are NVLink, so neither its rings nor its all-to-all take the PCIe bound.
  HostTopology host = makeHost({"X"}, 20.6, 12.0, 1.0);
  host.gpus[0].sm = 90;
  ClusterTopology cluster = makeCluster(host, 4, 0.0, 0.0);
  for (HostTopology& h : cluster.hosts) h.gpus[0].nvlink_domain = "a/1";
  const CostModel model(cluster);
  const NcclModel nccl(model);
  const NcclModel::Shape shape = nccl.shapeOf({iota(4)});
  EXPECT_EQ(shape.hosts, 1);
  EXPECT_FALSE(shape.pcie_only);
  const CostEstimate a2a =
      nccl.estimate(CollectiveOp::AllToAll, int64_t{1} << 30, {iota(4)}, Algorithm::Direct);
  EXPECT_GT(a2a.bus_bandwidth_gbps, 200.0);
}

TEST(NcclModelTest, PcieAllToAllOnOneHostIsBoundByEachGpusLink) {
  // Every GPU sends (n-1)/n of its buffer through its own link: nccl-tests' bus bandwidth is
  // the p2p path's share (kP2pEfficiency) of the link's rate through host memory.
  const HostTopology split = pcieHost(kPixPairsAcrossSockets, 89);
  const CostModel model(makeCluster(split, 1, 0.0, 0.0));
  const NcclModel nccl(model);
  const CostEstimate est =
      nccl.estimate(CollectiveOp::AllToAll, int64_t{1} << 30, {iota(4)}, Algorithm::Direct);
  EXPECT_NEAR(est.bus_bandwidth_gbps, kP2pEfficiency * 24.0 * kNcclShmEfficiency, 0.05);
}

TEST(NcclModelTest, PcieAllToAllAcrossHostsSplitsEachGpusLink) {
  // Two hosts of four sm120 GPUs (Gen5 x16, 48 GB/s) in switch pairs across sockets: of the
  // 8 shares a GPU sends, 3 go to host peers (through host memory for the pairs across
  // sockets, the slowest) and 4 over the network, both through the GPU's own link; the
  // socket link's 12 GB/s paths bind nothing. With one 100G NIC per host the NIC binds.
  auto a2a_bus = [](int nics, double gbit) {
    HostTopology host = pcieHost(kPixPairsAcrossSockets, 120);
    addNics(host, nics, gbit);
    const CostModel model(makeCluster(host, 2, 0.0, 0.0));
    const NcclModel nccl(model);
    const NcclModel::Shape shape = nccl.shapeOf({iota(8)});
    EXPECT_TRUE(shape.pcie_only);
    EXPECT_DOUBLE_EQ(shape.pcie_link_gbps, 48.0);
    return std::pair{shape.net_gbps,
                     nccl.estimate(CollectiveOp::AllToAll, int64_t{1} << 32, {iota(8)},
                                   Algorithm::Direct).bus_bandwidth_gbps};
  };
  const double busbw_of_alg = 7.0 / 8.0;
  const double link_bound = 1.0 / (3.0 / 8.0 / (48.0 * kNcclShmEfficiency) + 4.0 / 8.0 / 48.0);
  EXPECT_NEAR(a2a_bus(4, 400).second, kP2pEfficiency * link_bound * busbw_of_alg, 0.05);
  const auto [net, bus] = a2a_bus(1, 100);
  const double net_bound = 1.0 / (4.0 * 4.0 / 8.0 / net);
  ASSERT_LT(net_bound, link_bound);
  EXPECT_NEAR(bus, kP2pEfficiency * net_bound * busbw_of_alg, 0.05);
}

}  // namespace
}  // namespace torch_topo::topo
