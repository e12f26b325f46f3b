// SPDX-License-Identifier: Apache-2.0
// Alpha-beta cost model (layer: csrc/topo): the cluster's links and shared resources (GPU
// injection, NICs, host uplink, socket links) as rates, and the choice of algorithm per op and
// size over the schedules of cost_schedules.cpp (alpha-beta) or NCCL's algorithms
// (nccl_model.cpp).
#include "topo/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "topo/error.h"
#include "topo/link_tables.h"
#include "topo/nccl_model.h"
#include "topo/ring_order.h"

namespace torch_topo::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBytesPerGB = 1e9;

// Fallbacks used only when a reader left a path's bandwidth or latency at 0. Bandwidths follow
// NCCL src/graph/topo.h (v2.19): SM80_NVLINK_BW 20 GB/s per lane, PCI_BW 12 (Gen3 x16 as NCCL
// counts it), SKL_QPI_BW 10; a GPU with itself is link_tables' kLocalGBps. Latencies are model
// defaults of the order of NCCL's tuning.cc hwLat for the Simple protocol (a few microseconds
// per hop).
constexpr double kNvlinkLaneGBps = 20.0;
constexpr double kPciGBps = 12.0;
constexpr double kSmpGBps = 10.0;
constexpr double kNvlinkLatencyUs = 1.0;
constexpr double kPciLatencyUs = 1.5;
constexpr double kSysLatencyUs = 2.5;
constexpr double kNetLatencyUs = 5.0;
// CPU-only ranks of one host (Gloo over loopback/shared memory): a model default, measured
// order of magnitude of Gloo ring all_reduce between two local processes on x86 hosts.
constexpr double kCpuLocalGBps = 5.0;
constexpr double kCpuLocalLatencyUs = 10.0;
// No NIC speed and no measured inter-host bandwidth: 100 Gbit/s, the common cloud default.
constexpr double kDefaultNetworkGBps = 12.5;
// A transfer between NICs of different rails crosses the spine tier: one more switch hop.
constexpr double kCrossRailLatencyUs = 1.0;
// Largest NVLink lane count of any GPU so far (H100/B200: 18). More lanes to every peer than
// this means the lanes go through NVSwitch and are shared, not one bundle per peer.
constexpr int kMaxNvlinkLanesPerGpu = 18;
// NVLink lanes of a GPU of a multi-node NVLink domain when its host shows no NVLink peer to
// take the rate from (one GPU per host, as GH200 NVL32): Hopper and Blackwell GPUs have 18.
constexpr int kDomainNvlinkLanes = 18;

double defaultBandwidth(const PathInfo& p) {
  switch (p.cls) {
    case PathClass::X: return kLocalGBps;
    case PathClass::NV: return kNvlinkLaneGBps * std::max(1, p.nvlinks);
    case PathClass::SYS: return kSmpGBps;
    case PathClass::NET: return kDefaultNetworkGBps;
    default: return kPciGBps;
  }
}

double defaultLatency(const PathInfo& p) {
  switch (p.cls) {
    case PathClass::X: return 0.0;
    case PathClass::NV: return kNvlinkLatencyUs;
    case PathClass::SYS: return kSysLatencyUs;
    case PathClass::NET: return kNetLatencyUs;
    default: return kPciLatencyUs;
  }
}

/// NVLink lanes of one GPU reach its peers through NVSwitch (shared) rather than one bundle
/// per peer: the box has NVSwitch nodes, or every peer shows the same lane count and their sum
/// exceeds what any GPU has.
bool hostNvlinkSwitched(const HostTopology& host) {
  if (!host.graph.nodesOfKind(NodeKind::NvSwitch).empty()) return true;
  const int g = host.gpuCount();
  if (g < 3) return false;
  const int lanes = host.path(0, 1).nvlinks;
  for (int a = 0; a < g; ++a)
    for (int b = 0; b < g; ++b)
      if (a != b && (host.path(a, b).cls != PathClass::NV || host.path(a, b).nvlinks != lanes))
        return false;
  return lanes * (g - 1) > kMaxNvlinkLanesPerGpu;
}

/// The NICs (indices on the host) each GPU's cross-host traffic spreads over, its rail first:
/// the NICs with its best path class (every NIC without GPU-NIC paths), shared out in whole
/// shares among the GPUs that find the same NICs nearest, as NCCL spreads its channels over
/// them (two each of 16 NICs for 8 GPUs; four GPUs that all see four NICs at SYS, as on a GB200
/// tray, use all four, not the first). With fewer NICs than such GPUs, each takes one: in turn
/// where paths tie them, in blocks of neighbours without paths.
std::vector<std::vector<int>> nicsOfHost(const HostTopology& host) {
  const int g = host.gpuCount();
  const int nics = static_cast<int>(host.nics.size());
  std::vector<std::vector<int>> out(std::max(g, 0), std::vector<int>{0});
  if (nics == 0) return out;
  const bool have_paths = host.gpu_nic_paths.size() == static_cast<size_t>(g) * nics;
  // The GPUs that find each set of NICs nearest.
  std::map<std::vector<int>, std::vector<int>> sharing;
  for (int i = 0; i < g; ++i) {
    PathClass best = PathClass::NET;
    for (int k = 0; k < nics; ++k)
      if (have_paths) best = std::min(best, host.gpu_nic_paths[i * nics + k].cls);
    std::vector<int> tied;
    for (int k = 0; k < nics; ++k)
      if (!have_paths || host.gpu_nic_paths[i * nics + k].cls == best) tied.push_back(k);
    sharing[tied].push_back(i);
  }
  for (const auto& [set, gpus] : sharing) {
    const int n = static_cast<int>(set.size()), users = static_cast<int>(gpus.size());
    for (int j = 0; j < users; ++j) {
      std::vector<int>& mine = out[gpus[j]];
      if (n >= users) {
        // As NCCL spreads a GPU's channels over its NICs: an equal whole share each (four
        // GPUs that see six NICs alike take one each).
        const int share = n / users;
        mine.assign(set.begin() + j * share, set.begin() + (j + 1) * share);
      } else {
        // More GPUs than NICs: a block of neighbours per NIC where the source gives no paths
        // (GPU order follows the bus), in turn among GPUs the paths tie.
        mine = {set[have_paths ? j % n : j * n / users]};
      }
    }
  }
  return out;
}

}  // namespace

const char* toString(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::AllReduce: return "all_reduce";
    case CollectiveOp::AllGather: return "all_gather";
    case CollectiveOp::ReduceScatter: return "reduce_scatter";
    case CollectiveOp::AllToAll: return "all_to_all";
    case CollectiveOp::Broadcast: return "broadcast";
    case CollectiveOp::Reduce: return "reduce";
    case CollectiveOp::SendRecv: return "send_recv";
  }
  return "?";
}

const char* toString(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::Ring: return "ring";
    case Algorithm::Tree: return "tree";
    case Algorithm::HalvingDoubling: return "halving_doubling";
    case Algorithm::Direct: return "direct";
    case Algorithm::Hierarchical: return "hierarchical";
    case Algorithm::Nvls: return "nvls";
    case Algorithm::NvlsTree: return "nvls_tree";
    case Algorithm::CollNet: return "collnet";
    case Algorithm::Pat: return "pat";
  }
  return "?";
}

CollectiveOp parseCollectiveOp(const std::string& text) {
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather,
                          CollectiveOp::ReduceScatter, CollectiveOp::AllToAll,
                          CollectiveOp::Broadcast, CollectiveOp::Reduce,
                          CollectiveOp::SendRecv}) {
    if (text == toString(op)) return op;
  }
  throw InvalidArgument("collective op: got '" + text +
                        "', expected all_reduce, all_gather, reduce_scatter, all_to_all, "
                        "broadcast, reduce or send_recv");
}

Algorithm parseAlgorithm(const std::string& text) {
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling,
                      Algorithm::Direct, Algorithm::Hierarchical, Algorithm::Nvls,
                      Algorithm::NvlsTree, Algorithm::CollNet, Algorithm::Pat}) {
    if (text == toString(a)) return a;
  }
  throw InvalidArgument("algorithm: got '" + text +
                        "', expected ring, tree, halving_doubling, direct, hierarchical, nvls, "
                        "nvls_tree, collnet or pat");
}

ModelKind parseModelKind(const std::string& text) {
  if (text == "auto") return ModelKind::Auto;
  if (text == "alpha_beta") return ModelKind::AlphaBeta;
  if (text == "nccl") return ModelKind::Nccl;
  throw InvalidArgument("cost model: got '" + text + "', expected auto, alpha_beta or nccl");
}

double busBandwidthFactor(CollectiveOp op, int group_size) {
  const double n = std::max(group_size, 1);
  switch (op) {
    case CollectiveOp::AllReduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

CostModel::~CostModel() = default;

CostModel::CostModel(const ClusterTopology& cluster, CostOptions options)
    : cluster_(cluster),
      options_(options),
      n_(static_cast<int>(cluster.ranks.size())),
      nccl_shapes_(std::make_unique<NcclShapes>(1 << 12)) {
  TOPO_CHECK(options_.chunk_bytes > 0, "CostOptions.chunk_bytes: got ", options_.chunk_bytes,
             ", expected > 0");
  const int hosts = static_cast<int>(cluster_.hosts.size());
  describeNetwork();
  std::vector<std::vector<std::vector<int>>> host_nics(hosts);
  switched_.assign(hosts, 0);
  nic_base_.assign(hosts, 0);
  host_uplink_gbps_.assign(hosts, kInf);
  for (int h = 0; h < hosts; ++h) {
    const HostTopology& host = cluster_.hosts[h];
    host_nics[h] = nicsOfHost(host);
    switched_[h] = hostNvlinkSwitched(host);
    nic_base_[h] = static_cast<int>(nic_gbps_.size());
    const int nics = std::max<int>(1, static_cast<int>(host.nics.size()));
    for (int k = 0; k < nics; ++k) {
      double gbps = k < static_cast<int>(host.nics.size()) ? host.nics[k].speed_gbps / 8.0 : 0.0;
      if (gbps <= 0) {
        gbps = cluster_.inter_host_bandwidth_gbps > 0 ? cluster_.inter_host_bandwidth_gbps / nics
                                                      : kDefaultNetworkGBps;
      }
      nic_gbps_.push_back(gbps);
    }
    if (cluster_.inter_host_bandwidth_gbps > 0) {
      host_uplink_gbps_[h] = cluster_.inter_host_bandwidth_gbps;
    }
    // The socket link carries every SYS transfer between two NUMA nodes; no single GPU path
    // through it is faster than the link, so the fastest SYS path is its capacity.
    double smp = 0.0;
    for (int a = 0; a < host.gpuCount(); ++a)
      for (int b = 0; b < host.gpuCount(); ++b) {
        const PathInfo& path = host.path(a, b);
        if (a != b && path.cls == PathClass::SYS)
          smp = std::max(smp, path.bandwidth_gbps > 0 ? path.bandwidth_gbps : kSmpGBps);
      }
    smp_gbps_.push_back(smp > 0 ? smp : kSmpGBps);
  }
  for (int r = 0; r < n_; ++r) {
    const RankPlacement& p = cluster_.ranks[r];
    TOPO_CHECK(p.host >= 0 && p.host < hosts, "ClusterTopology.ranks[", r, "].host: got ",
               p.host, ", expected 0..", hosts - 1);
    TOPO_CHECK(p.local_gpu < cluster_.hosts[p.host].gpuCount(), "ClusterTopology.ranks[", r,
               "].local_gpu: got ", p.local_gpu, ", expected < ",
               cluster_.hosts[p.host].gpuCount(), " (GPUs of host ", p.host, ")");
  }
  rail_.assign(n_, 0);
  nics_.assign(n_, {});
  nic_share_gbps_.assign(n_, 0.0);
  numa_.assign(n_, -1);
  assignNodes();
  nvlink_injection_gbps_.assign(n_, kInf);
  pcie_injection_gbps_.assign(n_, kInf);
  for (int r = 0; r < n_; ++r) {
    const RankPlacement& p = cluster_.ranks[r];
    const HostTopology& host = cluster_.hosts[p.host];
    // A rank without a GPU leaves through the host's first NIC.
    const std::vector<int> mine = p.local_gpu < 0 ? std::vector<int>{0}
                                                  : host_nics[p.host][p.local_gpu];
    for (int k : mine) nics_[r].push_back(nic_base_[p.host] + k);
    rail_[r] = mine.front();
    for (int nic : nics_[r]) nic_share_gbps_[r] += nic_gbps_[nic];
    if (p.local_gpu < 0) continue;
    numa_[r] = host.gpus[p.local_gpu].numa_node;
    // Switched: one GPU's lanes are the same bundle to every peer; direct: bundles add up.
    double nv_sum = 0.0, nv_max = 0.0, pcie_max = 0.0;
    for (int j = 0; j < host.gpuCount(); ++j) {
      if (j == p.local_gpu) continue;
      const PathInfo& path = host.path(p.local_gpu, j);
      const double bw = path.bandwidth_gbps > 0 ? path.bandwidth_gbps : defaultBandwidth(path);
      if (path.cls == PathClass::NV) {
        nv_sum += bw;
        nv_max = std::max(nv_max, bw);
      } else {
        pcie_max = std::max(pcie_max, bw);
      }
    }
    if (nv_max > 0) nvlink_injection_gbps_[r] = switched_[p.host] ? nv_max : nv_sum;
    if (nv_max == 0 && domain_[r] >= 0)
      nvlink_injection_gbps_[r] = kDomainNvlinkLanes * nvlinkLaneGBps(host.gpus[p.local_gpu].sm);
    if (pcie_max > 0) pcie_injection_gbps_[r] = pcie_max;
  }
}

void CostModel::assignNodes() {
  std::map<std::string, int> domains;
  std::map<int, int> host_nodes;
  domain_.assign(n_, -1);
  node_.assign(n_, -1);
  for (int r = 0; r < n_; ++r) {
    const RankPlacement& p = cluster_.ranks[r];
    const std::string& name =
        p.local_gpu >= 0 ? cluster_.hosts[p.host].gpus[p.local_gpu].nvlink_domain : "";
    if (!name.empty()) domain_[r] = domains.emplace(name, static_cast<int>(domains.size())).first->second;
  }
  // Domains take node numbers 0..D-1, hosts outside any domain the numbers after them.
  const int domain_count = static_cast<int>(domains.size());
  for (int r = 0; r < n_; ++r) {
    node_[r] = domain_[r] >= 0
                   ? domain_[r]
                   : host_nodes.emplace(cluster_.ranks[r].host,
                                        domain_count + static_cast<int>(host_nodes.size()))
                         .first->second;
  }
}

void CostModel::describeNetwork() {
  const double inter = cluster_.inter_host_bandwidth_gbps;
  int nics = 0, unknown = 0;
  std::map<double, int> speeds;  // Gbit/s -> NICs
  for (const HostTopology& host : cluster_.hosts) {
    nics += static_cast<int>(host.nics.size());
    for (const Nic& nic : host.nics) {
      if (nic.speed_gbps > 0) ++speeds[nic.speed_gbps];
      else ++unknown;
    }
  }
  std::ostringstream os;
  if (cluster_.hosts.size() < 2) {
    os << "one host: no network";
  } else if (inter > 0) {
    os << "inter-host bandwidth " << inter << " GB/s per direction per host (measured, or "
       << "TORCH_TOPO_INTER_HOST_GBPS)";
  } else if (nics > 0 && unknown == 0) {
    os << "NIC speeds from the topology:";
    for (const auto& [gbit, count] : speeds) os << " " << count << " x " << gbit << " Gbit/s";
  } else {
    network_assumed_ = true;
    os << (nics == 0
               ? std::string("no NICs listed")
               : std::to_string(unknown) + " of " + std::to_string(nics) + " NICs without a speed")
       << (nics == 0 ? " (the source lists none)"
                     : " (the source gives none; nvidia-smi text never does)")
       << ": " << kDefaultNetworkGBps * 8 << " Gbit/s assumed per " << (nics == 0 ? "host" : "NIC")
       << "; set TORCH_TOPO_INTER_HOST_GBPS or plan on the live "
       << "probe";
  }
  network_source_ = os.str();
}

CostModel::PairPath CostModel::pairPath(int a, int b) const {
  TOPO_CHECK(a >= 0 && a < n_ && b >= 0 && b < n_, "CostModel: pair (", a, ", ", b,
             "): expected ranks 0..", n_ - 1);
  if (a == b) return {kLocalGBps, 0.0};
  const RankPlacement& pa = cluster_.ranks[a];
  const RankPlacement& pb = cluster_.ranks[b];
  if (nvlinkDomainPair(a, b)) {
    // Through the domain's NVSwitch trays: each GPU's NVLink bundle, one switch hop more.
    return {std::min(nvlink_injection_gbps_[a], nvlink_injection_gbps_[b]),
            kNvlinkLatencyUs + kNvlinkHopLatencyUs};
  }
  if (pa.host != pb.host) {
    double lat = cluster_.inter_host_latency_us > 0 ? cluster_.inter_host_latency_us : kNetLatencyUs;
    if (rail_[a] != rail_[b]) lat += kCrossRailLatencyUs;
    return {std::min({nic_share_gbps_[a], nic_share_gbps_[b], host_uplink_gbps_[pa.host],
                      host_uplink_gbps_[pb.host]}),
            lat};
  }
  if (pa.local_gpu < 0 || pb.local_gpu < 0) return {kCpuLocalGBps, kCpuLocalLatencyUs};
  const PathInfo& path = cluster_.hosts[pa.host].path(pa.local_gpu, pb.local_gpu);
  return {path.bandwidth_gbps > 0 ? path.bandwidth_gbps : defaultBandwidth(path),
          path.latency_us > 0 ? path.latency_us : defaultLatency(path)};
}

double CostModel::pairBandwidth(int a, int b) const { return pairPath(a, b).gbps; }
int CostModel::railOf(int rank) const { return rail_.at(rank); }

void CostModel::checkRanks(const std::vector<int>& ranks) const {
  TOPO_CHECK(!ranks.empty(), "CostModel: group: got no ranks, expected at least one");
  std::vector<char> seen(n_, 0);
  for (int r : ranks) {
    TOPO_CHECK(r >= 0 && r < n_, "CostModel: group rank: got ", r, ", expected 0..", n_ - 1);
    TOPO_CHECK(!seen[r], "CostModel: group: rank ", r, " appears twice");
    seen[r] = 1;
  }
}

std::vector<int> CostModel::ringOrderOf(const std::vector<int>& ranks, bool keep_root) const {
  const int m = static_cast<int>(ranks.size());
  if (!options_.search_ring_order || m <= 2) return ranks;
  // The search breaks ties by position, so it starts from the sorted members (the root kept
  // first when it matters): a group then costs the same whatever order it was listed in, which
  // placement relies on when it prices each grouping once.
  std::vector<int> members = ranks;
  std::sort(members.begin() + (keep_root ? 1 : 0), members.end());
  return ring_orders_.get({members, keep_root}, [&] {
    std::vector<double> sub(static_cast<size_t>(m) * m);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j)
        sub[i * m + j] = i == j ? 0.0 : pairBandwidth(members[i], members[j]);
    std::vector<int> order;
    for (int i : findRingOrder(sub, m)) order.push_back(members[i]);
    return order;
  });
}

bool CostModel::usesNccl(const std::vector<std::vector<int>>& groups) const {
  if (options_.model != ModelKind::Auto) return options_.model == ModelKind::Nccl;
  for (const auto& g : groups) {
    for (int r : g) {
      TOPO_CHECK(r >= 0 && r < n_, "CostModel: group rank: got ", r, ", expected 0..", n_ - 1);
      if (cluster_.ranks[r].local_gpu < 0) return false;
    }
  }
  return true;
}

CostModel::Schedule CostModel::flatSchedule(CollectiveOp op, double bytes,
                                            const std::vector<std::vector<int>>& groups,
                                            Algorithm algorithm, std::vector<int>* order) const {
  std::vector<Schedule> levels;
  for (const auto& g : groups) {
    std::vector<int> o =
        algorithm == Algorithm::Direct ? g : ringOrderOf(g, isRooted(op));
    Schedule s = buildFlat(op, bytes, o, algorithm);
    if (s.empty()) return {};
    if (order && order->empty()) *order = o;
    appendLevels(levels, {std::move(s)});
  }
  return levels.empty() ? Schedule{} : levels[0];
}

double CostModel::bandwidthSeconds(CollectiveOp op, double bytes,
                                   const std::vector<std::vector<int>>& groups,
                                   Algorithm algorithm) const {
  const Schedule s = flatSchedule(op, bytes, groups, algorithm, nullptr);
  if (s.empty()) return kInf;
  double total = 0.0, alpha = 0.0;
  for (const Phase& phase : s) total += phaseLoadSeconds(phase, &alpha);
  return total;
}

CostEstimate CostModel::estimateConcurrent(CollectiveOp op, int64_t bytes,
                                           const std::vector<std::vector<int>>& groups,
                                           Algorithm algorithm) const {
  TOPO_CHECK(bytes >= 0, "CostModel: bytes: got ", bytes, ", expected >= 0");
  TOPO_CHECK(!groups.empty(), "CostModel: groups: got none, expected at least one");
  std::vector<int> all;
  for (const auto& g : groups) {
    TOPO_CHECK(g.size() == groups[0].size(), "CostModel: groups: sizes ", groups[0].size(),
               " and ", g.size(), " differ, expected groups of one size");
    all.insert(all.end(), g.begin(), g.end());
  }
  checkRanks(all);
  if (groups[0].size() == 1) {  // nothing moves; reported once, as a ring
    CostEstimate est;
    est.algorithm = algorithm;
    est.applicable = algorithm == Algorithm::Ring;
    est.seconds = est.applicable ? 0.0 : kInf;
    est.order = groups[0];
    return est;
  }
  if (usesNccl(groups)) return NcclModel(*this).estimate(op, bytes, groups, algorithm);
  return estimateAlphaBeta(op, bytes, groups, algorithm);
}

CostEstimate CostModel::estimateAlphaBeta(CollectiveOp op, int64_t bytes,
                                          const std::vector<std::vector<int>>& groups,
                                          Algorithm algorithm) const {
  CostEstimate est;
  est.algorithm = algorithm;
  est.seconds = kInf;
  const int n = static_cast<int>(groups[0].size());
  if (algorithm == Algorithm::Hierarchical) {
    // Levels of the schedule, each merged over the groups (their transfers run at once).
    std::vector<Schedule> levels;
    const double chunks = std::max(1.0, std::ceil(static_cast<double>(bytes) / options_.chunk_bytes));
    for (const auto& g : groups) {
      auto parts = buildHierarchical(op, bytes / chunks, g);
      if (parts.empty()) return est;
      appendLevels(levels, std::move(parts));
    }
    // Levels pipelined over chunks: the first chunk passes every level, the rest follow at
    // the pace of the slowest level.
    double sum = 0.0, slowest = 0.0;
    for (const Schedule& level : levels) {
      const double t = timeOf(level);
      sum += t;
      slowest = std::max(slowest, t);
    }
    est.seconds = sum + (chunks - 1.0) * slowest;
  } else {
    const Schedule s = flatSchedule(op, static_cast<double>(bytes), groups, algorithm, &est.order);
    if (s.empty()) return est;
    est.seconds = timeOf(s);
  }
  est.applicable = true;
  est.alg_bandwidth_gbps = est.seconds > 0 ? bytes / est.seconds / kBytesPerGB : 0.0;
  est.bus_bandwidth_gbps = est.alg_bandwidth_gbps * busBandwidthFactor(op, n);
  return est;
}

CostEstimate CostModel::estimateCollective(CollectiveOp op, int64_t bytes,
                                           const std::vector<int>& ranks,
                                           Algorithm algorithm) const {
  return estimateConcurrent(op, bytes, {ranks}, algorithm);
}

CostEstimate CostModel::bestFlat(CollectiveOp op, int64_t bytes,
                                 const std::vector<std::vector<int>>& groups,
                                 bool by_choice) const {
  CostEstimate best;
  best.seconds = kInf;
  auto key = [by_choice](const CostEstimate& e) { return by_choice ? e.choiceSeconds() : e.seconds; };
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling,
                      Algorithm::Direct, Algorithm::Nvls, Algorithm::NvlsTree, Algorithm::CollNet,
                      Algorithm::Pat}) {
    CostEstimate e = estimateConcurrent(op, bytes, groups, a);
    // The fastest asks NCCL to run it: never one NCCL's own estimate rules out.
    if (e.applicable && std::isfinite(e.choiceSeconds()) && key(e) < key(best)) best = std::move(e);
  }
  return best;
}

CostEstimate CostModel::chooseFlat(CollectiveOp op, int64_t bytes,
                                   const std::vector<std::vector<int>>& groups) const {
  return bestFlat(op, bytes, groups, /*by_choice=*/true);
}

CostEstimate CostModel::fastestFlat(CollectiveOp op, int64_t bytes,
                                    const std::vector<std::vector<int>>& groups) const {
  return bestFlat(op, bytes, groups, /*by_choice=*/false);
}

CostEstimate CostModel::chooseConcurrent(CollectiveOp op, int64_t bytes,
                                         const std::vector<std::vector<int>>& groups) const {
  CostEstimate best = chooseFlat(op, bytes, groups);
  CostEstimate hier = estimateConcurrent(op, bytes, groups, Algorithm::Hierarchical);
  const double margin = usesNccl(groups) ? kHierarchicalMarginOverNccl : 1.0;
  if (hier.applicable && hier.seconds * margin < best.seconds) best = std::move(hier);
  return best;
}

CostEstimate CostModel::chooseAlgorithm(CollectiveOp op, int64_t bytes,
                                        const std::vector<int>& ranks) const {
  return chooseConcurrent(op, bytes, {ranks});
}

std::vector<HierarchicalThreshold> computeHierarchicalThresholds(const CostModel& model,
                                                                 const std::vector<int>& ranks) {
  std::vector<HierarchicalThreshold> out;
  const double margin = model.usesNccl({ranks}) ? kHierarchicalMarginOverNccl : 1.0;
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather,
                          CollectiveOp::ReduceScatter, CollectiveOp::Broadcast,
                          CollectiveOp::Reduce}) {
    HierarchicalThreshold th;
    th.op = op;
    for (int64_t bytes = kHierarchicalScanMinBytes; bytes <= kHierarchicalScanMaxBytes; bytes *= 2) {
      const CostEstimate hier = model.estimateCollective(op, bytes, ranks, Algorithm::Hierarchical);
      const bool wins = hier.applicable &&
                        hier.seconds * margin < model.chooseFlat(op, bytes, {ranks}).seconds;
      const bool open = !th.ranges.empty() && th.ranges.back().below < 0;
      if (wins && !open) th.ranges.push_back({bytes == kHierarchicalScanMinBytes ? 0 : bytes, -1});
      if (!wins && open) th.ranges.back().below = bytes;
    }
    out.push_back(th);
  }
  return out;
}

}  // namespace torch_topo::topo
