// SPDX-License-Identifier: Apache-2.0
// What NCCL itself does with a group of GPUs (layer: csrc/topo, pure C++17): its algorithms
// (ring over channels on every rail, tree, NVLS, NVLS tree, CollNet, PAT, p2p) and protocols
// (LL, LL128, Simple), priced with NCCL's tuning constants (nccl_tuning.h) over the links the
// alpha-beta cost model measures. CostModel delegates CUDA groups here.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "topo/cost_model.h"
#include "topo/nccl_tuning.h"

namespace torch_topo::topo {

/// Prices NCCL calls on groups of a CostModel's cluster. Cheap to build (holds a reference);
/// every query derives what it needs from the groups it is given.
///
/// Per algorithm and protocol: seconds = (call overhead + latency) + bytes / algorithm
/// bandwidth, the best protocol reported. Bandwidths come from two figures per group:
///  - intra: bus bandwidth of a ring through the group's GPUs of one host (the alpha-beta
///    model's ring bottleneck, NVSwitch and socket sharing included), and
///  - net: per host, the sum over the NICs its ranks use (each rank's rail) of the NIC's
///    bandwidth, shared with the other groups priced at once; NCCL spreads its channels over
///    every rail, so a flat ring is not limited to one NIC.
/// Latency: NCCL's base latency plus hop latencies by link class (tuning.cc's formulas).
///
/// NCCL picks its algorithm and protocol by its own estimates, which on several hosts differ from
/// what the calls then take (its per-channel caps, its discount of simple trees, its channel
/// count). There the model reproduces those estimates to pick as NCCL does (choice_seconds) and
/// prices the pick with its own figures (seconds). One host and CollNet: the model picks by its
/// own figures.
class NcclModel {
 public:
  explicit NcclModel(const CostModel& model) : model_(model) {}

  /// One algorithm on disjoint groups of one size run at once (as CostModel::
  /// estimateConcurrent; the groups are checked there). Ring, Tree, Nvls, NvlsTree, CollNet,
  /// Pat: NCCL's collective algorithms where NCCL runs them for that op and cluster; Direct:
  /// NCCL's p2p path for all_to_all and send_recv; Hierarchical: the backend's two-level
  /// schedule, each level an NCCL call. Others: not applicable.
  CostEstimate estimate(CollectiveOp op, int64_t bytes,
                        const std::vector<std::vector<int>>& groups, Algorithm algorithm) const;

  /// What one group set looks like to NCCL's tuning.
  struct Shape {
    int ranks = 0;           // per group
    // "Host" here is the node NCCL sees (CostModel::nodeOf): a whole multi-node NVLink
    // domain counts as one.
    int hosts = 0;           // per group
    int per_host = 0;        // most ranks of one group on one host
    NcclGeneration generation = NcclGeneration::Ampere;
    int sm = 0;              // lowest compute capability of the ranks' GPUs (0 unknown)
    bool nvlink = false;     // every pair of a group inside a host is NVLink
    bool nvswitch = false;   // every host is an NVSwitch host (a domain spanning hosts is)
    bool amd_cpu = false;    // a host's CPU vendor is AMD
    bool collnet = false;    // every NIC used declares collective offload (NCCL XML coll="1")
    double intra_bus_gbps = 0.0;  // +inf with one rank per host
    // Each GPU's own PCIe link as NCCL's transfers between a host's GPUs use it (peer access
    // or through host memory); +inf with one rank per host. pcie_only: no pair of a group
    // inside a node is NVLink.
    double pcie_gbps = 0.0;
    double pcie_link_gbps = 0.0;  // the slowest member's own link, whatever the transport
    bool pcie_only = false;
    double net_gbps = 0.0;        // +inf on one host
    int nics = 0;                 // fewest NICs a group's ranks use on one node
    // NCCL's latencyInter: the latency the net plugin reports for the NICs used (the most of
    // them), which NCCL's estimates add to each network step; 0 on one host or where none.
    double net_latency_us = 0.0;
  };
  /// Kept by the CostModel per group set: the same shapes come back at every size of a scan.
  Shape shapeOf(const std::vector<std::vector<int>>& groups) const;

  /// NCCL's own entry for one collective algorithm and protocol, as NCCL_DEBUG_SUBSYS=TUNING
  /// prints it: latency (us) before NCCL's per-call adjustments (the ring's plateau) and
  /// algorithm bandwidth (GB/s) before its per-size ones (the tree correction); alg_gbps 0 where
  /// NCCL does not consider the pair. Where the model does not reproduce NCCL's estimate (see
  /// the class), its own figures; nullopt where the model has no such algorithm or protocol.
  struct TuningEntry {
    double latency_us = 0.0;
    double alg_gbps = 0.0;
  };
  std::optional<TuningEntry> tuning(CollectiveOp op, const std::vector<std::vector<int>>& groups,
                                    NcclAlgo algo, NcclProto proto) const;

  /// One protocol's prediction: algorithm bandwidth (GB/s) and latency (us) of one call, the
  /// algorithm bandwidth NCCL's own estimate gives it (negative: the model's own; 0: NCCL does
  /// not consider it), and the latency NCCL's estimate adds for the net plugin's reported
  /// latency (Shape::net_latency_us). That latency stays out of the price: on AWS p5 (plugin:
  /// 75 us) two hosts' 8-byte all-reduce takes 65-75 us, where NCCL's estimate is over 150.
  struct Prediction {
    NcclProto proto;
    double alg_gbps;
    double latency_us;
    double choice_alg_gbps = -1.0;
    double choice_extra_us = 0.0;
  };

 private:
  Shape computeShape(const std::vector<std::vector<int>>& groups) const;
  /// Best protocol of one NCCL collective algorithm; not applicable when NCCL lacks it.
  CostEstimate collective(CollectiveOp op, int64_t bytes, const Shape& shape, NcclAlgo algo) const;
  /// Every protocol of one NCCL collective algorithm; empty when NCCL lacks it.
  std::vector<Prediction> predictions(CollectiveOp op, int64_t bytes, const Shape& shape,
                                      NcclAlgo algo) const;
  CostEstimate p2p(CollectiveOp op, int64_t bytes, const std::vector<std::vector<int>>& groups,
                   const Shape& shape) const;
  CostEstimate hierarchical(CollectiveOp op, int64_t bytes,
                            const std::vector<std::vector<int>>& groups) const;

  const CostModel& model_;
};

/// CostModel's store of NcclModel::shapeOf results (see CostModel::nccl_shapes_).
struct NcclShapes : BoundedMemo<std::vector<std::vector<int>>, NcclModel::Shape> {
  using BoundedMemo::BoundedMemo;
};

}  // namespace torch_topo::topo
