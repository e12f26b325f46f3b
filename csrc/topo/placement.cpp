// SPDX-License-Identifier: Apache-2.0
// Rank placement (layer: csrc/topo): split each mesh dimension into an intra-host and an
// inter-host extent, then search the intra-host arrangement that puts the heaviest dimensions
// on the best links; every host of one shape gets the same arrangement, so rails line up.
#include "topo/placement.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "topo/error.h"

namespace torch_topo::topo {
namespace {

constexpr int kLocalSearchMaxPasses = 64;

struct KnownDim {
  const char* name;
  double bytes;
  const char* op;
  int rank;  // default heaviness order, 0 heaviest
};

constexpr double kMiB = 1 << 20;
// clang-format off
//  name            bytes/step    collective        rank
const KnownDim kKnownDims[] = {
  {"tp",           1024 * kMiB, "all_reduce",      0},
  {"sp",            512 * kMiB, "all_to_all",      1},  // Ulysses: inside the NVLink clique
  {"cp",            256 * kMiB, "all_gather",      2},  // ring attention: K/V pass the ring,
  {"ring",          256 * kMiB, "all_gather",      2},  // overlapped with compute: may cross
  {"ep",            256 * kMiB, "all_to_all",      3},
  {"dp_shard",      128 * kMiB, "all_reduce",      4},  // FSDP: all-gather + reduce-scatter
  {"fsdp",          128 * kMiB, "all_reduce",      4},
  {"dp",            128 * kMiB, "all_reduce",      4},
  {"dp_replicate",  128 * kMiB, "all_reduce",      5},
  {"pp",             32 * kMiB, "send_recv",       6},
};
// clang-format on

std::string knownNames() {
  std::string out;
  for (const KnownDim& k : kKnownDims) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

std::string describeMesh(const std::vector<MeshDim>& dims) {
  std::string out;
  int64_t product = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    out += (i ? " x " : "") + dims[i].name + "=" + std::to_string(dims[i].size);
    product *= dims[i].size;
  }
  return out + " = " + std::to_string(product);
}

/// Ranks of each host (host-major, sorted by global rank), checked to be of equal count.
std::vector<std::vector<int>> ranksByHost(const ClusterTopology& cluster) {
  std::vector<std::vector<int>> by_host(cluster.hosts.size());
  for (size_t r = 0; r < cluster.ranks.size(); ++r) {
    const int h = cluster.ranks[r].host;
    TOPO_CHECK(h >= 0 && h < static_cast<int>(cluster.hosts.size()), "cluster: ranks[", r,
               "].host: got ", h, ", expected 0..", cluster.hosts.size() - 1);
    by_host[h].push_back(static_cast<int>(r));
  }
  by_host.erase(std::remove_if(by_host.begin(), by_host.end(),
                               [](const std::vector<int>& v) { return v.empty(); }),
                by_host.end());
  TOPO_CHECK(!by_host.empty(), "cluster: got no ranks, expected at least one");
  for (const auto& ranks : by_host) {
    TOPO_CHECK(ranks.size() == by_host[0].size(), "cluster: hosts hold different rank counts (",
               by_host[0].size(), " and ", ranks.size(),
               "), expected the same count on every host for a device mesh");
  }
  return by_host;
}

/// Validates the dims, fills traffic defaults, and splits each size into intra x inter.
MeshPlan resolveMesh(const std::vector<MeshDim>& dims, const PlanOptions& options, int world,
                     int local) {
  TOPO_CHECK(!dims.empty(), "mesh: got no dimensions, expected at least one (e.g. dp=2,tp=4)");
  MeshPlan plan;
  plan.dims = dims;
  std::vector<int> rank(dims.size(), 0);
  int64_t product = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    MeshDim& d = plan.dims[i];
    TOPO_CHECK(d.size >= 1, "mesh: dimension '", d.name, "': size got ", d.size,
               ", expected >= 1");
    for (size_t j = 0; j < i; ++j)
      TOPO_CHECK(dims[j].name != d.name, "mesh: dimension '", d.name, "' appears twice");
    double bytes = 0.0;
    std::string op;
    const bool known = defaultTraffic(d.name, &bytes, &op, &rank[i]);
    if (options.traffic_given) {
      TOPO_CHECK(d.bytes >= 0, "traffic: dimension '", d.name, "': got no bytes, expected "
                 "bytes per step for every mesh dimension");
      if (!known) rank[i] = static_cast<int>(std::size(kKnownDims));
    } else {
      TOPO_CHECK(known, "mesh: unknown dimension '", d.name, "', expected one of ",
                 knownNames(), "; give traffic (bytes per dimension) to plan other names");
      d.bytes = bytes;
    }
    if (d.op.empty()) d.op = known ? op : "all_reduce";
    parseCollectiveOp(d.op);  // validates the spelling
    product *= d.size;
  }
  TOPO_CHECK(product == world, "mesh: product of sizes ", describeMesh(dims),
             ", expected the world size ", world, " (", world / local, " host(s) x ", local,
             " rank(s))");
  plan.priority.resize(dims.size());
  std::iota(plan.priority.begin(), plan.priority.end(), 0);
  std::stable_sort(plan.priority.begin(), plan.priority.end(), [&](int a, int b) {
    if (plan.dims[a].bytes != plan.dims[b].bytes) return plan.dims[a].bytes > plan.dims[b].bytes;
    return rank[a] < rank[b];
  });
  // Heaviest dimensions take the host's ranks first. Taking gcd(size, room) per dimension
  // consumes every prime factor of the host size (the product is hosts x local), so the
  // splits always tile equal hosts exactly.
  plan.intra_size.assign(dims.size(), 1);
  plan.inter_size.assign(dims.size(), 1);
  int room = local;
  for (int d : plan.priority) {
    plan.intra_size[d] = std::gcd(plan.dims[d].size, room);
    plan.inter_size[d] = plan.dims[d].size / plan.intra_size[d];
    room /= plan.intra_size[d];
  }
  return plan;
}

/// Mixed-radix helpers over row-major shapes (last dimension fastest).
std::vector<int> unravel(int index, const std::vector<int>& shape) {
  std::vector<int> coords(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    coords[d] = index % shape[d];
    index /= shape[d];
  }
  return coords;
}

int ravel(const std::vector<int>& coords, const std::vector<int>& shape) {
  int index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coords[d];
  return index;
}

/// Searches the arrangement of one host: intra index -> slot in the host's rank list.
class IntraSearch {
 public:
  IntraSearch(const MeshPlan& plan, std::vector<int> scores, int local)
      : scores_(std::move(scores)), local_(local) {
    for (int d : plan.priority) {
      if (plan.intra_size[d] < 2) continue;
      std::map<std::vector<int>, std::vector<int>> groups;  // other coords -> members
      for (int i = 0; i < local_; ++i) {
        std::vector<int> c = unravel(i, plan.intra_size);
        c[d] = 0;
        groups[c].push_back(i);
      }
      std::vector<std::vector<int>> list;
      for (auto& [key, members] : groups) list.push_back(std::move(members));
      dims_.push_back(std::move(list));
    }
  }

  /// Exhaustive over local! arrangements; the identity wins ties, so an arrangement that is
  /// already optimal stays contiguous.
  std::vector<int> exact() const {
    std::vector<int> perm(local_), best;
    std::iota(perm.begin(), perm.end(), 0);
    best = perm;
    std::vector<long> best_score = score(perm);
    while (std::next_permutation(perm.begin(), perm.end())) {
      std::vector<long> s = score(perm);
      if (s > best_score) {
        best_score = std::move(s);
        best = perm;
      }
    }
    return best;
  }

  /// Greedy cliques for the heaviest dimension, then first-improvement pairwise swaps; the
  /// identity is kept unless strictly beaten.
  std::vector<int> local() const {
    std::vector<int> identity(local_);
    std::iota(identity.begin(), identity.end(), 0);
    std::vector<int> best = climb(identity);
    std::vector<int> seeded = climb(greedySeed());
    return score(seeded) > score(best) ? seeded : best;
  }

 private:
  /// Per dimension (heaviest first): the worst pair of its worst group, then the sum over all
  /// pairs; compared lexicographically.
  std::vector<long> score(const std::vector<int>& perm) const {
    std::vector<long> out;
    for (const auto& groups : dims_) {
      long worst = 1L << 30, sum = 0;
      for (const auto& g : groups) {
        for (size_t a = 0; a < g.size(); ++a)
          for (size_t b = a + 1; b < g.size(); ++b) {
            const long s = scores_[perm[g[a]] * local_ + perm[g[b]]];
            worst = std::min(worst, s);
            sum += s;
          }
      }
      out.push_back(worst);
      out.push_back(sum);
    }
    return out;
  }

  std::vector<int> climb(std::vector<int> perm) const {
    std::vector<long> current = score(perm);
    for (int pass = 0; pass < kLocalSearchMaxPasses; ++pass) {
      bool improved = false;
      for (int i = 0; i < local_; ++i)
        for (int j = i + 1; j < local_; ++j) {
          std::swap(perm[i], perm[j]);
          std::vector<long> s = score(perm);
          if (s > current) {
            current = std::move(s);
            improved = true;
          } else {
            std::swap(perm[i], perm[j]);
          }
        }
      if (!improved) break;
    }
    return perm;
  }

  std::vector<int> greedySeed() const {
    std::vector<int> perm(local_, -1);
    if (dims_.empty()) {
      std::iota(perm.begin(), perm.end(), 0);
      return perm;
    }
    std::vector<char> used(local_, 0);
    for (const auto& g : dims_[0]) {
      for (size_t k = 0; k < g.size(); ++k) {
        int pick = -1;
        long pick_score = -1;
        for (int slot = 0; slot < local_; ++slot) {
          if (used[slot]) continue;
          long worst = 1L << 30;  // the first member: the lowest free slot
          for (size_t m = 0; m < k; ++m) worst = std::min(worst, long{scores_[perm[g[m]] * local_ + slot]});
          if (worst > pick_score) {
            pick = slot;
            pick_score = worst;
          }
        }
        perm[g[k]] = pick;
        used[pick] = 1;
      }
    }
    return perm;
  }

  std::vector<int> scores_;
  int local_;
  std::vector<std::vector<std::vector<int>>> dims_;
};

}  // namespace

bool defaultTraffic(const std::string& name, double* bytes, std::string* op, int* rank) {
  for (const KnownDim& k : kKnownDims) {
    if (name == k.name) {
      *bytes = k.bytes;
      *op = k.op;
      *rank = k.rank;
      return true;
    }
  }
  return false;
}

int scorePair(const ClusterTopology& cluster, int rank_a, int rank_b) {
  const RankPlacement& a = cluster.ranks.at(rank_a);
  const RankPlacement& b = cluster.ranks.at(rank_b);
  if (a.host != b.host || a.local_gpu < 0 || b.local_gpu < 0) return 0;
  const PathInfo& p = cluster.hosts[a.host].path(a.local_gpu, b.local_gpu);
  // Lanes dominate; the class (X=0 .. NET=7) breaks ties among equal lane counts.
  return p.nvlinks * 8 + (static_cast<int>(PathClass::NET) - static_cast<int>(p.cls));
}

MeshPlan contiguousMesh(const ClusterTopology& cluster, const std::vector<MeshDim>& dims,
                        const PlanOptions& options) {
  const auto by_host = ranksByHost(cluster);
  MeshPlan plan = resolveMesh(dims, options, static_cast<int>(cluster.ranks.size()),
                              static_cast<int>(by_host[0].size()));
  plan.mesh.resize(cluster.ranks.size());
  std::iota(plan.mesh.begin(), plan.mesh.end(), 0);
  plan.contiguous = true;
  return plan;
}

MeshPlan planMesh(const ClusterTopology& cluster, const std::vector<MeshDim>& dims,
                  const PlanOptions& options) {
  const auto by_host = ranksByHost(cluster);
  const int local = static_cast<int>(by_host[0].size());
  MeshPlan plan = resolveMesh(dims, options, static_cast<int>(cluster.ranks.size()), local);
  // Hosts with the same pair scores share one search (and so one arrangement: rails align).
  std::map<std::vector<int>, std::vector<int>> arrangement_of;
  std::vector<const std::vector<int>*> arrangement(by_host.size());
  plan.exact = local <= kExactPlacementMaxLocalRanks;
  for (size_t h = 0; h < by_host.size(); ++h) {
    std::vector<int> scores(static_cast<size_t>(local) * local);
    for (int a = 0; a < local; ++a)
      for (int b = 0; b < local; ++b)
        scores[a * local + b] = scorePair(cluster, by_host[h][a], by_host[h][b]);
    auto it = arrangement_of.find(scores);
    if (it == arrangement_of.end()) {
      IntraSearch search(plan, scores, local);
      it = arrangement_of.emplace(scores, plan.exact ? search.exact() : search.local()).first;
    }
    arrangement[h] = &it->second;
  }
  std::vector<int> shape;
  for (const MeshDim& d : plan.dims) shape.push_back(d.size);
  plan.mesh.resize(cluster.ranks.size());
  std::vector<int> intra(shape.size()), inter(shape.size());
  for (size_t m = 0; m < plan.mesh.size(); ++m) {
    const std::vector<int> c = unravel(static_cast<int>(m), shape);
    for (size_t d = 0; d < c.size(); ++d) {
      intra[d] = c[d] % plan.intra_size[d];
      inter[d] = c[d] / plan.intra_size[d];
    }
    const int host = ravel(inter, plan.inter_size);
    plan.mesh[m] = by_host[host][(*arrangement[host])[ravel(intra, plan.intra_size)]];
  }
  plan.contiguous = true;
  for (size_t m = 0; m < plan.mesh.size(); ++m) plan.contiguous &= plan.mesh[m] == static_cast<int>(m);
  if (options.keep_contiguous_if_faster && !plan.contiguous) {
    const CostModel model(cluster, options.cost);
    const MeshPlan naive = contiguousMesh(cluster, dims, options);
    double planned = 0.0, contiguous = 0.0;
    for (const CostEstimate& e : estimateMeshCost(model, plan)) planned += e.seconds;
    for (const CostEstimate& e : estimateMeshCost(model, naive)) contiguous += e.seconds;
    if (contiguous < planned) {
      MeshPlan kept = naive;
      kept.exact = plan.exact;
      return kept;
    }
  }
  return plan;
}

std::vector<std::vector<int>> meshGroups(const MeshPlan& plan, int dim) {
  TOPO_CHECK(dim >= 0 && dim < static_cast<int>(plan.dims.size()), "meshGroups: dim: got ", dim,
             ", expected 0..", plan.dims.size() - 1);
  std::vector<int> shape;
  for (const MeshDim& d : plan.dims) shape.push_back(d.size);
  std::vector<std::vector<int>> groups;
  for (size_t m = 0; m < plan.mesh.size(); ++m) {
    std::vector<int> c = unravel(static_cast<int>(m), shape);
    if (c[dim] != 0) continue;
    std::vector<int> group;
    for (int k = 0; k < shape[dim]; ++k) {
      c[dim] = k;
      group.push_back(plan.mesh[ravel(c, shape)]);
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

std::vector<CostEstimate> estimateMeshCost(const CostModel& model, const MeshPlan& plan) {
  std::vector<CostEstimate> out;
  for (size_t d = 0; d < plan.dims.size(); ++d) {
    out.push_back(model.chooseConcurrent(parseCollectiveOp(plan.dims[d].op),
                                         static_cast<int64_t>(plan.dims[d].bytes),
                                         meshGroups(plan, static_cast<int>(d))));
  }
  return out;
}

}  // namespace torch_topo::topo
