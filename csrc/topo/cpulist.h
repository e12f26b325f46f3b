// SPDX-License-Identifier: Apache-2.0
// CPU sets as Linux cpulists ("0-3,8,10-11") and hwloc bitmaps ("0x00000303,,0x0f"), and the
// graph node of a NUMA domain (layer: csrc/topo). Probe, hwloc reader and NUMA binding share them.
#pragma once

#include <set>
#include <string>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Parses a Linux cpulist ("0-3,8"; whitespace and a trailing newline allowed, "" is empty).
/// Throws InvalidArgument naming `where` and the bad text.
std::set<int> parseCpulist(const std::string& text, const std::string& where);

/// Formats a set as the shortest cpulist ("0-3,8"); the empty set gives "".
std::string formatCpulist(const std::set<int>& cpus);

/// Converts an hwloc bitmap string (comma-separated 32-bit hex words, most significant first,
/// empty words are zero, "0xf...f" infinite sets are refused) to a cpu set.
std::set<int> parseHwlocBitmap(const std::string& text, const std::string& where);

/// The Cpu node of NUMA domain `numa` as every source names it: id "numa<N>", index N.
Node makeCpuNode(int numa);

}  // namespace torch_topo::topo
