// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/cpulist: Linux cpulists and hwloc bitmaps.
#include "topo/cpulist.h"

#include <gtest/gtest.h>

#include "topo/error.h"

namespace torch_topo::topo {
namespace {

TEST(CpulistTest, ParsesAndFormatsRanges) {
  EXPECT_EQ(parseCpulist("0-3,8,10-11\n", "t"), (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(parseCpulist("", "t").empty());
  EXPECT_EQ(formatCpulist({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpulist({}), "");
  EXPECT_EQ(formatCpulist({5}), "5");
}

TEST(CpulistTest, RefusesGarbageNamingTheSource) {
  EXPECT_THROW(parseCpulist("0-", "node0/cpulist"), InvalidArgument);
  EXPECT_THROW(parseCpulist("3-1", "x"), InvalidArgument);
  EXPECT_THROW(parseCpulist("a", "x"), InvalidArgument);
  EXPECT_THROW(parseCpulist("99999999", "x"), InvalidArgument);
  EXPECT_THROW(parseCpulist("0-3,", "x"), InvalidArgument);  // Linux writes no empty item
  try {
    parseCpulist("1,,x", "node0/cpulist");
    ADD_FAILURE() << "1,,x was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("node0/cpulist: bad cpulist '1,,x': item 2 is empty"),
              std::string::npos)
        << e.what();
  }
}

TEST(CpulistTest, HwlocBitmapWordsRunFromMostSignificant) {
  EXPECT_EQ(formatCpulist(parseHwlocBitmap("0x03030303", "t")), "0-1,8-9,16-17,24-25");
  EXPECT_EQ(formatCpulist(parseHwlocBitmap("0x00000303,0x03030000,,0x0", "t")),
            "80-81,88-89,96-97,104-105");
  EXPECT_EQ(formatCpulist(parseHwlocBitmap("0x1,", "t")), "32");
  EXPECT_THROW(parseHwlocBitmap("0xf...f", "t"), InvalidArgument);
  EXPECT_THROW(parseHwlocBitmap("0x123456789", "t"), InvalidArgument);
  EXPECT_THROW(parseHwlocBitmap("0xzz", "t"), InvalidArgument);
}

}  // namespace
}  // namespace torch_topo::topo
