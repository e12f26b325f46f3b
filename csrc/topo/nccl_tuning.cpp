// SPDX-License-Identifier: Apache-2.0
// NCCL's tuning tables (layer: csrc/topo). The numbers are NCCL's public constants, read in
// NVIDIA/nccl src/graph/tuning.cc and search.cc at master 5067397c (2026). Up to Hopper they
// hold since 2.23, but for the NVLS tree's network hop (14 us before 2.28, as its estimate's
// formula changed then); Blackwell's figures changed in 2.28. nvlsAlgFraction is not NCCL's:
// it is fitted to a published run (see there).
#include "topo/nccl_tuning.h"

#include <algorithm>
#include <vector>

namespace torch_topo::topo {
namespace {

// clang-format off
// Base latency per call (us). Rows: algorithm; columns: LL, LL128, Simple.
const double kBaseLatencyUs[kNcclAlgoCount][kNcclProtoCount] = {
  //                 LL    LL128  Simple
  /* Tree       */ { 6.8,  14.0,  8.4 },
  /* Ring       */ { 6.6,  14.0,  8.4 },
  /* CollNetDir */ { 0.0,   0.0,  0.0 },
  /* CollNetCh  */ { 0.0,   0.0,  0.0 },
  /* NVLS       */ { 0.0,   0.0,  0.0 },
  /* NVLSTree   */ { 0.0,   0.0,  0.0 },
  /* PAT        */ { 8.0,   8.0,  8.0 },
};

// Latency per hop (us) by link class, algorithm and protocol. 0: no such combination.
const double kHopLatencyUs[3][kNcclAlgoCount][kNcclProtoCount] = {
  { //                 LL    LL128  Simple      NVLink
    /* Tree       */ { 0.6,  1.25,  4.0 },
    /* Ring       */ { 0.6,  1.9,   3.4 },
    /* CollNetDir */ { 0.0,  0.0,   3.7 },
    /* CollNetCh  */ { 0.0,  0.0,   2.8 },
    /* NVLS       */ { 0.0,  0.0,  25.0 },
    /* NVLSTree   */ { 0.0,  0.0,  25.0 },
    /* PAT        */ { 0.0,  0.0,   4.0 },
  },
  { //                 LL    LL128  Simple      PCI
    /* Tree       */ { 1.0,  1.9,   4.0 },
    /* Ring       */ { 1.0,  2.5,   5.7 },
    /* CollNetDir */ { 0.0,  0.0,   3.7 },
    /* CollNetCh  */ { 0.0,  0.0,   2.8 },
    /* NVLS       */ { 0.0,  0.0,   0.0 },
    /* NVLSTree   */ { 0.0,  0.0,   0.0 },
    /* PAT        */ { 0.0,  0.0,   4.0 },
  },
  { //                 LL    LL128  Simple      network
    /* Tree       */ { 5.0,  8.5,  14.0 },
    /* Ring       */ { 2.7,  4.0,  14.0 },
    /* CollNetDir */ { 0.0,  0.0,  31.0 },
    /* CollNetCh  */ { 0.0,  0.0,  30.0 },
    /* NVLS       */ { 0.0,  0.0,  18.0 },
    /* NVLSTree   */ { 0.0,  0.0,  20.9 },
    /* PAT        */ { 0.0,  0.0,  14.0 },
  },
};

// LL bus bandwidth cap (GB/s). One host: by generation; columns 2 hosts and more than 2 by
// CPU vendor (NCCL's rows "Intel" and "AMD").
const double kLlMaxOneHostGBps[4] = {
  // Volta  Ampere  Hopper  Blackwell
     39.0,  87.7,   141.0,  282.0,
};
const double kLlMaxHostsGBps[2][2] = {
  //           2 hosts  > 2 hosts
  /* Intel */ { 39.0,   20.4 },
  /* AMD   */ { 22.5,   19.0 },
};

// NVLS all-reduce algorithm bandwidth as a fraction of one GPU's NVLink bandwidth. Hopper:
// 8x H200 (18 lanes x 20.6 GB/s = 370.8 GB/s as NCCL counts them) measured 480.0 GB/s bus
// bandwidth at 16 GiB with NVLS (stas00/ml-engineering network/README.md, nccl 2.27.7;
// tests/data/nccl_tests/h200_8xSXM_NVLS_vs_ring_16GiB_mlengineering_summary.md): algorithm
// bandwidth 480.0 x 8/14 = 274.3 GB/s = 0.74 x 370.8. Blackwell: no published run here; the
// Hopper figure scaled by NCCL's own ratio of nvlsEfficiency (Blackwell .74 / Hopper .85).
const double kNvlsAlgFraction[4] = {
  // Volta  Ampere  Hopper  Blackwell
     0.0,   0.0,    0.74,   0.74 * 0.74 / 0.85,
};
// NCCL's treeCorrectionFactor (tuning.cc): its tree all-reduce runs below the tree's bandwidth
// formula at medium sizes, by this factor per protocol (LL, LL128, Simple) and power of two of
// the message in 64-byte units, 64 B (index 0) to 256 MiB (22); 1 from 512 MiB.
const double kTreeCorrection[3][23] = {
  { 1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0 },
  { 1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0 },
  { .9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9 },
};
// Per-channel bus bandwidth caps (GB/s). Rows: generation; columns: 1 node, 2, more than 2.
const double kRingLl128MaxGBps[4][3] = {
  { 20.0, 20.0, 20.0 }, { 20.0, 20.0, 20.0 }, { 36.7, 36.7, 36.7 }, { 40.0, 40.0, 40.0 },
};
const double kTreeMaxGBps[4][3] = {
  { 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 38.7, 41.4, 36.0 }, { 70.0, 42.8, 24.0 },
};
const double kTreeLl128MaxGBps[4][3] = {
  { 20.0, 20.0, 20.0 }, { 20.0, 20.0, 20.0 }, { 36.7, 36.7, 29.0 }, { 55.6, 31.67, 20.0 },
};
const double kNvlsTreeMaxGBps[4][3] = {
  { 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 0.0, 57.7, 45.5 }, { 0.0, 96.0, 80.0 },
};

// The speeds NCCL's search tries per channel (GB/s), fastest first: before sm90, sm90, sm100;
// inside a host and across hosts.
const std::vector<double> kSearchSpeedsIntra[3] = {
  { 40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0 },
  { 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0 },
  { 90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0 },
};
const std::vector<double> kSearchSpeedsInter[3] = {
  { 48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12 },
  { 48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12 },
  { 96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12 },
};

const double kNvlsEfficiency[4] = { 0.0, 0.0, 0.85, 0.74 };
// clang-format on

int row(NcclAlgo a) { return static_cast<int>(a); }
int col(NcclProto p) { return static_cast<int>(p); }
int gen(NcclGeneration g) { return static_cast<int>(g); }

}  // namespace

const char* toString(NcclAlgo algo) {
  switch (algo) {
    case NcclAlgo::Tree: return "tree";
    case NcclAlgo::Ring: return "ring";
    case NcclAlgo::CollNetDirect: return "collnet_direct";
    case NcclAlgo::CollNetChain: return "collnet_chain";
    case NcclAlgo::Nvls: return "nvls";
    case NcclAlgo::NvlsTree: return "nvls_tree";
    case NcclAlgo::Pat: return "pat";
  }
  return "?";
}

const char* toString(NcclProto proto) {
  switch (proto) {
    case NcclProto::LL: return "LL";
    case NcclProto::LL128: return "LL128";
    case NcclProto::Simple: return "Simple";
  }
  return "?";
}

NcclGeneration ncclGeneration(int sm) {
  if (sm <= 0) return NcclGeneration::Ampere;
  if (sm >= 100) return NcclGeneration::Blackwell;
  if (sm >= 90) return NcclGeneration::Hopper;
  if (sm >= 80) return NcclGeneration::Ampere;
  return NcclGeneration::Volta;
}

double ncclBaseLatencyUs(NcclAlgo algo, NcclProto proto) {
  return kBaseLatencyUs[row(algo)][col(proto)];
}

double ncclHopLatencyUs(NcclHop hop, NcclAlgo algo, NcclProto proto, int version) {
  if (hop == NcclHop::Net && algo == NcclAlgo::NvlsTree &&
      !ncclAtLeast(version, kNcclNvlsTreeHopRevised))
    return 14.0;
  return kHopLatencyUs[static_cast<int>(hop)][row(algo)][col(proto)];
}

double ncclLlMaxBusGBps(NcclGeneration g, bool amd_cpu, int hosts) {
  if (hosts <= 1) return kLlMaxOneHostGBps[gen(g)];
  return kLlMaxHostsGBps[amd_cpu ? 1 : 0][hosts <= 2 ? 0 : 1];
}

double ncclNetOverheadUs(bool amd_cpu, NcclProto proto) {
  const double post = amd_cpu ? 2.0 : 1.0;
  return proto == NcclProto::Simple ? 3.0 * post : post;
}

double nvlsAlgFraction(NcclGeneration g) { return kNvlsAlgFraction[gen(g)]; }

double ncclNvlsEfficiency(NcclGeneration g) { return kNvlsEfficiency[gen(g)]; }

NcclChannelCaps ncclChannelCaps(NcclGeneration g, int nodes, int version) {
  const int n = nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
  const bool revised = g == NcclGeneration::Blackwell &&
                       ncclAtLeast(version, kNcclBlackwellTreeCapsRevised);
  const bool doubled_hopper = g == NcclGeneration::Blackwell && !revised;
  const int tree_gen = doubled_hopper ? gen(NcclGeneration::Hopper) : gen(g);
  const double tree_scale = doubled_hopper ? 2.0 : 1.0;
  return {kRingLl128MaxGBps[gen(g)][n], tree_scale * kTreeMaxGBps[tree_gen][n],
          tree_scale * kTreeLl128MaxGBps[tree_gen][n], kNvlsTreeMaxGBps[gen(g)][n], revised};
}

double ncclSearchSpeedGBps(int sm, bool inter, double gbps) {
  const int list = sm >= 100 ? 2 : sm >= 90 ? 1 : 0;
  const std::vector<double>& speeds = (inter ? kSearchSpeedsInter : kSearchSpeedsIntra)[list];
  for (double s : speeds)
    if (s <= gbps) return s;
  return speeds.back();
}

double ncclTreeCorrection(NcclProto proto, int64_t bytes) {
  int log_size = 0;  // NCCL's log2i(bytes >> 6): 0 below 128 bytes
  for (int64_t units = std::max<int64_t>(bytes, 0) >> 6; units > 1; units >>= 1) ++log_size;
  return log_size < 23 ? kTreeCorrection[col(proto)][log_size] : 1.0;
}

}  // namespace torch_topo::topo
