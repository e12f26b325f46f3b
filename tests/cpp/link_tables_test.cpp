// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/link_tables: table shapes and the values NCCL and the PCIe spec give.
#include "topo/link_tables.h"

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

namespace torch_topo::topo {
namespace {

TEST(LinkTablesTest, TablesHaveTheirRows) {
  int rows = 0;
  const NvlinkGeneration* nv = nvlinkTable(&rows);
  ASSERT_EQ(rows, 6);
  EXPECT_EQ(nv[0].sm, 60);
  EXPECT_EQ(nv[rows - 1].sm, 100);
  for (int i = 1; i < rows; ++i) EXPECT_LT(nv[i - 1].sm, nv[i].sm) << "rows sorted by sm";
  const PcieGeneration* pcie = pcieTable(&rows);
  ASSERT_EQ(rows, 6);
  for (int i = 0; i < rows; ++i) EXPECT_EQ(pcie[i].gen, i + 1);
  smpTable(&rows);
  EXPECT_EQ(rows, 6);
}

TEST(LinkTablesTest, NvlinkLaneRatesFollowNcclTopoH) {
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(60), 18.0);   // SM60_NVLINK_BW
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(70), 20.0);   // SM70_NVLINK_BW
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(80), 20.0);   // SM80_NVLINK_BW
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(86), 12.0);   // SM86_NVLINK_BW
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(89), 12.0);   // Ada falls in the sm86 row
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(90), 20.6);   // SM90_NVLINK_BW
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(100), 40.0);  // SM100_NVLINK_BW
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(0), 20.0);    // unknown: sm80
  EXPECT_DOUBLE_EQ(nvlinkLaneGBps(35), 18.0);   // below the table: oldest row
}

TEST(LinkTablesTest, PcieRatesMatchNcclWidthTimesSpeedOver80) {
  EXPECT_DOUBLE_EQ(pcieGBps(3, 16), 12.0);  // PCI_BW, Gen3 x16
  EXPECT_DOUBLE_EQ(pcieGBps(4, 16), 24.0);
  EXPECT_DOUBLE_EQ(pcieGBps(5, 16), 48.0);
  EXPECT_DOUBLE_EQ(pcieGBps(4, 8), 12.0);
  EXPECT_DOUBLE_EQ(pcieGBps(0, 0), 12.0);   // empty sysfs fields: Gen3 x16 like NCCL
  EXPECT_DOUBLE_EQ(pcieGBps(9, 16), 96.0);  // beyond the table: capped at Gen6
}

TEST(LinkTablesTest, HwlocEncodedPcieRatesMapToTheirGenerationAndWidth) {
  // The PCIe specification's signalling rates and line encodings, printed as hwloc prints
  // pci_link_speed ("%f"); the expected usable rate is NCCL's width x rate in 100 Mbit/s / 80.
  struct Gen {
    int gen;
    double gts;
    double encoding;
    double ncclRate;  // kvDictPciGen, units of 100 Mbit/s per lane
  };
  const Gen gens[] = {{1, 2.5, 8.0 / 10, 15},     {2, 5, 8.0 / 10, 30},
                      {3, 8, 128.0 / 130, 60},    {4, 16, 128.0 / 130, 120},
                      {5, 32, 128.0 / 130, 240},  {6, 64, 242.0 / 256, 480}};
  for (const Gen& g : gens) {
    for (int width : {1, 2, 4, 8, 16}) {
      char printed[32];
      std::snprintf(printed, sizeof(printed), "%f", g.gts * g.encoding * width / 8);
      EXPECT_DOUBLE_EQ(pcieGBpsFromEncodedRate(std::atof(printed)), width * g.ncclRate / 80)
          << "Gen" << g.gen << " x" << width << " (" << printed << ")";
    }
  }
  // Not any generation's rate (0.2, as the SL390 export gives older devices): scaled as Gen3.
  EXPECT_DOUBLE_EQ(pcieGBpsFromEncodedRate(0.2), 0.2 * 0.75 / (8 * 128.0 / 130 / 8));
  EXPECT_DOUBLE_EQ(pcieGBpsFromEncodedRate(0.0), 0.0);
}

TEST(LinkTablesTest, PcieGenerationOfAGpuFollowsItsComputeCapability) {
  EXPECT_EQ(pcieGenOfSm(70), 3);   // V100
  EXPECT_EQ(pcieGenOfSm(75), 3);   // T4
  EXPECT_EQ(pcieGenOfSm(80), 4);   // A100
  EXPECT_EQ(pcieGenOfSm(89), 4);   // L40S, RTX 4090
  EXPECT_EQ(pcieGenOfSm(90), 5);   // H100 PCIe
  EXPECT_EQ(pcieGenOfSm(120), 5);  // RTX 5090, RTX PRO 6000
  EXPECT_EQ(pcieGenOfSm(0), kDefaultPcieGen);
}

TEST(LinkTablesTest, LinkSpeedStringsOfEveryKernelGeneration) {
  EXPECT_EQ(pcieGenFromSpeed("16 GT/s"), 4);
  EXPECT_EQ(pcieGenFromSpeed("32.0 GT/s PCIe"), 5);
  EXPECT_EQ(pcieGenFromSpeed("32 GT/s PCIe/s"), 5);
  EXPECT_EQ(pcieGenFromSpeed("8 GT/s"), 3);
  EXPECT_EQ(pcieGenFromSpeed("2.5 GT/s"), 1);
  EXPECT_EQ(pcieGenFromSpeed(""), 0);
  EXPECT_EQ(pcieGenFromSpeed("fast"), 0);
  EXPECT_EQ(pcieGenFromSpeed("7 GT/s"), 0);
  EXPECT_EQ(pcieSpeedString(4), "16.0 GT/s PCIe");
  EXPECT_EQ(pcieGenFromSpeed(pcieSpeedString(6)), 6);
  EXPECT_EQ(pcieGenFromLaneGBps(24.0 / 16), 4);
}

TEST(LinkTablesTest, SmpAndNicRates) {
  EXPECT_DOUBLE_EQ(smpGBps("AuthenticAMD", "x86_64", 0), 16.0);   // AMD_BW
  EXPECT_DOUBLE_EQ(smpGBps("AMD", "x86_64", 0), 16.0);            // as RCCL's dumps write it
  EXPECT_DOUBLE_EQ(smpGBps("GenuineIntel", "x86_64", 85), 10.0);  // SKL_QPI_BW
  EXPECT_DOUBLE_EQ(smpGBps("GenuineIntel", "x86_64", 79), 6.0);   // Broadwell: BDW_QPI_BW
  EXPECT_DOUBLE_EQ(smpGBps("", "ppc64", 0), 32.0);                // P9_BW
  EXPECT_DOUBLE_EQ(smpGBps("", "aarch64", 0), 6.0);               // ARM_BW
  EXPECT_DOUBLE_EQ(nicGBps(400.0), 50.0);
  EXPECT_DOUBLE_EQ(nicGBps(100.0), 12.5);
}

}  // namespace
}  // namespace torch_topo::topo
