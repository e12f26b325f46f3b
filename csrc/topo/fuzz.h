// SPDX-License-Identifier: Apache-2.0
// Mutation fuzzing of the topology readers (layer: csrc/topo): the robustness check shared by
// the C++ tests (run under ASan/UBSan) and the Python suite (through a binding, for speed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_topo::topo {

struct FuzzReport {
  int inputs = 0;    // mutated inputs fed to loadTopologyText
  int parsed = 0;    // accepted, and the result passed the shape checks
  int rejected = 0;  // refused with ParseError, the documented error for bad input
  /// Inputs that raised anything else or gave an inconsistent topology: the mutation, then
  /// what happened (at most 10 kept).
  std::vector<std::string> failures;
  int failure_count = 0;
};

/// Feeds `count` mutants of the texts in `corpus` to loadTopologyText, from a fixed `seed`:
/// truncations, swapped and glued cells, deleted/duplicated lines, garbage bytes and huge or
/// negative numbers. Each must parse into a consistent topology (path matrices of the right
/// shape, finite non-negative bandwidths) or raise ParseError.
FuzzReport fuzzTopologyTexts(const std::vector<std::string>& corpus, uint64_t seed, int count);

}  // namespace torch_topo::topo
