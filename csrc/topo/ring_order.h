// SPDX-License-Identifier: Apache-2.0
// Ring order search (layer: csrc/topo, pure C++17): the cyclic order of a group's devices that
// maximises the ring's bottleneck bandwidth, as NCCL's ring search does over its graph.
#pragma once

#include <vector>

namespace torch_topo::topo {

/// Groups up to this size are solved exactly (bitmask dynamic programming, 2^n x n^2 steps);
/// larger ones by greedy nearest neighbour plus 2-opt.
constexpr int kExactRingOrderMaxDevices = 12;

/// Smallest edge bandwidth of the ring `order` (cyclic; +inf for fewer than two devices).
/// `bandwidth` is n x n row-major, GB/s per direction from row to column.
double computeRingBottleneck(const std::vector<double>& bandwidth, int n,
                             const std::vector<int>& order);

/// A cyclic order of 0..n-1 starting at 0 that maximises the smallest edge bandwidth; among
/// those, the largest sum of edge bandwidths (fewer slow hops). Exact for
/// n <= kExactRingOrderMaxDevices, heuristic beyond. Throws InvalidArgument when
/// bandwidth.size() != n*n or n < 1.
std::vector<int> findRingOrder(const std::vector<double>& bandwidth, int n);

}  // namespace torch_topo::topo
