// SPDX-License-Identifier: Apache-2.0
// Python bindings of the planner layer (layer: csrc/bindings): cost model, ring order search and
// placement over a cluster given as torch-topo JSON. Types in and out are plain Python values.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "topo/cost_model.h"
#include "topo/error.h"
#include "topo/loader.h"
#include "topo/placement.h"
#include "topo/ring_order.h"
#include "topo/topology_json.h"

namespace torch_topo::bindings {
namespace {

using topo::ClusterTopology;
using topo::CostEstimate;
using topo::MeshDim;
using topo::MeshPlan;

/// Argument errors of the planner surface as ValueError (they name the option); other core
/// errors keep their registered types.
template <typename Fn>
auto valueErrors(Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const topo::InvalidArgument& e) {
    throw py::value_error(e.what());
  }
}

py::dict estimateToDict(const CostEstimate& e) {
  py::dict d;
  d["algorithm"] = topo::toString(e.algorithm);
  d["applicable"] = e.applicable;
  d["seconds"] = e.seconds;
  d["choice_seconds"] = e.choiceSeconds();
  d["alg_bandwidth_gbps"] = e.alg_bandwidth_gbps;
  d["bus_bandwidth_gbps"] = e.bus_bandwidth_gbps;
  d["protocol"] = e.protocol;
  d["order"] = e.order;
  return d;
}

py::dict planToDict(const MeshPlan& plan) {
  py::list dims;
  for (size_t i = 0; i < plan.dims.size(); ++i) {
    py::dict d;
    d["name"] = plan.dims[i].name;
    d["size"] = plan.dims[i].size;
    d["bytes"] = plan.dims[i].bytes;
    d["op"] = plan.dims[i].op;
    d["intra_size"] = plan.intra_size[i];
    d["inter_size"] = plan.inter_size[i];
    dims.append(d);
  }
  py::dict out;
  out["dims"] = dims;
  out["mesh"] = plan.mesh;
  out["priority"] = plan.priority;
  out["exact"] = plan.exact;
  out["contiguous"] = plan.contiguous;
  return out;
}

/// Bytes of a dimension: the cost model converts them to int64, where inf, NaN or 2**63 and
/// more are undefined (they came out as INT64_MIN).
double checkedBytes(const char* option, const std::string& name, double bytes) {
  TOPO_CHECK(std::isfinite(bytes) && bytes >= 0 && bytes < 0x1p63, option, ": dimension '", name,
             "': got ", bytes, " bytes, expected >= 0 and < 2**63 (finite)");
  return bytes;
}

/// (name, size) pairs plus optional {name: (bytes, op)} traffic into core dims.
std::pair<std::vector<MeshDim>, topo::PlanOptions> toDims(
    const std::vector<std::pair<std::string, int>>& mesh,
    const std::optional<std::map<std::string, std::pair<double, std::string>>>& traffic,
    int64_t chunk_bytes) {
  std::vector<MeshDim> dims;
  for (const auto& [name, size] : mesh) dims.push_back({name, size, -1.0, ""});
  topo::PlanOptions options;
  options.cost.chunk_bytes = chunk_bytes;
  if (traffic) {
    options.traffic_given = true;
    for (const auto& [name, entry] : *traffic) {
      bool found = false;
      for (MeshDim& d : dims) {
        if (d.name != name) continue;
        d.bytes = checkedBytes("traffic", name, entry.first);
        d.op = entry.second;
        found = true;
      }
      TOPO_CHECK(found, "traffic: unknown dimension '", name, "', expected a mesh dimension");
    }
  }
  return {dims, options};
}

/// `value` as an index below `count`, refused with a ValueError naming the PlannerCluster
/// method and argument (a bare vector::at IndexError said neither which argument nor the range).
size_t checkedIndex(const char* method, const char* arg, int64_t value, size_t count) {
  if (value < 0 || static_cast<uint64_t>(value) >= count) {
    throw py::value_error(std::string("PlannerCluster.") + method + ": " + arg + ": got " +
                          std::to_string(value) + ", expected 0.." + std::to_string(count - 1));
  }
  return static_cast<size_t>(value);
}

/// A network figure of PlannerCluster.of_cluster: 0 (the cluster's NICs or the model's default)
/// or a finite positive number up to 1e6, as the cluster JSON reader takes it.
double checkedNetworkFigure(const char* name, double value) {
  TOPO_CHECK(std::isfinite(value) && value >= 0 && value <= 1e6, "PlannerCluster.of_cluster: ",
             name, ": got ", value, ", expected 0 or a finite number up to 1e6");
  return value;
}

int checkedNcclVersion(int64_t nccl_version) {
  TOPO_CHECK(nccl_version >= 0 && nccl_version < 1000000, "PlannerCluster: nccl_version: got ",
             nccl_version, ", expected 0 or a version code such as 22809 (2.28.9)");
  return static_cast<int>(nccl_version);
}

/// A cluster with a cost model built once; the Python Plan keeps one per topology.
class PlannerCluster {
 public:
  PlannerCluster(ClusterTopology cluster, int64_t chunk_bytes, topo::ModelKind kind,
                 int nccl_version)
      : cluster_(std::move(cluster)),
        model_(cluster_, topo::CostOptions{chunk_bytes, true, kind, nccl_version}) {}

  const ClusterTopology& cluster() const { return cluster_; }
  const topo::CostModel& model() const { return model_; }

  /// The placement of rank `r` and the host `h`. They take int64 so that 2**40 is a ValueError
  /// too, not a pybind11 TypeError.
  const topo::RankPlacement& rank(const char* method, const char* arg, int64_t r) const {
    return cluster_.ranks[checkedIndex(method, arg, r, cluster_.ranks.size())];
  }
  const topo::HostTopology& host(const char* method, const char* arg, int64_t h) const {
    return cluster_.hosts[checkedIndex(method, arg, h, cluster_.hosts.size())];
  }
  /// Most NVLink lanes the rank's GPU has to a peer on its host (0: none known).
  int nvlinkLanes(const topo::RankPlacement& p) const {
    const topo::HostTopology& h = cluster_.hosts[p.host];
    int lanes = 0;
    for (int j = 0; p.local_gpu >= 0 && j < h.gpuCount(); ++j)
      if (j != p.local_gpu) lanes = std::max(lanes, h.path(p.local_gpu, j).nvlinks);
    return lanes;
  }

 private:
  ClusterTopology cluster_;
  topo::CostModel model_;
};

/// Most ranks a cluster may have. Time and memory grow with the ranks and their host graphs:
/// beyond what importing torch takes, `plan` on 16384 ranks takes about 0.5 s and 0.03 GB on
/// DGX-1 hosts, 0.6 s and 0.12 GB on Azure NDv5 hosts (larger graphs). Until 2026-12-07 the
/// cost model kept an n x n pair table and was built through the cluster's JSON: 4096 NDv5
/// ranks took 2.4 s and 0.54 GB (docs/backend.md).
constexpr int kMaxRanks = 16384;

/// A loaded topology as a cluster with rank placements: a one-host topology is repeated
/// `hosts` times; missing ranks run host-major, rank r of a host on GPU r (one CPU rank on a
/// host without GPUs).
ClusterTopology completeCluster(ClusterTopology c, int hosts, const std::string& where) {
  // "hosts" as the Python argument and the CLI option (--hosts) both name it.
  TOPO_CHECK(hosts >= 1 && hosts <= kMaxRanks, "hosts: got ", hosts,
             ", expected >= 1 and <= ", kMaxRanks);
  if (hosts > 1) {
    TOPO_CHECK(c.hosts.size() == 1, "hosts: got ", hosts, " for ", where,
               ", which already describes ", c.hosts.size(),
               " hosts; expected hosts > 1 only with a one-host file");
    const int per_host = std::max(c.hosts[0].gpuCount(), 1);
    TOPO_CHECK(hosts <= kMaxRanks / per_host, "hosts: got ", hosts, " hosts x ", per_host,
               " ranks of ", where, ", expected at most ", kMaxRanks, " ranks in all");
    c.hosts.resize(hosts, c.hosts[0]);
    c.ranks.clear();
  }
  if (c.ranks.empty()) {
    for (int h = 0; h < static_cast<int>(c.hosts.size()); ++h) {
      const int gpus = c.hosts[h].gpuCount();
      if (gpus == 0) c.ranks.push_back({h, -1, 0});
      for (int g = 0; g < gpus; ++g) c.ranks.push_back({h, g, g});
    }
  }
  TOPO_CHECK(c.ranks.size() <= static_cast<size_t>(kMaxRanks), where, ": ", c.ranks.size(), " ranks, expected at most ",
             kMaxRanks);
  return c;
}

ClusterTopology clusterOfText(const std::string& text, const std::string& where) {
  if (topo::topologyJsonKind(text) == "cluster") return topo::clusterFromJson(text, where);
  ClusterTopology c;
  c.hosts.push_back(topo::loadTopologyText(text, where));
  return c;
}

/// completeCluster of a file or of text, exactly one of them given.
ClusterTopology completeSource(const char* function, const std::optional<std::string>& path,
                               const std::optional<std::string>& text, int hosts) {
  TOPO_CHECK(path.has_value() != text.has_value(), function,
             ": expected exactly one of path and text");
  ClusterTopology c = path ? topo::loadClusterFile(*path) : clusterOfText(*text, "<topology>");
  return completeCluster(std::move(c), hosts, path ? *path : "<topology>");
}

}  // namespace

void defPlanner(py::module_& m) {
  m.attr("MAX_RANKS") = kMaxRanks;
  m.attr("HIERARCHICAL_SCAN_BYTES") =
      py::make_tuple(topo::kHierarchicalScanMinBytes, topo::kHierarchicalScanMaxBytes);
  m.def("planner_cluster_json",
        [](std::optional<std::string> path, std::optional<std::string> text, int hosts) {
          return valueErrors([&] {
            return topo::clusterToJson(completeSource("planner_cluster_json", path, text, hosts));
          });
        },
        py::arg("path") = py::none(), py::arg("text") = py::none(), py::arg("hosts") = 1,
        R"(A topology as a torch-topo cluster JSON with rank placements.

Args:
  path: any host topology file (nvidia-smi text, NCCL XML, torch-topo JSON) or a cluster JSON.
  text: the same content as a string (e.g. Topology.to_json()); give path or text.
  hosts: copies of a one-host topology; ranks run host-major, rank r of a host on GPU r.)");
  m.def("complete_cluster",
        [](std::optional<std::string> path, std::optional<std::string> text, int hosts) {
          return valueErrors([&] { return completeSource("complete_cluster", path, text, hosts); });
        },
        py::arg("path") = py::none(), py::arg("text") = py::none(), py::arg("hosts") = 1,
        py::call_guard<py::gil_scoped_release>(),
        R"(The ClusterTopology planner_cluster_json describes, without writing it out: what
PlannerCluster.of_cluster takes (16384 ranks: the JSON took about 3.5 s to write and read).

Args: as for planner_cluster_json.)");

  m.def("find_ring_order",
        [](const std::vector<std::vector<double>>& bandwidth) {
          std::vector<double> flat;
          for (const auto& row : bandwidth) {
            TOPO_CHECK(row.size() == bandwidth.size(), "find_ring_order: bandwidth: row of ",
                       row.size(), " entries, expected ", bandwidth.size());
            for (double gbps : row) {
              // NaN compares false both ways, so the search would keep whichever order came first.
              if (!(std::isfinite(gbps) && gbps >= 0)) {
                throw py::value_error("find_ring_order: bandwidth: got " + std::to_string(gbps) +
                                      " GB/s, expected a finite number >= 0");
              }
            }
            flat.insert(flat.end(), row.begin(), row.end());
          }
          return valueErrors([&] {
            return topo::findRingOrder(flat, static_cast<int>(bandwidth.size()));
          });
        },
        py::arg("bandwidth"),
        R"(Cyclic order maximising the ring's bottleneck bandwidth (exact up to 12 devices).

Args:
  bandwidth: n x n matrix, GB/s from row to column.)");

  m.def("bus_bandwidth_factor",
        [](const std::string& op, int n) {
          return valueErrors([&] {
            TOPO_CHECK(n >= 1, "bus_bandwidth_factor: group_size: got ", n, ", expected >= 1");
            return topo::busBandwidthFactor(topo::parseCollectiveOp(op), n);
          });
        },
        py::arg("op"), py::arg("group_size"),
        R"(nccl-tests bus bandwidth factor of a collective.

Args:
  op: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast or send_recv.
  group_size: ranks in the group.)");

  py::class_<PlannerCluster>(m, "PlannerCluster",
                             "A cluster (torch-topo JSON) with its cost model, built once.")
      .def(py::init([](const std::string& json, int64_t chunk_bytes, const std::string& model,
                       int64_t nccl_version) {
             return valueErrors([&] {
               // Checked in this order whatever the compiler's order of arguments.
               const int version = checkedNcclVersion(nccl_version);
               const topo::ModelKind kind = topo::parseModelKind(model);
               return new PlannerCluster(topo::clusterFromJson(json, "<cluster json>"),
                                         chunk_bytes, kind, version);
             });
           }),
           py::arg("cluster_json"), py::arg("chunk_bytes") = int64_t{4} << 20,
           py::arg("model") = "auto", py::arg("nccl_version") = 0,
           R"(Args:
  cluster_json: a torch-topo/1 cluster document with rank placements.
  chunk_bytes: pipelining grain of hierarchical schedules (TopoConfig.pipeline_chunk_bytes).
  model: "auto" (NCCL's algorithms for groups of GPU ranks, the alpha-beta schedules of the
    Gloo side otherwise), "alpha_beta" or "nccl".
  nccl_version: NCCL's version code (major x 10000 + minor x 100 + patch) whose tuning the
    model follows where releases differ; 0 for the newest it knows.)")
      .def_static("of_cluster",
                  [](ClusterTopology cluster, double inter_host_bandwidth_gbps,
                     double inter_host_latency_us, int64_t chunk_bytes, const std::string& model,
                     int64_t nccl_version) {
                    return valueErrors([&] {
                      const int version = checkedNcclVersion(nccl_version);
                      const topo::ModelKind kind = topo::parseModelKind(model);
                      cluster.inter_host_bandwidth_gbps = checkedNetworkFigure(
                          "inter_host_bandwidth_gbps", inter_host_bandwidth_gbps);
                      cluster.inter_host_latency_us =
                          checkedNetworkFigure("inter_host_latency_us", inter_host_latency_us);
                      return new PlannerCluster(std::move(cluster), chunk_bytes, kind, version);
                    });
                  },
                  py::arg("cluster"), py::arg("inter_host_bandwidth_gbps"),
                  py::arg("inter_host_latency_us"), py::arg("chunk_bytes") = int64_t{4} << 20,
                  py::arg("model") = "auto", py::arg("nccl_version") = 0,
                  py::return_value_policy::take_ownership,
                  R"(The PlannerCluster of an assembled ClusterTopology (what a group's exchange
holds) with its network figures replaced, without a JSON round trip (at 4096 ranks that
route and the old pair table took 1.4 s of each rank's group creation).

Args:
  cluster: the ClusterTopology.
  inter_host_bandwidth_gbps: GB/s per direction for every host's network, 0 for its NICs.
  inter_host_latency_us: one-way us between hosts, 0 for NCCL's network hop.
  chunk_bytes, model, nccl_version: as for the constructor.)")
      .def_property_readonly("world_size", [](const PlannerCluster& c) { return c.model().rankCount(); })
      .def("rank_host", [](const PlannerCluster& c, int64_t r) { return c.rank("rank_host", "rank", r).host; },
           py::arg("rank"), "Host index of a rank.\n\nArgs:\n  rank: global rank.")
      .def("rank_gpu", [](const PlannerCluster& c, int64_t r) { return c.rank("rank_gpu", "rank", r).local_gpu; },
           py::arg("rank"), "Local GPU of a rank (-1 for CPU-only).\n\nArgs:\n  rank: global rank.")
      .def("rank_cpus",
           [](const PlannerCluster& c, int64_t r) {
             const auto& p = c.rank("rank_cpus", "rank", r);
             const auto& host = c.cluster().hosts.at(p.host);
             py::dict d;
             d["numa_node"] = p.local_gpu >= 0 ? host.gpus.at(p.local_gpu).numa_node : -1;
             d["cpu_affinity"] = p.local_gpu >= 0 ? host.gpus.at(p.local_gpu).cpu_affinity : "";
             std::string numa_cpus;
             for (const auto& n : host.numa_nodes)
               if (n.id == d["numa_node"].cast<int>()) numa_cpus = n.cpus;
             d["numa_cpus"] = numa_cpus;
             return d;
           },
           py::arg("rank"),
           "NUMA node and cpulists nearest a rank's GPU (empty when unknown).\n\nArgs:\n  rank: global rank.")
      .def("pair_path",
           [](const PlannerCluster& c, int64_t a, int64_t b) {
             const auto& pa = c.rank("pair_path", "a", a);
             const auto& pb = c.rank("pair_path", "b", b);
             if (c.model().nvlinkDomainPair(static_cast<int>(a), static_cast<int>(b))) {
               // NVLink through the domain's switches: the lanes both GPUs have to it.
               return std::make_pair(std::string("NV"),
                                     std::min(c.nvlinkLanes(pa), c.nvlinkLanes(pb)));
             }
             if (pa.host != pb.host) return std::make_pair(std::string("NET"), 0);
             if (pa.local_gpu < 0 || pb.local_gpu < 0) return std::make_pair(std::string("SYS"), 0);
             const auto& p = c.cluster().hosts[pa.host].path(pa.local_gpu, pb.local_gpu);
             return std::make_pair(std::string(topo::toString(p.cls)), p.nvlinks);
           },
           py::arg("a"), py::arg("b"),
           "(path class, NVLink lanes) between two ranks; NV between hosts of one multi-node\n"
           "NVLink domain.\n\nArgs:\n  a: rank.\n  b: rank.")
      .def("gpu_pcie_links",
           [](const PlannerCluster& c, int64_t host) {
             // (gpu index, lanes, GB/s) of every PCIe link that ends at a GPU of the host.
             std::vector<std::tuple<int, int, double>> out;
             const auto& g = c.host("gpu_pcie_links", "host", host).graph;
             for (const auto& link : g.links) {
               if (link.kind != topo::LinkKind::Pci) continue;
               for (int end : {link.a, link.b}) {
                 if (g.nodes.at(end).kind == topo::NodeKind::Gpu)
                   out.emplace_back(g.nodes[end].index, link.lanes, link.bandwidth_gbps);
               }
             }
             return out;
           },
           py::arg("host"),
           "PCIe links ending at GPUs of a host: (gpu, lanes, GB/s); empty without a graph.\n\n"
           "Args:\n  host: host index.")
      .def_property_readonly("host_count", [](const PlannerCluster& c) {
             return static_cast<int>(c.cluster().hosts.size());
           })
      .def_property_readonly("network_source",
                             [](const PlannerCluster& c) { return c.model().networkSource(); },
                             "Where the inter-host bandwidth comes from, in words.")
      .def_property_readonly("network_assumed",
                             [](const PlannerCluster& c) { return c.model().networkAssumed(); },
                             "True when no NIC speed or inter-host bandwidth is known and the "
                             "model assumes 100 Gbit/s.")
      .def("rail", [](const PlannerCluster& c, int64_t r) {
             c.rank("rail", "rank", r);
             return c.model().railOf(static_cast<int>(r));
           },
           py::arg("rank"), "NIC index (rail) of a rank.\n\nArgs:\n  rank: global rank.")
      .def("bandwidth", [](const PlannerCluster& c, int64_t a, int64_t b) {
             // Checked here, so that the error names this method and argument.
             c.rank("bandwidth", "a", a);
             c.rank("bandwidth", "b", b);
             return c.model().pairBandwidth(static_cast<int>(a), static_cast<int>(b));
           }, py::arg("a"), py::arg("b"),
           "Path bandwidth between two ranks, GB/s.\n\nArgs:\n  a: rank.\n  b: rank.")
      .def("estimate",
           [](const PlannerCluster& c, const std::string& op, int64_t bytes,
              const std::vector<std::vector<int>>& groups, std::optional<std::string> algorithm) {
             return valueErrors([&] {
               const auto cop = topo::parseCollectiveOp(op);
               CostEstimate e;
               {
                 py::gil_scoped_release nogil;
                 e = algorithm ? c.model().estimateConcurrent(cop, bytes, groups,
                                                              topo::parseAlgorithm(*algorithm))
                               : c.model().chooseConcurrent(cop, bytes, groups);
               }
               return estimateToDict(e);
             });
           },
           py::arg("op"), py::arg("bytes"), py::arg("groups"), py::arg("algorithm") = py::none(),
           R"(Predicted time of one collective run at once on disjoint groups of one size.

Args:
  op: collective name (all_reduce, ...).
  bytes: buffer size as nccl-tests counts it.
  groups: list of rank lists.
  algorithm: ring, tree, halving_doubling, direct, hierarchical, nvls, nvls_tree, collnet or
    pat; None picks the fastest (hierarchical over NCCL's algorithms only by the 1.15x
    margin). The result's "protocol" names NCCL's protocol (empty under alpha-beta).)")
      .def("fastest_flat",
           [](const PlannerCluster& c, const std::string& op, int64_t bytes,
              const std::vector<std::vector<int>>& groups) {
             return valueErrors([&] {
               const auto cop = topo::parseCollectiveOp(op);
               CostEstimate e;
               {
                 py::gil_scoped_release nogil;
                 e = c.model().fastestFlat(cop, bytes, groups);
               }
               return estimateToDict(e);
             });
           },
           py::arg("op"), py::arg("bytes"), py::arg("groups"),
           R"(The flat algorithm the model prices fastest among those NCCL's own estimates consider,
whatever NCCL would pick (estimate() without an algorithm gives that pick): what an NCCL_ALGO
hint asks for.

Args:
  op: collective name.
  bytes: buffer size as nccl-tests counts it.
  groups: list of rank lists run at once.)")
      .def("compare_hierarchical",
           [](const PlannerCluster& c, const std::string& op, int64_t bytes,
              const std::vector<std::vector<int>>& groups) {
             return valueErrors([&] {
               const auto cop = topo::parseCollectiveOp(op);
               CostEstimate flat, hier;
               {
                 py::gil_scoped_release nogil;
                 flat = c.model().chooseFlat(cop, bytes, groups);
                 hier = c.model().estimateConcurrent(cop, bytes, groups,
                                                     topo::Algorithm::Hierarchical);
               }
               py::dict out;
               out["flat"] = estimateToDict(flat);
               out["hierarchical"] = estimateToDict(hier);
               out["margin"] =
                   c.model().usesNccl(groups) ? topo::kHierarchicalMarginOverNccl : 1.0;
               return out;
             });
           },
           py::arg("op"), py::arg("bytes"), py::arg("groups"),
           R"(Both sides of the flat-or-hierarchical choice for one size.

Args:
  op: collective name.
  bytes: buffer size as nccl-tests counts it.
  groups: list of rank lists run at once.

Returns {"flat": estimate, "hierarchical": estimate, "margin": m}: hierarchical is chosen where
its seconds x m are below flat's (m = 1.15 on groups priced with NCCL's algorithms).)")
      .def("hierarchical_thresholds",
           [](const PlannerCluster& c, const std::vector<int>& ranks) {
             return valueErrors([&] {
               py::dict out;
               for (const auto& t : topo::computeHierarchicalThresholds(c.model(), ranks)) {
                 py::list ranges;
                 for (const topo::SizeRange& r : t.ranges) {
                   ranges.append(py::make_tuple(
                       r.from, r.below < 0 ? py::object(py::none()) : py::object(py::int_(r.below))));
                 }
                 out[topo::toString(t.op)] = ranges;
               }
               return out;
             });
           },
           py::arg("ranks"),
           R"(Per op, the sizes at which hierarchical beats flat: a list of (from, below) byte
ranges, below None for no upper end (empty: never). Scanned in powers of two from 1 KiB to
16 GiB; a winning size s stands for [s, 2s), 1 KiB for [0, 2 KiB).

Args:
  ranks: global ranks of the group.)")
      .def("plan_mesh",
           [](const PlannerCluster& c, const std::vector<std::pair<std::string, int>>& mesh,
              std::optional<std::map<std::string, std::pair<double, std::string>>> traffic,
              bool contiguous) {
             return valueErrors([&] {
               auto [dims, options] = toDims(mesh, traffic, c.model().options().chunk_bytes);
               options.cost.model = c.model().options().model;
               MeshPlan plan;
               {
                 py::gil_scoped_release nogil;
                 plan = contiguous ? topo::contiguousMesh(c.cluster(), dims, options)
                                   : topo::planMesh(c.cluster(), dims, options);
               }
               return planToDict(plan);
             });
           },
           py::arg("mesh"), py::arg("traffic") = py::none(), py::arg("contiguous") = false,
           R"(Lays a device mesh out on the cluster's ranks.

Args:
  mesh: [(name, size)] outermost first.
  traffic: {name: (bytes per step, collective)} for every dimension, or None for defaults.
  contiguous: return the launcher's contiguous layout instead of searching.)")
      .def("mesh_cost",
           [](const PlannerCluster& c, const std::vector<std::tuple<std::string, int, double, std::string>>& dims,
              const std::vector<int>& mesh) {
             return valueErrors([&] {
               MeshPlan plan;
               int64_t product = 1;
               for (const auto& [name, size, bytes, op] : dims) {
                 TOPO_CHECK(size >= 1, "mesh_cost: dimension '", name, "': size got ", size,
                            ", expected >= 1");
                 plan.dims.push_back({name, size, checkedBytes("mesh_cost", name, bytes), op});
                 product *= size;
               }
               TOPO_CHECK(product == static_cast<int64_t>(mesh.size()), "mesh_cost: dims: product ",
                          product, ", expected the mesh's ", mesh.size(), " ranks");
               TOPO_CHECK(mesh.size() == c.cluster().ranks.size(), "mesh_cost: mesh: got ",
                          mesh.size(), " ranks, expected ", c.cluster().ranks.size());
               plan.mesh = mesh;
               std::vector<CostEstimate> costs;
               {
                 py::gil_scoped_release nogil;
                 costs = topo::estimateMeshCost(c.model(), plan);
               }
               py::list out;
               for (const auto& e : costs) out.append(estimateToDict(e));
               return out;
             });
           },
           py::arg("dims"), py::arg("mesh"),
           R"(Predicted seconds per step of every dimension of a laid-out mesh.

Args:
  dims: [(name, size, bytes, op)] outermost first.
  mesh: ranks in mesh shape, flattened row-major.)");
}

}  // namespace torch_topo::bindings
