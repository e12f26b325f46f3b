// SPDX-License-Identifier: Apache-2.0
// Hardware link constants (layer: csrc/topo): NVLink per GPU generation, PCIe per generation and
// width, SMP interconnects, NICs and per-hop latencies. Every other stage takes its numbers here.
#pragma once

#include <string>

namespace torch_topo::topo {

/// One row of the NVLink table: a GPU generation by compute capability (sm x 10).
struct NvlinkGeneration {
  int sm;            // lowest compute capability of the row (60, 70, 80, 86, 90, 100)
  const char* name;  // "sm90 Hopper"
  double lane_gbps;  // GB/s per bonded lane per direction, as NCCL counts it
};

/// One row of the PCIe table.
struct PcieGeneration {
  int gen;              // 1 .. 6
  double transfer_gts;  // GT/s per lane, as sysfs prints it ("16 GT/s")
  double lane_gbps;     // usable GB/s per lane per direction
};

/// One row of the SMP (CPU-to-CPU) table.
struct SmpInterconnect {
  const char* name;  // "intel-skl" (UPI), "amd" (xGMI/Infinity Fabric), ...
  double gbps;       // GB/s per direction usable by GPU peer traffic
};

/// One row of the SXM board table: a GPU by PCI device id whose NVLinks an NCCL XML may leave
/// out (clouds ship the PCI tree; NCCL adds NVLink from NVML at run time).
struct SxmBoard {
  unsigned device;     // PCI device id (vendor 0x10de)
  const char* name;    // "H100 SXM5 80GB"
  int sm;              // compute capability x 10
  int nvlinks;         // NVLink lanes per GPU
  int board_gpus;      // GPUs of the HGX board whose every GPU reaches NVSwitch
};

const SxmBoard* sxmBoardTable(int* rows);
/// The SXM board of a PCI device id ("0x2330"), or nullptr when the id names no such part.
const SxmBoard* findSxmBoard(const std::string& device_id);
const NvlinkGeneration* nvlinkTable(int* rows);
const PcieGeneration* pcieTable(int* rows);
const SmpInterconnect* smpTable(int* rows);

/// GB/s per NVLink lane per direction for a GPU of compute capability `sm` (x 10); sm <= 0
/// (unknown) gives the sm80 row, the generation most files without a model name come from.
double nvlinkLaneGBps(int sm);
/// Usable GB/s per direction of a PCIe link of `gen` and `width` lanes; gen <= 0 or width <= 0
/// fall back to Gen3 x16, NCCL's default for empty sysfs fields.
double pcieGBps(int gen, int width);
/// Usable GB/s per direction of a PCIe link known only by its data rate after line encoding
/// (hwloc's pci_link_speed: lanes x GT/s x 8b/10b for Gen1/2, 128b/130b from Gen3, / 8). A rate
/// that is exactly some generation and width maps to pcieGBps of it; any other is scaled as a
/// Gen3 link would be.
double pcieGBpsFromEncodedRate(double encoded_gbps);
/// PCIe generation a GPU of compute capability `sm` (x 10) has on its own x16 link, by NVIDIA's
/// data sheets: Gen3 to Turing (P100, V100, T4), Gen4 for Ampere and Ada (A100, A10, A40, L4,
/// L40S, RTX 30/40), Gen5 from Hopper (H100 PCIe, H20, B200, RTX 50, RTX PRO 6000);
/// kDefaultPcieGen when unknown (0).
int pcieGenOfSm(int sm);
/// PCIe generation from a sysfs/NCCL `link_speed` string ("16 GT/s", "32.0 GT/s PCIe",
/// "2.5 GT/s"); 0 when the string is empty or names no known rate.
int pcieGenFromSpeed(const std::string& text);
/// PCIe generation whose per-lane rate is nearest `lane_gbps` (a link's GB/s over its width).
int pcieGenFromLaneGBps(double lane_gbps);
/// `link_speed` string NCCL itself dumps for a generation ("16.0 GT/s PCIe").
std::string pcieSpeedString(int gen);
/// GB/s of the SMP interconnect by CPU vendor/arch ("GenuineIntel", "AuthenticAMD", "ppc64",
/// "arm64") and Intel model id (0 when unknown).
double smpGBps(const std::string& vendor, const std::string& arch, int intel_model);
/// GB/s per direction of a NIC of `gbit` Gbit/s line rate.
double nicGBps(double gbit);

// Defaults for sources that name no hardware (nvidia-smi text).
constexpr int kDefaultPcieGen = 4;  // A100/H100-era hosts dominate the collection
constexpr int kDefaultPcieWidth = 16;
constexpr int kNcclPlaceholderPcieGen = 3;  // NCCL reads empty link_speed as Gen3 (topo.cc)

// Per-hop latency in microseconds. Source: NCCL src/graph/tuning.cc `hwLat`, the LL protocol
// column of the ring algorithm (NVLINK .6, PCI 1.0, NET 2.7), which is the per-hop base latency
// NCCL adds for each link class. The SMP and NVSwitch hops have no NCCL row: SMP is taken as
// one more PCI hop, NVSwitch as one more NVLink hop (store-and-forward free crossbar).
constexpr double kNvlinkHopLatencyUs = 0.6;
constexpr double kPcieHopLatencyUs = 1.0;
constexpr double kSmpHopLatencyUs = 1.0;
constexpr double kNetHopLatencyUs = 2.7;
/// Bandwidth NCCL gives a device to itself (LOC_BW, topo.h): a copy within one GPU's memory.
constexpr double kLocalGBps = 5000.0;

}  // namespace torch_topo::topo
