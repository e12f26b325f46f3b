// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/ring_order: exact search against brute force over all cyclic orders, and
// the heuristic on host-clustered matrices.
#include "topo/ring_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "topo/error.h"

namespace torch_topo::topo {
namespace {

double bruteForceBottleneck(const std::vector<double>& bw, int n) {
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  double best = -1;
  do {
    double worst = 1e300;
    for (int i = 0; i < n; ++i) worst = std::min(worst, bw[perm[i] * n + perm[(i + 1) % n]]);
    best = std::max(best, worst);
  } while (std::next_permutation(perm.begin() + 1, perm.end()));
  return best;
}

bool isPermutation(std::vector<int> order, int n) {
  std::sort(order.begin(), order.end());
  for (int i = 0; i < n; ++i)
    if (order.size() != static_cast<size_t>(n) || order[i] != i) return false;
  return true;
}

TEST(RingOrderTest, ExactMatchesBruteForceOnRandomMatrices) {
  std::mt19937 rng(1234);
  const double levels[] = {10, 20, 25, 50, 100};
  for (int n = 2; n <= 8; ++n) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> bw(n * n, 0.0);
      for (int a = 0; a < n; ++a)
        for (int b = a + 1; b < n; ++b) bw[a * n + b] = bw[b * n + a] = levels[rng() % 5];
      const std::vector<int> order = findRingOrder(bw, n);
      ASSERT_TRUE(isPermutation(order, n));
      EXPECT_EQ(order[0], 0);
      EXPECT_DOUBLE_EQ(computeRingBottleneck(bw, n, order), bruteForceBottleneck(bw, n))
          << "n=" << n << " trial=" << trial;
    }
  }
}

TEST(RingOrderTest, HeuristicCrossesEachHostOnceWhenRanksInterleave) {
  // 4 hosts x 6 devices, device i on host i % 4: the best ring leaves each host exactly once.
  const int hosts = 4, n = 24;
  std::vector<double> bw(n * n, 0.0);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) bw[a * n + b] = a % hosts == b % hosts ? 100.0 : 10.0;
  const std::vector<int> order = findRingOrder(bw, n);
  ASSERT_TRUE(isPermutation(order, n));
  int slow = 0;
  for (int i = 0; i < n; ++i) slow += bw[order[i] * n + order[(i + 1) % n]] < 50 ? 1 : 0;
  EXPECT_EQ(slow, hosts);
}

TEST(RingOrderTest, RejectsBadMatrices) {
  EXPECT_THROW(findRingOrder({1.0, 2.0}, 2), InvalidArgument);
  EXPECT_THROW(findRingOrder({}, 0), InvalidArgument);
  EXPECT_EQ(findRingOrder({0.0}, 1), std::vector<int>{0});
}

}  // namespace
}  // namespace torch_topo::topo
