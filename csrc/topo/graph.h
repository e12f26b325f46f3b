// SPDX-License-Identifier: Apache-2.0
// The topology model shared by every stage of the core (layer: csrc/topo, pure C++17): devices
// and links of one host, the per-GPU-pair path summary that placement and cost model consume,
// and the cluster of hosts that ranks run on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_topo::topo {

/// Kinds of device in a host graph.
enum class NodeKind { Host, Cpu, PciSwitch, Gpu, Nic, NvSwitch };

/// Kinds of physical link. `Pci` lanes are the PCIe width, `NvLink` lanes the bonded links.
enum class LinkKind { NvLink, C2C, Pci, Smp, Net };

/// GPU-to-GPU path classes in the vocabulary of `nvidia-smi topo -m` and NCCL, ordered from the
/// best path to the worst so that `a < b` means "a is the faster class".
///   X    the device itself
///   NV   bonded NVLinks, direct or through NVSwitch (lane count in PathInfo::nvlinks)
///   PIX  at most one PCIe switch
///   PXB  several PCIe switches, no host bridge
///   PHB  through a PCIe host bridge (one CPU)
///   NODE across host bridges inside one NUMA node
///   SYS  across the SMP interconnect between NUMA nodes / sockets
///   NET  across hosts
enum class PathClass : int { X = 0, NV, PIX, PXB, PHB, NODE, SYS, NET };

const char* toString(NodeKind kind);
const char* toString(LinkKind kind);
const char* toString(PathClass cls);
/// Most NVLink lanes one pair of devices may bond: GB200 gives a GPU 18 in all, and NCCL's
/// topology files never list more per <nvlink>.
constexpr int kMaxNvlinkLanes = 64;

/// Parses "X", "NV", "NV12" (class NV), "PIX", ... "SOC" (old name of SYS). Returns false when
/// the text is not a path class or an NV# above kMaxNvlinkLanes; `nvlinks` receives the NV#
/// lane count (0 otherwise).
bool parsePathClass(const std::string& text, PathClass* cls, int* nvlinks);

/// One device of a host graph.
struct Node {
  NodeKind kind = NodeKind::Cpu;
  /// Stable id within the host: PCI bus id ("0000:07:00.0") for PCI devices, "numa<N>" for
  /// CPUs, the NIC name ("mlx5_0") for NICs without a bus id.
  std::string id;
  /// Human-readable name (GPU model, NIC device name); may be empty.
  std::string name;
  /// NUMA node the device is attached to, -1 when unknown.
  int numa_node = -1;
  /// Per-kind index on the host: CUDA index for GPUs, NIC number for NICs, NUMA id for CPUs.
  int index = -1;
  /// Attributes a source gave verbatim (NCCL XML: pci `class`, `vendor`, `link_speed`, cpu
  /// `arch`, gpu `gdr` as "gpu.gdr"), kept so writers reproduce them; empty for live probes.
  std::vector<std::pair<std::string, std::string>> attrs;
};

/// Value of `key` in `attrs`, or `fallback` when absent.
const std::string& findAttr(const std::vector<std::pair<std::string, std::string>>& attrs,
                            const std::string& key, const std::string& fallback);

/// One bidirectional physical link; bandwidth is per direction.
struct Link {
  int a = -1;
  int b = -1;
  LinkKind kind = LinkKind::Pci;
  /// NVLink: number of bonded links; PCIe: lane width (x16 = 16); otherwise 0.
  int lanes = 0;
  double bandwidth_gbps = 0.0;  // GB/s per direction
  double latency_us = 0.0;
};

/// Physical graph of one host: devices as nodes, links weighted by bandwidth and latency.
struct Graph {
  std::vector<Node> nodes;
  std::vector<Link> links;

  int addNode(Node node);
  int addLink(Link link);
  /// Index of the node with this kind and id, -1 when absent.
  int findNode(NodeKind kind, const std::string& id) const;
  std::vector<int> nodesOfKind(NodeKind kind) const;
};

/// Summary of the best path between two devices, as placement and the cost model see it.
struct PathInfo {
  PathClass cls = PathClass::SYS;
  /// Bonded NVLink lanes between the two GPUs (direct or through NVSwitch), 0 when none.
  int nvlinks = 0;
  double bandwidth_gbps = 0.0;  // GB/s per direction, bottleneck of the path
  double latency_us = 0.0;
};

struct Gpu {
  int index = -1;         // CUDA index (PCI bus order) or the nvidia-smi numbering
  std::string bus_id;     // "0000:07:00.0", empty when the source has none
  std::string name;       // model name, empty when unknown
  int sm = 0;             // compute capability x 10 (90 for H100), 0 when unknown
  int numa_node = -1;
  std::string cpu_affinity;  // cpulist such as "0-47,96-143", empty when unknown
  /// NUMA node of the GPU's own memory where it is one (GB200 "GPU NUMA ID"), -1 otherwise.
  int memory_numa_node = -1;
  /// NVLink domain that reaches beyond this host (multi-node NVLink: GB200 NVL72, GH200 NVL32),
  /// as NVML's fabric cluster UUID and clique id ("<uuid>/<clique>"); GPUs of several hosts
  /// with one domain talk over NVLink, not NICs. Empty when the GPU has none.
  std::string nvlink_domain;
};

struct Nic {
  std::string name;     // "mlx5_0", "NIC3", "eth0"
  std::string bus_id;   // empty when unknown
  int numa_node = -1;
  double speed_gbps = 0.0;  // Gbit/s line rate, 0 when unknown
  /// Source attributes kept for writers (NCCL `<net>`: dev, port, guid, gdr, ...).
  std::vector<std::pair<std::string, std::string>> attrs;
  /// Latency (us) NCCL's net plugin reports for the NIC (NCCL XML `<net latency>`: aws-ofi-nccl
  /// gives EFA 35-150 us, NCCL's own IB and socket transports 0). NCCL's tuning adds it to every
  /// network step of its estimates; 0 when unknown or none.
  double latency_us = 0.0;
};

struct NumaNode {
  int id = -1;
  std::string cpus;  // cpulist, empty when unknown
};

/// Everything known about one host. `gpu_paths` is always filled (n x n, row-major); `graph` is
/// filled by sources that describe the physical tree (NCCL XML, hwloc, NVML) and empty for
/// `nvidia-smi topo -m` text, which only gives the path summary.
struct HostTopology {
  std::string hostname;
  std::string source;  // file path or "probe:<what>"
  /// Format the topology was read from ("nvidia-smi", "nccl-xml", "hwloc-xml"), empty for
  /// live probes; writers use it to tell source attributes from derived ones.
  std::string format;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<NumaNode> numa_nodes;
  Graph graph;
  std::vector<PathInfo> gpu_paths;   // gpus.size() x gpus.size()
  std::vector<PathInfo> gpu_nic_paths;  // gpus.size() x nics.size(), may be empty
  /// Non-fatal findings of the reader (missing rows of a PARTIAL file, guessed values).
  std::vector<std::string> warnings;

  int gpuCount() const { return static_cast<int>(gpus.size()); }
  const PathInfo& path(int i, int j) const { return gpu_paths.at(i * gpus.size() + j); }
  PathInfo& path(int i, int j) { return gpu_paths.at(i * gpus.size() + j); }
};

/// Where one rank runs.
struct RankPlacement {
  int host = -1;       // index into ClusterTopology::hosts
  int local_gpu = -1;  // GPU index on that host, -1 for a CPU-only rank
  int local_rank = -1;
};

/// Hosts joined by a network. Rank order is the launcher's (host-major under torchrun).
struct ClusterTopology {
  std::vector<HostTopology> hosts;
  std::vector<RankPlacement> ranks;
  /// Network bandwidth between two hosts per direction (GB/s) and latency; derived from NIC
  /// speeds unless measured or pinned.
  double inter_host_bandwidth_gbps = 0.0;
  double inter_host_latency_us = 0.0;
};

}  // namespace torch_topo::topo
