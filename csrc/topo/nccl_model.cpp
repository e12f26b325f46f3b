// SPDX-License-Identifier: Apache-2.0
// NCCL's algorithms priced on a cluster (layer: csrc/topo). The latency formulas follow NCCL's
// src/graph/tuning.cc (ncclTopoTuneModel); the bandwidths are this project's own reading of
// what each algorithm moves over which link, checked against published nccl-tests runs by
// benchmarks/model_vs_nccl_tests.py (docs/planner.md has the table).
#include "topo/nccl_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "topo/link_tables.h"

namespace torch_topo::topo {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBytesPerGB = 1e9;
/// Rate of one NIC (GB/s) where a host file lists none: 400 Gbit/s, the compute NICs of current
/// GPU hosts (one per GPU on H100 and H200 systems).
constexpr double kUnlistedNicGBps = 50.0;
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

bool amdCpu(const HostTopology& host) {
  for (const Node& n : host.graph.nodes)
    if (n.kind == NodeKind::Cpu && findAttr(n.attrs, "vendor", "") == "AuthenticAMD") return true;
  return false;
}

/// Rate (GB/s per direction) of a GPU's own PCIe link: the graph's PCIe link at the GPU where
/// the source has one (NCCL XML, hwloc, live probe), else the generation of its compute
/// capability at x16. A dump whose link_speed is empty (VMs) has NCCL's Gen3 placeholder
/// there, not the link.
double gpuPcieLinkGBps(const HostTopology& host, int local_gpu) {
  const Gpu& gpu = host.gpus[local_gpu];
  const int node = gpu.bus_id.empty() ? -1 : host.graph.findNode(NodeKind::Gpu, gpu.bus_id);
  double link = 0.0;
  if (node >= 0 && !findAttr(host.graph.nodes[node].attrs, "link_speed", "unset").empty())
    for (const Link& l : host.graph.links)
      if (l.kind == LinkKind::Pci && (l.a == node || l.b == node))
        link = std::max(link, l.bandwidth_gbps);
  return link > 0 ? link : pcieGBps(pcieGenOfSm(gpu.sm), 16);
}

/// Whether NCCL joins two GPUs of one host that share no NVLink with peer access (its P2P
/// transport) rather than through host memory (SHM): paths.cc ncclTopoCheckP2p allows P2P over
/// PCIe switches only (PXB), through the CPU too on AMD hosts (`amd`) of at most two GPUs;
/// GeForce cards report no peer access.
bool ncclPeerAccess(const HostTopology& host, bool amd, int a, int b) {
  for (int g : {a, b})
    if (host.gpus[g].name.find("GeForce") != std::string::npos) return false;
  return host.path(a, b).cls <= PathClass::PXB || (amd && host.gpuCount() <= 2);
}

/// Whether NVLink alone can join `members` (ranks of one node) in a ring: every member has two
/// NVLink peers among them (one in a pair) and those links connect them all. A multi-node
/// NVLink domain's members on other hosts count as NVLink peers.
bool nvlinkRingCloses(const ClusterTopology& cluster, const std::vector<int>& members) {
  const size_t n = members.size();
  auto nv = [&](size_t i, size_t j) {
    const RankPlacement& a = cluster.ranks[members[i]];
    const RankPlacement& b = cluster.ranks[members[j]];
    return a.host != b.host ||
           cluster.hosts[a.host].path(a.local_gpu, b.local_gpu).cls == PathClass::NV;
  };
  std::vector<char> seen(n, 0);
  std::vector<size_t> todo{0};
  seen[0] = 1;
  while (!todo.empty()) {
    const size_t i = todo.back();
    todo.pop_back();
    size_t degree = 0;
    for (size_t j = 0; j < n; ++j) {
      if (j == i || !nv(i, j)) continue;
      ++degree;
      if (!seen[j]) {
        seen[j] = 1;
        todo.push_back(j);
      }
    }
    if (degree < std::min<size_t>(2, n - 1)) return false;
  }
  return std::all_of(seen.begin(), seen.end(), [](char c) { return c != 0; });
}

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
    const double choice = c.choice_alg_gbps < 0 ? t
                          : c.choice_alg_gbps > 0 ? latency + bytes / (c.choice_alg_gbps * kBytesPerGB)
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

NcclModel::Shape NcclModel::shapeOf(const std::vector<std::vector<int>>& groups) const {
  // Ranks are grouped by the node NCCL sees (CostModel::nodeOf): a host, or a whole
  // multi-node NVLink domain, whose ranks NCCL joins over NVLink as if they shared a host.
  const ClusterTopology& cluster = model_.cluster();
  Shape s;
  s.ranks = static_cast<int>(groups.at(0).size());
  std::vector<std::vector<int>> intra;   // every group's members on each node
  std::vector<std::map<int, std::set<int>>> nics_of(groups.size());  // group -> node -> NICs
  std::vector<std::map<int, std::set<int>>> hosts_of(groups.size());  // group -> node -> hosts
  std::map<int, int> nic_users, host_users;
  int sm = 0;
  bool sm_known = false;
  s.nvlink = s.nvswitch = true;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    std::map<int, std::vector<int>> by_node;
    for (int r : groups[gi]) by_node[model_.nodeOf(r)].push_back(r);
    s.hosts = std::max(s.hosts, static_cast<int>(by_node.size()));
    for (const auto& [node, members] : by_node) {
      s.per_host = std::max(s.per_host, static_cast<int>(members.size()));
      if (members.size() >= 2) intra.push_back(members);
      std::set<int>& hosts = hosts_of[gi][node];
      for (int a : members) {
        const RankPlacement& pa = cluster.ranks.at(a);
        const HostTopology& host = cluster.hosts[pa.host];
        hosts.insert(pa.host);
        for (int nic : model_.nicsOf(a)) nics_of[gi][node].insert(nic);
        const int sm_a = host.gpus[pa.local_gpu].sm;
        if (sm_a > 0) sm = sm_known ? std::min(sm, sm_a) : sm_a;
        sm_known = sm_known || sm_a > 0;
        for (int b : members) {
          const RankPlacement& pb = cluster.ranks[b];
          if (a != b && pa.host == pb.host &&
              host.path(pa.local_gpu, pb.local_gpu).cls != PathClass::NV)
            s.nvlink = false;
        }
      }
      for (int h : hosts) {
        // A domain spanning hosts is switched whatever one tray's own matrix shows.
        s.nvswitch = s.nvswitch && (hosts.size() > 1 || model_.nvlinkSwitched(h));
        ++host_users[h];
        s.amd_cpu = s.amd_cpu || amdCpu(cluster.hosts[h]);
      }
    }
    for (const auto& [node, nics] : nics_of[gi])
      for (int nic : nics) ++nic_users[nic];
  }
  s.nvlink = s.nvlink && s.per_host >= 2;
  s.sm = sm;
  s.generation = ncclGeneration(sm);
  s.intra_bus_gbps = kInf;
  if (!intra.empty()) {
    // A ring all-gather of 1 GB moves (L-1)/L GB over each edge: its bandwidth term gives the
    // ring's bus bandwidth with every link the node-local rings share.
    const double t = model_.bandwidthSeconds(CollectiveOp::AllGather, kBytesPerGB, intra,
                                             Algorithm::Ring);
    const double L = s.per_host;
    if (t > 0 && std::isfinite(t)) s.intra_bus_gbps = (L - 1) / L / t;
  }
  // Where NVLink alone cannot close a node's ring, the ring crosses PCIe, and there each GPU's
  // own PCIe link bounds NCCL's transfers (at kNcclShmEfficiency of it through host memory),
  // not the socket-link figures its search ranks paths by: published runs across sockets reach
  // the link's rate.
  s.pcie_gbps = s.pcie_link_gbps = kInf;
  s.pcie_only = !intra.empty();
  double ring_pcie = kInf;
  for (const auto& members : intra) {
    double pcie = kInf;
    for (int a : members) {
      const RankPlacement& pa = cluster.ranks[a];
      const HostTopology& host = cluster.hosts[pa.host];
      const bool amd = amdCpu(host);
      bool peer = true;
      for (int b : members) {
        const RankPlacement& pb = cluster.ranks[b];
        if (a == b) continue;
        // Members on other hosts of the node share a multi-node NVLink domain with `a`.
        if (pa.host != pb.host || host.path(pa.local_gpu, pb.local_gpu).cls == PathClass::NV)
          s.pcie_only = false;
        else
          peer = peer && ncclPeerAccess(host, amd, pa.local_gpu, pb.local_gpu);
      }
      const double link = gpuPcieLinkGBps(host, pa.local_gpu);
      s.pcie_link_gbps = std::min(s.pcie_link_gbps, link);
      pcie = std::min(pcie, link * (peer ? 1.0 : kNcclShmEfficiency));
    }
    s.pcie_gbps = std::min(s.pcie_gbps, pcie);
    if (!nvlinkRingCloses(cluster, members)) ring_pcie = std::min(ring_pcie, pcie);
  }
  if (std::isfinite(ring_pcie)) s.intra_bus_gbps = ring_pcie;
  s.net_gbps = kInf;
  s.collnet = s.hosts >= 2;
  if (s.hosts >= 2) {
    s.nics = std::numeric_limits<int>::max();
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      for (const auto& [node, nics] : nics_of[gi]) {
        double sum = 0.0, uplink = 0.0;
        bool listed = false;
        for (int nic : nics) sum += model_.nicBandwidth(nic) / nic_users[nic];
        for (int h : hosts_of[gi][node]) {
          uplink += model_.hostUplinkBandwidth(h) / host_users[h];
          listed = listed || !cluster.hosts[h].nics.empty();
        }
        const double net = std::min(sum, uplink);
        s.net_gbps = std::min(s.net_gbps, net);
        // A host file without NICs stands for its NICs with one aggregate: counted as NICs of
        // kUnlistedNicGBps, for the channels NCCL would build over them.
        const int count = listed ? static_cast<int>(nics.size())
                                 : std::max(1, static_cast<int>(std::lround(net / kUnlistedNicGBps)));
        s.nics = std::min(s.nics, count);
      }
    }
    for (const auto& g : groups)
      for (int r : g) {
        const HostTopology& host = cluster.hosts[cluster.ranks[r].host];
        const int rail = model_.railOf(r);
        s.collnet = s.collnet && rail < static_cast<int>(host.nics.size()) &&
                    findAttr(host.nics[rail].attrs, "coll", "0") == "1";
      }
  }
  return s;
}

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
  // A ring's bus bandwidth by protocol, from its links' (NCCL caps LL128 per channel).
  auto ring_proto = [&](NcclProto p, double bus, double ll128_cap) {
    return p == NcclProto::Simple  ? bus
           : p == NcclProto::LL128 ? std::min(kLl128Efficiency * bus, ll128_cap)
                                   : std::min(ll_max, kRingLlEfficiency * bus);
  };
  std::vector<NcclModel::Prediction> c;
  switch (algo) {
    case NcclAlgo::Ring: {
      if (!all_reduce && !gather_scatter && op != CollectiveOp::Broadcast) break;
      const double factor = busBandwidthFactor(op, n);
      for (NcclProto p : {NcclProto::LL, NcclProto::LL128, NcclProto::Simple}) {
        if (p == NcclProto::LL128 && !ll128) continue;
        const double bus = ring_proto(p, ring_bus, kInf);
        const double choice =
            nccl_view ? ring_proto(p, nccl_bus, graphs.channels * caps.ring_ll128) / factor : -1.0;
        double lat = ncclBaseLatencyUs(NcclAlgo::Ring, p);
        if (op == CollectiveOp::Broadcast) {
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
          if (p == NcclProto::Simple && hosts > 1 && all_reduce)
            lat *= s.sm >= 80 || s.sm == 0 ? kRingPlateauLatencyFactor
                                           : kRingPlateauLatencyFactorPreSm80;
        }
        c.push_back({p, bus / factor, lat, choice});
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
                     lat, choice});
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
      c.push_back({NcclProto::Simple, alg, lat});
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
      c.push_back({NcclProto::Simple, alg, lat, choice});
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
      c.push_back({NcclProto::Simple, alg, lat});
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
      c.push_back({NcclProto::Simple, alg, lat, choice});
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
      return TuningEntry{p.latency_us, p.choice_alg_gbps < 0 ? p.alg_gbps : p.choice_alg_gbps};
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
