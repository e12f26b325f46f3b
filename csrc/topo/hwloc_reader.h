// SPDX-License-Identifier: Apache-2.0
// Reader of hwloc XML topologies (layer: csrc/topo, stage after the text readers): NUMA nodes,
// the PCI tree, GPUs, NVSwitches, NICs and NVLink from hwloc's NVLinkBandwidth distances.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Parses the text of an hwloc XML topology (the v2 and v3 formats `lstopo FILE.xml` and
/// `hwloc_topology_export_xmlbuffer` write; TinyXML-2, no libhwloc needed) into a host topology:
///   - one Cpu node per NUMANode ("numa<os_index>", cpulist from its cpuset), joined by Smp links;
///   - PCI switches as PciSwitch nodes (the downstream ports of a switch fold into its upstream
///     port, the root ports into the CPU, as NCCL's own tree does), Pci links weighted by
///     `pci_link_speed`;
///   - GPUs: PCI class 0x0300/0x0302 with NVIDIA vendor 0x10de, CUDA-ordered by bus id;
///   - NVSwitches: PCI devices of subtype "NVSwitch" or NVIDIA class 0x0680;
///   - NICs: PCI class 0x0200/0x0207, named after their openfabrics (else network) OS device;
///   - NvLink links from the `NVLinkBandwidth` distance matrix (MB/s), lanes = bandwidth over the
///     per-lane rate of the GPU's generation.
/// `gpu_paths` is computed by the paths stage. `path` names the file in messages.
///
/// lstopo *console* output (`lstopo -v` text) is refused: it drops the cpusets and the
/// distance matrices the graph needs; the message says how to export XML instead.
///
/// Throws ParseError ("path:line:col: ...") for text that is not well-formed hwloc XML or holds
/// a malformed attribute or matrix.
HostTopology readHwlocXml(const std::string& text, const std::string& path);

/// Compute capability (x 10) from an NVIDIA model name ("Tesla V100-SXM3-32GB" -> 70), 0 when
/// the name is unknown. hwloc XML carries names, not capabilities.
int smFromGpuName(const std::string& name);

}  // namespace torch_topo::topo
