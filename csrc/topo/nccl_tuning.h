// SPDX-License-Identifier: Apache-2.0
// NCCL's public tuning constants and the few figures fitted to published nccl-tests results
// (layer: csrc/topo, pure C++17): latency per call and per hop by algorithm, protocol and link
// class, LL bandwidth caps, NVLS efficiency per GPU generation. nccl_model.cpp combines them.
#pragma once

#include <cstdint>

namespace torch_topo::topo {

/// NCCL's algorithms, in the order of its tuning tables.
enum class NcclAlgo { Tree, Ring, CollNetDirect, CollNetChain, Nvls, NvlsTree, Pat };
/// NCCL's protocols: LL (8-byte flag+data stores), LL128 (128-byte lines), Simple (bulk copies
/// with a flag per chunk).
enum class NcclProto { LL, LL128, Simple };
/// Link class a hop crosses, as NCCL's hwLat table is indexed.
enum class NcclHop { NvLink, Pci, Net };
/// GPU generations NCCL keeps per-generation constants for.
enum class NcclGeneration { Volta, Ampere, Hopper, Blackwell };

constexpr int kNcclAlgoCount = 7;
constexpr int kNcclProtoCount = 3;

const char* toString(NcclAlgo algo);
const char* toString(NcclProto proto);

/// Generation of a GPU of compute capability `sm` (x 10); 0 (unknown) counts as Ampere, the
/// generation most files without a model name come from (as link_tables does).
NcclGeneration ncclGeneration(int sm);

/// Fixed latency of one call (us) before any hop: NCCL tuning.cc baseLatencies.
double ncclBaseLatencyUs(NcclAlgo algo, NcclProto proto);
/// NCCL releases (version codes) that changed the NVLS tree's tuning: its estimate's formula
/// (2.28.3; before, a head's rate was the lower of inside the host and half the network beyond two
/// hosts, times 5/6) and its network hop's latency (2.28.9: 20.9 us, before 14).
constexpr int kNcclNvlsTreeEstimateRevised = 22803;
constexpr int kNcclNvlsTreeHopRevised = 22809;
/// True when `version` (0: the newest) is at least `release`.
inline bool ncclAtLeast(int version, int release) { return version == 0 || version >= release; }

/// Latency of one hop (us) over a link class: NCCL tuning.cc hwLatencies of NCCL `version`
/// (0: the newest). 0 where NCCL has no entry (that algorithm / protocol pair does not run over
/// that link).
double ncclHopLatencyUs(NcclHop hop, NcclAlgo algo, NcclProto proto, int version = 0);
/// Bus bandwidth cap of the LL protocol (GB/s): NCCL tuning.cc llMaxBws. One host: by GPU
/// generation; several hosts: by CPU vendor (AMD hosts lower), 2 hosts or more than 2.
double ncclLlMaxBusGBps(NcclGeneration gen, bool amd_cpu, int hosts);
/// Extra latency of each network step of a ring (us): NCCL's network post overhead, 1 on Intel
/// and other CPUs, 2 on AMD; the Simple protocol posts three times per step.
double ncclNetOverheadUs(bool amd_cpu, NcclProto proto);

/// Factor on a tree all-reduce's bandwidth for a message of `bytes`: NCCL tuning.cc
/// treeCorrectionFactor (lowest, .4-.6 by protocol, between 64 KiB and 2 MiB; 1 from 512 MiB),
/// NCCL's own correction of its tree formula at medium sizes.
double ncclTreeCorrection(NcclProto proto, int64_t bytes);

/// NCCL's caps on the bus bandwidth one channel carries (GB/s): tuning.cc perChMaxRingLL128Bws,
/// perChMaxTreeBws, perChMaxTreeLL128Bws, perChMaxNVLSTreeBws, by GPU generation and node count
/// (1, 2, more than 2), Blackwell's tree caps by release `version` (0: the newest; before 2.28.3
/// twice Hopper's). They bound NCCL's estimates; `tree_bounds_transfers` where the tree's caps
/// also bound what the tree moves: Blackwell's from 2.28.3, whose lowered figures B200 hosts on
/// 2.28.9 ran at exactly (8 channels x 42.8 GB/s on two hosts, 342 against 338.5 published, and
/// x 24 from four, 192 against 192-196; Together AI). Elsewhere they do not: a 2-host H100 tree
/// through one 400G NIC reached 92.6 GB/s over NCCL's 2 x 41.4 (NVIDIA/nccl #1357), and GB200
/// partitions on 2.27.3 their NICs' rate (#1801).
struct NcclChannelCaps {
  double ring_ll128 = 0.0;
  double tree = 0.0;
  double tree_ll128 = 0.0;
  double nvls_tree = 0.0;
  bool tree_bounds_transfers = false;
};
NcclChannelCaps ncclChannelCaps(NcclGeneration gen, int nodes, int version = 0);
/// The release that lowered Blackwell's tree caps (perChMaxTreeBws, perChMaxTreeLL128Bws).
constexpr int kNcclBlackwellTreeCapsRevised = 22803;

/// The per-channel bandwidth (GB/s) NCCL's topology search settles on for a path of `gbps`:
/// the fastest entry of its speed list (search.cc, by compute capability `sm`, across hosts or
/// inside one) at or below it; the slowest entry when none is.
double ncclSearchSpeedGBps(int sm, bool inter, double gbps);

/// NCCL's NVLS efficiency (tuning.cc nvlsEfficiency): 0 before Hopper.
double ncclNvlsEfficiency(NcclGeneration gen);

/// NCCL discounts its tree estimate by this where the search could only build its simple tree
/// pattern (all of a NIC's traffic through one GPU). NCCL 2.27.5's tuning logs of 8-GPU H100
/// hosts show it at every rank count per host (1-8; meta-pytorch/autoparallel's tables), so the
/// model applies it from Hopper on (Blackwell's logs are not published), and one GPU per host
/// forces that pattern on any generation.
constexpr double kNcclTreePatternFactor = 0.85;

/// Share of its NICs' rate an NVLS tree's network side reaches: NCCL's own ratio of the NVLS
/// tree's algorithm bandwidth to its heads' rate before 2.28.3, which nccl-tests #309's 4 x 8 H100
/// run on 2.26.2 follows from 4 to 128 MiB (1.05-1.15x with it, 1.15-1.26x without).
constexpr double kNvlsTreeNetEfficiency = 5.0 / 6.0;

/// Fraction of one GPU's NVLink bandwidth an NVLS all-reduce reaches as algorithm bandwidth on
/// one NVSwitch host; 0 where NVLS does not exist (before Hopper).
double nvlsAlgFraction(NcclGeneration gen);

/// Time nccl-tests measures per call on top of NCCL's own latency model (kernel launch and
/// completion, host-side enqueue), fitted to the smallest sizes of published runs (us).
constexpr double kNcclCallOverheadUs = 8.0;
/// Bytes a Simple-protocol call pays for beyond its payload before its channels run at full
/// rate (pipeline fill: NCCL's Simple buffers are 4 MiB per channel, filled before a step's
/// flag is posted). Fitted: 8x H200 NVLS from 8 MiB to 256 MiB ran 40-55 us above latency plus
/// payload at full rate (stas00/ml-engineering), a 2-GPU NV4 send/recv 87 us at 16 MiB
/// (nccl-tests #331); 8 MiB at each system's rate gives 31 us and 105 us. A smaller message
/// pays its own size instead: a 2 x 8 H20 NVLSTree all-reduce took 46-48 us from 4 B to 512 B
/// (NVIDIA/nccl #1244), where a full 8 MiB fill would add 31 us to NCCL's 67 us latency.
constexpr double kSimpleFillBytes = 8.0 * (1 << 20);
/// The fill takes no longer than this (us): NCCL gives a slow path few channels, and fewer bytes
/// fill them. PCIe hosts of 8 x RTX 4090 and 4 x RTX 5090 reached 0.87-0.95 of their all-reduce
/// plateau by 8 MiB, where 8 MiB of fill at their 8-16 GB/s would take 500-1000 us; 60 us keeps
/// the NVLink fits above (31-55 us), and brings a 10-host all-to-all at 32 MiB from 0.88-0.90x
/// to 1.00x (xxrjun/nccl-tests-cluster) and an NV4 send/recv at 8 MiB from 0.72x to 0.95x.
constexpr double kSimpleFillMaxUs = 60.0;
/// The NVLS tree's fill (us, no byte bound): each chunk passes NVLS inside the host, the tree
/// across hosts and NVLS again, a deeper pipeline than a ring's. Published 2 x 8 H100 (NCCL
/// 2.26.2) and 2 x 8 H200 (2.30.4) runs took 200-270 us (latency included) above their plateau
/// rate from 64 MiB to 1 GiB, and 32-128 MiB read 1.22-1.39x with the ring's fill; with this,
/// 0.87-1.10x on those and on 4 and 8 hosts of H100 (nccl-tests #309) from 16 MiB.
constexpr double kNvlsTreeFillUs = 130.0;
/// Latency multiplier of a multi-host ring with the Simple protocol once each rank's share of
/// every channel is past 64 bytes (NCCL's "plateau effect of ring"): sm80 and later / older.
constexpr double kRingPlateauLatencyFactor = 1.4;
constexpr double kRingPlateauLatencyFactorPreSm80 = 1.9;
/// Bus bandwidth a tree reaches relative to its links (NCCL applies .92 to tree all-reduce),
/// LL128 on rings (120 of 128 bytes carry data), LL (half of each 8-byte store is a flag).
constexpr double kTreeEfficiency = 0.92;
constexpr double kLl128Efficiency = 0.92;
constexpr double kRingLlEfficiency = 0.5;
/// NCCL's p2p path (send/recv, all-to-all) takes LL for a peer only up to 16 KiB per channel,
/// and splits a peer's bytes into channels of at least 64 KiB (enqueue.cc addP2pToPlan,
/// NCCL_P2P_LL_THRESHOLD): in effect LL up to 16 KiB per peer, Simple above.
constexpr int64_t kNcclP2pLlThresholdBytes = 16 << 10;
/// Share of its links' rate NCCL's p2p Simple path reaches at large sizes, published plateaus
/// 0.82-0.93: 8 x A100 send/recv over NV12 (195 of 240 GB/s), 2 x A100 NV4 (72-73 of 80),
/// 8 x B200 all-to-all (673 of 720), a GB200 rack's (623 of 720), and two and three GB200 racks
/// over their NICs (89.7 of 99, 62.5 of 74.5).
constexpr double kP2pEfficiency = 0.88;
/// Time each peer across the network adds to a p2p call: NCCL's proxy thread posts and polls
/// every network peer's transfers in turn. Small all-to-alls published on three clusters grow by
/// 2.4-3.3 us per network peer: two B200 hosts (8 peers, 37-40 us; their send/recv 14.5), two
/// RTX 6000D hosts (8 peers 33-35 us, 15 with NCCL's p2p off 47-48), 8 DGX-2 (112 peers, 324 us).
constexpr double kP2pNetPeerUs = 2.8;
/// Share of a GPU's own PCIe link NCCL reaches between GPUs of one host without NVLink when it
/// moves the data through host memory (its SHM transport: peer access off, as on GeForce cards,
/// or beyond NCCL's P2P level, a path through the CPU on Intel hosts and on AMD hosts of more
/// than two GPUs). Published all-reduce plateaus: 8 x RTX 4090 on EPYC Rome 15 GB/s of 24, 4 x
/// RTX 5090 on Genoa 27.3 of 48, 8 x RTX 5090 on two Xeon 8480+ 28 of 48. With peer access the
/// transfers run at the link's rate (RTX 4090 with a peer-access driver 20.6-26 of 24, RTX 6000D
/// 41-46 of 48), whatever NCCL's socket-link figure.
constexpr double kNcclShmEfficiency = 0.6;
/// Tree protocol factors on top of kTreeEfficiency: LL 1/3.8; LL128 7/9 on one host, 120/128
/// across hosts.
constexpr double kTreeLlFactor = 1.0 / 3.8;
constexpr double kTreeLl128FactorOneHost = 7.0 / 9.0;
constexpr double kTreeLl128FactorHosts = 120.0 / 128.0;
/// PAT reaches 3/4 of the ring's bus bandwidth; its latency has a log part (network hop / 3.5
/// per level) and a linear part per rank.
constexpr double kPatEfficiency = 0.75;
constexpr double kPatLatencyLogDivisor = 3.5;
constexpr double kPatLatencyPerRankUs = 2.8;
/// CollNet Direct on Hopper and later reaches .85 of its modelled bandwidth; each local rank
/// beyond the first adds 0.4 us of arity serialisation.
constexpr double kCollNetHopperEfficiency = 0.85;
constexpr double kCollNetArityLatencyUs = 0.4;

}  // namespace torch_topo::topo
