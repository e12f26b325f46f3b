// SPDX-License-Identifier: Apache-2.0
// NCCL's algorithms priced on a cluster (layer: csrc/topo). The latency formulas follow NCCL's
// src/graph/tuning.cc (ncclTopoTuneModel); the bandwidths are this project's own reading of
// what each algorithm moves over which link, checked against published nccl-tests runs by
// benchmarks/model_vs_nccl_tests.py (docs/planner.md has the table), on the shape of the groups
// nccl_shape.cpp reads off the cluster.
#include "topo/nccl_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace torch_topo::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBytesPerGB = 1e9;
constexpr int kNcclMaxChannels = 32;

Algorithm algorithmOf(NcclAlgo algo) {
  switch (algo) {
    case NcclAlgo::Tree: return Algorithm::Tree;
    case NcclAlgo::Nvls: return Algorithm::Nvls;
    case NcclAlgo::NvlsTree: return Algorithm::NvlsTree;
    case NcclAlgo::CollNetDirect:
    case NcclAlgo::CollNetChain: return Algorithm::CollNet;
    case NcclAlgo::Pat: return Algorithm::Pat;
    case NcclAlgo::Ring: break;
  }
  return Algorithm::Ring;
}

double log2Floor(int x) { return std::floor(std::log2(std::max(x, 1))); }

/// Links of position `r` in NCCL's binary tree over n nodes rooted at 0 (src/graph/trees.cc,
/// ncclGetBtree): the root has one child; any other node a parent, and when its lowest set bit
/// is above bit 0, a first child below it and a second one when a node above it exists.
int btreeLinks(int n, int r) {
  if (n <= 1) return 0;
  if (r == 0) return 1;
  const int lowest = r & -r;
  return lowest == 1 ? 1 : 2 + (r + 1 < n ? 1 : 0);
}

/// The busiest node's network traffic per direction in NCCL's double binary tree, in units of
/// the buffer: each tree carries half of it, which a node sends once up (reduce) and once to
/// each child (broadcast). The second tree mirrors the first over an even node count and shifts
/// it by one over an odd count (ncclGetDtree). 1 on two nodes, 1.5 on three, 2 from four.
double treeNicLoad(int nodes) {
  int busiest = 0;
  for (int r = 0; r < nodes; ++r) {
    const int second = nodes % 2 == 1 ? (r - 1 + nodes) % nodes : nodes - 1 - r;
    busiest = std::max(busiest, btreeLinks(nodes, r) + btreeLinks(nodes, second));
  }
  return 0.5 * busiest;
}

/// What NCCL's topology search leaves of a multi-host group, as far as its tuning reads it
/// (src/graph/search.cc): channels and their bandwidth (GB/s) for the ring and tree graphs, heads
/// and bandwidths for the NVLS graph. Derived from the NICs the group uses; NCCL's tuning logs of
/// 8-GPU H100 hosts with a 400G NIC per GPU (2 to 32 hosts, 1 to 8 ranks per host) show these.
struct NcclGraphs {
  int channels = 0;
  double inter_gbps = 0.0;
  double tree_intra_gbps = 0.0;
  int nvls_heads = 0;
  double nvls_intra_gbps = 0.0;
  double nvls_inter_gbps = 0.0;
};

NcclGraphs searchedGraphs(const NcclModel::Shape& s) {
  NcclGraphs g;
  // A multi-node NVLink domain's NICs (72 on a GB200 NVL72) give no more channels than NCCL's
  // arity allows (NCCL_MAX_NVLS_ARITY, 32).
  const int nics = std::min(kNcclMaxChannels, std::max(1, s.nics));
  // A channel also crosses the host; without NVSwitch its path there (PCIe, the socket link)
  // bounds it, while behind NVSwitch NCCL's logs show channels at the NIC's rate (8 x 48 GB/s
  // over an H100's 370.8 GB/s of NVLink).
  double per_channel = s.net_gbps / nics;
  if (!s.nvswitch) per_channel = std::min(per_channel, s.intra_bus_gbps / nics);
  const double speed = ncclSearchSpeedGBps(s.sm, /*inter=*/true, per_channel);
  g.channels = nics;  // one channel per NIC
  g.inter_gbps = speed;
  // ncclTopoDupChannels doubles fast channels at half the bandwidth each, but from Hopper on
  // not more than four below 50 GB/s.
  if (speed >= 25.0 && !(s.sm > 80 && speed < 50.0 && nics > 4)) {
    g.channels *= 2;
    g.inter_gbps /= 2;
  }
  // On two hosts the search raises a tree's intra-host bandwidth up to twice its network one,
  // as far as each GPU's NVLink carries every channel.
  g.tree_intra_gbps =
      s.hosts <= 2 ? std::max(g.inter_gbps, std::min(2 * g.inter_gbps, s.intra_bus_gbps / g.channels))
                   : g.inter_gbps;
  g.nvls_heads = std::min(s.per_host, nics);
  g.nvls_inter_gbps = speed;
  g.nvls_intra_gbps =
      ncclSearchSpeedGBps(s.sm, /*inter=*/false, s.intra_bus_gbps / std::max(1, g.nvls_heads));
  return g;
}

CostEstimate finish(CollectiveOp op, int64_t bytes, int ranks, Algorithm algorithm,
                    const std::vector<NcclModel::Prediction>& candidates) {
  CostEstimate est;
  est.algorithm = algorithm;
  est.seconds = est.choice_seconds = kInf;
  for (const NcclModel::Prediction& c : candidates) {
    if (!(c.alg_gbps > 0)) continue;
    // A message smaller than the fill occupies only its own bytes of the Simple buffers, and a
    // slow path fills them within kSimpleFillMaxUs; the NVLS tree's deeper pipeline fills by
    // time alone.
    const bool nvls_tree = algorithm == Algorithm::NvlsTree;
    const double fill_us = nvls_tree ? kNvlsTreeFillUs : kSimpleFillMaxUs;
    const double fill = std::min({static_cast<double>(bytes), nvls_tree ? kInf : kSimpleFillBytes,
                                  fill_us * 1e-6 * c.alg_gbps * kBytesPerGB});
    const double payload = bytes + (c.proto == NcclProto::Simple ? fill : 0.0);
    const double latency = (kNcclCallOverheadUs + c.latency_us) * 1e-6;
    const double t = latency + payload / (c.alg_gbps * kBytesPerGB);
    const double extra = c.choice_extra_us * 1e-6;
    const double choice =
        c.choice_alg_gbps < 0   ? t + extra
        : c.choice_alg_gbps > 0 ? latency + extra + bytes / (c.choice_alg_gbps * kBytesPerGB)
                                : kInf;
    if (choice < est.choice_seconds || (choice == est.choice_seconds && t < est.seconds)) {
      est.seconds = t;
      est.choice_seconds = choice;
      est.protocol = toString(c.proto);
    }
  }
  est.applicable = std::isfinite(est.seconds);
  if (est.applicable) {
    est.alg_bandwidth_gbps = bytes / est.seconds / kBytesPerGB;
    est.bus_bandwidth_gbps = est.alg_bandwidth_gbps * busBandwidthFactor(op, ranks);
  }
  return est;
}

}  // namespace

std::vector<NcclModel::Prediction> NcclModel::predictions(CollectiveOp op, int64_t bytes,
                                                         const Shape& s, NcclAlgo algo) const {
  const int n = s.ranks, hosts = s.hosts, local = s.per_host;
  const NcclHop intra_hop = s.nvlink ? NcclHop::NvLink : NcclHop::Pci;
  // NCCL enables LL128 only where the GPUs of a host talk over NVLink (sm70 and later).
  const bool ll128 = s.sm >= 70 && (local == 1 || s.nvlink);
  const bool nvls_hw = s.generation >= NcclGeneration::Hopper && s.nvswitch && local >= 2;
  const double ll_max = ncclLlMaxBusGBps(s.generation, s.amd_cpu, hosts);
  const bool all_reduce = op == CollectiveOp::AllReduce;
  const bool gather_scatter = op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter;
  const bool rooted = isRooted(op);
  // The ring's bus bandwidth: the host-local ring and the host's NICs (one channel per rail).
  const double ring_bus = std::min(s.intra_bus_gbps, s.net_gbps);
  // NCCL's own view across nodes (hosts or multi-node NVLink domains): its channels and their
  // caps (see NcclGraphs).
  const bool nccl_view = hosts >= 2;
  const NcclGraphs graphs = nccl_view ? searchedGraphs(s) : NcclGraphs{};
  const int version = model_.options().nccl_version;
  const NcclChannelCaps caps = ncclChannelCaps(s.generation, hosts, version);
  const double nccl_bus = graphs.channels * graphs.inter_gbps;
  auto hop = [version](NcclHop h, NcclAlgo a, NcclProto p) {
    return ncclHopLatencyUs(h, a, p, version);
  };
  // What NCCL's estimate adds per network step for the plugin's reported latency: once, and
  // once more with Simple (NCCL counts a flush).
  auto plugin = [&s, hosts](NcclProto p) {
    return hosts > 1 ? s.net_latency_us * (p == NcclProto::Simple ? 2 : 1) : 0.0;
  };
  // A ring's bus bandwidth by protocol, from its links' (NCCL caps LL128 per channel).
  auto ring_proto = [&](NcclProto p, double bus, double ll128_cap) {
    return p == NcclProto::Simple  ? bus
           : p == NcclProto::LL128 ? std::min(kLl128Efficiency * bus, ll128_cap)
                                   : std::min(ll_max, kRingLlEfficiency * bus);
  };
  std::vector<NcclModel::Prediction> c;
  switch (algo) {
    case NcclAlgo::Ring: {
      if (!all_reduce && !gather_scatter && !rooted) break;
      const double factor = busBandwidthFactor(op, n);
      for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple}) {
        if (p == NcclProto::LL128 && !ll128) continue;
        const double bus = ring_proto(p, ring_bus, kInf);
        const double choice =
            nccl_view ? ring_proto(p, nccl_bus, graphs.channels * caps.ring_ll128) / factor : -1.0;
        double lat = ncclBaseLatencyUs(NcclAlgo::Ring, p);
        double extra = 0.0;
        if (rooted) {
          // A pipelined chain: one hop's latency, whatever the group size.
          lat += hop(hosts == 1 ? intra_hop : NcclHop::Net, NcclAlgo::Ring, p);
        } else {
          const int steps = all_reduce ? 2 * (n - 1) : n - 1;
          const int net_steps = hosts == 1 ? 0 : (all_reduce ? 2 : 1) * (hosts - 1);
          double intra_lat = hop(intra_hop, NcclAlgo::Ring, p);
          if (hosts > 1) intra_lat = std::max(intra_lat, ncclNetOverheadUs(s.amd_cpu, p));
          // One rank per host exposes the network latency fully: NCCL uses the tree's.
          const double net_lat = hop(NcclHop::Net, local == 1 ? NcclAlgo::Tree : NcclAlgo::Ring, p);
          lat += (steps - net_steps) * intra_lat + net_steps * net_lat;
          extra = net_steps * plugin(p);
          if (p == NcclProto::Simple && hosts > 1 && all_reduce)
            lat *= s.sm >= 80 || s.sm == 0 ? kRingPlateauLatencyFactor
                                           : kRingPlateauLatencyFactorPreSm80;
        }
        c.push_back({p, bus / factor, lat, choice, extra});
      }
      break;
    }
    case NcclAlgo::Tree: {
      if (!all_reduce) break;
      // Chain inside a host, double binary tree across hosts: the busiest host's NICs carry
      // treeNicLoad(hosts) buffers per direction; NCCL's algorithm bandwidth is half its tree
      // bus bandwidth, corrected by NCCL's own factor at medium sizes. (NCCL corrects the NVLS
      // tree too, but only on Blackwell with x86 CPUs, and a shape knows no CPU architecture.)
      // NCCL's estimate takes its channels' bandwidth (inside the hosts on two, across them
      // beyond), caps per channel, and discounts a simple tree pattern.
      // Where NCCL's per-channel caps describe its tree, they bound it (see ncclChannelCaps).
      const bool capped = nccl_view && caps.tree_bounds_transfers;
      const double net = hosts < 2 ? kInf : 2 * s.net_gbps / treeNicLoad(hosts);
      const double bus = std::min(kTreeEfficiency * std::min(s.intra_bus_gbps, net),
                                  capped ? graphs.channels * caps.tree : kInf);
      const double nccl_tree_bus =
          std::min(kTreeEfficiency * graphs.channels *
                       (hosts <= 2 ? graphs.tree_intra_gbps : graphs.inter_gbps),
                   graphs.channels * caps.tree);
      const double pattern = s.sm >= 90 || local == 1 ? kNcclTreePatternFactor : 1.0;
      auto tree_proto = [&](NcclProto p, double b, double ll128_cap) {
        return p == NcclProto::Simple ? b
               : p == NcclProto::LL128
                   ? std::min(b * (hosts == 1 ? kTreeLl128FactorOneHost : kTreeLl128FactorHosts), ll128_cap)
                   : std::min(ll_max, b * kTreeLlFactor);
      };
      for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple}) {
        if (p == NcclProto::LL128 && !ll128) continue;
        const double correction = 0.5 * ncclTreeCorrection(p, bytes);
        const double choice =
            nccl_view ? pattern * tree_proto(p, nccl_tree_bus, graphs.channels * caps.tree_ll128) * correction
                      : -1.0;
        const double lat = ncclBaseLatencyUs(NcclAlgo::Tree, p) +
                           2 * ((local - 1) * hop(intra_hop, NcclAlgo::Tree, p) +
                                log2Floor(hosts) * hop(NcclHop::Net, NcclAlgo::Tree, p));
        c.push_back({p, tree_proto(p, bus, capped ? graphs.channels * caps.tree_ll128 : kInf) *
                            correction,
                     lat, choice, 2 * log2Floor(hosts) * plugin(p)});
      }
      break;
    }
    case NcclAlgo::Nvls: {
      // NVSwitch multicast reduces inside the switch; across hosts only with a collective
      // network (SHARP) to reduce between them.
      if (!all_reduce || !nvls_hw || (hosts > 1 && !s.collnet)) break;
      double alg = nvlsAlgFraction(s.generation) * s.intra_bus_gbps;
      if (hosts > 1) alg = std::min(alg, s.net_gbps);
      const double lat = hop(NcclHop::NvLink, NcclAlgo::Nvls, NcclProto::Simple) +
                         (hosts > 1 ? hop(NcclHop::Net, NcclAlgo::Nvls, NcclProto::Simple) : 0.0);
      c.push_back({NcclProto::Simple, alg, lat, -1.0, plugin(NcclProto::Simple)});
      break;
    }
    case NcclAlgo::NvlsTree: {
      if (!all_reduce || !nvls_hw || hosts < 2) break;
      // NVLS reduces inside each host; the hosts' reductions meet in the double binary tree,
      // whose network side reaches kNvlsTreeNetEfficiency of the NICs.
      const double net = kNvlsTreeNetEfficiency * s.net_gbps / treeNicLoad(hosts);
      const double alg = std::min(nvlsAlgFraction(s.generation) * s.intra_bus_gbps, net);
      const double lat = hop(NcclHop::NvLink, NcclAlgo::NvlsTree, NcclProto::Simple) +
                         2 * log2Floor(hosts) * hop(NcclHop::Net, NcclAlgo::NvlsTree, NcclProto::Simple);
      // NCCL's estimate: per head, NVLS's intra-host rate (two operations pipelined) or the
      // network's (doubled on two hosts), capped per channel; none with fewer than two heads.
      // Before 2.28.3: the intra-host search rate or the network's (halved beyond two hosts).
      double choice = -1.0;
      if (nccl_view) {
        const int heads = graphs.nvls_heads;
        double per_head;
        if (ncclAtLeast(version, kNcclNvlsTreeEstimateRevised)) {
          const double intra = graphs.nvls_intra_gbps * ncclNvlsEfficiency(s.generation) *
                               (heads - 1) / std::max(heads, 1) * 2;
          const double inter = graphs.nvls_inter_gbps * (hosts <= 2 ? 2 : 1);
          per_head = std::min({intra, inter, caps.nvls_tree}) / busBandwidthFactor(op, n);
        } else {
          per_head = std::min(graphs.nvls_intra_gbps, graphs.nvls_inter_gbps / (hosts <= 2 ? 1 : 2)) *
                     kNvlsTreeNetEfficiency;
        }
        choice = heads < 2 ? 0.0 : heads * per_head;
      }
      c.push_back({NcclProto::Simple, alg, lat, choice,
                   2 * log2Floor(hosts) * plugin(NcclProto::Simple)});
      break;
    }
    case NcclAlgo::CollNetDirect:
    case NcclAlgo::CollNetChain: {
      // The network reduces: each host sends and receives the buffer once; inside the host a
      // reduce-scatter and an all-gather feed it.
      if (!all_reduce || !s.collnet || !s.nvswitch || hosts < 2) break;
      const double intra = local >= 2 ? s.intra_bus_gbps * local / (2.0 * (local - 1)) : kInf;
      double alg = std::min(s.net_gbps, intra);
      if (s.sm >= 90) alg *= kCollNetHopperEfficiency;
      const double lat =
          2 * (std::min(1, local - 1) * hop(intra_hop, NcclAlgo::CollNetDirect, NcclProto::Simple) +
               (local - 1) * kCollNetArityLatencyUs) +
          hop(NcclHop::Net, NcclAlgo::CollNetDirect, NcclProto::Simple);
      c.push_back({NcclProto::Simple, alg, lat, -1.0, plugin(NcclProto::Simple)});
      break;
    }
    case NcclAlgo::Pat: {
      // Parallel aggregated trees: one GPU per host only.
      if (!gather_scatter || local != 1 || hosts < 2) break;
      const double alg = kPatEfficiency * ring_bus / busBandwidthFactor(op, n);
      // NCCL's table keeps PAT's bus bandwidth unconverted (it converts only its ring's for
      // all-gather and reduce-scatter), so its estimate reads it as algorithm bandwidth.
      const double choice = nccl_view ? kPatEfficiency * nccl_bus : -1.0;
      const double lat = ncclBaseLatencyUs(NcclAlgo::Pat, NcclProto::Simple) +
                         log2Floor(hosts) * hop(NcclHop::Net, NcclAlgo::Pat, NcclProto::Simple) /
                             kPatLatencyLogDivisor +
                         n * kPatLatencyPerRankUs;
      c.push_back({NcclProto::Simple, alg, lat, choice,
                   log2Floor(hosts) * plugin(NcclProto::Simple) / kPatLatencyLogDivisor});
      break;
    }
  }
  return c;
}

std::optional<NcclModel::TuningEntry> NcclModel::tuning(CollectiveOp op,
                                                        const std::vector<std::vector<int>>& groups,
                                                        NcclAlgo algo, NcclProto proto) const {
  // From 512 MiB NCCL's tree correction is 1: the entry as its table holds it.
  for (const Prediction& p : predictions(op, int64_t{1} << 30, shapeOf(groups), algo))
    if (p.proto == proto)
      return TuningEntry{p.latency_us + p.choice_extra_us,
                         p.choice_alg_gbps < 0 ? p.alg_gbps : p.choice_alg_gbps};
  return std::nullopt;
}

CostEstimate NcclModel::collective(CollectiveOp op, int64_t bytes, const Shape& s,
                                   NcclAlgo algo) const {
  return finish(op, bytes, s.ranks, algorithmOf(algo), predictions(op, bytes, s, algo));
}

CostEstimate NcclModel::p2p(CollectiveOp op, int64_t bytes,
                            const std::vector<std::vector<int>>& groups, const Shape& s) const {
  // send/recv and all-to-all go through NCCL's p2p path: one hop's latency and one per network
  // peer, the transfers' bandwidth as the alpha-beta model shares it, LL for small peers.
  const double load = model_.bandwidthSeconds(op, static_cast<double>(bytes), groups,
                                              Algorithm::Direct);
  CostEstimate est;
  est.algorithm = Algorithm::Direct;
  est.seconds = kInf;
  if (!std::isfinite(load)) return est;
  const bool all_to_all = op == CollectiveOp::AllToAll;
  const int64_t per_peer = all_to_all ? bytes / s.ranks : bytes;
  const NcclProto proto = per_peer <= kNcclP2pLlThresholdBytes ? NcclProto::LL : NcclProto::Simple;
  const NcclHop h = s.hosts > 1 ? NcclHop::Net : s.nvlink ? NcclHop::NvLink : NcclHop::Pci;
  const int net_peers = s.hosts <= 1 ? 0 : all_to_all ? s.ranks - s.per_host : 1;
  double alg = load > 0 ? bytes / load / kBytesPerGB : kInf;
  // Without NVLink every GPU's own PCIe link bounds what it sends (see shapeOf), not the
  // socket-link figures the alpha-beta paths carry: its host peers' shares at NCCL's rate
  // between the host's GPUs, its network peers' shares on their way to its NIC at the link's,
  // and the host's NICs carry every GPU's network shares.
  if (s.pcie_only && all_to_all) {
    const double n = s.ranks, local = s.per_host, remote = n - local;
    const double link_s = (local - 1) / n / s.pcie_gbps + remote / n / s.pcie_link_gbps;
    const double net_s = remote > 0 ? local * remote / n / s.net_gbps : 0.0;
    alg = 1.0 / std::max(link_s, net_s);
  } else if (s.pcie_only && s.hosts == 1) {
    alg = s.pcie_gbps;
  }
  return finish(op, bytes, s.ranks, Algorithm::Direct,
                {{proto, (proto == NcclProto::LL ? kRingLlEfficiency : kP2pEfficiency) * alg,
                  ncclHopLatencyUs(h, NcclAlgo::Ring, proto) + net_peers * kP2pNetPeerUs}});
}

CostEstimate NcclModel::hierarchical(CollectiveOp op, int64_t bytes,
                                     const std::vector<std::vector<int>>& groups) const {
  CostEstimate est;
  est.algorithm = Algorithm::Hierarchical;
  est.seconds = kInf;
  std::vector<std::vector<int>> intra, rails, root_rails;
  size_t local = 0;
  for (const auto& g : groups) {
    const CostModel::HierarchicalLevels lv = model_.hierarchicalLevels(g);
    if (lv.intra.empty()) return est;
    local = lv.rails.size();
    intra.insert(intra.end(), lv.intra.begin(), lv.intra.end());
    rails.insert(rails.end(), lv.rails.begin(), lv.rails.end());
    for (const auto& rail : lv.rails)
      if (std::find(rail.begin(), rail.end(), g[0]) != rail.end()) root_rails.push_back(rail);
  }
  const double chunks = std::max(1.0, std::ceil(static_cast<double>(bytes) /
                                                model_.options().chunk_bytes));
  const auto chunk = static_cast<int64_t>(std::ceil(bytes / chunks));
  const auto per_rail = static_cast<int64_t>(std::ceil(static_cast<double>(chunk) / local));
  struct Level {
    CollectiveOp op;
    const std::vector<std::vector<int>>* groups;
    int64_t bytes;
    bool intra;
  };
  std::vector<Level> levels;
  // Reserved so the copy from a brace list never starts at a null buffer: GCC 12 warns on the
  // memmove otherwise (-Wnonnull), though an empty copy moves nothing.
  levels.reserve(3);
  switch (op) {
    case CollectiveOp::AllReduce:
      levels = {{CollectiveOp::ReduceScatter, &intra, chunk, true},
                {CollectiveOp::AllReduce, &rails, per_rail, false},
                {CollectiveOp::AllGather, &intra, chunk, true}};
      break;
    case CollectiveOp::AllGather:
      levels = {{op, &rails, per_rail, false}, {op, &intra, chunk, true}};
      break;
    case CollectiveOp::ReduceScatter:
      levels = {{op, &intra, chunk, true}, {op, &rails, per_rail, false}};
      break;
    case CollectiveOp::Broadcast:
      levels = {{op, &root_rails, chunk, false}, {op, &intra, chunk, true}};
      break;
    case CollectiveOp::Reduce:
      levels = {{op, &intra, chunk, true}, {op, &root_rails, chunk, false}};
      break;
    default: return est;
  }
  // Each chunk passes every level in turn; after the first, chunks follow at the pace of the
  // busiest resource: the network level, or the intra-host levels together, which share the
  // GPUs' NVLink (or PCIe) and SMs.
  double sum = 0.0, intra_pace = 0.0, net_pace = 0.0;
  for (const Level& level : levels) {
    const CostEstimate e = model_.chooseFlat(level.op, level.bytes, *level.groups);
    if (!e.applicable) return est;
    sum += e.seconds;
    (level.intra ? intra_pace : net_pace) += e.seconds;
    est.protocol += (est.protocol.empty() ? "" : "/") + std::string(toString(e.algorithm)) + ":" +
                    e.protocol;
  }
  est.seconds = sum + (chunks - 1.0) * std::max(intra_pace, net_pace);
  est.applicable = true;
  est.order = groups[0];
  est.alg_bandwidth_gbps = est.seconds > 0 ? bytes / est.seconds / kBytesPerGB : 0.0;
  est.bus_bandwidth_gbps =
      est.alg_bandwidth_gbps * busBandwidthFactor(op, static_cast<int>(groups[0].size()));
  return est;
}

CostEstimate NcclModel::estimate(CollectiveOp op, int64_t bytes,
                                 const std::vector<std::vector<int>>& groups,
                                 Algorithm algorithm) const {
  if (algorithm == Algorithm::Hierarchical) return hierarchical(op, bytes, groups);
  const Shape shape = shapeOf(groups);
  CostEstimate est;
  switch (algorithm) {
    case Algorithm::Ring: est = collective(op, bytes, shape, NcclAlgo::Ring); break;
    case Algorithm::Tree: est = collective(op, bytes, shape, NcclAlgo::Tree); break;
    case Algorithm::Nvls: est = collective(op, bytes, shape, NcclAlgo::Nvls); break;
    case Algorithm::NvlsTree: est = collective(op, bytes, shape, NcclAlgo::NvlsTree); break;
    case Algorithm::CollNet: est = collective(op, bytes, shape, NcclAlgo::CollNetDirect); break;
    case Algorithm::Pat: est = collective(op, bytes, shape, NcclAlgo::Pat); break;
    case Algorithm::Direct:
      if (op == CollectiveOp::AllToAll || op == CollectiveOp::SendRecv)
        est = p2p(op, bytes, groups, shape);
      break;
    default: break;
  }
  est.algorithm = algorithm;
  if (!est.applicable) est.seconds = kInf;
  if (est.applicable && est.order.empty()) est.order = groups[0];
  return est;
}

}  // namespace torch_topo::topo
