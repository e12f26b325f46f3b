// SPDX-License-Identifier: Apache-2.0
// What a set of groups looks like to NCCL's tuning: ranks per node, the links inside a node
// (NVLink, or each GPU's PCIe link where NVLink cannot close a ring), the NICs across
// (layer: csrc/topo). nccl_model.cpp prices NCCL's algorithms on it.
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

}  // namespace

NcclModel::Shape NcclModel::shapeOf(const std::vector<std::vector<int>>& groups) const {
  return model_.nccl_shapes_->get(groups, [&] { return computeShape(groups); });
}

NcclModel::Shape NcclModel::computeShape(const std::vector<std::vector<int>>& groups) const {
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
  // Only groups that span nodes use the network: a group inside one node (a launcher's layout
  // keeps some so) took a share of the NICs it never touches, and doubled the price of a
  // cross-host group beside it.
  std::vector<char> spans(groups.size(), 0);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    std::map<int, std::vector<int>> by_node;
    for (int r : groups[gi]) by_node[model_.nodeOf(r)].push_back(r);
    s.hosts = std::max(s.hosts, static_cast<int>(by_node.size()));
    spans[gi] = by_node.size() > 1;
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
        if (spans[gi]) ++host_users[h];
        s.amd_cpu = s.amd_cpu || amdCpu(cluster.hosts[h]);
      }
    }
    if (!spans[gi]) continue;
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
      if (!spans[gi]) continue;
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
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      if (!spans[gi]) continue;
      for (int r : groups[gi]) {
        const HostTopology& host = cluster.hosts[cluster.ranks[r].host];
        const int rail = model_.railOf(r);
        const bool listed = rail < static_cast<int>(host.nics.size());
        s.collnet = s.collnet && listed && findAttr(host.nics[rail].attrs, "coll", "0") == "1";
        if (listed) s.net_latency_us = std::max(s.net_latency_us, host.nics[rail].latency_us);
      }
    }
  }
  return s;
}

}  // namespace torch_topo::topo
