// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/nvsmi_reader: the format variants of the real files and the error shape.
#include "topo/nvsmi_reader.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_data.h"
#include "topo/error.h"
#include "topo/nvlink_inference.h"

namespace torch_topo::topo {
namespace {

using testing::dataPath;
using testing::readText;

HostTopology readData(const std::string& name) {
  std::string path = dataPath("nvidia_smi_topo/" + name);
  return readNvidiaSmi(readText(path), path);
}

std::string parseError(const std::string& text) {
  return testing::parseErrorOf([&] { readNvidiaSmi(text, "t.txt"); });
}

TEST(NvsmiReaderTest, GluedHeaderOfTheSocEra) {
  HostTopology h = readData("sheffield_sharc_DGX-1_8xP100_NV1_4xmlx5_SOCformat.tsv.txt");
  ASSERT_EQ(h.gpuCount(), 8);
  ASSERT_EQ(h.nics.size(), 4u);
  EXPECT_EQ(h.nics[1].name, "mlx5_2");          // header order kept
  EXPECT_EQ(h.path(0, 5).cls, PathClass::SYS);  // SOC
  EXPECT_EQ(h.path(1, 5).nvlinks, 1);
  EXPECT_EQ(h.gpu_nic_paths[0 * 4 + 2].cls, PathClass::PHB);
}

TEST(NvsmiReaderTest, EmptyAffinityCellsArePlacedByHeaderColumn) {
  HostTopology h = readData("vllm19607_2xGPU_NV12_8xNIC_emptyAffinity.txt");
  ASSERT_EQ(h.gpuCount(), 2);
  EXPECT_EQ(h.gpus[0].cpu_affinity, "");
  EXPECT_EQ(h.gpus[0].numa_node, -1);
  EXPECT_EQ(h.path(0, 1).nvlinks, 12);
  EXPECT_EQ(h.gpu_nic_paths[6].cls, PathClass::PXB);
}

TEST(NvsmiReaderTest, NicLegendNamesNicColumns) {
  HostTopology h = readData("ncclTests331_leonardo_4xA100-64GB_NV4mesh_4xNIC.txt");
  ASSERT_EQ(h.nics.size(), 4u);
  EXPECT_EQ(h.nics[3].name, "mlx5_3");
  EXPECT_EQ(h.gpus[0].cpu_affinity, "0");
  EXPECT_EQ(h.gpus[0].numa_node, 0);  // NUMA Affinity 0-1: first id
}

// A legend that names a NIC twice, gives two NICs one name, misses a NIC or names one the
// matrix lacks was read without a word (the later line won; NICs kept "NIC3").
TEST(NvsmiReaderTest, NicLegendThatDisagreesWithTheMatrixIsNamed) {
  const std::string file =
      testing::dataPath("nvidia_smi_topo/ncclTests331_leonardo_4xA100-64GB_NV4mesh_4xNIC.txt");
  const std::string good = readText(file);
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  EXPECT_EQ(parseError(edited("  NIC1: mlx5_1\n", "  NIC1: mlx5_1\n  NIC1: mlx5_9\n")),
            "t.txt:25:3: NIC Legend: NIC1 appears twice");
  EXPECT_EQ(parseError(edited("  NIC2: mlx5_2", "  NIC2: mlx5_1")),
            "t.txt:25:9: NIC Legend: NIC2 and NIC1 are both named 'mlx5_1'");
  auto warnings = [](const std::string& text) {
    std::string all;
    for (const std::string& w : readNvidiaSmi(text, "t.txt").warnings) all += w + "\n";
    return all;
  };
  EXPECT_EQ(warnings(good).find("NIC"), std::string::npos) << warnings(good);
  EXPECT_NE(warnings(edited("  NIC3: mlx5_3\n", ""))
                .find("t.txt: NIC3 has no line in the NIC Legend; named NIC3"),
            std::string::npos);
  EXPECT_NE(
      warnings(edited("  NIC3: mlx5_3\n", "  NIC3: mlx5_3\n  NIC9: mlx5_9\n"))
          .find("t.txt:27: NIC Legend names NIC9, which the matrix has no column for; ignored"),
      std::string::npos);
}

TEST(NvsmiReaderTest, GpuNumaIdColumnOfGb200) {
  HostTopology h = readData("PARTIAL_sglang11208_GB200_4xGPU_NV18_6xNIC_gpuNUMAid.txt");
  ASSERT_EQ(h.gpuCount(), 4);
  EXPECT_EQ(h.gpus[1].memory_numa_node, 10);
  EXPECT_EQ(h.gpus[2].numa_node, 1);
  EXPECT_EQ(h.gpus[3].numa_node, -1);   // row missing
  EXPECT_EQ(h.path(3, 0).nvlinks, 18);  // from the mirror cell in row GPU0
  ASSERT_FALSE(h.warnings.empty());
  EXPECT_NE(h.warnings[0].find("rows missing"), std::string::npos);
  EXPECT_NE(h.warnings[0].find("GPU3"), std::string::npos);
}

TEST(NvsmiReaderTest, PairsOfTwoMissingRowsAreSysWithAWarning) {
  HostTopology h = readData("PARTIAL_nccl1505_DGX-A100-40GB_NV12_12xNIC_NPS4.txt");
  EXPECT_EQ(h.gpuCount(), 8);
  EXPECT_EQ(h.path(4, 5).cls, PathClass::SYS);
  EXPECT_EQ(h.path(4, 0).nvlinks, 12);
  EXPECT_NE(h.warnings[0].find("GPU4, GPU5, GPU6, GPU7"), std::string::npos);
}

TEST(NvsmiReaderTest, TabFilesWithPaddingTabs) {
  HostTopology h = readData("nccl557_2xGPU_NV3_bridge.tsv.txt");
  EXPECT_EQ(h.gpus[0].cpu_affinity, "0-47");
  EXPECT_EQ(h.gpus[0].numa_node, -1);  // N/A
  HostTopology c = readData("club3090_1229_2xRTX5090_PHB.tsv.txt");
  EXPECT_EQ(c.gpus[1].numa_node, 0);
  EXPECT_EQ(c.path(0, 1).cls, PathClass::PHB);
}

TEST(NvsmiReaderTest, GluedCellsAndNumbering) {
  HostTopology h = readNvidiaSmi(
      "\tGPU2\tGPU5\tNIC0\tCPU Affinity\n"
      "GPU2\t X \tNV4\tPIX\t0-7\n"
      "GPU5\tNV4\t X \tNODE\t8-15\n"
      "NIC0\tPIXNODE X\n",
      "t.txt");
  ASSERT_EQ(h.gpuCount(), 2);
  EXPECT_EQ(h.gpus[0].index, 2);
  EXPECT_EQ(h.gpus[1].index, 5);
  EXPECT_EQ(h.gpus[1].numa_node, 1);  // numbered by distinct CPU Affinity
  EXPECT_EQ(h.gpu_nic_paths[1].cls, PathClass::NODE);
}

TEST(NvsmiReaderTest, H200FirecrackerVmWithAnEmptyCellBeforeGpuNumaId) {
  // One row "GPU0\t X \t0-15\t0\t\tN/A": four fields for three affinity columns.
  HostTopology h = readData("h200_1xGPU_firecracker-vm_driver580.tsv.txt");
  ASSERT_EQ(h.gpuCount(), 1);
  EXPECT_EQ(h.gpus[0].index, 0);
  EXPECT_EQ(h.gpus[0].bus_id, "");  // `nvidia-smi topo -m` names no bus ids
  EXPECT_EQ(h.gpus[0].cpu_affinity, "0-15");
  EXPECT_EQ(h.gpus[0].numa_node, 0);
  EXPECT_EQ(h.gpus[0].memory_numa_node, -1);  // N/A
  EXPECT_TRUE(h.nics.empty());                // the VM's eth0 is no NIC column here
  EXPECT_EQ(h.path(0, 0).cls, PathClass::X);
  ASSERT_EQ(h.warnings.size(), 1u);  // no missing rows or cells: only the usual estimate note
  EXPECT_NE(h.warnings[0].find("estimated from path classes"), std::string::npos);
}

TEST(NvsmiReaderTest, HeaderUnderlinedWithTerminalEscapes) {
  // Driver 590/610 captures keep nvidia-smi's ESC[4m ... ESC[0m around the header.
  HostTopology h = readData("gpuexporter_1xH100-MIG_driver590_underlinedHeader.tsv.txt");
  ASSERT_EQ(h.gpuCount(), 1);
  EXPECT_EQ(h.gpus[0].index, 0);
  EXPECT_EQ(h.gpus[0].cpu_affinity, "0-19");
  EXPECT_EQ(h.gpus[0].numa_node, 0);
  EXPECT_EQ(h.gpus[0].memory_numa_node, -1);  // GPU NUMA ID N/A: the escape closed before it
  HostTopology w =
      readData("gpuexporter_1xRTX2080S_windows_driver610_underlinedHeader_emptyAffinity.tsv.txt");
  ASSERT_EQ(w.gpuCount(), 1);
  EXPECT_EQ(w.gpus[0].cpu_affinity, "");  // Windows prints no affinity
  EXPECT_EQ(w.gpus[0].numa_node, -1);
  // Only SGR escapes draw nothing; any other control text is still reported.
  EXPECT_NE(parseError("\x1b[2JGPU0\nGPU0 X\n").find("t.txt:1:1: header: got '?[2JGPU0'"),
            std::string::npos);
}

TEST(NvsmiReaderTest, EmptyCpuAffinityLeavesNumaInItsColumn) {
  // Space-expanded tabs: with CPU Affinity empty, the NUMA id sits halfway between the CPU and
  // NUMA headers and N/A halfway between NUMA Affinity and GPU NUMA ID.
  HostTopology h = readData("nchcSlurmGuide_8xH200_NV18_10xNIC_emptyCpuAffinity.txt");
  ASSERT_EQ(h.gpuCount(), 8);
  EXPECT_EQ(h.gpus[0].cpu_affinity, "");
  EXPECT_EQ(h.gpus[0].numa_node, 0);
  EXPECT_EQ(h.gpus[0].memory_numa_node, -1);
  EXPECT_EQ(h.gpus[4].cpu_affinity, "56");
  EXPECT_EQ(h.gpus[4].numa_node, 1);
  ASSERT_EQ(h.numa_nodes.size(), 2u);
  EXPECT_EQ(h.gpu_nic_paths[1 * 10 + 3].cls, PathClass::PIX);
}

TEST(NvsmiReaderTest, PcieOnlyMatrixOfTopoMpLeavesNvlinkUnknown) {
  // `nvidia-smi topo -mp` drops NV# from the cells and from the legend.
  const std::string name = "numaK8sNotes_3xGPU_topo-mp_PCIeOnly_SYS_NODE_2numa.txt";
  HostTopology h = readData(name);
  ASSERT_EQ(h.gpuCount(), 3);
  EXPECT_EQ(h.path(1, 2).cls, PathClass::NODE);
  ASSERT_FALSE(h.warnings.empty());
  EXPECT_EQ(h.warnings[0].rfind(std::string(kPcieOnlyMatrixWarning) + " (", 0), 0u);
  EXPECT_NE(h.warnings[0].find(name), std::string::npos);
  EXPECT_EQ(nvlinkOrigin(h), NvlinkOrigin::Unknown);
  // A `topo -m` legend lists NV#: PCIe paths there are what the host has.
  HostTopology m = readData("hwPlatformNotes_sm02_4xA100-PCIE-40GB_allSYS_2numa.txt");
  for (const std::string& w : m.warnings)
    EXPECT_EQ(w.find(kPcieOnlyMatrixWarning), std::string::npos) << w;
  EXPECT_EQ(nvlinkOrigin(m), NvlinkOrigin::None);
}

TEST(NvsmiReaderTest, PeerAccessMatrixIsNamedInTheError) {
  // `nvidia-smi topo -p2p r` shares the header and diagonal X of `topo -m`; its cells are
  // status words.
  const std::string name = "p2pMatrix_8xH100_mlengineering_notTopoM.txt";
  std::string what;
  try {
    readData(name);
  } catch (const ParseError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find(name + ":2:17: row GPU0, column GPU1: got 'OK', expected a path class"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("; this is `nvidia-smi topo -p2p` output (peer-access status, not "
                      "paths): save `nvidia-smi topo -m` instead"),
            std::string::npos)
      << what;
  EXPECT_EQ(parseError("GPU0 GPU1\nGPU0 X NVx\n").find("topo -p2p"), std::string::npos);
}

TEST(NvsmiReaderTest, LinesPastedAboveTheHeaderAreSkippedWithAWarning) {
  // A quarter of the tables posted in public issues carry the prompt, a label or a Markdown
  // fence above the header; the reference is the bare table.
  const std::string table =
      "        GPU0    GPU1    NIC0    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      NV18    PIX     0-31    0\n"
      "GPU1    NV18     X      SYS     32-63   1\n"
      "NIC0    PIX     SYS      X\n";
  const std::string legend = "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n";
  const HostTopology bare = readNvidiaSmi(table + legend, "t.txt");
  for (const std::string& above :
       {std::string("NVIDIA Topology:\n"), std::string("[user@node ~]$ nvidia-smi topo -m\n"),
        std::string("```shell\n"),
        std::string("$ nvidia-smi topo -m\n\nNVIDIA Topology:\n```\n")}) {
    for (const std::string& below : {legend, std::string("```\n"), legend + "```\n"}) {
      const std::string text = above + table + below;
      ASSERT_TRUE(looksLikeNvidiaSmi(text)) << text;
      const HostTopology h = readNvidiaSmi(text, "t.txt");
      ASSERT_EQ(h.gpuCount(), bare.gpuCount()) << text;
      auto same = [](const std::vector<PathInfo>& a, const std::vector<PathInfo>& b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
          return x.cls == y.cls && x.nvlinks == y.nvlinks && x.bandwidth_gbps == y.bandwidth_gbps &&
                 x.latency_us == y.latency_us;
        });
      };
      EXPECT_TRUE(same(h.gpu_paths, bare.gpu_paths)) << text;
      EXPECT_TRUE(same(h.gpu_nic_paths, bare.gpu_nic_paths)) << text;
      EXPECT_EQ(h.path(0, 1).nvlinks, 18) << text;
      ASSERT_EQ(h.nics.size(), 1u) << text;
      EXPECT_EQ(h.gpus[1].numa_node, 1) << text;
      EXPECT_EQ(h.gpus[1].cpu_affinity, "32-63") << text;
      const std::string header_at =
          std::to_string(std::count(above.begin(), above.end(), '\n') + 1);
      EXPECT_TRUE(std::any_of(h.warnings.begin(), h.warnings.end(), [&](const std::string& w) {
        return w.rfind("t.txt:1: skipped the line(s) above the header at line " + header_at, 0) ==
               0;
      })) << text;
    }
  }
  // Four lines above the header: not a paste of the table, and not read as one.
  const std::string far = "a\nb\nc\nd\n" + table;
  EXPECT_FALSE(looksLikeNvidiaSmi(far));
  EXPECT_NE(parseError(far).find("t.txt:1:1: header: got 'a'"), std::string::npos);
  EXPECT_TRUE(looksLikeNvidiaSmi("a\n\n\nb\nc\n" + table));  // blank lines do not count
}

TEST(NvsmiReaderTest, OneCpuAffinityAcrossSocketsIsACgroupsNotNumaNodes) {
  // Old drivers print no NUMA Affinity; under a Slurm job's cpuset every GPU shows the job's
  // CPUs, which numbered all four GPUs of two sockets as one node.
  auto table = [](const std::string& across) {
    return "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\n"
           "GPU0\t X \tPIX\t" +
           across + "\t" + across +
           "\t0-3\n"
           "GPU1\tPIX\t X \t" +
           across + "\t" + across +
           "\t0-3\n"
           "GPU2\t" +
           across + "\t" + across +
           "\t X \tPIX\t0-3\n"
           "GPU3\t" +
           across + "\t" + across + "\tPIX\t X \t0-3\n";
  };
  const HostTopology sockets = readNvidiaSmi(table("SOC"), "t.txt");
  for (const Gpu& gpu : sockets.gpus) {
    EXPECT_EQ(gpu.numa_node, -1) << gpu.index;
    EXPECT_EQ(gpu.cpu_affinity, "0-3") << gpu.index;
  }
  EXPECT_TRUE(sockets.numa_nodes.empty());
  for (const std::string& w : sockets.warnings)
    EXPECT_EQ(w.find("numbered"), std::string::npos) << w;
  EXPECT_TRUE(
      std::any_of(sockets.warnings.begin(), sockets.warnings.end(), [](const std::string& w) {
        return w ==
               "GPU0 and GPU2 share CPU Affinity 0-3 across SYS (the link between sockets): a "
               "cpuset or cgroup limit, not their sockets'; NUMA nodes unknown";
      }));
  // One socket (PHB, NODE between the pairs): one node, as inferred.
  for (const std::string& near : {"PHB", "NODE"}) {
    const HostTopology one = readNvidiaSmi(table(near), "t.txt");
    for (const Gpu& gpu : one.gpus) EXPECT_EQ(gpu.numa_node, 0) << near << gpu.index;
    ASSERT_EQ(one.numa_nodes.size(), 1u) << near;
  }
}

TEST(NvsmiReaderTest, ErrorsNameLineColumnAndExpectation) {
  EXPECT_EQ(parseError("        GPU0    GPU1\nGPU0     X      NVx\n"),
            "t.txt:2:17: row GPU0, column GPU1: got 'NVx', expected a path class (X, NV1 to NV64, "
            "PIX, PXB, PHB, NODE, SYS, SOC)");
  EXPECT_EQ(parseError("        GPU0    GPU1\nGPU0     X      NV99\n"),
            "t.txt:2:17: row GPU0, column GPU1: got 'NV99', expected a path class (X, NV1 to NV64, "
            "PIX, PXB, PHB, NODE, SYS, SOC)");
  EXPECT_NE(parseError("GPU0 GPU1\nGPU0 X X\n")
                .find("t.txt:2:8: row GPU0, column GPU1: got 'X', "
                      "expected X exactly on the diagonal"),
            std::string::npos);
  EXPECT_NE(parseError("GPU0 GPU1\nGPU7 X SYS\n").find("t.txt:2:1:"), std::string::npos);
  EXPECT_NE(parseError("GPU0 GPU1\nGPU0 X\n").find("has 1 path cells, expected 2"),
            std::string::npos);
  EXPECT_NE(parseError("GPU0 GPU99999\n").find("out of range (max 4095)"), std::string::npos);
  EXPECT_NE(parseError("GPU0 CPU Affinity\nGPU0 X 0-3 junk\n").find("expected no more cells"),
            std::string::npos);
  EXPECT_NE(parseError("GPU0 CPU Affinity\nGPU0 X 0-99999999\n").find("CPU Affinity: got"),
            std::string::npos);
  // Text glued to the last path cell in the tab layout: the message quotes the whole cell.
  EXPECT_EQ(parseError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1X\t0-1\n"),
            "t.txt:2:10: row GPU0, column GPU1: got 'NV1X', expected a path class (X, NV1 to "
            "NV64, PIX, PXB, PHB, NODE, SYS, SOC) followed by a tab; 'X' is glued to it");
  EXPECT_EQ(parseError("\tGPU0\tCPU Affinity\tNUMA\nGPU0\t X \t0-3\t0\n"),
            "t.txt:1:20: header: got 'NUMA' after the affinity columns, expected CPU Affinity, "
            "NUMA Affinity or GPU NUMA ID (device columns come before them)");
  EXPECT_NE(parseError("hello world\n").find("t.txt:1:1: header"), std::string::npos);
  EXPECT_NE(parseError("").find("empty file"), std::string::npos);
}

}  // namespace
}  // namespace torch_topo::topo
