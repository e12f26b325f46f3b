// SPDX-License-Identifier: Apache-2.0
// Message-size ranges over which a group takes a schedule (layer: csrc/topo, header only). A
// choice may hold in a band rather than from one size up: a two-level schedule saves latency
// steps on small messages and pays an extra pass over the bytes on large ones, so it can win
// only in between.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace torch_topo::topo {

/// Payloads of `from` bytes and more, below `below` bytes; below < 0: no upper end.
struct SizeRange {
  int64_t from = 0;
  int64_t below = -1;

  bool contains(int64_t bytes) const { return bytes >= from && (below < 0 || bytes < below); }
  bool operator==(const SizeRange& o) const { return from == o.from && below == o.below; }
};

inline bool anyContains(const std::vector<SizeRange>& ranges, int64_t bytes) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [bytes](const SizeRange& r) { return r.contains(bytes); });
}

}  // namespace torch_topo::topo
