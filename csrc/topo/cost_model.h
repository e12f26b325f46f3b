// SPDX-License-Identifier: Apache-2.0
// Alpha-beta cost model of collectives over the ranks of a ClusterTopology (layer: csrc/topo,
// pure C++17). Consumed by placement (group cost), the CLI and the backend (hierarchical
// thresholds).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "topo/bounded_memo.h"
#include "topo/graph.h"
#include "topo/size_ranges.h"

namespace torch_topo::topo {

enum class CollectiveOp { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, SendRecv,
                          Reduce };

/// Broadcast and reduce: one root, the same chain or tree with its edges reversed. NCCL runs
/// both as rings only and tunes them alike (src/graph/tuning.cc), so the model prices a reduce
/// as the broadcast whose transfers run the other way.
inline bool isRooted(CollectiveOp op) {
  return op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce;
}

/// Algorithms the model knows. Not every algorithm applies to every op (`estimateCollective`
/// returns `applicable = false`): e.g. all_to_all is Direct only, send/recv is Direct only.
/// Nvls, NvlsTree, CollNet and Pat are NCCL's and exist on CUDA groups only (nccl_model.h).
enum class Algorithm { Ring, Tree, HalvingDoubling, Direct, Hierarchical, Nvls, NvlsTree, CollNet,
                       Pat };

/// Which model prices a group. Auto: NCCL's algorithms (nccl_model.h) when every rank of the
/// group has a GPU, the alpha-beta schedules of this file otherwise (Gloo on CPU ranks).
enum class ModelKind { Auto, AlphaBeta, Nccl };

/// Hierarchical schedules run three NCCL calls where NCCL runs one, on a model that cannot see
/// everything NCCL tunes: on CUDA groups they are chosen only where predicted at least this
/// much faster than NCCL's best algorithm (issue 22). Alpha-beta groups need no margin.
constexpr double kHierarchicalMarginOverNccl = 1.15;

const char* toString(CollectiveOp op);
const char* toString(Algorithm algorithm);
/// Parses "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
/// "send_recv";
/// throws InvalidArgument naming the text otherwise.
CollectiveOp parseCollectiveOp(const std::string& text);
Algorithm parseAlgorithm(const std::string& text);
/// Parses "auto", "alpha_beta", "nccl".
ModelKind parseModelKind(const std::string& text);

/// nccl-tests bus bandwidth factor (doc/PERFORMANCE.md of NVIDIA/nccl-tests): all-reduce
/// 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n, broadcast, reduce, send/recv 1.
double busBandwidthFactor(CollectiveOp op, int group_size);

/// Result of one estimate. `seconds` is +inf when the algorithm does not apply.
struct CostEstimate {
  Algorithm algorithm = Algorithm::Ring;
  bool applicable = false;
  double seconds = 0.0;
  double alg_bandwidth_gbps = 0.0;  // bytes / seconds, GB/s
  double bus_bandwidth_gbps = 0.0;  // alg bandwidth x busBandwidthFactor
  /// NCCL protocol of the estimate ("LL", "LL128", "Simple"; for Hierarchical the protocols of
  /// its levels joined by "/"), empty under the alpha-beta model.
  std::string protocol;
  /// Ring order used (global ranks), filled for Ring and for the flat level of Tree.
  std::vector<int> order;
  /// What the implementation's own tuning predicts, by which it picks an algorithm and protocol:
  /// NCCL's estimate where the model reproduces it (NcclModel), else negative (then `seconds`).
  /// `seconds` is the model's price of the call that choice makes.
  double choice_seconds = -1.0;
  double choiceSeconds() const { return choice_seconds < 0 ? seconds : choice_seconds; }
};

/// Knobs of the model.
struct CostOptions {
  /// Pipelining grain of the hierarchical levels (TopoConfig.pipeline_chunk_bytes).
  int64_t chunk_bytes = 4 << 20;
  /// Search a bandwidth-maximising ring order when none is given (else the given rank order).
  bool search_ring_order = true;
  /// Model of CUDA groups (see ModelKind).
  ModelKind model = ModelKind::Auto;
  /// NCCL's version code (major x 10000 + minor x 100 + patch, as torch.cuda.nccl.version()
  /// reads), for the few tuning figures that changed between releases; 0: the newest this model
  /// read (2.28.9 and later).
  int nccl_version = 0;
};

/// Per-pair view of a cluster plus the shared resources (GPU injection, NICs, host uplink)
/// each transfer uses. Built once per cluster; all queries are by global rank.
///
/// Sizes follow nccl-tests: `bytes` is the whole buffer (all_reduce/broadcast: the tensor;
/// all_gather: the output; reduce_scatter: the input; all_to_all: the send buffer of one rank).
///
/// Model (per algorithm, see cost_model.cpp): a schedule is a list of phases; a phase is a set
/// of concurrent transfers plus a number of latency steps. Phase time = steps x alpha (the
/// largest path latency among its transfers) + max over resources of bytes carried / capacity.
/// Resources: every directed GPU pair path, every GPU's NVLink and PCIe injection (send and
/// receive), every NIC (send and receive), every host's network uplink, so several ring edges
/// through one NIC share it, and every host's socket link per direction between two NUMA nodes,
/// shared by all SYS transfers between them (as NCCL's search deducts each channel's bandwidth
/// from every link its path crosses).
struct NcclShapes;  // nccl_model.h

class CostModel {
 public:
  explicit CostModel(const ClusterTopology& cluster, CostOptions options = {});
  ~CostModel();

  int rankCount() const { return static_cast<int>(cluster_.ranks.size()); }
  /// Bandwidth (GB/s per direction) of the path between two ranks.
  double pairBandwidth(int a, int b) const;
  /// NIC index of a rank's rail (the first of its NICs on its host), 0 without NICs.
  int railOf(int rank) const;
  /// Every NIC a rank's cross-host traffic spreads over (cluster-wide indices): its nearest
  /// NICs, shared out among the GPUs nearest to them (two per GPU on a host of 16 NICs for 8
  /// GPUs, as NCCL spreads a GPU's channels); a NIC's GB/s per direction, and a host's network
  /// uplink (+inf when only its NICs limit it).
  const std::vector<int>& nicsOf(int rank) const { return nics_.at(rank); }
  double nicBandwidth(int nic) const { return nic_gbps_.at(nic); }
  double hostUplinkBandwidth(int host) const { return host_uplink_gbps_.at(host); }
  /// Where the inter-host bandwidth comes from, in words ("NIC speeds from the topology: ...",
  /// "inter-host bandwidth ... GB/s per direction", or the default assumed for NICs without a
  /// speed), and whether it is that default: plan and doctor print it (issue 22).
  const std::string& networkSource() const { return network_source_; }
  bool networkAssumed() const { return network_assumed_; }
  /// GPUs of the host reach their peers through NVSwitch (lanes shared, not per peer).
  bool nvlinkSwitched(int host) const { return switched_.at(host) != 0; }
  /// Two ranks on different hosts of one multi-node NVLink domain (Gpu::nvlink_domain): their
  /// traffic crosses NVLink and NVSwitch, never a NIC.
  bool nvlinkDomainPair(int a, int b) const {
    return domain_.at(a) >= 0 && domain_.at(a) == domain_.at(b) &&
           cluster_.ranks.at(a).host != cluster_.ranks.at(b).host;
  }
  /// The node NCCL sees a rank on: its NVLink domain where it has one (NCCL treats one
  /// multi-node NVLink clique as one node), else its host. Numbered from 0.
  int nodeOf(int rank) const { return node_.at(rank); }
  /// Whether `groups` are priced with NCCL's algorithms (options().model and their ranks).
  bool usesNccl(const std::vector<std::vector<int>>& groups) const;
  /// Seconds the alpha-beta schedule of `algorithm` keeps its busiest resource busy, latency
  /// left out: the bandwidth term, with the groups' shared links and NICs. +inf when the
  /// algorithm does not apply.
  double bandwidthSeconds(CollectiveOp op, double bytes, const std::vector<std::vector<int>>& groups,
                          Algorithm algorithm) const;

  /// Groups of the two levels of a hierarchical schedule over `ranks`: one per host (members
  /// in ring order) and one per local index across hosts (a rail); empty when the ranks do not
  /// span several hosts with the same number (>= 2) of ranks each.
  struct HierarchicalLevels {
    std::vector<std::vector<int>> intra;
    std::vector<std::vector<int>> rails;
  };
  HierarchicalLevels hierarchicalLevels(const std::vector<int>& ranks) const;
  const ClusterTopology& cluster() const { return cluster_; }
  const CostOptions& options() const { return options_; }

  /// Time of one collective over `ranks` (global ranks; for Ring the ring order, unless
  /// options.search_ring_order). Throws InvalidArgument for empty or repeated ranks, ranks
  /// out of range, or negative bytes.
  CostEstimate estimateCollective(CollectiveOp op, int64_t bytes, const std::vector<int>& ranks,
                                  Algorithm algorithm) const;
  /// Same collective run at once on several disjoint groups of one size (the groups of one mesh
  /// dimension): they compete for shared NICs and host uplinks. Time of the slowest.
  CostEstimate estimateConcurrent(CollectiveOp op, int64_t bytes,
                                  const std::vector<std::vector<int>>& groups,
                                  Algorithm algorithm) const;
  /// Best applicable algorithm for this op and size. On NCCL-priced groups the hierarchical
  /// schedule wins only by kHierarchicalMarginOverNccl.
  CostEstimate chooseAlgorithm(CollectiveOp op, int64_t bytes,
                               const std::vector<int>& ranks) const;
  CostEstimate chooseConcurrent(CollectiveOp op, int64_t bytes,
                                const std::vector<std::vector<int>>& groups) const;
  /// Best applicable algorithm other than Hierarchical (on CUDA groups: NCCL's own choice, by
  /// its own estimates where the model reproduces them).
  CostEstimate chooseFlat(CollectiveOp op, int64_t bytes,
                          const std::vector<std::vector<int>>& groups) const;
  /// The flat algorithm the model prices fastest, whatever NCCL would pick, among those NCCL
  /// considers: what an NCCL_ALGO hint asks NCCL to run.
  CostEstimate fastestFlat(CollectiveOp op, int64_t bytes,
                           const std::vector<std::vector<int>>& groups) const;

 private:
  CostEstimate bestFlat(CollectiveOp op, int64_t bytes, const std::vector<std::vector<int>>& groups,
                        bool by_choice) const;
  struct Transfer {
    int src = -1;
    int dst = -1;
    double bytes = 0.0;
  };
  struct Phase {
    std::vector<Transfer> transfers;
    int latency_steps = 1;
  };
  using Schedule = std::vector<Phase>;

  Schedule buildFlat(CollectiveOp op, double bytes, const std::vector<int>& order,
                     Algorithm algorithm) const;
  /// The three levels (intra, inter, intra) of a two-level schedule, or empty when the group
  /// does not span several hosts with the same number of ranks each.
  std::vector<Schedule> buildHierarchical(CollectiveOp op, double bytes,
                                          const std::vector<int>& ranks) const;
  /// Flat schedule of `algorithm` on every group at once (merged), empty when it does not
  /// apply; `order` (optional) receives the first group's ring order.
  Schedule flatSchedule(CollectiveOp op, double bytes, const std::vector<std::vector<int>>& groups,
                        Algorithm algorithm, std::vector<int>* order) const;
  static void appendLevels(std::vector<Schedule>& levels, std::vector<Schedule> parts);
  double timeOf(const Schedule& schedule) const;
  double phaseTime(const Phase& phase) const;
  /// Bandwidth term of a phase (seconds); `alpha_us` receives its largest path latency.
  double phaseLoadSeconds(const Phase& phase, double* alpha_us) const;
  CostEstimate estimateAlphaBeta(CollectiveOp op, int64_t bytes,
                                 const std::vector<std::vector<int>>& groups,
                                 Algorithm algorithm) const;
  /// Bandwidth-maximising ring order of `ranks` (as given when the search is off); with
  /// `keep_root` the first rank stays first (broadcast root).
  std::vector<int> ringOrderOf(const std::vector<int>& ranks, bool keep_root) const;
  void checkRanks(const std::vector<int>& ranks) const;
  /// The path between two ranks, derived on each call from the per-rank and per-host figures:
  /// an n x n table took 0.3 GB and a second of every rank's group creation at 4096 ranks.
  struct PairPath {
    double gbps;
    double latency_us;
  };
  PairPath pairPath(int a, int b) const;
  void describeNetwork();
  /// Fills domain_ and node_ from the GPUs' nvlink_domain.
  void assignNodes();

  ClusterTopology cluster_;
  CostOptions options_;
  int n_ = 0;
  std::vector<int> rail_;          // per rank: its first NIC on its host
  std::vector<std::vector<int>> nics_;  // per rank: the NIC resources its traffic spreads over
  std::vector<double> nic_share_gbps_;  // per rank: their summed rate
  std::vector<int> domain_;        // per rank: multi-node NVLink domain, -1 none
  std::vector<int> node_;          // per rank: see nodeOf
  std::vector<char> switched_;     // per host: NVLink through NVSwitch
  // ringOrderOf's results by (members as searched, root kept): the search (a bitmask DP to 12
  // members) took most of a size scan that prices the same groups at 25 sizes.
  mutable BoundedMemo<std::pair<std::vector<int>, bool>, std::vector<int>> ring_orders_{1 << 14};
  // NcclModel::shapeOf's results, for the same reason: every size asks for the same shapes.
  std::unique_ptr<NcclShapes> nccl_shapes_;
  friend class NcclModel;
  std::string network_source_;
  bool network_assumed_ = false;
  std::vector<int> nic_base_;      // first NIC resource of each host
  std::vector<double> nic_gbps_;   // per NIC resource
  std::vector<double> host_uplink_gbps_;
  std::vector<double> nvlink_injection_gbps_;  // per rank
  std::vector<double> pcie_injection_gbps_;    // per rank
  std::vector<int> numa_;                      // per rank: its GPU's NUMA node, -1 unknown
  std::vector<double> smp_gbps_;               // per host: socket link, per direction
};

/// The sizes computeHierarchicalThresholds scans, in powers of two (the size rule of
/// torch_topo.hierarchy scans the same ones, through _C.HIERARCHICAL_SCAN_BYTES).
constexpr int64_t kHierarchicalScanMinBytes = 1 << 10;
constexpr int64_t kHierarchicalScanMaxBytes = int64_t{16} << 30;

/// Per op, the message sizes (bytes) at which the hierarchical schedule is predicted faster than
/// the best flat algorithm (on CUDA groups by kHierarchicalMarginOverNccl), scanned in powers of
/// two from 1 KiB to 16 GiB: each scanned size s that wins stands for [s, 2s), the first for
/// [0, 2 KiB) and the last for everything from 16 GiB. Empty: never (one host, uneven hosts, or
/// flat always wins).
struct HierarchicalThreshold {
  CollectiveOp op = CollectiveOp::AllReduce;
  std::vector<SizeRange> ranges;
};
std::vector<HierarchicalThreshold> computeHierarchicalThresholds(const CostModel& model,
                                                                 const std::vector<int>& ranks);

}  // namespace torch_topo::topo
