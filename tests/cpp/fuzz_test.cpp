// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/fuzz: mutated real files either parse into a consistent topology or raise
// ParseError. CI also runs this under ASan/UBSan (build/core-asan), which catches what the
// shape checks cannot (out-of-bounds reads, overflow).
#include "topo/fuzz.h"

#include <gtest/gtest.h>

#include "test_data.h"
#include "topo/loader.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

TEST(FuzzTest, MutantsParseOrRaiseParseError) {
  std::vector<std::string> corpus;
  // hwloc included: its reader is what the live probe runs on every host.
  for (const char* dir : {"nvidia_smi_topo", "nccl_topo_xml", "hwloc"}) {
    for (const std::string& path : testing::dataFiles(dir))
      corpus.push_back(testing::readText(path));
  }
  corpus.push_back(hostToJson(loadTopologyFile(
      testing::dataPath("nvidia_smi_topo/ncclTests331_leonardo_4xA100-64GB_NV4mesh_4xNIC.txt"))));
  FuzzReport report = fuzzTopologyTexts(corpus, 20260101, 3000);
  EXPECT_EQ(report.inputs, 3000);
  for (const std::string& f : report.failures) ADD_FAILURE() << f;
  EXPECT_EQ(report.failure_count, 0);
  // Both outcomes must occur, else the mutations are too weak or too strong to mean anything.
  EXPECT_GT(report.parsed, 300);
  EXPECT_GT(report.rejected, 300);
}

}  // namespace
}  // namespace torch_topo::topo
