// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/graph: path-class names and graph lookups.
#include "topo/graph.h"

#include <gtest/gtest.h>

namespace torch_topo::topo {
namespace {

TEST(PathClassTest, ParsesEveryNvidiaSmiSpelling) {
  PathClass cls;
  int lanes = -1;
  ASSERT_TRUE(parsePathClass("NV12", &cls, &lanes));
  EXPECT_EQ(cls, PathClass::NV);
  EXPECT_EQ(lanes, 12);
  ASSERT_TRUE(parsePathClass("SOC", &cls, &lanes));
  EXPECT_EQ(cls, PathClass::SYS);
  EXPECT_EQ(lanes, 0);
  ASSERT_TRUE(parsePathClass("NODE", &cls, &lanes));
  EXPECT_EQ(cls, PathClass::NODE);
  EXPECT_FALSE(parsePathClass("NV", &cls, &lanes) && lanes > 0);
  EXPECT_FALSE(parsePathClass("NVx", &cls, &lanes));
  EXPECT_FALSE(parsePathClass("NV99999999", &cls, &lanes));
  // No device bonds more lanes: NV255 was priced at 5100 GB/s.
  EXPECT_TRUE(parsePathClass("NV64", &cls, &lanes));
  EXPECT_FALSE(parsePathClass("NV65", &cls, &lanes));
  EXPECT_FALSE(parsePathClass("NV255", &cls, &lanes));
  EXPECT_FALSE(parsePathClass("", &cls, &lanes));
  EXPECT_STREQ(toString(PathClass::PXB), "PXB");
}

TEST(PathClassTest, OrderRunsFromFastToSlow) {
  EXPECT_LT(PathClass::NV, PathClass::PIX);
  EXPECT_LT(PathClass::PHB, PathClass::SYS);
  EXPECT_LT(PathClass::SYS, PathClass::NET);
}

TEST(GraphTest, FindsNodesByKindAndId) {
  Graph g;
  int cpu = g.addNode({NodeKind::Cpu, "numa0", "", 0, 0});
  int gpu = g.addNode({NodeKind::Gpu, "0000:07:00.0", "H100", 0, 0});
  g.addLink({cpu, gpu, LinkKind::Pci, 16, 24.0, 1.0});
  EXPECT_EQ(g.findNode(NodeKind::Gpu, "0000:07:00.0"), gpu);
  EXPECT_EQ(g.findNode(NodeKind::Cpu, "0000:07:00.0"), -1);
  EXPECT_EQ(g.nodesOfKind(NodeKind::Gpu), std::vector<int>{gpu});
}

}  // namespace
}  // namespace torch_topo::topo
