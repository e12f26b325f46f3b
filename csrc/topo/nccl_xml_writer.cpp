// SPDX-License-Identifier: Apache-2.0
// NCCL topology XML writer (layer: csrc/topo): walks the PCI tree down from each CPU and emits
// the elements NCCL dumps; a node's source attributes are written verbatim, missing ones are
// derived from the graph (class from the node kind, link_speed/width from its uplink).
#include <tinyxml2.h>

#include <algorithm>
#include <cmath>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/link_tables.h"
#include "topo/nccl_xml.h"
#include "topo/text_numbers.h"

namespace torch_topo::topo {
namespace {

/// A link known by its rate only (hwloc's pci_link_speed) as the generation and width NCCL XML
/// needs: the table's closest, x16 first. Exact for every rate the hwloc reader matched to a
/// generation and width (it puts those on the table).
void nearestPcieLink(double gbps, int* gen, int* width) {
  int rows = 0;
  const PcieGeneration* table = pcieTable(&rows);
  double best = -1.0;
  for (int w : {16, 8, 4, 2, 1, 32}) {
    for (int r = 0; r < rows; ++r) {
      const double err = std::fabs(table[r].lane_gbps * w - gbps);
      if (best < 0.0 || err < best - 1e-9) {
        best = err;
        *gen = table[r].gen;
        *width = w;
      }
    }
  }
}

const char* defaultClass(NodeKind kind) {
  switch (kind) {
    case NodeKind::Gpu:
      return "0x030200";
    case NodeKind::Nic:
      return "0x020000";
    case NodeKind::NvSwitch:
      return "0x068000";
    default:
      return "0x060400";
  }
}

/// cpulist "0-23,48-71" -> NCCL affinity mask "000000ff,ff000000,00ffffff" (32-bit words,
/// most significant first).
std::string cpulistToMask(const std::string& cpus, const std::string& where) {
  std::vector<unsigned long> words(1, 0);
  for (int c : parseCpulist(cpus, where)) {
    if (words.size() <= static_cast<size_t>(c / 32)) words.resize(c / 32 + 1, 0);
    words[c / 32] |= 1UL << (c % 32);
  }
  std::string out;
  for (auto w = words.rbegin(); w != words.rend(); ++w) {
    if (!out.empty()) out += ",";
    out += formatHex(*w, 8);
  }
  return out;
}

/// TinyXML-2's printer with NCCL's two-space indent (the library indents by four).
class TwoSpacePrinter : public tinyxml2::XMLPrinter {
 protected:
  void PrintSpace(int depth) override {
    for (int i = 0; i < depth; ++i) Write("  ");
  }
};

class NcclXmlWriter {
 public:
  // Attributes are derived only for graphs from other sources: an NCCL file's element without
  // attributes is written back without them.
  explicit NcclXmlWriter(const HostTopology& host)
      : host_(host), graph_(host.graph), derive_(host.format != "nccl-xml") {}

  std::string write() {
    TOPO_CHECK(!graph_.nodesOfKind(NodeKind::Cpu).empty(), "topology '", host_.source,
               "' has no physical graph (CPU and PCI tree), expected one; path-only sources "
               "such as nvidia-smi text carry no PCI bus ids, so read an NCCL XML or hwloc file");
    tinyxml2::XMLDocument doc;
    tinyxml2::XMLElement* system = doc.NewElement("system");
    doc.InsertEndChild(system);
    system->SetAttribute("version", "1");
    visited_.assign(graph_.nodes.size(), false);
    for (int cpu : graph_.nodesOfKind(NodeKind::Cpu)) visited_[cpu] = true;
    for (int cpu : graph_.nodesOfKind(NodeKind::Cpu)) writeCpu(system, cpu);
    TwoSpacePrinter xml;
    doc.Print(&xml);
    return xml.CStr();
  }

 private:
  static void setAttrs(tinyxml2::XMLElement* el, const Node& node, const std::string& prefix) {
    for (const auto& kv : node.attrs) {
      bool match = prefix.empty() ? kv.first.find('.') == std::string::npos
                                  : kv.first.compare(0, prefix.size(), prefix) == 0;
      if (match && !el->Attribute(kv.first.c_str() + prefix.size())) {
        el->SetAttribute(kv.first.c_str() + prefix.size(), kv.second.c_str());
      }
    }
  }

  void writeCpu(tinyxml2::XMLElement* parent, int cpu) {
    const Node& node = graph_.nodes[cpu];
    tinyxml2::XMLElement* el = parent->InsertNewChildElement("cpu");
    el->SetAttribute("numaid", node.index);
    if (derive_) {
      for (const NumaNode& numa : host_.numa_nodes) {
        if (numa.id == node.index && !numa.cpus.empty()) {
          std::string where =
              "topology '" + host_.source + "': NUMA node " + std::to_string(numa.id) + " cpus";
          el->SetAttribute("affinity", cpulistToMask(numa.cpus, where).c_str());
        }
      }
    }
    setAttrs(el, node, "");
    writeChildren(el, cpu);
  }

  void writeChildren(tinyxml2::XMLElement* el, int node) {
    for (size_t l = 0; l < graph_.links.size(); ++l) {
      const Link& link = graph_.links[l];
      if (link.kind != LinkKind::Pci && link.kind != LinkKind::C2C) continue;
      int child = link.a == node ? link.b : (link.b == node ? link.a : -1);
      if (child < 0) continue;
      const Node& c = graph_.nodes[child];
      const Nic* bare = bareNic(c);
      // A NIC without a PCI device goes under every CPU that reaches it, as the reader takes it.
      if (visited_[child] && bare == nullptr) continue;
      visited_[child] = true;
      if (bare != nullptr) {
        writeNets(el->InsertNewChildElement("nic"), c.id, true);
      } else {
        writePci(el, child, link);
      }
    }
  }

  /// The NIC entry a graph node stands for when the NIC has no PCI device of its own.
  const Nic* bareNic(const Node& node) const {
    if (node.kind != NodeKind::Nic) return nullptr;
    for (const Nic& nic : host_.nics) {
      if (nic.bus_id.empty() && nic.name == node.id) return &nic;
    }
    return nullptr;
  }

  void writePci(tinyxml2::XMLElement* parent, int id, const Link& uplink) {
    const Node& node = graph_.nodes[id];
    tinyxml2::XMLElement* el = parent->InsertNewChildElement("pci");
    el->SetAttribute("busid", node.id.c_str());
    if (derive_) {
      el->SetAttribute("class", defaultClass(node.kind));
      int gen = 0, width = uplink.lanes;
      if (width > 0) {
        gen = pcieGenFromLaneGBps(uplink.bandwidth_gbps / width);
      } else if (uplink.bandwidth_gbps > 0) {
        nearestPcieLink(uplink.bandwidth_gbps, &gen, &width);
      }
      el->SetAttribute("link_speed", gen > 0 ? pcieSpeedString(gen).c_str() : "");
      el->SetAttribute("link_width", width);
    }
    setAttrs(el, node, "");
    if (node.kind == NodeKind::Gpu) writeGpu(el, id);
    if (node.kind == NodeKind::Nic) writeNets(el, node.id, false);
    writeChildren(el, id);
  }

  void writeGpu(tinyxml2::XMLElement* pci, int id) {
    const Node& node = graph_.nodes[id];
    const Gpu* gpu = nullptr;
    for (const Gpu& g : host_.gpus) {
      if (g.bus_id == node.id) gpu = &g;
    }
    bool has_gpu_attrs = std::any_of(node.attrs.begin(), node.attrs.end(),
                                     [](const auto& kv) { return kv.first.rfind("gpu.", 0) == 0; });
    std::vector<const Link*> nvlinks, c2c;
    for (const Link& l : graph_.links) {
      if (l.a != id && l.b != id) continue;
      if (l.kind == LinkKind::NvLink) nvlinks.push_back(&l);
      if (l.kind == LinkKind::C2C && l.lanes > 0) c2c.push_back(&l);
    }
    // Without any of these NCCL fills the <gpu> element itself at run time, so none is written.
    if (!has_gpu_attrs && nvlinks.empty() && c2c.empty() && (gpu == nullptr || gpu->sm <= 0)) {
      return;
    }
    tinyxml2::XMLElement* el = pci->InsertNewChildElement("gpu");
    el->SetAttribute("dev", node.index);
    if (gpu != nullptr && gpu->sm > 0) el->SetAttribute("sm", gpu->sm);
    setAttrs(el, node, "gpu.");
    for (const Link* l : nvlinks) {
      const Node& other = graph_.nodes[l->a == id ? l->b : l->a];
      // NVLink to a CPU (POWER8/9, from hwloc or NVML) has no PCI bus id to name as a target;
      // NCCL finds those links at run time, so the file leaves them out.
      if (other.kind != NodeKind::Gpu && other.kind != NodeKind::NvSwitch) continue;
      tinyxml2::XMLElement* nv = el->InsertNewChildElement("nvlink");
      nv->SetAttribute("target", other.id.c_str());
      nv->SetAttribute("count", l->lanes);
      nv->SetAttribute("tclass", other.kind == NodeKind::NvSwitch ? defaultClass(NodeKind::NvSwitch)
                                                                  : "0x030200");
    }
    for (const Link* l : c2c) {
      // NCCL's form: MB/s per link and the link count (it rates the whole as bw * count / 1000).
      tinyxml2::XMLElement* c = el->InsertNewChildElement("c2c");
      const double link_mbps = l->bandwidth_gbps * 1000.0 / l->lanes;
      c->SetAttribute("bw", static_cast<int64_t>(std::llround(link_mbps)));
      c->SetAttribute("count", l->lanes);
    }
  }

  void writeNets(tinyxml2::XMLElement* parent, const std::string& key, bool bare) {
    tinyxml2::XMLElement* nic_el = nullptr;
    for (const Nic& nic : host_.nics) {
      bool mine =
          bare ? (nic.bus_id.empty() && nic.name == key) : (nic.bus_id == key && nic.name != key);
      if (!mine) continue;
      if (!nic_el) nic_el = bare ? parent : parent->InsertNewChildElement("nic");
      tinyxml2::XMLElement* net = nic_el->InsertNewChildElement("net");
      net->SetAttribute("name", nic.name.c_str());
      // NCCL writes speed in Mbit/s and latency in us as "%f" does; the model's values win over
      // stale source ones (a file's latency="0.0" where the NIC has since been given its
      // plugin's figure).
      std::string speed = std::to_string(static_cast<long long>(nic.speed_gbps * 1000.0 + 0.5));
      std::string latency = formatFixed(nic.latency_us, 6);
      for (const auto& kv : nic.attrs) {
        bool is_speed = kv.first == "speed" && nic.speed_gbps > 0;
        bool is_latency = kv.first == "latency" && nic.latency_us > 0;
        net->SetAttribute(kv.first.c_str(), is_speed     ? speed.c_str()
                                            : is_latency ? latency.c_str()
                                                         : kv.second.c_str());
      }
      if (nic.speed_gbps > 0 && !net->Attribute("speed")) {
        net->SetAttribute("speed", speed.c_str());
      }
      if (nic.latency_us > 0 && !net->Attribute("latency")) {
        net->SetAttribute("latency", latency.c_str());
      }
    }
  }

  const HostTopology& host_;
  const Graph& graph_;
  bool derive_;
  std::vector<bool> visited_;
};

}  // namespace

std::string writeNcclXml(const HostTopology& host) { return NcclXmlWriter(host).write(); }

}  // namespace torch_topo::topo
