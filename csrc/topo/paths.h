// SPDX-License-Identifier: Apache-2.0
// The paths stage (layer: csrc/topo): from a host's physical graph to the per-GPU-pair and
// GPU-to-NIC path summary (class, NVLink lanes, bottleneck bandwidth, latency), as NCCL's
// src/graph/paths.cc does, and the same numbers estimated for sources that give classes only.
#pragma once

#include "topo/graph.h"

namespace torch_topo::topo {

/// Best path between two nodes of `graph`:
/// - NV when they share NVLinks, directly or through NVSwitches (all NVSwitches of a host are
///   one fabric, as NCCL merges them): lanes = direct lanes + min(lanes of each side into the
///   fabric); bandwidth = the lanes' summed rate.
/// - otherwise the shortest route over PCIe, C2C and SMP links that never passes through
///   another GPU or NIC: SYS when it crosses two CPUs, PHB when it goes through one CPU, PIX
///   when at most one PCIe switch lies between, PXB beyond (NCCL's rule; NODE needs host
///   bridges, which these graphs do not model, so graph sources report PHB for it).
/// Bandwidth is the bottleneck link, latency the sum of hop latencies. Unconnected nodes get
/// class SYS with zero bandwidth.
PathInfo computePath(const Graph& graph, int from, int to);

/// Fills `host->gpu_paths` and `host->gpu_nic_paths` from `host->graph`. A GPU's graph node is
/// the Gpu node whose id is its bus id (or whose index is its index when the bus id is empty);
/// a NIC's is the Nic node with its bus id, else its name.
/// Throws InvalidArgument when a GPU or NIC has no node in the graph.
void computePaths(HostTopology* host);

/// Bandwidth (GB/s) and latency (us) of a path known by class and lane count only (nvidia-smi
/// text), from link_tables: NV = lanes x lane rate of `sm`; PCIe classes = the default PCIe
/// link (Gen4 x16); SYS = the lesser of PCIe and the default SMP link.
void estimatePathMetrics(PathInfo* path, int sm);

/// Applies estimatePathMetrics to every GPU pair and GPU-NIC path of `host` and records one
/// warning saying which defaults were assumed.
void estimatePathMetrics(HostTopology* host);

}  // namespace torch_topo::topo
