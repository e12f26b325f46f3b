// SPDX-License-Identifier: Apache-2.0
// Rank placement (layer: csrc/topo, pure C++17): which ranks share each group of a device
// mesh, so the heaviest dimensions sit in the fastest cliques and cross-host groups on one rail.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/cost_model.h"
#include "topo/graph.h"

namespace torch_topo::topo {

/// Exact search over intra-host arrangements up to this many ranks per host (8! = 40320
/// arrangements); greedy + pairwise-swap local search beyond.
constexpr int kExactPlacementMaxLocalRanks = 8;

/// One mesh dimension. `bytes` < 0 and empty `op` take the defaults of the dimension's name
/// (see defaultTraffic).
struct MeshDim {
  std::string name;
  int size = 1;
  double bytes = -1.0;  // bytes per training step moved by one group of this dimension
  std::string op;       // collective, as parseCollectiveOp spells it
};

struct PlanOptions {
  /// The caller gave bytes for every dimension (MeshDim::bytes >= 0): names outside the known
  /// set (tp, sp, cp, ring, ep, dp, fsdp, dp_shard, dp_replicate, pp) are then allowed.
  bool traffic_given = false;
  /// The model that prices candidate layouts (see planMesh).
  CostOptions cost;
};

/// A mesh laid out on the ranks of a cluster.
struct MeshPlan {
  std::vector<MeshDim> dims;  // outermost first, defaults resolved
  /// Global ranks in mesh shape, row-major (last dimension fastest).
  std::vector<int> mesh;
  /// Per dimension: its extent inside one host and across hosts (size = intra x inter).
  std::vector<int> intra_size;
  std::vector<int> inter_size;
  /// Dimension indices, heaviest first.
  std::vector<int> priority;
  bool exact = true;        // the intra-host search was exhaustive
  bool contiguous = false;  // the result is the launcher's contiguous layout
};

/// Default bytes per step and collective for a dimension name: tp all_reduce 1 GiB, sp
/// all_to_all 512 MiB, cp/ring all_gather 256 MiB, ep all_to_all 256 MiB, dp/fsdp/dp_shard
/// all_reduce 128 MiB, dp_replicate all_reduce 128 MiB, pp send_recv 32 MiB. They encode the
/// usual order of traffic (tp heaviest, pp lightest), not any one model; pass traffic for real
/// numbers. Returns false for unknown names.
bool defaultTraffic(const std::string& name, double* bytes, std::string* op, int* rank);

/// Lays the mesh out. Objective, compared lexicographically: for each dimension from the
/// heaviest, its bottleneck (the worst scorePair of any two members of one of its groups on one
/// host, larger is better, then the fewest pairs at that score); then the cost model's seconds
/// per step summed over dimensions. Exact
/// (every arrangement of a host's ranks) up to kExactPlacementMaxLocalRanks per host when all
/// hosts share one pair matrix. Throws InvalidArgument naming the option for: no dims, sizes < 1,
/// repeated names, product != world size, hosts with different rank counts (no mesh tiles
/// them), unknown names without traffic, bad ops. A dimension that does not divide a host
/// spans hosts (e.g. tp=6 on 8-GPU hosts: 2 per host x 3 hosts). The launcher's layout
/// (contiguousMesh) replaces the result where, measured over the whole cluster (pairs across
/// hosts score 0), it is as good on both the bottlenecks and the seconds and better on one;
/// intra_size and inter_size still give the split.
MeshPlan planMesh(const ClusterTopology& cluster, const std::vector<MeshDim>& dims,
                  const PlanOptions& options = {});
/// The launcher's layout: mesh position i holds rank i.
MeshPlan contiguousMesh(const ClusterTopology& cluster, const std::vector<MeshDim>& dims,
                        const PlanOptions& options = {});
/// The groups of one dimension: ranks that differ only in that coordinate, ordered by the
/// other coordinates row-major.
std::vector<std::vector<int>> meshGroups(const MeshPlan& plan, int dim);
/// Predicted seconds per step of each dimension (all its groups at once, best algorithm).
std::vector<CostEstimate> estimateMeshCost(const CostModel& model, const MeshPlan& plan);

/// Quality of a GPU pair for placement: NVLink lanes first, then the path class (NV > PIX >
/// ... > SYS), then whether both GPUs sit on one NUMA node (unknown counts as one); larger is
/// better. Ranks on different hosts or CPU-only ranks score 0.
int scorePair(const ClusterTopology& cluster, int rank_a, int rank_b);

}  // namespace torch_topo::topo
