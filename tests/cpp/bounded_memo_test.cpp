// SPDX-License-Identifier: Apache-2.0
#include "topo/bounded_memo.h"

#include <gtest/gtest.h>

#include <string>

namespace torch_topo::topo {
namespace {

TEST(BoundedMemoTest, ComputesEachKeyOnceUntilFull) {
  BoundedMemo<int, std::string> memo(3);
  int calls = 0;
  auto get = [&](int key) {
    return memo.get(key, [&] {
      ++calls;
      return std::to_string(key * 10);
    });
  };
  EXPECT_EQ(get(1), "10");
  EXPECT_EQ(get(2), "20");
  EXPECT_EQ(get(1), "10");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(get(3), "30");
  EXPECT_EQ(calls, 3);
  // Full: the next new key forgets the rest, so 1 is computed again (same value).
  EXPECT_EQ(get(4), "40");
  EXPECT_EQ(get(1), "10");
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(get(4), "40");
  EXPECT_EQ(calls, 5);
}

}  // namespace
}  // namespace torch_topo::topo
