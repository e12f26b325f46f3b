// SPDX-License-Identifier: Apache-2.0
// NCCL topology XML reader and writer (layer: csrc/topo). Elements and attribute formats follow
// what NCCL's src/graph/xml.cc dumps and reads; attributes we do not model are kept verbatim
// on the graph nodes so that a file we read is written back with them.
#include "topo/nccl_xml.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>

#include "topo/error.h"
#include "topo/link_tables.h"
#include "topo/paths.h"
#include "topo/sysfs_probe.h"
#include "topo/text_numbers.h"
#include "topo/xml_document.h"

namespace torch_topo::topo {
namespace {

using Attrs = std::vector<std::pair<std::string, std::string>>;

constexpr int kMaxIndex = 4095;         // dev, numaid, rank: above any real host
constexpr long kMaxC2cLinkMBps = 1000000;  // per C2C link; Grace's are ~45000
constexpr double kMaxNetMbps = 1e7;     // 10 Tbit/s per port
constexpr double kMaxNetLatencyUs = 1e6;  // a second: beyond it no plugin reports a real network
constexpr size_t kMaxMaskWords = 1024;  // 32768 CPUs
const char* const kNvswitchClass = "0x068000";
const char* const kGpuClass = "0x030200";
// NCCL's class for an NVLink whose far end is the CPU (POWER9's NVLink to the host, tclass
// of the NPU): kvDictPciClass in NCCL's topo.cc maps it to CPU, and ncclTopoAddNvLinks then
// links the GPU to its own CPU, whatever the target bus id says.
const char* const kNvlinkCpuClass = "0x068001";

struct Pending {
  int gpu_node;
  std::string target;
  int count;
  bool to_cpu;
};

/// A `<c2c bw count>` of a GPU: `count` chip-to-chip links of `bw` MB/s each to its own CPU.
struct PendingC2c {
  int gpu_node;
  int count;
  long link_mbps;
};

bool isHexString(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Sort key of a PCI bus id "dddd:bb:dd.f" (hex fields); unparsable ids sort last by text.
std::vector<long long> busKey(const std::string& id) {
  std::vector<long long> key;
  std::string field;
  for (char c : id + ":") {
    if (c == ':' || c == '.') {
      key.push_back(isHexString(field) && field.size() <= 8 ? parseInteger(field, 16).value
                                                             : 0x7fffffff);
      field.clear();
    } else {
      field += c;
    }
  }
  return key;
}

class NcclXmlReader {
 public:
  NcclXmlReader(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  HostTopology read() {
    doc_ = std::make_unique<XmlDocument>(text_, path_, true);
    if (doc_->truncated()) {
      host_.warnings.push_back(
          "file ends before its closing tags (cut short?): kept the elements read so far");
    }
    const XmlElement* root = doc_->root();
    if (root != nullptr && std::string(root->Name()) == "graphs") {
      fail(root,
           "this is an NCCL graph file (NCCL_GRAPH_FILE: <graphs> of ring/tree channels), not a "
           "topology; expected an NCCL_TOPO_FILE with a <system> root");
    }
    if (root == nullptr || std::string(root->Name()) != "system") {
      fail(root, "got root element <" + std::string(root ? root->Name() : "") +
                     ">, expected <system> (NCCL topology XML)");
    }
    host_.source = path_;
    host_.format = "nccl-xml";
    checkOneHost(root);
    for (const XmlElement* child = root->FirstChildElement(); child;
         child = child->NextSiblingElement()) {
      if (std::string(child->Name()) == "cpu") {
        readCpu(child);
      } else {
        fail(child, "<system> child <" + std::string(child->Name()) + ">: expected <cpu>");
      }
    }
    linkCpus();
    resolveNvlinks();
    resolveC2c();
    orderGpus();
    orderNics();
    if (!repeated_bare_.empty()) {
      std::string names;
      for (const std::string& name : repeated_bare_) names += (names.empty() ? "" : ", ") + name;
      host_.warnings.push_back("NICs without a PCI device listed under several <cpu> (from line " +
                               std::to_string(first_repeat_line_) + "): " + names +
                               "; each is one NIC, reached from every <cpu> that lists it");
    }
    if (host_.gpus.empty()) {
      host_.warnings.push_back("no GPUs in the file (NCCL finds them at run time): no GPU paths");
    }
    computePaths(&host_);
    return std::move(host_);
  }

 private:
  // Diagnostics point at the element's '<'.
  [[noreturn]] void fail(const XmlElement* node, const std::string& what) const {
    doc_->fail(node, what, -1);
  }

  long intAttr(const XmlElement* node, const char* name, long fallback, long lo, long hi) const {
    std::string v = xmlAttr(node, name);
    if (v.empty()) return fallback;
    // Base 0 (0x... hex, as NCCL writes class ids), as NCCL's own reader takes them with strtol.
    ParsedNumber<long long> value = parseInteger(v, 0);
    if (!value || v.size() > 12 || value.value < lo || value.value > hi) {
      fail(node, "<" + std::string(node->Name()) + "> " + name + ": got '" + v +
                     "', expected an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
    }
    return static_cast<long>(value.value);
  }

  std::string busId(const XmlElement* node, const char* name) const {
    std::string id = lower(xmlAttr(node, name));
    bool ok = !id.empty() && id.size() <= 32 && std::all_of(id.begin(), id.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
    });
    if (!ok) {
      fail(node, "<" + std::string(node->Name()) + "> " + name + ": got '" + id +
                     "', expected a PCI bus id such as 0000:07:00.0");
    }
    return id;
  }

  static Attrs attrsExcept(const XmlElement* node, std::initializer_list<const char*> skip,
                           const std::string& prefix = "") {
    Attrs out;
    for (const tinyxml2::XMLAttribute* a = node->FirstAttribute(); a; a = a->Next()) {
      bool skipped = std::any_of(skip.begin(), skip.end(),
                                 [&](const char* s) { return std::string(a->Name()) == s; });
      if (!skipped) out.emplace_back(prefix + a->Name(), a->Value());
    }
    return out;
  }

  std::string maskToCpulist(const XmlElement* cpu) const {
    std::string mask = xmlAttr(cpu, "affinity");
    if (mask.empty()) return "";
    std::vector<std::string> words = splitList(mask, ',');
    if (words.size() > kMaxMaskWords ||
        !std::all_of(words.begin(), words.end(),
                     [](const std::string& w) { return isHexString(w) && w.size() <= 8; })) {
      fail(cpu, "<cpu> affinity: got '" + mask.substr(0, 40) +
                    "', expected comma-separated 32-bit hex words");
    }
    std::string out;
    int run_start = -1, cpu_id = 0;
    auto close = [&](int end) {
      if (run_start < 0) return;
      if (!out.empty()) out += ",";
      out += std::to_string(run_start);
      if (end - 1 > run_start) out += "-" + std::to_string(end - 1);
      run_start = -1;
    };
    for (auto w = words.rbegin(); w != words.rend(); ++w) {
      long long bits = parseInteger(*w, 16).value;  // hex digits only, at most 8
      for (int b = 0; b < 32; ++b, ++cpu_id) {
        if ((bits >> b) & 1LL) {
          if (run_start < 0) run_start = cpu_id;
        } else {
          close(cpu_id);
        }
      }
    }
    close(cpu_id);
    return out;
  }

  /// NCCL's dump of a multi-node NVLink domain (GB200, GB300 trays) holds the <cpu> elements of
  /// every host of the domain, told apart by `host_hash`; read as one host, their NUMA ids and bus
  /// ids would clash with a message about those instead.
  void checkOneHost(const XmlElement* root) const {
    const XmlElement* first = nullptr;
    for (const XmlElement* cpu = root->FirstChildElement("cpu"); cpu;
         cpu = cpu->NextSiblingElement("cpu")) {
      if (!cpu->Attribute("host_hash")) continue;
      if (first == nullptr) {
        first = cpu;
      } else if (xmlAttr(cpu, "host_hash") != xmlAttr(first, "host_hash")) {
        fail(cpu, "<cpu> host_hash " + xmlAttr(cpu, "host_hash") + " after " +
                      xmlAttr(first, "host_hash") + " (line " +
                      std::to_string(first->GetLineNum()) +
                      "): the file holds several hosts (a multi-node NVLink dump?), expected one; "
                      "keep one host's <cpu> elements");
      }
    }
  }

  void readCpu(const XmlElement* cpu) {
    int numa = static_cast<int>(intAttr(cpu, "numaid", -1, -1, kMaxIndex));
    Node node;
    node.kind = NodeKind::Cpu;
    node.id = numa >= 0 ? "numa" + std::to_string(numa) : "cpu" + std::to_string(cpu_count_);
    ++cpu_count_;
    if (host_.graph.findNode(NodeKind::Cpu, node.id) >= 0) {
      fail(cpu, "<cpu> numaid " + std::to_string(numa) + " appears twice");
    }
    node.index = numa;
    node.numa_node = numa;
    node.attrs = attrsExcept(cpu, {"numaid"});
    std::string cpus = maskToCpulist(cpu);
    int id = host_.graph.addNode(node);
    if (numa >= 0) host_.numa_nodes.push_back({numa, cpus});
    cpu_affinity_[id] = cpus;
    smp_gbps_[id] = smpGBps(xmlAttr(cpu, "vendor"), xmlAttr(cpu, "arch"),
                            static_cast<int>(intAttr(cpu, "modelid", 0, 0, 1 << 20)));
    readChildren(cpu, id, numa);
  }

  void readChildren(const XmlElement* parent, int parent_node, int numa) {
    for (const XmlElement* child = parent->FirstChildElement(); child;
         child = child->NextSiblingElement()) {
      std::string name = child->Name();
      if (name == "pci") {
        readPci(child, parent_node, numa);
      } else if (name == "nic") {
        readNic(child, parent_node, "", numa);
      } else if (name != "gpu") {  // <gpu> is read with its pci device
        fail(child, "<" + std::string(parent->Name()) + "> child <" + name +
                        ">: expected <pci>, <nic> or <gpu>");
      }
    }
  }

  void readPci(const XmlElement* pci, int parent, int numa) {
    Node node;
    node.id = busId(pci, "busid");
    node.numa_node = numa;
    node.attrs = attrsExcept(pci, {"busid"});
    long cls = intAttr(pci, "class", -1, 0, 0xffffff);
    std::string vendor = lower(xmlAttr(pci, "vendor"));
    const XmlElement* gpu = pci->FirstChildElement("gpu");
    if (gpu ||
        ((cls >> 8 == 0x0302 || cls >> 8 == 0x0300) && (vendor.empty() || vendor == "0x10de"))) {
      node.kind = NodeKind::Gpu;
    } else if (cls >> 16 == 0x02 || pci->FirstChildElement("nic")) {
      node.kind = NodeKind::Nic;
    } else if (cls >> 8 == 0x0680) {
      node.kind = NodeKind::NvSwitch;
    } else {
      node.kind = NodeKind::PciSwitch;  // bridges, and NCCL's class-less placeholders
    }
    // Bridges and NVSwitches may carry NCCL's placeholders; a GPU's or NIC's id is matched
    // against the live probe and written to torch-topo JSON, whose reader checks its form.
    if ((node.kind == NodeKind::Gpu || node.kind == NodeKind::Nic) && !isPciBusId(node.id, 8)) {
      fail(pci, "<pci> busid: got '" + node.id + "', expected a PCI bus id such as 0000:07:00.0");
    }
    for (NodeKind kind : {NodeKind::Gpu, NodeKind::Nic, NodeKind::NvSwitch, NodeKind::PciSwitch}) {
      if (host_.graph.findNode(kind, node.id) >= 0) {
        fail(pci, "<pci> busid " + node.id + " appears twice");
      }
    }
    int id = host_.graph.addNode(node);
    addPciLink(pci, parent, id);
    if (node.kind == NodeKind::Gpu) readGpu(pci, gpu, id, numa);
    if (node.kind == NodeKind::Nic) {
      size_t before = host_.nics.size();
      for (const XmlElement* nic = pci->FirstChildElement("nic"); nic;
           nic = nic->NextSiblingElement("nic")) {
        readNic(nic, id, node.id, numa);
      }
      if (host_.nics.size() == before) {
        Nic nic;
        nic.name = node.id;
        nic.bus_id = node.id;
        nic.numa_node = numa;
        nics_in_file_order_.push_back({nic, -1});
        host_.nics.push_back(nic);
      }
    }
    for (const XmlElement* child = pci->FirstChildElement("pci"); child;
         child = child->NextSiblingElement("pci")) {
      readPci(child, id, numa);
    }
    for (const XmlElement* child = pci->FirstChildElement(); child;
         child = child->NextSiblingElement()) {
      std::string n = child->Name();
      if (n != "pci" && n != "gpu" && n != "nic") {
        fail(child, "<pci> child <" + n + ">: expected <pci>, <gpu> or <nic>");
      }
    }
  }

  void addPciLink(const XmlElement* pci, int parent, int child) {
    std::string speed = xmlAttr(pci, "link_speed");
    int width = static_cast<int>(intAttr(pci, "link_width", 0, 0, 64));
    int gen = pcieGenFromSpeed(speed);
    if (gen == 0 && !speed.empty() && warned_speeds_.insert(speed).second) {
      host_.warnings.push_back("unknown link_speed '" + speed + "': rated as PCIe Gen" +
                               std::to_string(kNcclPlaceholderPcieGen) + " like NCCL");
    }
    Link link;
    link.a = parent;
    link.b = child;
    link.kind = LinkKind::Pci;
    link.lanes = width;
    link.bandwidth_gbps = pcieGBps(gen, width);
    link.latency_us = kPcieHopLatencyUs;
    host_.graph.addLink(link);
  }

  void readGpu(const XmlElement* pci, const XmlElement* gpu, int node, int numa) {
    Gpu g;
    g.bus_id = host_.graph.nodes[node].id;
    g.numa_node = numa;
    g.cpu_affinity = cpu_affinity_[cpuOf(node)];
    if (gpu) {
      g.sm = static_cast<int>(intAttr(gpu, "sm", 0, 0, 10000));
      long dev = intAttr(gpu, "dev", -1, 0, kMaxIndex);
      if (dev >= 0) devs_[node] = static_cast<int>(dev);
      Attrs extra = attrsExcept(gpu, {"dev", "sm"}, "gpu.");
      auto& attrs = host_.graph.nodes[node].attrs;
      attrs.insert(attrs.end(), extra.begin(), extra.end());
      for (const XmlElement* nv = gpu->FirstChildElement(); nv; nv = nv->NextSiblingElement()) {
        const std::string child = nv->Name();
        if (child == "c2c") {
          // NCCL (2.19 on, Grace GPUs) reads both attributes; neither has a default.
          for (const char* attr : {"bw", "count"}) {
            if (xmlAttr(nv, attr).empty()) {
              fail(nv, std::string("<c2c> has no ") + attr + " attribute, expected one");
            }
          }
          c2c_.push_back({node, static_cast<int>(intAttr(nv, "count", 0, 1, kMaxNvlinkLanes)),
                          intAttr(nv, "bw", 0, 0, kMaxC2cLinkMBps)});
          continue;
        }
        if (child != "nvlink") {
          fail(nv, "<gpu> child <" + child + ">: expected <nvlink> or <c2c>");
        }
        // Required, as in NCCL's reader: a default of one lane took an NV18 pair for NV14.
        if (xmlAttr(nv, "count").empty()) fail(nv, "<nvlink> has no count attribute, expected one");
        int count = static_cast<int>(intAttr(nv, "count", 0, 1, kMaxNvlinkLanes));
        pending_.push_back(
            {node, busId(nv, "target"), count, xmlAttr(nv, "tclass") == kNvlinkCpuClass});
      }
    }
    gpu_nodes_.push_back(node);
    gpu_info_[node] = g;
  }

  void readNic(const XmlElement* nic, int parent, const std::string& bus_id, int numa) {
    for (const XmlElement* net = nic->FirstChildElement(); net; net = net->NextSiblingElement()) {
      if (std::string(net->Name()) != "net") {
        fail(net, "<nic> child <" + std::string(net->Name()) + ">: expected <net>");
      }
      Nic n;
      n.name = xmlAttr(net, "name");
      if (n.name.empty()) fail(net, "<net> has no name attribute, expected one");
      n.bus_id = bus_id;
      n.numa_node = numa;
      // NCCL writes an integer; no speed (absent or empty) is unknown, rated 0.
      const std::string speed = xmlAttr(net, "speed");
      ParsedNumber<double> mbps = speed.empty() ? ParsedNumber<double>{} : parseDouble(speed);
      if (!mbps || mbps.value < 0 || mbps.value > kMaxNetMbps) {
        fail(net, "<net> speed: got '" + speed + "', expected Mbit/s in [0, 1e7]");
      }
      n.speed_gbps = mbps.value / 1000.0;
      // NCCL writes the plugin's latency as a float ("75.000000"); absent or empty is none.
      const std::string latency = xmlAttr(net, "latency");
      ParsedNumber<double> us = latency.empty() ? ParsedNumber<double>{} : parseDouble(latency);
      if (!us || !(us.value >= 0) || us.value > kMaxNetLatencyUs) {
        fail(net, "<net> latency: got '" + latency + "', expected us in [0, 1e6]");
      }
      n.latency_us = us.value;
      n.attrs = attrsExcept(net, {"name"});
      long dev = intAttr(net, "dev", -1, 0, kMaxIndex);
      const int repeated = repeatedBareNic(net, n);
      if (bus_id.empty()) {
        // A <nic> straight under <cpu> (no PCI device): the NIC is its own graph node, linked
        // to each <cpu> that lists it.
        const int id = repeated >= 0
                           ? repeated
                           : host_.graph.addNode({NodeKind::Nic, n.name, "", numa, -1, {}});
        host_.graph.addLink({parent, id, LinkKind::Pci, 0, pcieGBps(0, 0), kPcieHopLatencyUs});
      }
      if (repeated >= 0) continue;
      nics_in_file_order_.push_back({n, static_cast<int>(dev)});
      host_.nics.push_back(n);
    }
  }

  /// NCCL dumps from some releases write a NIC without a PCI device (a socket or virtual one:
  /// eth0, tunl0) under every <cpu>, with the same attributes: one NIC reached from each, which
  /// then belongs to no one NUMA node. The graph node of the NIC `n` repeats so, -1 for a new
  /// name; a repeated name otherwise is an error.
  int repeatedBareNic(const XmlElement* net, const Nic& n) {
    for (auto& [first, dev] : nics_in_file_order_) {
      if (first.name != n.name) continue;
      const bool same = n.bus_id.empty() && first.bus_id.empty() && first.attrs == n.attrs &&
                        first.speed_gbps == n.speed_gbps && first.latency_us == n.latency_us;
      if (!same) {
        fail(net, "<net> name " + n.name + " appears twice" +
                      (n.bus_id.empty() && first.bus_id.empty()
                           ? " with different attributes, expected one NIC per name"
                           : ""));
      }
      const int node = host_.graph.findNode(NodeKind::Nic, n.name);
      if (first.numa_node != n.numa_node) {
        first.numa_node = -1;
        host_.graph.nodes[node].numa_node = -1;
      }
      if (repeated_bare_.empty()) first_repeat_line_ = net->GetLineNum();
      if (std::find(repeated_bare_.begin(), repeated_bare_.end(), n.name) == repeated_bare_.end())
        repeated_bare_.push_back(n.name);
      return node;
    }
    return -1;
  }

  int cpuOf(int node) const {
    // PCI links run parent -> child (a -> b), so walking `a` ends at the CPU.
    for (int hops = 0; hops < 64; ++hops) {
      if (host_.graph.nodes[node].kind == NodeKind::Cpu) return node;
      int up = -1;
      for (const Link& l : host_.graph.links) {
        if (l.kind == LinkKind::Pci && l.b == node) up = l.a;
      }
      if (up < 0) return -1;
      node = up;
    }
    return -1;
  }

  void linkCpus() {
    std::vector<int> cpus = host_.graph.nodesOfKind(NodeKind::Cpu);
    for (size_t i = 0; i < cpus.size(); ++i) {
      for (size_t j = i + 1; j < cpus.size(); ++j) {
        double gbps = std::min(smp_gbps_[cpus[i]], smp_gbps_[cpus[j]]);
        host_.graph.addLink({cpus[i], cpus[j], LinkKind::Smp, 0, gbps, kSmpHopLatencyUs});
      }
    }
  }

  void resolveNvlinks() {
    std::map<std::pair<int, int>, int> gpu_pairs;
    for (const Pending& p : pending_) {
      int target = host_.graph.findNode(NodeKind::Gpu, p.target);
      double lane = nvlinkLaneGBps(gpu_info_[p.gpu_node].sm);
      if (p.to_cpu) {
        // Read as an NVSwitch, every GPU with such a link met every other through one switch
        // (NV lanes between sockets); NCCL links the GPU to its local CPU instead.
        const int cpu = cpuOf(p.gpu_node);
        if (cpu >= 0) {
          host_.graph.addLink(
              {cpu, p.gpu_node, LinkKind::NvLink, p.count, p.count * lane, kNvlinkHopLatencyUs});
        } else {
          host_.warnings.push_back("GPU " + host_.graph.nodes[p.gpu_node].id +
                                   " lists an NVLink to a CPU (tclass " + kNvlinkCpuClass +
                                   ") but sits under no <cpu>: ignored");
        }
        continue;
      }
      if (target == p.gpu_node) {
        host_.warnings.push_back("GPU " + p.target + " lists an NVLink to itself (count " +
                                 std::to_string(p.count) + "): ignored");
        continue;
      }
      if (target >= 0) {
        // NCCL lists a GPU-GPU link on both GPUs; one bidirectional link stands for both.
        auto key = std::minmax(p.gpu_node, target);
        auto it = gpu_pairs.find(key);
        if (it != gpu_pairs.end()) {
          if (host_.graph.links[it->second].lanes != p.count) {
            host_.warnings.push_back("NVLink " + host_.graph.nodes[p.gpu_node].id + " <-> " +
                                     p.target + ": the two GPUs list different counts; kept " +
                                     std::to_string(host_.graph.links[it->second].lanes));
          }
          continue;
        }
        gpu_pairs[key] = host_.graph.addLink(
            {p.gpu_node, target, LinkKind::NvLink, p.count, p.count * lane, kNvlinkHopLatencyUs});
        continue;
      }
      int sw = host_.graph.findNode(NodeKind::NvSwitch, p.target);
      if (sw < 0) sw = host_.graph.addNode({NodeKind::NvSwitch, p.target, "NVSwitch", -1, -1, {}});
      host_.graph.addLink(
          {p.gpu_node, sw, LinkKind::NvLink, p.count, p.count * lane, kNvlinkHopLatencyUs});
    }
  }

  /// As NCCL's ncclTopoAddC2c: one link between the GPU and the CPU above it, rated
  /// bw * count / 1000 GB/s; a GPU under no <cpu> keeps no C2C link (NCCL skips it too).
  void resolveC2c() {
    for (const PendingC2c& c : c2c_) {
      const int cpu = cpuOf(c.gpu_node);
      if (cpu < 0) {
        host_.warnings.push_back("GPU " + host_.graph.nodes[c.gpu_node].id +
                                 " lists a <c2c> link but sits under no <cpu>: ignored");
        continue;
      }
      host_.graph.addLink({cpu, c.gpu_node, LinkKind::C2C, c.count,
                           static_cast<double>(c.link_mbps) * c.count / 1000.0,
                           kNvlinkHopLatencyUs});
    }
  }

  void orderGpus() {
    bool all_dev = !gpu_nodes_.empty() && devs_.size() == gpu_nodes_.size();
    std::set<int> unique;
    for (const auto& kv : devs_) unique.insert(kv.second);
    if (all_dev && unique.size() != devs_.size()) {
      host_.warnings.push_back("<gpu> dev values repeat: GPUs ordered by PCI bus id instead");
      all_dev = false;
    } else if (!all_dev && !devs_.empty()) {
      host_.warnings.push_back("only some GPUs have a dev attribute: ordered by PCI bus id");
    }
    std::vector<int> order = gpu_nodes_;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      if (all_dev) return devs_[a] < devs_[b];
      return busKey(host_.graph.nodes[a].id) < busKey(host_.graph.nodes[b].id);
    });
    for (size_t i = 0; i < order.size(); ++i) {
      Gpu g = gpu_info_[order[i]];
      g.index = all_dev ? devs_[order[i]] : static_cast<int>(i);
      host_.graph.nodes[order[i]].index = g.index;
      host_.gpus.push_back(g);
    }
  }

  void orderNics() {
    bool all_dev = std::all_of(nics_in_file_order_.begin(), nics_in_file_order_.end(),
                               [](const auto& n) { return n.second >= 0; });
    auto order = nics_in_file_order_;
    if (all_dev) {
      std::stable_sort(order.begin(), order.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
    }
    host_.nics.clear();
    for (const auto& n : order) host_.nics.push_back(n.first);
    for (size_t k = 0; k < host_.nics.size(); ++k) {
      const Nic& nic = host_.nics[k];
      int node = host_.graph.findNode(NodeKind::Nic, nic.bus_id.empty() ? nic.name : nic.bus_id);
      if (node >= 0 && host_.graph.nodes[node].index < 0) {
        host_.graph.nodes[node].index = static_cast<int>(k);
      }
    }
  }

  const std::string& text_;
  const std::string& path_;
  std::unique_ptr<XmlDocument> doc_;
  HostTopology host_;
  int cpu_count_ = 0;
  std::map<int, std::string> cpu_affinity_;
  std::map<int, double> smp_gbps_;
  std::vector<int> gpu_nodes_;
  std::map<int, int> devs_;
  std::map<int, Gpu> gpu_info_;
  std::vector<std::pair<Nic, int>> nics_in_file_order_;  // with the <net> dev, -1 when none
  std::vector<std::string> repeated_bare_;  // names repeatedBareNic found, in file order
  int first_repeat_line_ = 0;
  std::vector<Pending> pending_;
  std::vector<PendingC2c> c2c_;
  std::set<std::string> warned_speeds_;
};

}  // namespace

HostTopology readNcclXml(const std::string& text, const std::string& path) {
  return NcclXmlReader(text, path).read();
}

}  // namespace torch_topo::topo
