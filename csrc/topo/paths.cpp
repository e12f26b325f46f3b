// SPDX-License-Identifier: Apache-2.0
// The paths stage (layer: csrc/topo): NVLink fabric lanes plus a breadth-first search over the
// PCIe/SMP tree, like NCCL's ncclTopoSetPaths, on the graph model of graph.h.
#include "topo/paths.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "topo/error.h"
#include "topo/link_tables.h"

namespace torch_topo::topo {
namespace {

double linkGBps(const Link& link) {
  if (link.bandwidth_gbps > 0) return link.bandwidth_gbps;
  // A source that gave no rate: the link table's default for the kind.
  switch (link.kind) {
    case LinkKind::NvLink:
      return link.lanes * nvlinkLaneGBps(0);
    case LinkKind::Pci:
      return pcieGBps(0, link.lanes);
    case LinkKind::Smp:
      return smpGBps("", "", 0);
    case LinkKind::C2C:
      return pcieGBps(kDefaultPcieGen, kDefaultPcieWidth);
    case LinkKind::Net:
      return 0.0;
  }
  return 0.0;
}

double linkLatencyUs(const Link& link) {
  if (link.latency_us > 0) return link.latency_us;
  switch (link.kind) {
    case LinkKind::NvLink:
      return kNvlinkHopLatencyUs;
    case LinkKind::Smp:
      return kSmpHopLatencyUs;
    case LinkKind::Net:
      return kNetHopLatencyUs;
    default:
      return kPcieHopLatencyUs;
  }
}

struct FabricShare {
  int lanes = 0;
  double gbps = 0.0;
};

FabricShare nvswitchShare(const Graph& graph, int node) {
  FabricShare share;
  for (const Link& link : graph.links) {
    if (link.kind != LinkKind::NvLink || (link.a != node && link.b != node)) continue;
    int other = link.a == node ? link.b : link.a;
    if (graph.nodes[other].kind != NodeKind::NvSwitch) continue;
    share.lanes += link.lanes;
    share.gbps += linkGBps(link);
  }
  return share;
}

bool nvlinkPath(const Graph& graph, int from, int to, PathInfo* out) {
  FabricShare direct;
  for (const Link& link : graph.links) {
    if (link.kind != LinkKind::NvLink) continue;
    if ((link.a == from && link.b == to) || (link.a == to && link.b == from)) {
      direct.lanes += link.lanes;
      direct.gbps += linkGBps(link);
    }
  }
  FabricShare a = nvswitchShare(graph, from), b = nvswitchShare(graph, to);
  FabricShare fabric;
  if (a.lanes > 0 && b.lanes > 0) {
    fabric.lanes = std::min(a.lanes, b.lanes);
    fabric.gbps = std::min(a.gbps, b.gbps);
  }
  if (direct.lanes + fabric.lanes == 0) return false;
  out->cls = PathClass::NV;
  out->nvlinks = direct.lanes + fabric.lanes;
  out->bandwidth_gbps = direct.gbps + fabric.gbps;
  // Through the fabric a byte crosses two NVLink hops (GPU->switch->GPU).
  out->latency_us = direct.lanes > 0 ? kNvlinkHopLatencyUs : 2 * kNvlinkHopLatencyUs;
  return true;
}

}  // namespace

PathInfo computePath(const Graph& graph, int from, int to) {
  PathInfo info;
  if (from == to) {
    info.cls = PathClass::X;
    info.bandwidth_gbps = kLocalGBps;
    return info;
  }
  if (nvlinkPath(graph, from, to, &info)) return info;

  const int n = static_cast<int>(graph.nodes.size());
  std::vector<std::vector<int>> adjacent(n);  // link indices per node
  for (size_t l = 0; l < graph.links.size(); ++l) {
    const Link& link = graph.links[l];
    if (link.kind == LinkKind::NvLink || link.kind == LinkKind::Net) continue;
    if (link.a < 0 || link.b < 0 || link.a >= n || link.b >= n) continue;
    adjacent[link.a].push_back(static_cast<int>(l));
    adjacent[link.b].push_back(static_cast<int>(l));
  }
  std::vector<int> via(n, -1);  // link that reached each node
  std::vector<bool> seen(n, false);
  std::deque<int> queue{from};
  seen[from] = true;
  while (!queue.empty() && !seen[to]) {
    int node = queue.front();
    queue.pop_front();
    // GPUs and NICs are endpoints: PCIe peer traffic never routes through another device.
    NodeKind kind = graph.nodes[node].kind;
    if (node != from && (kind == NodeKind::Gpu || kind == NodeKind::Nic)) continue;
    for (int l : adjacent[node]) {
      const Link& link = graph.links[l];
      int next = link.a == node ? link.b : link.a;
      if (seen[next]) continue;
      seen[next] = true;
      via[next] = l;
      queue.push_back(next);
    }
  }
  if (!seen[to]) {
    info.cls = PathClass::SYS;
    return info;
  }
  int cpus = 0, switches = 0;
  double bottleneck = std::numeric_limits<double>::infinity();
  double latency = 0.0;
  for (int node = to; node != from;) {
    const Link& link = graph.links[via[node]];
    bottleneck = std::min(bottleneck, linkGBps(link));
    latency += linkLatencyUs(link);
    node = link.a == node ? link.b : link.a;
    if (node == from) break;
    if (graph.nodes[node].kind == NodeKind::Cpu) ++cpus;
    if (graph.nodes[node].kind == NodeKind::PciSwitch) ++switches;
  }
  if (cpus >= 2) {
    info.cls = PathClass::SYS;
  } else if (cpus == 1) {
    info.cls = PathClass::PHB;
  } else {
    info.cls = switches <= 1 ? PathClass::PIX : PathClass::PXB;
  }
  info.bandwidth_gbps = bottleneck;
  info.latency_us = latency;
  return info;
}

void computePaths(HostTopology* host) {
  const Graph& graph = host->graph;
  std::vector<int> gpu_nodes, nic_nodes;
  for (const Gpu& gpu : host->gpus) {
    int node = -1;
    if (!gpu.bus_id.empty()) {
      node = graph.findNode(NodeKind::Gpu, gpu.bus_id);
    } else {
      for (int g : graph.nodesOfKind(NodeKind::Gpu)) {
        if (graph.nodes[g].index == gpu.index) node = g;
      }
    }
    TOPO_CHECK(node >= 0, "computePaths: GPU ", gpu.index, " (bus id '", gpu.bus_id,
               "'): got no Gpu node in the graph, expected one with that bus id");
    gpu_nodes.push_back(node);
  }
  for (const Nic& nic : host->nics) {
    int node = graph.findNode(NodeKind::Nic, nic.bus_id.empty() ? nic.name : nic.bus_id);
    TOPO_CHECK(node >= 0, "computePaths: NIC '", nic.name,
               "': got no Nic node in the graph, expected one with its bus id or name");
    nic_nodes.push_back(node);
  }
  const size_t ng = gpu_nodes.size(), nn = nic_nodes.size();
  host->gpu_paths.assign(ng * ng, PathInfo{});
  // One search per pair, mirrored: searches from either end may pick different routes of equal
  // hop count (or add the same latencies in another order), and the JSON reader refuses a pair
  // whose two cells disagree, as the ranks' exchange would then depend on which end is read.
  for (size_t i = 0; i < ng; ++i) {
    for (size_t j = 0; j < ng; ++j) {
      host->gpu_paths[i * ng + j] = j < i ? host->gpu_paths[j * ng + i]
                                          : computePath(graph, gpu_nodes[i], gpu_nodes[j]);
    }
  }
  host->gpu_nic_paths.assign(ng * nn, PathInfo{});
  for (size_t i = 0; i < ng; ++i) {
    for (size_t k = 0; k < nn; ++k) {
      PathInfo path = computePath(graph, gpu_nodes[i], nic_nodes[k]);
      // A NIC is only reached over PCIe; its line rate caps the path.
      double nic_gbps = nicGBps(host->nics[k].speed_gbps);
      if (nic_gbps > 0) path.bandwidth_gbps = std::min(path.bandwidth_gbps, nic_gbps);
      host->gpu_nic_paths[i * nn + k] = path;
    }
  }
}

void estimatePathMetrics(PathInfo* path, int sm) {
  const double pcie = pcieGBps(kDefaultPcieGen, kDefaultPcieWidth);
  // Hop counts of the typical route of each class: PIX GPU-switch-GPU, PXB two switch levels
  // each way, PHB/NODE up to the root complex and down, SYS plus one SMP hop.
  switch (path->cls) {
    case PathClass::X:
      path->bandwidth_gbps = kLocalGBps;
      path->latency_us = 0.0;
      return;
    case PathClass::NV:
      path->bandwidth_gbps = path->nvlinks * nvlinkLaneGBps(sm);
      path->latency_us = kNvlinkHopLatencyUs;
      return;
    case PathClass::PIX:
      path->bandwidth_gbps = pcie;
      path->latency_us = 2 * kPcieHopLatencyUs;
      return;
    case PathClass::PXB:
      path->bandwidth_gbps = pcie;
      path->latency_us = 4 * kPcieHopLatencyUs;
      return;
    case PathClass::PHB:
    case PathClass::NODE:
      path->bandwidth_gbps = pcie;
      path->latency_us = 4 * kPcieHopLatencyUs;
      return;
    case PathClass::SYS:
      path->bandwidth_gbps = std::min(pcie, smpGBps("", "", 0));
      path->latency_us = 4 * kPcieHopLatencyUs + kSmpHopLatencyUs;
      return;
    case PathClass::NET:
      path->latency_us = kNetHopLatencyUs;
      return;
  }
}

void estimatePathMetrics(HostTopology* host) {
  const size_t ng = host->gpus.size();
  bool any_unknown_sm = false;
  for (size_t i = 0; i < ng; ++i) {
    for (size_t j = 0; j < ng; ++j) {
      int sm_i = host->gpus[i].sm, sm_j = host->gpus[j].sm;
      int sm = (sm_i > 0 && sm_j > 0) ? std::min(sm_i, sm_j) : 0;
      PathInfo& path = host->gpu_paths[i * ng + j];
      if (path.cls == PathClass::NV && sm == 0) any_unknown_sm = true;
      estimatePathMetrics(&path, sm);
    }
  }
  for (PathInfo& path : host->gpu_nic_paths) estimatePathMetrics(&path, 0);
  std::string note = "bandwidths estimated from path classes: PCIe assumed Gen" +
                     std::to_string(kDefaultPcieGen) + " x" + std::to_string(kDefaultPcieWidth);
  if (any_unknown_sm) note += ", NVLink lanes at the sm80 rate (GPU model unknown)";
  host->warnings.push_back(note);
}

}  // namespace torch_topo::topo
