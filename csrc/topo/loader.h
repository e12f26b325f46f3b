// SPDX-License-Identifier: Apache-2.0
// Topology file loader (layer: csrc/topo): recognises the format by content and hands the text
// to its reader, so users pass any file they have without naming its kind.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

enum class TopologyFormat { Unknown, NvidiaSmi, NcclXml, NcclGraphXml, HwlocXml, TopoJson };

const char* toString(TopologyFormat format);

/// Format of `text` judged by its content: JSON with a torch-topo "schema"; XML by its root
/// element (<system> NCCL topology, <graphs> NCCL graph, <topology> hwloc); text whose first
/// line has `GPU0` for nvidia-smi.
TopologyFormat sniffTopologyFormat(const std::string& text);

/// Parses `text` in whichever accepted format it is. An NCCL graph file and a cluster JSON are
/// recognised and refused with a ParseError saying what they are; anything else unknown gets
/// a ParseError at line 1 naming the accepted formats.
HostTopology loadTopologyText(const std::string& text, const std::string& path);

/// Reads `path` and calls loadTopologyText. Throws InvalidArgument when the file cannot be read.
HostTopology loadTopologyFile(const std::string& path);

/// Reads a cluster JSON, or any host file as a one-host cluster without rank placements.
ClusterTopology loadClusterFile(const std::string& path);

}  // namespace torch_topo::topo
