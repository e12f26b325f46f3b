// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/placement: planned groups against brute force over all groupings on
// small hosts, the DGX-1 hybrid cube-mesh, relabelled GPUs, rails across hosts and errors.
#include "topo/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "planner_fixtures.h"
#include "topo/error.h"

namespace torch_topo::topo {
namespace {

using testing::dgx1Rows;
using testing::makeCluster;
using testing::makeHost;
using testing::relabel;

/// Placement key of a pair computed from the matrix alone: (lanes, faster class).
std::pair<int, int> key(const HostTopology& h, int a, int b) {
  return {h.path(a, b).nvlinks, -static_cast<int>(h.path(a, b).cls)};
}

std::pair<int, int> worstOfGroups(const HostTopology& h,
                                  const std::vector<std::vector<int>>& groups) {
  std::pair<int, int> worst{1 << 20, 0};
  for (const auto& g : groups)
    for (size_t i = 0; i < g.size(); ++i)
      for (size_t j = i + 1; j < g.size(); ++j) worst = std::min(worst, key(h, g[i], g[j]));
  return worst;
}

/// Best worst-pair key over every partition of the host's GPUs into groups of `size`.
std::pair<int, int> bruteForceBest(const HostTopology& h, int size) {
  const int n = h.gpuCount();
  std::pair<int, int> best{-(1 << 20), 0};
  std::vector<std::vector<int>> groups;
  std::vector<char> used(n, 0);
  std::function<void()> recurse = [&]() {
    int first = -1;
    for (int i = 0; i < n && first < 0; ++i)
      if (!used[i]) first = i;
    if (first < 0) {
      best = std::max(best, worstOfGroups(h, groups));
      return;
    }
    // Groups are built around their smallest free member, so each partition is seen once.
    std::vector<int> group{first};
    used[first] = 1;
    std::function<void(int)> pick = [&](int from) {
      if (static_cast<int>(group.size()) == size) {
        groups.push_back(group);
        recurse();
        groups.pop_back();
        return;
      }
      for (int i = from; i < n; ++i) {
        if (used[i]) continue;
        used[i] = 1;
        group.push_back(i);
        pick(i + 1);
        group.pop_back();
        used[i] = 0;
      }
    };
    pick(first + 1);
    used[first] = 0;
  };
  recurse();
  return best;
}

int dimIndex(const MeshPlan& plan, const std::string& name) {
  for (size_t i = 0; i < plan.dims.size(); ++i)
    if (plan.dims[i].name == name) return static_cast<int>(i);
  return -1;
}

TEST(PlacementTest, Dgx1TensorParallelPairsGetNv2) {
  const ClusterTopology c = makeCluster(makeHost(dgx1Rows()), 1);
  const MeshPlan plan = planMesh(c, {{"dp", 4}, {"tp", 2}});
  for (const auto& g : meshGroups(plan, dimIndex(plan, "tp"))) {
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(c.hosts[0].path(g[0], g[1]).nvlinks, 2) << g[0] << "," << g[1];
  }
  // The launcher's layout pairs (0,1), (2,3), ...: NV1, NV2, NV1, NV2.
  const MeshPlan naive = contiguousMesh(c, {{"dp", 4}, {"tp", 2}});
  EXPECT_EQ(worstOfGroups(c.hosts[0], meshGroups(naive, 1)).first, 1);
  EXPECT_FALSE(plan.contiguous);
}

TEST(PlacementTest, MatchesBruteForceOnRelabelledHosts) {
  std::mt19937 rng(7);
  const std::vector<std::vector<std::string>> hosts = {
      dgx1Rows(),
      // 8x A100 PCIe with NVLink bridges on pairs (ncclTests178 file, typed in).
      {"X NV12 NODE NODE SYS SYS SYS SYS", "NV12 X NODE NODE SYS SYS SYS SYS",
       "NODE NODE X NV12 SYS SYS SYS SYS", "NODE NODE NV12 X SYS SYS SYS SYS",
       "SYS SYS SYS SYS X NV12 NODE NODE", "SYS SYS SYS SYS NV12 X NODE NODE",
       "SYS SYS SYS SYS NODE NODE X NV12", "SYS SYS SYS SYS NODE NODE NV12 X"},
  };
  for (const auto& rows : hosts) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<int> perm(8);
      std::iota(perm.begin(), perm.end(), 0);
      if (trial > 0) std::shuffle(perm.begin(), perm.end(), rng);
      const ClusterTopology c = makeCluster(relabel(makeHost(rows), perm), 1);
      for (int tp : {2, 4, 8}) {
        const MeshPlan plan = planMesh(c, {{"dp", 8 / tp}, {"tp", tp}});
        EXPECT_EQ(worstOfGroups(c.hosts[0], meshGroups(plan, 1)), bruteForceBest(c.hosts[0], tp))
            << "tp=" << tp << " trial=" << trial;
      }
    }
  }
}

TEST(PlacementTest, CrossHostGroupsFollowRails) {
  const ClusterTopology c = makeCluster(makeHost(dgx1Rows()), 4);
  const MeshPlan plan = planMesh(c, {{"dp", 8}, {"tp", 4}});
  EXPECT_EQ(plan.intra_size, (std::vector<int>{2, 4}));
  EXPECT_EQ(plan.inter_size, (std::vector<int>{4, 1}));
  for (const auto& g : meshGroups(plan, 0)) {
    // Each dp group holds 2 GPUs per host, the same 2 local GPUs on every host.
    std::set<int> first_host;
    for (int r : g)
      if (c.ranks[r].host == c.ranks[g[0]].host) first_host.insert(c.ranks[r].local_gpu);
    for (int r : g) EXPECT_TRUE(first_host.count(c.ranks[r].local_gpu)) << r;
  }
  std::vector<int> sorted = plan.mesh;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 32; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(PlacementTest, PlannedCostNeverAboveContiguous) {
  const CostModel model(makeCluster(makeHost(dgx1Rows()), 2));
  const std::vector<std::vector<MeshDim>> meshes = {
      {{"dp", 8}, {"tp", 2}}, {{"dp", 4}, {"tp", 4}}, {{"tp", 8}, {"dp", 2}}, {{"pp", 2}, {"dp", 2}, {"tp", 4}}};
  for (const auto& dims : meshes) {
    double planned = 0, naive = 0;
    for (const auto& e : estimateMeshCost(model, planMesh(model.cluster(), dims))) planned += e.seconds;
    for (const auto& e : estimateMeshCost(model, contiguousMesh(model.cluster(), dims))) naive += e.seconds;
    EXPECT_LE(planned, naive) << dims[0].name;
  }
  // tp outermost: contiguous tp groups straddle both hosts (1 GiB through the one EDR NIC);
  // the plan keeps them inside a host and sends only dp's 128 MiB across.
  double planned = 0, naive = 0;
  const std::vector<MeshDim> dims = {{"tp", 8}, {"dp", 2}};
  for (const auto& e : estimateMeshCost(model, planMesh(model.cluster(), dims))) planned += e.seconds;
  for (const auto& e : estimateMeshCost(model, contiguousMesh(model.cluster(), dims))) naive += e.seconds;
  EXPECT_LT(planned, 0.8 * naive);
}

TEST(PlacementTest, LargeHostsUseLocalSearch) {
  std::vector<std::string> rows;
  for (int i = 0; i < 16; ++i) {
    std::string row;
    for (int j = 0; j < 16; ++j) row += i == j ? "X " : (i / 2 == j / 2 ? "NV4 " : "SYS ");
    rows.push_back(row);
  }
  std::vector<int> perm(16);
  for (int i = 0; i < 16; ++i) perm[i] = (i * 5) % 16;  // pairs land on non-adjacent ids
  const ClusterTopology c = makeCluster(relabel(makeHost(rows), perm), 1);
  const MeshPlan plan = planMesh(c, {{"dp", 8}, {"tp", 2}});
  EXPECT_FALSE(plan.exact);
  for (const auto& g : meshGroups(plan, 1)) EXPECT_EQ(c.hosts[0].path(g[0], g[1]).nvlinks, 4);
}

TEST(PlacementTest, BadMeshesNameTheOption) {
  const ClusterTopology c = makeCluster(makeHost(dgx1Rows()), 2);
  auto message = [&](const std::vector<MeshDim>& dims, PlanOptions o = {}) {
    try {
      planMesh(c, dims, o);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"dp", 4}, {"tp", 2}}).find("mesh: product of sizes dp=4 x tp=2 = 8"),
            std::string::npos);
  EXPECT_NE(message({{"dp", 8}, {"foo", 2}}).find("unknown dimension 'foo'"), std::string::npos);
  EXPECT_NE(message({{"dp", 8}, {"dp", 2}}).find("appears twice"), std::string::npos);
  EXPECT_NE(message({{"dp", 16}, {"tp", 0}}).find("size got 0"), std::string::npos);
  PlanOptions with_traffic;
  with_traffic.traffic_given = true;
  EXPECT_NE(message({{"dp", 8}, {"tp", 2}}, with_traffic).find("traffic: dimension 'dp'"),
            std::string::npos);
  MeshDim custom{"foo", 2, 1e6, ""};
  MeshDim dp{"dp", 8, 1e3, ""};
  EXPECT_EQ(message({dp, custom}, with_traffic), "no error");
}

}  // namespace
}  // namespace torch_topo::topo
