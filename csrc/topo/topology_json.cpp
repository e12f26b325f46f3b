// SPDX-License-Identifier: Apache-2.0
// torch-topo JSON (layer: csrc/topo). Attribute lists are arrays of [key, value] pairs so
// their order survives (JSON objects are unordered, and writers reproduce source order).
#include "topo/topology_json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/json.h"
#include "topo/paths.h"
#include "topo/sysfs_probe.h"

namespace torch_topo::topo {
namespace {

using nlohmann::json;
using Attrs = std::vector<std::pair<std::string, std::string>>;

constexpr long kMaxCount = 1 << 20;  // list sizes, indices and lanes beyond this are corrupt

json attrsJson(const Attrs& attrs) {
  json out = json::array();
  for (const auto& kv : attrs) out.push_back({kv.first, kv.second});
  return out;
}

json pathJson(const PathInfo& p) {
  return {{"cls", toString(p.cls)},
          {"nvlinks", p.nvlinks},
          {"bandwidth_gbps", p.bandwidth_gbps},
          {"latency_us", p.latency_us}};
}

json matrixJson(const std::vector<PathInfo>& paths, size_t rows, size_t cols) {
  json out = json::array();
  for (size_t i = 0; i < rows; ++i) {
    json row = json::array();
    for (size_t j = 0; j < cols; ++j) row.push_back(pathJson(paths[i * cols + j]));
    out.push_back(row);
  }
  return out;
}

json hostJson(const HostTopology& h) {
  json gpus = json::array(), nics = json::array(), numa = json::array();
  for (const Gpu& g : h.gpus) {
    gpus.push_back({{"index", g.index},
                    {"bus_id", g.bus_id},
                    {"name", g.name},
                    {"sm", g.sm},
                    {"numa_node", g.numa_node},
                    {"cpu_affinity", g.cpu_affinity},
                    {"memory_numa_node", g.memory_numa_node}});
    // Written only where set: most hosts have no multi-node NVLink, and their documents stay
    // as they were.
    if (!g.nvlink_domain.empty()) gpus.back()["nvlink_domain"] = g.nvlink_domain;
  }
  for (const Nic& n : h.nics) {
    nics.push_back({{"name", n.name},
                    {"bus_id", n.bus_id},
                    {"numa_node", n.numa_node},
                    {"speed_gbps", n.speed_gbps},
                    {"attrs", attrsJson(n.attrs)}});
    if (n.latency_us > 0) nics.back()["latency_us"] = n.latency_us;
  }
  for (const NumaNode& n : h.numa_nodes) numa.push_back({{"id", n.id}, {"cpus", n.cpus}});
  json nodes = json::array(), links = json::array();
  for (const Node& n : h.graph.nodes) {
    nodes.push_back({{"kind", toString(n.kind)},
                     {"id", n.id},
                     {"name", n.name},
                     {"numa_node", n.numa_node},
                     {"index", n.index},
                     {"attrs", attrsJson(n.attrs)}});
  }
  for (const Link& l : h.graph.links) {
    links.push_back({{"a", l.a},
                     {"b", l.b},
                     {"kind", toString(l.kind)},
                     {"lanes", l.lanes},
                     {"bandwidth_gbps", l.bandwidth_gbps},
                     {"latency_us", l.latency_us}});
  }
  json out = {{"hostname", h.hostname},
              {"source", h.source},
              {"format", h.format},
              {"gpus", gpus},
              {"nics", nics},
              {"numa_nodes", numa},
              {"graph", {{"nodes", nodes}, {"links", links}}},
              {"warnings", h.warnings}};
  // A source that gave no full matrix (no NIC columns, missing rows) leaves it out; the
  // reader then derives it from the graph or marks the cells unknown, as for the source.
  if (h.gpu_paths.size() == h.gpus.size() * h.gpus.size()) {
    out["gpu_paths"] = matrixJson(h.gpu_paths, h.gpus.size(), h.gpus.size());
  }
  if (h.gpu_nic_paths.size() == h.gpus.size() * h.nics.size()) {
    out["gpu_nic_paths"] = matrixJson(h.gpu_nic_paths, h.gpus.size(), h.nics.size());
  }
  return out;
}

/// Levenshtein distance, for the unknown-field hint.
size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// Typed field access that reports the field path, and the line and column of its value in
/// `text`, on error.
class Reader {
 public:
  Reader(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  /// `value` is the value the field path names, or the object that lacks it.
  [[noreturn]] void fail(const json& value, const std::string& where,
                         const std::string& what) const {
    const auto [line, col] = jsonLineColumn(text_, value);
    throw ParseError(path_, line, col, "field " + where + ": " + what);
  }

  const json* find(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object())
      fail(obj, where, "got " + std::string(obj.type_name()) + ", expected an object");
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  /// Refuses a key of `obj` outside `known`: this schema is ours and its writer emits no other,
  /// so an unknown key is a misspelling whose value would otherwise be dropped unseen (a
  /// "numa_nod" left every GPU on an unknown node).
  void onlyKeys(const json& obj, std::initializer_list<const char*> known,
                const std::string& where) const {
    if (!obj.is_object()) return;  // the typed accessors name the wrong type
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string& key = it.key();
      if (std::any_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
        continue;
      // The message is built only for a refused key: every host of a cluster exchange passes
      // here for each of its objects and path cells.
      std::string names, closest;
      size_t best = 3;  // suggest a key within two edits
      for (const char* k : known) {
        names += (names.empty() ? "" : ", ") + std::string(k);
        const size_t d = editDistance(key, k);
        if (d < best) {
          best = d;
          closest = k;
        }
      }
      fail(it.value(), where + "." + key,
           "unknown field" + (closest.empty() ? "" : " (did you mean '" + closest + "'?)") +
               ", expected one of " + names);
    }
  }

  /// Where an error about field `key` of `obj` points: its value, else `obj`.
  const json& at(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? obj : *it;
  }

  std::string str(const json& obj, const char* key, const std::string& where,
                  const std::string& fallback = "") const {
    const json* v = find(obj, key, where);
    if (v == nullptr) return fallback;
    if (!v->is_string())
      fail(*v, where + "." + key, "got " + std::string(v->type_name()) + ", expected a string");
    return v->get<std::string>();
  }

  long integer(const json& obj, const char* key, const std::string& where, long fallback,
               long lo = -1, long hi = kMaxCount) const {
    const json* v = find(obj, key, where);
    if (v == nullptr) return fallback;
    if (!v->is_number_integer())
      fail(*v, where + "." + key, "got " + v->dump().substr(0, 40) + ", expected an integer");
    // An unsigned value past LLONG_MAX would wrap in get<long long>(): it is out of range
    // whatever the bounds, and the message quotes the file's text, not the wrapped number.
    const bool too_big = v->is_number_unsigned() &&
                         v->get<unsigned long long>() > static_cast<unsigned long long>(hi);
    long long x = too_big ? hi : v->get<long long>();
    if (too_big || x < lo || x > hi)
      fail(*v, where + "." + key, "got " + v->dump() + ", expected an integer in [" +
                                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<long>(x);
  }

  double number(const json& obj, const char* key, const std::string& where, double fallback) const {
    const json* v = find(obj, key, where);
    if (v == nullptr) return fallback;
    if (!v->is_number())
      fail(*v, where + "." + key, "got " + v->dump().substr(0, 40) + ", expected a number");
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0)
      fail(*v, where + "." + key, "got " + v->dump() + ", expected a finite number >= 0");
    return x;
  }

  /// A bandwidth (GB/s) or latency (us): 0 means unknown, anything else must be a rate or delay
  /// of a real (or emulated) link. 1e-300 GB/s would price a message at infinite seconds and
  /// 1e300 at none, and every comparison between plans would then be decided by the typo.
  double rate(const json& obj, const char* key, const std::string& where) const {
    constexpr double kLo = 1e-6, kHi = 1e6;  // 1 kB/s .. 1 PB/s; 1 ps .. 1 s of latency
    const double x = number(obj, key, where, 0.0);
    if (x != 0 && (x < kLo || x > kHi)) {
      const json& v = at(obj, key);
      fail(v, where + "." + key,
           "got " + v.dump() + ", expected 0 (unknown) or a value in [1e-06, 1e+06]");
    }
    return x;
  }

  /// A cpulist field: checked here, where the field is known, rather than by the NUMA binding
  /// or the NCCL XML writer long after the file was read.
  std::string cpulist(const json& obj, const char* key, const std::string& where) const {
    const std::string text = str(obj, key, where);
    const CpulistScan scan = scanCpulist(text);
    if (!scan.problem.empty()) {
      fail(at(obj, key), where + "." + key,
           "got '" + text + "': " + scan.problem + ", expected a cpulist such as \"0-3,8\"");
    }
    return text;
  }

  /// A GPU's or NIC's PCI address, empty when unknown: the live probe and NVLink completion
  /// match devices by it, so it has the form every other reader checks (hwloc's, of any domain
  /// width) rather than any text.
  std::string busId(const json& obj, const std::string& where) const {
    const std::string text = str(obj, "bus_id", where);
    if (!text.empty() && !isPciBusId(text, 8)) {
      fail(at(obj, "bus_id"), where + ".bus_id",
           "got '" + text +
               "', expected \"\" (unknown) or a PCI bus id in lower-case hex such as 0000:07:00.0");
    }
    return text;
  }

  const json& array(const json& obj, const char* key, const std::string& where) const {
    static const json kEmpty = json::array();
    const json* v = find(obj, key, where);
    if (v == nullptr) return kEmpty;
    if (!v->is_array())
      fail(*v, where + "." + key, "got " + std::string(v->type_name()) + ", expected an array");
    if (v->size() > static_cast<size_t>(kMaxCount)) fail(*v, where + "." + key, "too many entries");
    return *v;
  }

  Attrs attrs(const json& obj, const std::string& where) const {
    Attrs out;
    const json& list = array(obj, "attrs", where);
    for (size_t i = 0; i < list.size(); ++i) {
      const json& kv = list[i];
      if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_string()) {
        fail(kv, where + ".attrs[" + std::to_string(i) + "]",
             "expected a [key, value] pair of strings");
      }
      out.emplace_back(kv[0].get<std::string>(), kv[1].get<std::string>());
    }
    return out;
  }

  /// The "kind" field of `obj`, one of `values`.
  template <typename Enum, size_t N>
  Enum kind(const json& obj, const Enum (&values)[N], const std::string& where) const {
    const std::string text = str(obj, "kind", where);
    std::string names;
    for (Enum e : values) {
      if (text == toString(e)) return e;
      names += (names.empty() ? "" : ", ") + std::string(toString(e));
    }
    fail(at(obj, "kind"), where + ".kind", "got '" + text + "', expected one of " + names);
  }

  PathInfo path(const json& cell, const std::string& where, bool* estimated) const {
    PathInfo p;
    int lanes = 0;
    if (cell.is_string()) {
      if (!parsePathClass(cell.get<std::string>(), &p.cls, &lanes) ||
          (p.cls == PathClass::NV && lanes == 0))
        fail(cell, where, "got '" + cell.get<std::string>() +
                              "', expected a path class such as NV12, PIX or SYS");
      p.nvlinks = lanes;
      *estimated = true;
      return p;
    }
    onlyKeys(cell, {"cls", "nvlinks", "bandwidth_gbps", "latency_us"}, where);
    std::string cls = str(cell, "cls", where, "SYS");
    if (!parsePathClass(cls, &p.cls, &lanes))
      fail(at(cell, "cls"), where + ".cls",
           "got '" + cls + "', expected X, NV, PIX, PXB, PHB, NODE, SYS or NET");
    p.nvlinks = static_cast<int>(integer(cell, "nvlinks", where, lanes, 0, kMaxNvlinkLanes));
    // NV without a lane would be priced as an NVLink of no bandwidth by some stages and as PCIe
    // by others; lanes on another class would be counted into NVLink cliques.
    if ((p.cls == PathClass::NV) != (p.nvlinks > 0)) {
      fail(cell, where, "got cls " + cls + " with nvlinks " + std::to_string(p.nvlinks) +
                            ", expected nvlinks >= 1 for NV and 0 for any other class");
    }
    p.bandwidth_gbps = rate(cell, "bandwidth_gbps", where);
    p.latency_us = rate(cell, "latency_us", where);
    return p;
  }

  std::vector<PathInfo> matrix(const json& obj, const char* key, const std::string& where,
                               size_t rows, size_t cols, bool* present, bool* estimated) const {
    const json& m = array(obj, key, where);
    *present = find(obj, key, where) != nullptr;
    std::vector<PathInfo> out;
    if (!*present) return out;
    std::string w = where + "." + key;
    if (m.size() != rows)
      fail(m, w, "got " + std::to_string(m.size()) + " rows, expected " + std::to_string(rows));
    for (size_t i = 0; i < rows; ++i) {
      if (!m[i].is_array() || m[i].size() != cols)
        fail(m[i], w + "[" + std::to_string(i) + "]",
             "expected an array of " + std::to_string(cols) + " cells");
      for (size_t j = 0; j < cols; ++j)
        out.push_back(
            path(m[i][j], w + "[" + std::to_string(i) + "][" + std::to_string(j) + "]", estimated));
    }
    return out;
  }

  HostTopology host(const json& obj, const std::string& where) const;

 private:
  std::string path_;
  const std::string& text_;
};

/// A path cell as the pair-agreement error quotes it.
std::string describe(const PathInfo& p) {
  return std::string(toString(p.cls)) + " with " + std::to_string(p.nvlinks) + " NVLinks, " +
         json(p.bandwidth_gbps).dump() + " GB/s, " + json(p.latency_us).dump() + " us";
}

HostTopology Reader::host(const json& obj, const std::string& where) const {
  static const NodeKind kNodeKinds[] = {NodeKind::Host, NodeKind::Cpu, NodeKind::PciSwitch,
                                        NodeKind::Gpu,  NodeKind::Nic, NodeKind::NvSwitch};
  static const LinkKind kLinkKinds[] = {LinkKind::NvLink, LinkKind::C2C, LinkKind::Pci,
                                        LinkKind::Smp, LinkKind::Net};
  // "schema" and "kind" belong to a host document; a cluster's host entry may keep them.
  onlyKeys(obj,
           {"schema", "kind", "hostname", "source", "format", "gpus", "nics", "numa_nodes", "graph",
            "warnings", "gpu_paths", "gpu_nic_paths"},
           where);
  HostTopology h;
  h.hostname = str(obj, "hostname", where);
  h.source = str(obj, "source", where);
  h.format = str(obj, "format", where);
  const json& gpus = array(obj, "gpus", where);
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::string w = where + ".gpus[" + std::to_string(i) + "]";
    onlyKeys(gpus[i],
             {"index", "bus_id", "name", "sm", "numa_node", "cpu_affinity", "memory_numa_node",
              "nvlink_domain"},
             w);
    Gpu g;
    g.index = static_cast<int>(integer(gpus[i], "index", w, static_cast<long>(i), 0, 4095));
    g.bus_id = busId(gpus[i], w);
    g.name = str(gpus[i], "name", w);
    g.sm = static_cast<int>(integer(gpus[i], "sm", w, 0, 0, 10000));
    g.numa_node = static_cast<int>(integer(gpus[i], "numa_node", w, -1, -1, 4095));
    g.cpu_affinity = cpulist(gpus[i], "cpu_affinity", w);
    g.memory_numa_node = static_cast<int>(integer(gpus[i], "memory_numa_node", w, -1, -1, 4095));
    g.nvlink_domain = str(gpus[i], "nvlink_domain", w);
    // Two GPUs with one index or bus id would make ranks, play entries and the live probe's
    // bus-id matching pick one of them silently.
    for (size_t k = 0; k < h.gpus.size(); ++k) {
      const std::string other = where + ".gpus[" + std::to_string(k) + "]";
      if (h.gpus[k].index == g.index)
        fail(at(gpus[i], "index"), w + ".index",
             "got " + std::to_string(g.index) + ", the index of " + other +
                 ", expected a distinct index per GPU");
      if (!g.bus_id.empty() && h.gpus[k].bus_id == g.bus_id)
        fail(at(gpus[i], "bus_id"), w + ".bus_id",
             "got '" + g.bus_id + "', the bus id of " + other +
                 ", expected a distinct bus id per GPU");
    }
    h.gpus.push_back(g);
  }
  const json& nics = array(obj, "nics", where);
  for (size_t i = 0; i < nics.size(); ++i) {
    std::string w = where + ".nics[" + std::to_string(i) + "]";
    onlyKeys(nics[i], {"name", "bus_id", "numa_node", "speed_gbps", "latency_us", "attrs"}, w);
    Nic n;
    n.name = str(nics[i], "name", w);
    n.bus_id = busId(nics[i], w);
    n.numa_node = static_cast<int>(integer(nics[i], "numa_node", w, -1, -1, 4095));
    n.speed_gbps = rate(nics[i], "speed_gbps", w);
    n.latency_us = rate(nics[i], "latency_us", w);
    n.attrs = attrs(nics[i], w);
    h.nics.push_back(n);
  }
  const json& numa = array(obj, "numa_nodes", where);
  for (size_t i = 0; i < numa.size(); ++i) {
    std::string w = where + ".numa_nodes[" + std::to_string(i) + "]";
    onlyKeys(numa[i], {"id", "cpus"}, w);
    // An entry stands for one node, so unlike a device's numa_node its id has no "unknown":
    // the fallback, below the bounds, marks it missing (as a rank's host).
    int id = static_cast<int>(integer(numa[i], "id", w, -1, 0, 4095));
    if (id < 0) fail(numa[i], w + ".id", "missing, expected the NUMA node's id (0 to 4095)");
    for (const NumaNode& seen : h.numa_nodes) {
      if (seen.id == id)
        fail(at(numa[i], "id"), w + ".id",
             "got " + std::to_string(id) + " twice, expected one entry per NUMA node");
    }
    h.numa_nodes.push_back({id, cpulist(numa[i], "cpus", w)});
  }
  // A device on a node the host does not list would get no CPUs to bind to while the planner
  // still groups ranks by that node.
  auto checkNode = [&](const json& device, int node, const std::string& field) {
    if (node < 0) return;
    std::string listed;
    for (const NumaNode& known : h.numa_nodes) {
      if (known.id == node) return;
      listed += (listed.empty() ? "" : ", ") + std::to_string(known.id);
    }
    fail(at(device, "numa_node"), field,
         "got " + std::to_string(node) +
             ", expected -1 (unknown) or the id of an entry of numa_nodes (" +
             (listed.empty() ? "none listed" : listed) + ")");
  };
  for (size_t i = 0; i < h.gpus.size(); ++i)
    checkNode(gpus[i], h.gpus[i].numa_node, where + ".gpus[" + std::to_string(i) + "].numa_node");
  for (size_t i = 0; i < h.nics.size(); ++i)
    checkNode(nics[i], h.nics[i].numa_node, where + ".nics[" + std::to_string(i) + "].numa_node");
  static const json kNoGraph = json::object();
  const json* graph = find(obj, "graph", where);
  const json& g = graph != nullptr ? *graph : kNoGraph;
  onlyKeys(g, {"nodes", "links"}, where + ".graph");
  const json& nodes = array(g, "nodes", where + ".graph");
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string w = where + ".graph.nodes[" + std::to_string(i) + "]";
    onlyKeys(nodes[i], {"kind", "id", "name", "numa_node", "index", "attrs"}, w);
    Node n;
    n.kind = kind(nodes[i], kNodeKinds, w);
    n.id = str(nodes[i], "id", w);
    n.name = str(nodes[i], "name", w);
    n.numa_node = static_cast<int>(integer(nodes[i], "numa_node", w, -1, -1, 4095));
    n.index = static_cast<int>(integer(nodes[i], "index", w, -1, -1, kMaxCount));
    n.attrs = attrs(nodes[i], w);
    h.graph.nodes.push_back(n);
  }
  const json& links = array(g, "links", where + ".graph");
  for (size_t i = 0; i < links.size(); ++i) {
    std::string w = where + ".graph.links[" + std::to_string(i) + "]";
    long last = static_cast<long>(h.graph.nodes.size()) - 1;
    onlyKeys(links[i], {"a", "b", "kind", "lanes", "bandwidth_gbps", "latency_us"}, w);
    Link l;
    l.a = static_cast<int>(integer(links[i], "a", w, -2, 0, last));
    l.b = static_cast<int>(integer(links[i], "b", w, -2, 0, last));
    if (l.a < 0 || l.b < 0) fail(links[i], w, "expected node indices a and b");
    l.kind = kind(links[i], kLinkKinds, w);
    l.lanes = static_cast<int>(integer(links[i], "lanes", w, 0, 0, 4096));
    l.bandwidth_gbps = rate(links[i], "bandwidth_gbps", w);
    l.latency_us = rate(links[i], "latency_us", w);
    h.graph.links.push_back(l);
  }
  const json& warnings = array(obj, "warnings", where);
  for (size_t i = 0; i < warnings.size(); ++i) {
    if (!warnings[i].is_string())
      fail(warnings[i], where + ".warnings[" + std::to_string(i) + "]", "expected a string");
    h.warnings.push_back(warnings[i].get<std::string>());
  }
  bool present = false, estimated = false;
  h.gpu_paths = matrix(obj, "gpu_paths", where, h.gpus.size(), h.gpus.size(), &present, &estimated);
  // Readers write X on the diagonal only and symmetric cells; the planner and cost model read
  // one triangle or the other, so a hand edit breaking either gave answers that depended on
  // rank order instead of an error. A class string leaves bandwidth and latency at 0 (unknown,
  // estimated later), so it disagrees with a cell that states them.
  const size_t n = h.gpus.size();
  for (size_t i = 0; present && i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const PathInfo& p = h.gpu_paths[i * n + j];
      const PathInfo& q = h.gpu_paths[j * n + i];
      const json& cell = at(obj, "gpu_paths")[i][j];
      const std::string field = where + ".gpu_paths[" + std::to_string(i) + "][" +
                                std::to_string(j) + "]";
      if ((i == j) != (p.cls == PathClass::X))
        fail(cell, field,
             "got " + std::string(toString(p.cls)) +
                 (i == j ? ", expected X (a GPU's path to itself)"
                         : ", expected a class other than X between two GPUs"));
      if (j > i && (p.cls != q.cls || p.nvlinks != q.nvlinks ||
                    p.bandwidth_gbps != q.bandwidth_gbps || p.latency_us != q.latency_us))
        fail(cell, field,
             "got " + describe(p) + ", but gpu_paths[" + std::to_string(j) + "][" +
                 std::to_string(i) + "] has " + describe(q) + ", expected the same both ways");
    }
  }
  bool nic_present = false;
  h.gpu_nic_paths =
      matrix(obj, "gpu_nic_paths", where, h.gpus.size(), h.nics.size(), &nic_present, &estimated);
  if (!present && !h.graph.nodes.empty()) {
    try {
      computePaths(&h);
    } catch (const InvalidArgument& e) {
      fail(g, where + ".graph", e.what());
    }
    return h;
  }
  if (!present) {
    for (size_t i = 0; i < h.gpus.size(); ++i) {
      for (size_t j = 0; j < h.gpus.size(); ++j) {
        PathInfo p;
        p.cls = i == j ? PathClass::X : PathClass::SYS;
        h.gpu_paths.push_back(p);
      }
    }
    // The estimate's note names only the rates; the classes are this guess, and the planner
    // treats such a host as one with no fast pair.
    if (h.gpus.size() > 1)
      h.warnings.push_back(
          "no gpu_paths and no graph: every GPU pair taken as SYS (across the CPU sockets)");
    estimated = true;
  }
  if (!nic_present) h.gpu_nic_paths.assign(h.gpus.size() * h.nics.size(), PathInfo{});
  if (!estimated) return h;
  // Estimation prices every cell from its class; a number a cell states (an object beside
  // class strings) is the file's and stays.
  const std::vector<PathInfo> gpu_stated = h.gpu_paths, nic_stated = h.gpu_nic_paths;
  estimatePathMetrics(&h);
  auto keepStated = [](const std::vector<PathInfo>& stated, std::vector<PathInfo>* paths) {
    for (size_t k = 0; k < stated.size(); ++k) {
      if (stated[k].bandwidth_gbps > 0) (*paths)[k].bandwidth_gbps = stated[k].bandwidth_gbps;
      if (stated[k].latency_us > 0) (*paths)[k].latency_us = stated[k].latency_us;
    }
  };
  keepStated(gpu_stated, &h.gpu_paths);
  keepStated(nic_stated, &h.gpu_nic_paths);
  return h;
}

json parseDocument(const std::string& text, const std::string& path, const char* want) {
  json doc = parseJson(text, path);
  Reader r(path, text);
  std::string schema = r.str(doc, "schema", "(root)");
  if (schema != kTopologyJsonSchema) {
    r.fail(r.at(doc, "schema"), "schema",
           "got '" + schema + "', expected '" + kTopologyJsonSchema + "'");
  }
  if (r.find(doc, "kind", "(root)") == nullptr)
    r.fail(doc, "kind",
           std::string("missing, expected '") + want + "' (\"kind\": \"" + want + "\")");
  std::string kind = r.str(doc, "kind", "(root)");
  if (kind != want)
    r.fail(r.at(doc, "kind"), "kind", "got '" + kind + "', expected '" + want + "'");
  return doc;
}

std::string dump(json doc, int indent) { return doc.dump(indent); }

}  // namespace

std::string hostToJson(const HostTopology& host, int indent) {
  json doc = {{"schema", kTopologyJsonSchema}, {"kind", "host"}};
  doc.update(hostJson(host));
  return dump(doc, indent);
}

HostTopology hostFromJson(const std::string& text, const std::string& path) {
  return Reader(path, text).host(parseDocument(text, path, "host"), "(root)");
}

std::string clusterToJson(const ClusterTopology& c, int indent) {
  json hosts = json::array(), ranks = json::array();
  for (const HostTopology& h : c.hosts) hosts.push_back(hostJson(h));
  for (const RankPlacement& r : c.ranks) {
    ranks.push_back({{"host", r.host}, {"local_gpu", r.local_gpu}, {"local_rank", r.local_rank}});
  }
  json doc = {{"schema", kTopologyJsonSchema},
              {"kind", "cluster"},
              {"hosts", hosts},
              {"ranks", ranks},
              {"inter_host_bandwidth_gbps", c.inter_host_bandwidth_gbps},
              {"inter_host_latency_us", c.inter_host_latency_us}};
  return dump(doc, indent);
}

ClusterTopology clusterFromJson(const std::string& text, const std::string& path) {
  json doc = parseDocument(text, path, "cluster");
  Reader r(path, text);
  r.onlyKeys(
      doc,
      {"schema", "kind", "hosts", "ranks", "inter_host_bandwidth_gbps", "inter_host_latency_us"},
      "(root)");
  ClusterTopology c;
  const json& hosts = r.array(doc, "hosts", "(root)");
  // Else an empty cluster reached the planner, and some callers indexed its first host.
  if (hosts.empty()) r.fail(r.at(doc, "hosts"), "hosts", "got none, expected at least one host");
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string w = "hosts[" + std::to_string(i) + "]";
    // A whole document pasted as a host read as a host without GPUs, and the error fell on
    // the first rank placed on it. A host document pasted as an entry keeps its kind and
    // schema, which must then be a host's.
    for (const auto& [key, want] :
         {std::pair<const char*, const char*>{"kind", "host"}, {"schema", kTopologyJsonSchema}}) {
      const std::string got = r.str(hosts[i], key, w, want);
      if (got != want)
        r.fail(r.at(hosts[i], key), w + "." + key,
               "got '" + got + "', expected '" + want + "' or none");
    }
    c.hosts.push_back(r.host(hosts[i], w));
  }
  const json& ranks = r.array(doc, "ranks", "(root)");
  // Rank index holding each GPU of each host: two ranks on one GPU is a misconfigured launch,
  // refused here as live assembly (assembleCluster) refuses it.
  std::vector<std::vector<long>> gpu_owner(c.hosts.size());
  for (size_t h = 0; h < c.hosts.size(); ++h) gpu_owner[h].assign(c.hosts[h].gpus.size(), -1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::string w = "ranks[" + std::to_string(i) + "]";
    r.onlyKeys(ranks[i], {"host", "local_gpu", "local_rank"}, w);
    RankPlacement p;
    p.host = static_cast<int>(
        r.integer(ranks[i], "host", w, -2, 0, static_cast<long>(c.hosts.size()) - 1));
    if (p.host < 0) r.fail(ranks[i], w + ".host", "missing, expected a host index");
    long gpus = static_cast<long>(c.hosts[p.host].gpus.size());
    p.local_gpu = static_cast<int>(r.integer(ranks[i], "local_gpu", w, -1, -1, gpus - 1));
    p.local_rank = static_cast<int>(r.integer(ranks[i], "local_rank", w, -1, -1, kMaxCount));
    if (p.local_gpu >= 0) {
      long& owner = gpu_owner[p.host][p.local_gpu];
      if (owner >= 0) {
        r.fail(r.at(ranks[i], "local_gpu"), w + ".local_gpu",
               "ranks[" + std::to_string(owner) + "] and " + w + " on host " +
                   std::to_string(p.host) + " both claim GPU " + std::to_string(p.local_gpu) +
                   ", expected one rank per GPU");
      }
      owner = static_cast<long>(i);
    }
    c.ranks.push_back(p);
  }
  c.inter_host_bandwidth_gbps = r.rate(doc, "inter_host_bandwidth_gbps", "(root)");
  c.inter_host_latency_us = r.rate(doc, "inter_host_latency_us", "(root)");
  return c;
}

std::string topologyJsonKind(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return "";
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string() ||
      schema->get<std::string>().rfind("torch-topo/", 0) != 0) {
    return "";
  }
  auto kind = doc.find("kind");
  return kind != doc.end() && kind->is_string() ? kind->get<std::string>() : "";
}

}  // namespace torch_topo::topo
