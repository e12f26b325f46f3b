// SPDX-License-Identifier: Apache-2.0
// The hardware link tables (layer: csrc/topo). Sources per row; NCCL numbers are from
// NVIDIA/nccl src/graph/topo.h and topo.cc (v2.23-v2.27, the *_BW defines and kvDictPciGen).
#include "topo/link_tables.h"

#include <cmath>
#include <cstring>

#include "topo/text_numbers.h"

namespace torch_topo::topo {
namespace {

// clang-format off
// NVLink GB/s per lane per direction. NCCL topo.h SMxx_NVLINK_BW: the usable rate of one
// NVLink as NCCL models it (vendor raw: NVLink1 20, NVLink2/3 25, NVLink4 25, NVLink5 50 GB/s).
const NvlinkGeneration kNvlinkRows[] = {
  //  sm   generation                lane GB/s
  {   60, "sm60 Pascal NVLink1",     18.0 },  // SM60_NVLINK_BW
  {   70, "sm70 Volta NVLink2",      20.0 },  // SM70_NVLINK_BW
  {   80, "sm80 Ampere NVLink3",     20.0 },  // SM80_NVLINK_BW
  {   86, "sm86 GA10x NVLink3 bridge", 12.0 },  // SM86_NVLINK_BW (RTX A6000 / 3090 bridges)
  {   90, "sm90 Hopper NVLink4",     20.6 },  // SM90_NVLINK_BW
  {  100, "sm100 Blackwell NVLink5", 40.0 },  // SM100_NVLINK_BW
};

// PCIe usable GB/s per lane per direction. NCCL topo.cc kvDictPciGen gives per-lane rates in
// units of 100 Mbit/s (15, 30, 60, 120, 240, 480) and converts with width * rate / 80 GB/s:
// Gen3 x16 = 12 GB/s (PCI_BW), Gen4 x16 = 24 GB/s. Gen6 continues the doubling.
const PcieGeneration kPcieRows[] = {
  // gen  GT/s   lane GB/s
  {  1,   2.5,   0.1875 },
  {  2,   5.0,   0.375  },
  {  3,   8.0,   0.75   },
  {  4,  16.0,   1.5    },
  {  5,  32.0,   3.0    },
  {  6,  64.0,   6.0    },
};

// SMP interconnect GB/s per direction as GPU peer traffic sees it, NCCL topo.h.
const SmpInterconnect kSmpRows[] = {
  // name           GB/s
  { "intel-bdw",     6.0 },  // BDW_QPI_BW (QPI_BW in older NCCL): Broadwell and earlier
  { "intel-skl",    10.0 },  // SKL_QPI_BW: Skylake and later (UPI)
  { "amd",          16.0 },  // AMD_BW: Infinity Fabric / xGMI
  { "power9",       32.0 },  // P9_BW
  { "arm",           6.0 },  // ARM_BW
  { "zhaoxin",       6.0 },  // ZPI_BW
};
// SXM GPUs on 8-GPU HGX boards, every GPU's lanes into the board's NVSwitches. Names and ids:
// the PCI ID repository (pci-ids.ucw.cz, vendor 10de); lanes: NVIDIA's A100 (12 third-generation
// links) and H100 (18 fourth-generation links) data sheets; H200 keeps H100's NVLink.
const SxmBoard kSxmRows[] = {
  // device  name               sm  lanes  board GPUs
  { 0x20b0, "A100 SXM4 40GB",   80,  12,   8 },
  { 0x20b2, "A100 SXM4 80GB",   80,  12,   8 },
  { 0x2330, "H100 SXM5 80GB",   90,  18,   8 },
  { 0x2335, "H200 SXM 141GB",   90,  18,   8 },
};
// clang-format on

template <typename T, size_t N>
const T* rows(const T (&table)[N], int* count) {
  *count = static_cast<int>(N);
  return table;
}

}  // namespace

const NvlinkGeneration* nvlinkTable(int* count) { return rows(kNvlinkRows, count); }
const PcieGeneration* pcieTable(int* count) { return rows(kPcieRows, count); }
const SmpInterconnect* smpTable(int* count) { return rows(kSmpRows, count); }
const SxmBoard* sxmBoardTable(int* count) { return rows(kSxmRows, count); }

const SxmBoard* findSxmBoard(const std::string& device_id) {
  ParsedNumber<long long> id = parseInteger(device_id, 0);  // "0x2330"
  if (!id) return nullptr;
  for (const auto& row : kSxmRows) {
    if (static_cast<long long>(row.device) == id.value) return &row;
  }
  return nullptr;
}

double nvlinkLaneGBps(int sm) {
  if (sm <= 0) sm = 80;
  const NvlinkGeneration* best = &kNvlinkRows[0];
  for (const auto& row : kNvlinkRows) {
    if (row.sm <= sm) best = &row;
  }
  return best->lane_gbps;
}

double pcieGBps(int gen, int width) {
  if (gen <= 0) gen = kNcclPlaceholderPcieGen;
  if (width <= 0) width = 16;
  for (const auto& row : kPcieRows) {
    if (row.gen == gen) return row.lane_gbps * width;
  }
  // Beyond the table: the newest row, so an unknown future link is never rated above it.
  return kPcieRows[sizeof(kPcieRows) / sizeof(kPcieRows[0]) - 1].lane_gbps * width;
}

double pcieGBpsFromEncodedRate(double encoded_gbps) {
  // Gen6 is listed with both encodings: hwloc releases differ on its FLIT mode (242/256).
  struct Encoding {
    int gen;
    double efficiency;
  };
  constexpr Encoding kEncodings[] = {{1, 0.8},          {2, 0.8},          {3, 128.0 / 130},
                                     {4, 128.0 / 130},  {5, 128.0 / 130},  {6, 128.0 / 130},
                                     {6, 242.0 / 256}};
  for (const Encoding& e : kEncodings) {
    for (int width : {16, 8, 4, 2, 1, 32, 12}) {
      const double encoded = kPcieRows[e.gen - 1].transfer_gts * e.efficiency * width / 8;
      // hwloc prints six decimals of a float: a match is good to about 1e-6 relative.
      if (std::fabs(encoded - encoded_gbps) <= 1e-5 * encoded) return pcieGBps(e.gen, width);
    }
  }
  return encoded_gbps * pcieGBps(3, 1) / (kPcieRows[2].transfer_gts * 128.0 / 130 / 8);
}

int pcieGenOfSm(int sm) {
  if (sm <= 0) return kDefaultPcieGen;
  return sm < 80 ? 3 : sm < 90 ? 4 : 5;
}

int pcieGenFromSpeed(const std::string& text) {
  // NCCL matches on the leading number; the suffix varies by kernel ("PCIe", "PCIe/s", none).
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  ParsedNumber<double> gts = parseLeadingDouble(s);
  if (!gts) return 0;
  for (const auto& row : kPcieRows) {
    if (gts.value > row.transfer_gts - 0.01 && gts.value < row.transfer_gts + 0.01) return row.gen;
  }
  return 0;
}

int pcieGenFromLaneGBps(double lane_gbps) {
  int best = kPcieRows[0].gen;
  double best_err = 1e300;
  for (const auto& row : kPcieRows) {
    double err = lane_gbps > row.lane_gbps ? lane_gbps - row.lane_gbps : row.lane_gbps - lane_gbps;
    if (err < best_err) {
      best_err = err;
      best = row.gen;
    }
  }
  return best;
}

std::string pcieSpeedString(int gen) {
  for (const auto& row : kPcieRows) {
    if (row.gen == gen) {
      return formatFixed(row.transfer_gts, 1) + " GT/s PCIe";
    }
  }
  return "";
}

double smpGBps(const std::string& vendor, const std::string& arch, int intel_model) {
  auto pick = [](const char* name) {
    for (const auto& row : kSmpRows) {
      if (std::strcmp(row.name, name) == 0) return row.gbps;
    }
    return kSmpRows[0].gbps;
  };
  if (arch == "ppc64") return pick("power9");
  if (arch == "arm64" || arch == "aarch64") return pick("arm");
  // RCCL's dumps write "AMD" where NCCL's write the CPUID vendor string.
  if (vendor == "AuthenticAMD" || vendor == "HygonGenuine" || vendor == "AMD") return pick("amd");
  if (vendor == "CentaurHauls" || vendor == "  Shanghai  ") return pick("zhaoxin");
  // Intel: NCCL treats model 0x55 (85, Skylake-SP) and newer as UPI (topo.cc ncclTopoGetCpuType).
  if (vendor == "GenuineIntel" && intel_model > 0 && intel_model < 85) return pick("intel-bdw");
  return pick("intel-skl");
}

double nicGBps(double gbit) { return gbit / 8.0; }

}  // namespace torch_topo::topo
