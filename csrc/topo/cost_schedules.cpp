// SPDX-License-Identifier: Apache-2.0
// The alpha-beta model's schedules (layer: csrc/topo): the transfers of each phase of a flat
// algorithm (ring, tree, halving-doubling, direct) and of the two-level hierarchical form, and
// their time against the links and shared resources (GPU injection, NICs, host uplink, socket
// links) the transfers load.
#include "topo/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torch_topo::topo {
namespace {

constexpr double kBytesPerGB = 1e9;

// Largest group for one-shot (direct) all-reduce, all-gather and reduce-scatter.
constexpr int kDirectMaxGroup = 16;

// A reduce is its broadcast run backwards: the last phase first, every transfer towards its
// sender.
template <typename Schedule>
Schedule reversedSchedule(Schedule s) {
  std::reverse(s.begin(), s.end());
  for (auto& phase : s)
    for (auto& t : phase.transfers) std::swap(t.src, t.dst);
  return s;
}

}  // namespace

double CostModel::phaseTime(const Phase& phase) const {
  double alpha = 0.0;
  const double load = phaseLoadSeconds(phase, &alpha);
  return phase.latency_steps * alpha * 1e-6 + load;
}

double CostModel::phaseLoadSeconds(const Phase& phase, double* alpha_us) const {
  // Load per resource; the phase lasts as long as its most loaded resource needs.
  // Per directed pair (src x n + dst): bytes carried, and the path's bandwidth.
  std::unordered_map<int64_t, std::pair<double, double>> path_load;
  std::map<int, double> nic_tx, nic_rx, up_tx, up_rx;
  std::unordered_map<int, double> nv_tx, nv_rx, pci_tx, pci_rx;
  std::map<std::tuple<int, int, int>, double> smp_load;  // (host, from NUMA, to NUMA)
  double alpha = 0.0;
  for (const Transfer& t : phase.transfers) {
    if (t.bytes <= 0 || t.src == t.dst) continue;
    const PairPath path = pairPath(t.src, t.dst);
    alpha = std::max(alpha, path.latency_us);
    const RankPlacement& ps = cluster_.ranks[t.src];
    const RankPlacement& pd = cluster_.ranks[t.dst];
    auto& [carried, gbps] = path_load[static_cast<int64_t>(t.src) * n_ + t.dst];
    carried += t.bytes;
    gbps = path.gbps;
    if (nvlinkDomainPair(t.src, t.dst)) {
      nv_tx[t.src] += t.bytes;
      nv_rx[t.dst] += t.bytes;
    } else if (ps.host != pd.host) {
      // A rank's traffic spreads over its NICs in proportion to their rates.
      for (int nic : nics_[t.src]) nic_tx[nic] += t.bytes * nic_gbps_[nic] / nic_share_gbps_[t.src];
      for (int nic : nics_[t.dst]) nic_rx[nic] += t.bytes * nic_gbps_[nic] / nic_share_gbps_[t.dst];
      up_tx[ps.host] += t.bytes;
      up_rx[pd.host] += t.bytes;
      pci_tx[t.src] += t.bytes;  // GPUDirect RDMA leaves through the GPU's PCIe link
      pci_rx[t.dst] += t.bytes;
    } else if (ps.local_gpu >= 0 && pd.local_gpu >= 0) {
      const PathClass cls = cluster_.hosts[ps.host].path(ps.local_gpu, pd.local_gpu).cls;
      const bool nv = cls == PathClass::NV;
      (nv ? nv_tx : pci_tx)[t.src] += t.bytes;
      (nv ? nv_rx : pci_rx)[t.dst] += t.bytes;
      // The socket link is known only between two known NUMA nodes; a SYS path with an
      // unknown end, or between GPUs that report one node, keeps its own bandwidth only.
      const int from = numa_[t.src], to = numa_[t.dst];
      if (cls == PathClass::SYS && from >= 0 && to >= 0 && from != to) {
        smp_load[{ps.host, from, to}] += t.bytes;
      }
    }
  }
  double worst = 0.0;
  for (const auto& [key, load] : path_load) worst = std::max(worst, load.first / load.second);
  for (const auto* load : {&nic_tx, &nic_rx}) {
    for (const auto& [nic, bytes] : *load) worst = std::max(worst, bytes / nic_gbps_[nic]);
  }
  for (const auto* load : {&up_tx, &up_rx}) {
    for (const auto& [h, bytes] : *load) worst = std::max(worst, bytes / host_uplink_gbps_[h]);
  }
  for (const auto* load : {&nv_tx, &nv_rx}) {
    for (const auto& [r, bytes] : *load) worst = std::max(worst, bytes / nvlink_injection_gbps_[r]);
  }
  for (const auto* load : {&pci_tx, &pci_rx}) {
    for (const auto& [r, bytes] : *load) worst = std::max(worst, bytes / pcie_injection_gbps_[r]);
  }
  for (const auto& [key, bytes] : smp_load) {
    worst = std::max(worst, bytes / smp_gbps_[std::get<0>(key)]);
  }
  *alpha_us = alpha;
  return worst / kBytesPerGB;
}

double CostModel::timeOf(const Schedule& schedule) const {
  double total = 0.0;
  for (const Phase& phase : schedule) total += phaseTime(phase);
  return total;
}

CostModel::Schedule CostModel::buildFlat(CollectiveOp op, double bytes,
                                         const std::vector<int>& order,
                                         Algorithm algorithm) const {
  if (op == CollectiveOp::Reduce)
    return reversedSchedule(buildFlat(CollectiveOp::Broadcast, bytes, order, algorithm));
  const int n = static_cast<int>(order.size());
  auto at = [&](int p) { return order[((p % n) + n) % n]; };
  Schedule s;
  switch (algorithm) {
    case Algorithm::Ring: {
      // Ring (Patarasuk & Yuan 2009): every step each rank forwards one 1/n block to its
      // successor; all-reduce = reduce-scatter + all-gather (2(n-1) steps).
      Phase phase;
      double per_edge = 0.0;
      if (op == CollectiveOp::AllReduce) {
        per_edge = 2.0 * (n - 1) / n * bytes;
        phase.latency_steps = 2 * (n - 1);
      } else if (op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter) {
        per_edge = (n - 1.0) / n * bytes;
        phase.latency_steps = n - 1;
      } else if (op == CollectiveOp::Broadcast) {
        // Pipelined chain from order[0]: every edge but the closing one carries the tensor.
        for (int p = 0; p + 1 < n; ++p) phase.transfers.push_back({at(p), at(p + 1), bytes});
        phase.latency_steps = n - 1;
        return {phase};
      } else {
        return {};
      }
      for (int p = 0; p < n; ++p) phase.transfers.push_back({at(p), at(p + 1), per_edge});
      return {phase};
    }
    case Algorithm::Tree: {
      // Double binary tree (NCCL 2.4; Sanders, Speck & Traeff 2009): two trees each carry
      // half the data, reduce up and broadcast down pipelined; tree B is tree A shifted by
      // one position so each rank is a leaf in at least one of them.
      if (op != CollectiveOp::AllReduce && op != CollectiveOp::Broadcast) return {};
      const int depth = static_cast<int>(std::ceil(std::log2(std::max(n, 2))));
      Phase phase;
      if (op == CollectiveOp::Broadcast) {
        for (int p = 1; p < n; ++p) phase.transfers.push_back({at((p - 1) / 2), at(p), bytes});
        phase.latency_steps = depth;
        return {phase};
      }
      for (int shift : {0, 1}) {
        for (int p = 1; p < n; ++p) {
          const int child = at(p + shift), parent = at((p - 1) / 2 + shift);
          phase.transfers.push_back({child, parent, bytes / 2});
          phase.transfers.push_back({parent, child, bytes / 2});
        }
      }
      phase.latency_steps = 2 * depth;
      return {phase};
    }
    case Algorithm::HalvingDoubling: {
      // Recursive halving reduce-scatter then doubling all-gather (Thakur, Rabenseifner &
      // Gropp 2005); power-of-two groups only.
      if ((n & (n - 1)) != 0) return {};
      if (op != CollectiveOp::AllReduce && op != CollectiveOp::AllGather &&
          op != CollectiveOp::ReduceScatter)
        return {};
      auto exchange = [&](int distance, double chunk) {
        Phase phase;
        for (int p = 0; p < n; ++p) phase.transfers.push_back({order[p], order[p ^ distance], chunk});
        return phase;
      };
      if (op != CollectiveOp::AllGather) {
        for (int d = n / 2, k = 1; d >= 1; d /= 2, ++k) s.push_back(exchange(d, bytes / (1 << k)));
      }
      if (op != CollectiveOp::ReduceScatter) {
        for (int d = 1; d < n; d *= 2) s.push_back(exchange(d, bytes * d / n));
      }
      return s;
    }
    case Algorithm::Direct: {
      Phase phase;
      if (op == CollectiveOp::SendRecv) {
        // Pipeline-parallel hand-off: every stage sends to the next one at once.
        for (int p = 0; p + 1 < n; ++p) phase.transfers.push_back({at(p), at(p + 1), bytes});
        return {phase};
      }
      if (op == CollectiveOp::Broadcast) {
        for (int p = 1; p < n; ++p) phase.transfers.push_back({at(0), at(p), bytes});
        return {phase};
      }
      // One-shot all-reduce / all-gather / reduce-scatter are latency algorithms for small
      // groups (NCCL keeps its one-shot paths to single NVLink domains); beyond, n^2 transfers
      // only slow the model down.
      if (op != CollectiveOp::AllToAll && n > kDirectMaxGroup) return {};
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if (a != b) phase.transfers.push_back({order[a], order[b], bytes / n});
      if (op == CollectiveOp::AllReduce) return {phase, phase};  // reduce-scatter + all-gather
      return {phase};
    }
    case Algorithm::Hierarchical:
    case Algorithm::Nvls:
    case Algorithm::NvlsTree:
    case Algorithm::CollNet:
    case Algorithm::Pat: return {};
  }
  return s;
}

CostModel::HierarchicalLevels CostModel::hierarchicalLevels(const std::vector<int>& ranks) const {
  // Hosts in order of first appearance; members of a host sorted by GPU so rails align.
  std::vector<int> host_ids;
  std::map<int, std::vector<int>> members;
  for (int r : ranks) {
    const int h = cluster_.ranks.at(r).host;
    if (!members.count(h)) host_ids.push_back(h);
    members[h].push_back(r);
  }
  HierarchicalLevels levels;
  const size_t local = members[host_ids.at(0)].size();
  if (host_ids.size() < 2 || local < 2) return levels;
  for (int h : host_ids) {
    auto& list = members[h];
    if (list.size() != local) return {};
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return cluster_.ranks[a].local_gpu < cluster_.ranks[b].local_gpu;
    });
    levels.intra.push_back(list);
  }
  levels.rails.assign(local, {});
  for (size_t j = 0; j < local; ++j)
    for (int h : host_ids) levels.rails[j].push_back(members[h][j]);
  return levels;
}

std::vector<CostModel::Schedule> CostModel::buildHierarchical(CollectiveOp op, double bytes,
                                                              const std::vector<int>& ranks) const {
  if (op == CollectiveOp::AllToAll || op == CollectiveOp::SendRecv) return {};
  if (op == CollectiveOp::Reduce) {
    std::vector<Schedule> out = buildHierarchical(CollectiveOp::Broadcast, bytes, ranks);
    std::reverse(out.begin(), out.end());
    for (Schedule& level : out) level = reversedSchedule(std::move(level));
    return out;
  }
  const HierarchicalLevels levels = hierarchicalLevels(ranks);
  if (levels.intra.empty()) return {};
  auto merged = [&](CollectiveOp level_op, double level_bytes, bool intra) {
    Schedule out;
    for (const auto& members : intra ? levels.intra : levels.rails) {
      const std::vector<int> group = intra ? ringOrderOf(members, false) : members;
      Schedule part = buildFlat(level_op, level_bytes, group, Algorithm::Ring);
      if (out.size() < part.size()) out.resize(part.size());
      for (size_t i = 0; i < part.size(); ++i) {
        out[i].transfers.insert(out[i].transfers.end(), part[i].transfers.begin(),
                                part[i].transfers.end());
        out[i].latency_steps = std::max(out[i].latency_steps, part[i].latency_steps);
      }
    }
    return out;
  };
  const double L = static_cast<double>(levels.rails.size());
  switch (op) {
    case CollectiveOp::AllReduce:
      return {merged(CollectiveOp::ReduceScatter, bytes, true),
              merged(CollectiveOp::AllReduce, bytes / L, false),
              merged(CollectiveOp::AllGather, bytes, true)};
    case CollectiveOp::AllGather:
      return {merged(CollectiveOp::AllGather, bytes / L, false),
              merged(CollectiveOp::AllGather, bytes, true)};
    case CollectiveOp::ReduceScatter:
      return {merged(CollectiveOp::ReduceScatter, bytes, true),
              merged(CollectiveOp::ReduceScatter, bytes / L, false)};
    case CollectiveOp::Broadcast: {
      // Root's rail carries the tensor across hosts, then each host forwards it locally.
      const int root = ranks[0];
      size_t rail = 0, root_host = 0;
      for (size_t j = 0; j < levels.rails.size(); ++j)
        for (size_t h = 0; h < levels.rails[j].size(); ++h)
          if (levels.rails[j][h] == root) rail = j, root_host = h;
      std::vector<int> across{root};
      for (size_t h = 0; h < levels.intra.size(); ++h)
        if (h != root_host) across.push_back(levels.rails[rail][h]);
      Schedule inter = buildFlat(op, bytes, across, Algorithm::Ring);
      Phase local_phase;
      for (size_t h = 0; h < levels.intra.size(); ++h) {
        const int leader = levels.rails[rail][h];
        std::vector<int> group{leader};
        for (int r : levels.intra[h])
          if (r != leader) group.push_back(r);
        const Schedule chain = buildFlat(op, bytes, group, Algorithm::Ring);
        local_phase.transfers.insert(local_phase.transfers.end(), chain[0].transfers.begin(),
                                     chain[0].transfers.end());
        local_phase.latency_steps = static_cast<int>(L) - 1;
      }
      return {inter, {local_phase}};
    }
    default: return {};
  }
}

void CostModel::appendLevels(std::vector<Schedule>& levels, std::vector<Schedule> parts) {
  if (levels.size() < parts.size()) levels.resize(parts.size());
  for (size_t l = 0; l < parts.size(); ++l) {
    if (levels[l].size() < parts[l].size()) levels[l].resize(parts[l].size());
    for (size_t i = 0; i < parts[l].size(); ++i) {
      auto& dst = levels[l][i];
      dst.transfers.insert(dst.transfers.end(), parts[l][i].transfers.begin(),
                           parts[l][i].transfers.end());
      dst.latency_steps = std::max(dst.latency_steps, parts[l][i].latency_steps);
    }
  }
}

}  // namespace torch_topo::topo
