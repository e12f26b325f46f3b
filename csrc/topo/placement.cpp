// SPDX-License-Identifier: Apache-2.0
// Rank placement (layer: csrc/topo): split each mesh dimension into an intra-host and an
// inter-host extent, then search the intra-host arrangement that puts the heaviest dimensions
// on the best links; every host of one shape gets the same arrangement, so rails line up.
#include "topo/placement.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "topo/error.h"

namespace torch_topo::topo {
namespace {

constexpr int kLocalSearchMaxPasses = 64;
constexpr long kNoPair = 1L << 30;  // bottleneck of a group without pairs: above any pair

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

/// Groups of dimension `d` inside one host, as intra indices in coordinate order: one list per
/// combination of the other intra coordinates (singletons when the dimension spans hosts only).
std::vector<std::vector<int>> intraGroups(const MeshPlan& plan, int d, int local) {
  std::map<std::vector<int>, std::vector<int>> groups;  // other coords -> members
  for (int i = 0; i < local; ++i) {
    std::vector<int> c = unravel(i, plan.intra_size);
    c[d] = 0;
    groups[c].push_back(i);
  }
  std::vector<std::vector<int>> list;
  for (auto& [key, members] : groups) list.push_back(std::move(members));
  return list;
}

/// Global ranks in mesh shape, given each host's arrangement (intra index -> slot).
std::vector<int> layMesh(const MeshPlan& plan, const std::vector<std::vector<int>>& by_host,
                         const std::vector<const std::vector<int>*>& arrangement) {
  std::vector<int> shape;
  for (const MeshDim& d : plan.dims) shape.push_back(d.size);
  std::vector<int> mesh(arrangement.size() * by_host[0].size());
  std::vector<int> intra(shape.size()), inter(shape.size());
  for (size_t m = 0; m < mesh.size(); ++m) {
    const std::vector<int> c = unravel(static_cast<int>(m), shape);
    for (size_t d = 0; d < c.size(); ++d) {
      intra[d] = c[d] % plan.intra_size[d];
      inter[d] = c[d] / plan.intra_size[d];
    }
    const int host = ravel(inter, plan.inter_size);
    mesh[m] = by_host[host][(*arrangement[host])[ravel(intra, plan.intra_size)]];
  }
  return mesh;
}

CostEstimate estimateDimCost(const CostModel& model, const MeshPlan& plan, int d) {
  return model.chooseConcurrent(parseCollectiveOp(plan.dims[d].op),
                                static_cast<int64_t>(plan.dims[d].bytes), meshGroups(plan, d));
}

/// Seconds per step of the whole mesh (every dimension, best algorithm each) when the hosts of
/// one shape take a candidate arrangement and the other hosts keep theirs. A dimension's cost
/// depends only on its set of intra-host groups (the cost model searches ring orders from the
/// sorted members; broadcast and send/recv keep their order), so each set is priced once.
class ArrangementCost {
 public:
  ArrangementCost(const CostModel& model, const MeshPlan& plan,
                  const std::vector<std::vector<int>>& by_host,
                  std::vector<const std::vector<int>*> arrangement, std::vector<int> hosts)
      : model_(model), plan_(plan), by_host_(by_host), arrangement_(std::move(arrangement)),
        hosts_(std::move(hosts)), memo_(plan.dims.size()) {
    const int local = static_cast<int>(by_host[0].size());
    for (size_t d = 0; d < plan.dims.size(); ++d) {
      groups_.push_back(intraGroups(plan, static_cast<int>(d), local));
      const CollectiveOp op = parseCollectiveOp(plan.dims[d].op);
      ordered_.push_back(isRooted(op) || op == CollectiveOp::SendRecv);
      // One group of the whole host (unordered) or singletons: the same for every candidate.
      fixed_.push_back(plan.intra_size[d] == 1 || (plan.intra_size[d] == local && !ordered_[d]));
    }
  }

  double operator()(const std::vector<int>& perm) {
    double total = 0.0;
    MeshPlan candidate;
    for (size_t d = 0; d < plan_.dims.size(); ++d) {
      key_.clear();
      if (!fixed_[d]) keyOf(d, perm);
      auto it = memo_[d].find(key_);
      if (it == memo_[d].end()) {
        if (candidate.mesh.empty()) {
          candidate = plan_;
          for (int h : hosts_) arrangement_[h] = &perm;
          candidate.mesh = layMesh(plan_, by_host_, arrangement_);
        }
        const double seconds = estimateDimCost(model_, candidate, static_cast<int>(d)).seconds;
        it = memo_[d].emplace(key_, seconds).first;
      }
      total += it->second;
    }
    return total;
  }

 private:
  /// Dimension d's groups under `perm` into key_: members mapped through perm (sorted unless
  /// their order matters), groups one after the other by first member (they are disjoint, so
  /// the order is total). Scratch buffers are reused: most candidates hit the memo.
  void keyOf(size_t d, const std::vector<int>& perm) {
    const auto& groups = groups_[d];
    const size_t size = groups[0].size();
    mapped_.resize(groups.size() * size);
    order_.resize(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto first = mapped_.begin() + g * size;
      for (size_t k = 0; k < size; ++k) first[k] = perm[groups[g][k]];
      if (!ordered_[d]) std::sort(first, first + size);
      order_[g] = g;
    }
    std::sort(order_.begin(), order_.end(),
              [&](size_t a, size_t b) { return mapped_[a * size] < mapped_[b * size]; });
    for (size_t g : order_)
      key_.insert(key_.end(), mapped_.begin() + g * size, mapped_.begin() + (g + 1) * size);
  }

  const CostModel& model_;
  const MeshPlan& plan_;
  const std::vector<std::vector<int>>& by_host_;
  std::vector<const std::vector<int>*> arrangement_;
  std::vector<int> hosts_;  // the hosts of the shape being searched
  std::vector<std::vector<std::vector<int>>> groups_;
  std::vector<char> ordered_, fixed_;
  std::vector<int> key_, mapped_;
  std::vector<size_t> order_;
  std::vector<std::map<std::vector<int>, double>> memo_;  // per dimension: key -> seconds
};

/// A dimension's bottleneck as its pairs come: the worst pair score and how many pairs have it.
struct Bottleneck {
  long worst = kNoPair;
  long at_worst = 0;
  void add(long s, long pairs = 1) {
    if (pairs == 0) return;
    if (s < worst) {
      worst = s;
      at_worst = 0;
    }
    at_worst += s == worst ? pairs : 0;
  }
};

/// Searches the arrangement of one host shape: intra index -> slot in the host's rank list.
/// Objective, compared lexicographically: per dimension from the heaviest, the worst pair score
/// of its worst group (its bottleneck) and the fewest pairs at that score; then the cost
/// model's seconds per step of the mesh.
class IntraSearch {
 public:
  using CostFn = std::function<double(const std::vector<int>&)>;

  IntraSearch(const MeshPlan& plan, std::vector<int> scores, int local)
      : scores_(std::move(scores)), local_(local) {
    for (int d : plan.priority) {
      if (plan.intra_size[d] >= 2) dims_.push_back(intraGroups(plan, d, local));
    }
  }

  /// Exhaustive over local! arrangements; every arrangement with the best bottlenecks is
  /// priced. The identity comes first and wins exact ties, so an arrangement that is already
  /// optimal stays contiguous.
  std::vector<int> exact(const CostFn& cost) const {
    std::vector<int> perm(local_);
    std::iota(perm.begin(), perm.end(), 0);
    std::vector<int> ties = perm;  // the tied arrangements, one after the other
    std::vector<long> best, b;
    score(perm, false, &best);
    while (std::next_permutation(perm.begin(), perm.end())) {
      if (!bottlenecksReach(perm, best, &b)) continue;
      if (b > best) {
        best.swap(b);
        ties.clear();
      }
      ties.insert(ties.end(), perm.begin(), perm.end());
    }
    return cheapest(ties, cost);
  }

  /// Greedy cliques for the heaviest dimension, then first-improvement pairwise swaps guided
  /// by bottlenecks and pair sums; of the climbs from the identity and from the greedy seed,
  /// the one with the better objective.
  std::vector<int> local(const CostFn& cost) const {
    std::vector<int> identity(local_);
    std::iota(identity.begin(), identity.end(), 0);
    const std::vector<int> from_identity = climb(identity), from_seed = climb(greedySeed());
    std::vector<long> a, b;
    score(from_identity, false, &a);
    score(from_seed, false, &b);
    if (a != b) return a > b ? from_identity : from_seed;
    std::vector<int> both = from_identity;
    both.insert(both.end(), from_seed.begin(), from_seed.end());
    return cheapest(both, cost);
  }

 private:
  /// The first cheapest of the arrangements stored one after the other in `candidates`.
  std::vector<int> cheapest(const std::vector<int>& candidates, const CostFn& cost) const {
    std::vector<int> best(candidates.begin(), candidates.begin() + local_), perm(local_);
    double best_cost = cost(best);
    for (size_t at = local_; at < candidates.size(); at += local_) {
      std::copy(candidates.begin() + at, candidates.begin() + at + local_, perm.begin());
      const double c = cost(perm);
      if (c < best_cost) {
        best_cost = c;
        best = perm;
      }
    }
    return best;
  }

  /// Bottlenecks of `perm` into `out` (per dimension its worst pair and, negated, how many of
  /// its pairs are that bad), or false as soon as they fall lexicographically below `floor`
  /// (most arrangements are out after a few pairs).
  bool bottlenecksReach(const std::vector<int>& perm, const std::vector<long>& floor,
                        std::vector<long>* out) const {
    out->clear();
    bool tied = true;  // equal to `floor` so far
    for (size_t d = 0; d < dims_.size(); ++d) {
      Bottleneck bn;
      for (const auto& g : dims_[d]) {
        for (size_t a = 0; a < g.size(); ++a)
          for (size_t b = a + 1; b < g.size(); ++b) {
            bn.add(scores_[perm[g[a]] * local_ + perm[g[b]]]);
            if (tied && bn.worst < floor[2 * d]) return false;
          }
      }
      out->push_back(bn.worst);
      out->push_back(-bn.at_worst);
      if (tied && bn.worst == floor[2 * d] && -bn.at_worst < floor[2 * d + 1]) return false;
      tied = tied && bn.worst == floor[2 * d] && -bn.at_worst == floor[2 * d + 1];
    }
    return true;
  }

  /// Per dimension (heaviest first): the worst pair of its worst group, how many of its pairs
  /// are that bad (negated: fewer is better) and, when `sums`, the sum over all pairs after
  /// them (the local search's guide).
  void score(const std::vector<int>& perm, bool sums, std::vector<long>* out) const {
    out->clear();
    for (const auto& groups : dims_) {
      Bottleneck bn;
      long sum = 0;
      for (const auto& g : groups) {
        for (size_t a = 0; a < g.size(); ++a)
          for (size_t b = a + 1; b < g.size(); ++b) {
            const long s = scores_[perm[g[a]] * local_ + perm[g[b]]];
            bn.add(s);
            sum += s;
          }
      }
      out->push_back(bn.worst);
      out->push_back(-bn.at_worst);
      if (sums) out->push_back(sum);
    }
  }

  std::vector<int> climb(std::vector<int> perm) const {
    std::vector<long> current, s;
    score(perm, true, &current);
    for (int pass = 0; pass < kLocalSearchMaxPasses; ++pass) {
      bool improved = false;
      for (int i = 0; i < local_; ++i)
        for (int j = i + 1; j < local_; ++j) {
          std::swap(perm[i], perm[j]);
          score(perm, true, &s);
          if (s > current) {
            current.swap(s);
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
          long worst = kNoPair;  // the first member: the lowest free slot
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

/// The two measures of a whole mesh, every pair of every group included (a pair across hosts
/// scores 0): per dimension from the heaviest, its worst pair and, negated, how many of its
/// pairs are that bad (larger is better); and the cost model's seconds per step.
struct MeshObjective {
  std::vector<long> bottlenecks;
  double seconds = 0.0;
  /// At least as good on both measures and better on one.
  bool dominates(const MeshObjective& o) const {
    return bottlenecks >= o.bottlenecks && seconds <= o.seconds &&
           (bottlenecks > o.bottlenecks || seconds < o.seconds);
  }
};

MeshObjective objectiveOf(const ClusterTopology& cluster, const CostModel& model,
                          const MeshPlan& plan) {
  MeshObjective out;
  for (int d : plan.priority) {
    Bottleneck bn;
    // Pairs across hosts all score 0, so only those inside a host are scored one by one: a dp
    // group over thousands of hosts costs its size, not its square.
    for (const auto& g : meshGroups(plan, d)) {
      std::map<int, std::vector<int>> by_host;
      for (int r : g) by_host[cluster.ranks[r].host].push_back(r);
      long across = static_cast<long>(g.size()) * static_cast<long>(g.size() - 1) / 2;
      for (const auto& [host, members] : by_host) {
        across -= static_cast<long>(members.size()) * static_cast<long>(members.size() - 1) / 2;
        for (size_t a = 0; a < members.size(); ++a)
          for (size_t b = a + 1; b < members.size(); ++b)
            bn.add(scorePair(cluster, members[a], members[b]));
      }
      bn.add(0, across);
    }
    out.bottlenecks.push_back(bn.worst);
    out.bottlenecks.push_back(-bn.at_worst);
  }
  for (const CostEstimate& e : estimateMeshCost(model, plan)) out.seconds += e.seconds;
  return out;
}

/// `plan` laid out as the launcher does: mesh position i holds rank i.
MeshPlan launcherLayout(MeshPlan plan, size_t ranks) {
  plan.mesh.resize(ranks);
  std::iota(plan.mesh.begin(), plan.mesh.end(), 0);
  plan.contiguous = true;
  return plan;
}

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
  const HostTopology& host = cluster.hosts[a.host];
  const PathInfo& p = host.path(a.local_gpu, b.local_gpu);
  const int numa_a = host.gpus[a.local_gpu].numa_node, numa_b = host.gpus[b.local_gpu].numa_node;
  const int same_numa = numa_a < 0 || numa_b < 0 || numa_a == numa_b;
  // Lanes dominate; the class (X=0 .. NET=7) breaks ties among equal lane counts, and one NUMA
  // node (or an unknown one) beats two among equal links.
  return (p.nvlinks * 8 + (static_cast<int>(PathClass::NET) - static_cast<int>(p.cls))) * 2 +
         same_numa;
}

MeshPlan contiguousMesh(const ClusterTopology& cluster, const std::vector<MeshDim>& dims,
                        const PlanOptions& options) {
  const auto by_host = ranksByHost(cluster);
  return launcherLayout(resolveMesh(dims, options, static_cast<int>(cluster.ranks.size()),
                                    static_cast<int>(by_host[0].size())),
                        cluster.ranks.size());
}

MeshPlan planMesh(const ClusterTopology& cluster, const std::vector<MeshDim>& dims,
                  const PlanOptions& options) {
  const auto by_host = ranksByHost(cluster);
  const int local = static_cast<int>(by_host[0].size());
  MeshPlan plan = resolveMesh(dims, options, static_cast<int>(cluster.ranks.size()), local);
  plan.exact = local <= kExactPlacementMaxLocalRanks;
  // Hosts with the same pair scores form one shape with one arrangement (rails align).
  std::map<std::vector<int>, int> shape_of;
  std::vector<std::vector<int>> shape_scores, shape_hosts;
  for (size_t h = 0; h < by_host.size(); ++h) {
    std::vector<int> scores(static_cast<size_t>(local) * local);
    for (int a = 0; a < local; ++a)
      for (int b = 0; b < local; ++b)
        scores[a * local + b] = scorePair(cluster, by_host[h][a], by_host[h][b]);
    auto it = shape_of.emplace(scores, static_cast<int>(shape_scores.size())).first;
    if (it->second == static_cast<int>(shape_scores.size())) {
      shape_scores.push_back(std::move(scores));
      shape_hosts.emplace_back();
    }
    shape_hosts[it->second].push_back(static_cast<int>(h));
  }
  // Shapes are searched in turn; the cost of a candidate sees the shapes searched before with
  // their choice and the later ones contiguous (exact when all hosts share one shape).
  std::vector<int> identity(local);
  std::iota(identity.begin(), identity.end(), 0);
  std::vector<std::vector<int>> chosen(shape_scores.size(), identity);
  std::vector<const std::vector<int>*> arrangement(by_host.size());
  for (size_t s = 0; s < shape_scores.size(); ++s)
    for (int h : shape_hosts[s]) arrangement[h] = &chosen[s];
  const CostModel model(cluster, options.cost);
  for (size_t s = 0; s < shape_scores.size(); ++s) {
    ArrangementCost cost(model, plan, by_host, arrangement, shape_hosts[s]);
    const IntraSearch search(plan, shape_scores[s], local);
    const IntraSearch::CostFn price = [&cost](const std::vector<int>& perm) { return cost(perm); };
    chosen[s] = plan.exact ? search.exact(price) : search.local(price);
  }
  plan.mesh = layMesh(plan, by_host, arrangement);
  plan.contiguous = true;
  for (size_t m = 0; m < plan.mesh.size(); ++m) plan.contiguous &= plan.mesh[m] == static_cast<int>(m);
  if (plan.contiguous) return plan;
  // The split serves dimensions that divide a host. One that does not (tp=4 on 3-GPU hosts)
  // goes wholly across hosts, where the launcher's layout keeps part of each group inside one.
  // Across hosts, fewer pairs on the network is not always cheaper (the launcher's layout then
  // spreads the lighter dimensions unevenly over the NICs), so the launcher's layout replaces
  // the plan only where it is better on both measures.
  MeshPlan launcher = launcherLayout(plan, plan.mesh.size());
  return objectiveOf(cluster, model, launcher).dominates(objectiveOf(cluster, model, plan))
             ? launcher
             : plan;
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
  for (size_t d = 0; d < plan.dims.size(); ++d)
    out.push_back(estimateDimCost(model, plan, static_cast<int>(d)));
  return out;
}

}  // namespace torch_topo::topo
