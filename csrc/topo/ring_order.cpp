// SPDX-License-Identifier: Apache-2.0
// Ring order search (layer: csrc/topo): exact bottleneck-then-sum optimum by bitmask DP for small
// groups, nearest neighbour + 2-opt for large ones.
#include "topo/ring_order.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "topo/error.h"

namespace torch_topo::topo {
namespace {

constexpr double kNoEdge = -1.0;
constexpr int kTwoOptPasses = 4;

double edge(const std::vector<double>& bw, int n, int a, int b) { return bw[a * n + b]; }

/// Best Hamiltonian cycle through 0 using only edges >= threshold, maximising the edge sum;
/// empty when none exists. dp[mask][v]: best sum of a path 0 -> v visiting `mask`.
std::vector<int> bestCycleAbove(const std::vector<double>& bw, int n, double threshold) {
  const uint32_t full = (1u << n) - 1;
  std::vector<double> dp(static_cast<size_t>(full + 1) * n, kNoEdge);
  std::vector<int8_t> prev(dp.size(), -1);
  dp[1 * n + 0] = 0.0;
  for (uint32_t mask = 1; mask <= full; mask += 2) {  // masks containing vertex 0
    for (int v = 0; v < n; ++v) {
      const double here = dp[mask * n + v];
      if (here < 0) continue;
      for (int w = 1; w < n; ++w) {
        if (mask & (1u << w)) continue;
        const double e = edge(bw, n, v, w);
        if (e < threshold) continue;
        const uint32_t next = mask | (1u << w);
        if (here + e > dp[next * n + w]) {
          dp[next * n + w] = here + e;
          prev[next * n + w] = static_cast<int8_t>(v);
        }
      }
    }
  }
  int best_end = -1;
  double best = kNoEdge;
  for (int v = 1; v < n; ++v) {
    const double here = dp[full * n + v];
    if (here < 0 || edge(bw, n, v, 0) < threshold) continue;
    if (here + edge(bw, n, v, 0) > best) {
      best = here + edge(bw, n, v, 0);
      best_end = v;
    }
  }
  if (best_end < 0) return {};
  std::vector<int> order;
  uint32_t mask = full;
  for (int v = best_end; v != 0;) {
    order.push_back(v);
    const int p = prev[mask * n + v];
    mask &= ~(1u << v);
    v = p;
  }
  order.push_back(0);
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<int> exactRingOrder(const std::vector<double>& bw, int n) {
  std::vector<double> values;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) values.push_back(edge(bw, n, a, b));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  // Feasibility is monotone in the threshold, so binary-search the largest feasible value.
  int lo = 0, hi = static_cast<int>(values.size()) - 1;
  std::vector<int> best = bestCycleAbove(bw, n, values[lo]);
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    std::vector<int> order = bestCycleAbove(bw, n, values[mid]);
    if (order.empty()) {
      hi = mid - 1;
    } else {
      lo = mid;
      best = std::move(order);
    }
  }
  return best;
}

/// Lexicographic quality of replacing edges (a,b),(c,d) by (a,c),(b,d) in a 2-opt move: the
/// move is taken when it raises the smaller of the two edges, or keeps it and raises the sum;
/// both keep the ring's global bottleneck from falling.
bool twoOptImproves(const std::vector<double>& bw, int n, int a, int b, int c, int d) {
  const double old_min = std::min(edge(bw, n, a, b), edge(bw, n, c, d));
  const double new_min = std::min(edge(bw, n, a, c), edge(bw, n, b, d));
  if (new_min != old_min) return new_min > old_min;
  return edge(bw, n, a, c) + edge(bw, n, b, d) > edge(bw, n, a, b) + edge(bw, n, c, d) + 1e-12;
}

std::vector<int> heuristicRingOrder(const std::vector<double>& bw, int n) {
  std::vector<int> order{0};
  std::vector<char> used(n, 0);
  used[0] = 1;
  for (int step = 1; step < n; ++step) {
    const int last = order.back();
    int pick = -1;
    for (int w = 0; w < n; ++w) {
      if (!used[w] && (pick < 0 || edge(bw, n, last, w) > edge(bw, n, last, pick))) pick = w;
    }
    used[pick] = 1;
    order.push_back(pick);
  }
  // 2-opt on a ring with symmetric-enough edges: reversing order[i+1..j] swaps two edges.
  for (int pass = 0; pass < kTwoOptPasses; ++pass) {
    bool changed = false;
    for (int i = 0; i + 2 < n; ++i) {
      for (int j = i + 2; j < n; ++j) {
        const int a = order[i], b = order[i + 1], c = order[j], d = order[(j + 1) % n];
        if (d == a) continue;
        if (twoOptImproves(bw, n, a, b, c, d)) {
          std::reverse(order.begin() + i + 1, order.begin() + j + 1);
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  return order;
}

}  // namespace

double computeRingBottleneck(const std::vector<double>& bandwidth, int n,
                             const std::vector<int>& order) {
  double bottleneck = std::numeric_limits<double>::infinity();
  const int m = static_cast<int>(order.size());
  if (m < 2) return bottleneck;
  for (int i = 0; i < m; ++i) {
    bottleneck = std::min(bottleneck, edge(bandwidth, n, order[i], order[(i + 1) % m]));
  }
  return bottleneck;
}

std::vector<int> findRingOrder(const std::vector<double>& bandwidth, int n) {
  TOPO_CHECK(n >= 1, "findRingOrder: device count: got ", n, ", expected >= 1");
  TOPO_CHECK(bandwidth.size() == static_cast<size_t>(n) * n,
             "findRingOrder: bandwidth matrix: got ", bandwidth.size(), " entries, expected ",
             n, "x", n);
  if (n <= 2) return n == 1 ? std::vector<int>{0} : std::vector<int>{0, 1};
  return n <= kExactRingOrderMaxDevices ? exactRingOrder(bandwidth, n)
                                        : heuristicRingOrder(bandwidth, n);
}

}  // namespace torch_topo::topo
