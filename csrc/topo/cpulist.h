// SPDX-License-Identifier: Apache-2.0
// CPU sets as Linux cpulists ("0-3,8,10-11") and hwloc bitmaps ("0x00000303,,0x0f"), and the
// graph node of a NUMA domain (layer: csrc/topo). Probe, hwloc reader and NUMA binding share them.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topo/graph.h"

namespace torch_topo::topo {

/// Larger CPU or NUMA ids are a corrupt file, not a machine: Linux caps NR_CPUS at 8192 on x86-64.
constexpr long kMaxCpuId = 1L << 16;

/// A cpulist's ranges in the order written, or the first problem found in words ("item 2 is
/// empty"); every reader of cpulist text (sysfs, nvidia-smi, torch-topo JSON) checks with this,
/// so one file is accepted or refused alike whatever reads it. Blanks are ignored, "" has no
/// ranges, and a trailing comma is an empty item: Linux never writes one.
struct CpulistScan {
  std::vector<std::pair<long, long>> ranges;
  std::string problem;  // empty when the text is a cpulist
};
CpulistScan scanCpulist(std::string_view text);

/// Parses a Linux cpulist ("0-3,8"; whitespace and a trailing newline allowed, "" is empty).
/// Throws InvalidArgument naming `where`, the bad text and what is wrong with it.
std::set<int> parseCpulist(const std::string& text, const std::string& where);

/// Formats a set as the shortest cpulist ("0-3,8"); the empty set gives "".
std::string formatCpulist(const std::set<int>& cpus);

/// Converts an hwloc bitmap string (comma-separated 32-bit hex words, most significant first,
/// empty words are zero, "0xf...f" infinite sets are refused) to a cpu set.
std::set<int> parseHwlocBitmap(const std::string& text, const std::string& where);

/// The Cpu node of NUMA domain `numa` as every source names it: id "numa<N>", index N.
Node makeCpuNode(int numa);

}  // namespace torch_topo::topo
