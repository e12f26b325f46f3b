// SPDX-License-Identifier: Apache-2.0
// Hand-typed host topologies for the planner's C++ tests (cost_model, ring_order, placement):
// path matrices copied by eye from files in tests/data/nvidia_smi_topo/.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topo/cost_model.h"
#include "topo/graph.h"

namespace torch_topo::topo::testing {

/// A host from an `nvidia-smi topo -m`-style matrix of path cells ("X", "NV2", "SYS", ...).
/// Bandwidth: lanes x `lane_gbps` for NV#, `pci_gbps` otherwise; latency `latency_us` on every
/// pair, so closed-form expectations stay simple.
inline HostTopology makeHost(const std::vector<std::string>& rows, double lane_gbps = 25.0,
                             double pci_gbps = 12.0, double latency_us = 2.0) {
  HostTopology host;
  const int n = static_cast<int>(rows.size());
  for (int i = 0; i < n; ++i) {
    Gpu g;
    g.index = i;
    g.numa_node = 0;
    host.gpus.push_back(g);
  }
  host.gpu_paths.resize(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    std::istringstream in(rows[i]);
    for (int j = 0; j < n; ++j) {
      std::string cell;
      in >> cell;
      PathInfo& p = host.path(i, j);
      parsePathClass(cell, &p.cls, &p.nvlinks);
      p.bandwidth_gbps = p.cls == PathClass::NV ? lane_gbps * p.nvlinks : pci_gbps;
      p.latency_us = i == j ? 0.0 : latency_us;
    }
  }
  return host;
}

/// DGX-1 (8x V100 SXM2) hybrid cube-mesh, from
/// tests/data/nvidia_smi_topo/dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt.
inline std::vector<std::string> dgx1Rows() {
  return {
      "X   NV1 NV1 NV2 NV2 SYS SYS SYS",  //
      "NV1 X   NV2 NV1 SYS NV2 SYS SYS",  //
      "NV1 NV2 X   NV2 SYS SYS NV1 SYS",  //
      "NV2 NV1 NV2 X   SYS SYS SYS NV1",  //
      "NV2 SYS SYS SYS X   NV1 NV1 NV2",  //
      "SYS NV2 SYS SYS NV1 X   NV2 NV1",  //
      "SYS SYS NV1 SYS NV1 NV2 X   NV2",  //
      "SYS SYS SYS NV1 NV2 NV1 NV2 X  ",
  };
}

/// `hosts` copies of one host, ranks host-major with rank r on GPU r % gpus.
inline ClusterTopology makeCluster(const HostTopology& host, int hosts, double net_gbps = 12.5,
                                   double net_latency_us = 5.0) {
  ClusterTopology c;
  for (int h = 0; h < hosts; ++h) {
    c.hosts.push_back(host);
    for (int g = 0; g < host.gpuCount(); ++g) c.ranks.push_back({h, g, g});
  }
  c.inter_host_bandwidth_gbps = net_gbps;
  c.inter_host_latency_us = net_latency_us;
  return c;
}

/// The same host with GPU i renamed perm[i]: its record (bus id, NUMA node, ...), its row and
/// column of the pair matrix and its row of GPU-NIC paths move with it. The physical graph is
/// kept: its GPU nodes are found by bus id.
inline HostTopology relabel(const HostTopology& host, const std::vector<int>& perm) {
  HostTopology out = host;
  const int n = host.gpuCount();
  const size_t nics = n > 0 ? host.gpu_nic_paths.size() / n : 0;
  for (int i = 0; i < n; ++i) {
    out.gpus[perm[i]] = host.gpus[i];
    out.gpus[perm[i]].index = perm[i];
    for (int j = 0; j < n; ++j) out.path(perm[i], perm[j]) = host.path(i, j);
    for (size_t k = 0; k < nics; ++k)
      out.gpu_nic_paths[perm[i] * nics + k] = host.gpu_nic_paths[i * nics + k];
  }
  return out;
}

// 8 GPUs behind NVSwitch, NV18 to every peer at `lane` GB/s per lane; compute capability `sm`.
inline HostTopology switchedHost(int sm, double lane = 20.0) {
  std::vector<std::string> rows;
  for (int i = 0; i < 8; ++i) {
    std::string row;
    for (int j = 0; j < 8; ++j) row += (j ? " " : "") + std::string(i == j ? "X" : "NV18");
    rows.push_back(row);
  }
  HostTopology host = makeHost(rows, lane, 24.0, 1.0);
  for (Gpu& g : host.gpus) g.sm = sm;
  return host;
}

inline std::vector<int> iota(int n, int from = 0) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// `count` NICs of `gbit` Gbit/s, without paths: GPU i takes NIC i (in turn when fewer).
inline void addNics(HostTopology& host, int count, double gbit) {
  for (int k = 0; k < count; ++k) {
    Nic nic;
    nic.name = "mlx5_" + std::to_string(k);
    nic.speed_gbps = gbit;
    host.nics.push_back(nic);
  }
}

/// Checks computeHierarchicalThresholds against its definition, size by size: every scanned
/// power of two from 1 KiB to 16 GiB lies in the op's ranges exactly where hierarchical x
/// `margin` beats the best flat algorithm, a size between two scanned ones goes as the lower
/// one, a size below 1 KiB as 1 KiB and one above 16 GiB as 16 GiB. Returns how many ops had
/// a band with flat winning on both sides, so a caller can ask for one.
inline int expectRangesFollowTheScan(const CostModel& model, const std::vector<int>& ranks,
                                     double margin) {
  int bands = 0;
  for (const HierarchicalThreshold& t : computeHierarchicalThresholds(model, ranks)) {
    std::vector<bool> wins;
    for (int64_t s = kHierarchicalScanMinBytes; s <= kHierarchicalScanMaxBytes; s *= 2) {
      const CostEstimate hier = model.estimateCollective(t.op, s, ranks, Algorithm::Hierarchical);
      const bool won = hier.applicable &&
                       hier.seconds * margin < model.chooseFlat(t.op, s, {ranks}).seconds;
      wins.push_back(won);
      EXPECT_EQ(anyContains(t.ranges, s), won) << toString(t.op) << " at " << s;
      EXPECT_EQ(anyContains(t.ranges, s + s / 2), won) << toString(t.op) << " at 1.5 x " << s;
    }
    EXPECT_EQ(anyContains(t.ranges, 0), wins.front()) << toString(t.op) << " at 0";
    EXPECT_EQ(anyContains(t.ranges, int64_t{64} << 30), wins.back()) << toString(t.op);
    for (size_t i = 1; i + 1 < wins.size(); ++i) {
      if (wins[i] && !wins.front() && !wins.back()) {
        ++bands;
        break;
      }
    }
  }
  return bands;
}

}  // namespace torch_topo::topo::testing
