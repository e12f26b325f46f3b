// SPDX-License-Identifier: Apache-2.0
// Reader of hwloc XML exports (layer: csrc/topo). Declared here so the loader can dispatch to it;
// the definition (hwloc_reader.cpp) belongs to the probes stage.
#pragma once

#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Parses an hwloc XML export (`lstopo --of xml`, root <topology>) into a host graph: NUMA
/// nodes, PCI tree, GPUs, NICs and NVLink bandwidth distances where present.
/// Throws ParseError (`path:line:col: ...`) on malformed input.
HostTopology readHwlocXml(const std::string& text, const std::string& path);

}  // namespace torch_topo::topo
