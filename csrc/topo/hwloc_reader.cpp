// SPDX-License-Identifier: Apache-2.0
// hwloc XML -> HostTopology (layer: csrc/topo). One walk over the object tree builds the graph;
// the NVLinkBandwidth matrix then adds the NVLink edges.
#include "topo/hwloc_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/link_tables.h"
#include "topo/paths.h"
#include "topo/sysfs_probe.h"
#include "topo/text_numbers.h"
#include "topo/xml_document.h"

namespace torch_topo::topo {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
// hwloc's NVLinkBandwidth values are links x a per-link MB/s fixed by the NVML NVLink version
// (hwloc 2.x hwloc/nvml.c, hwloc_nvml_discover: version 1 -> 20000, 2..6 -> 25000, 7 -> 50000),
// i.e. Pascal 20000, Volta to Hopper 25000, Blackwell 50000. Dividing recovers the lane count;
// the bandwidth then comes from link_tables like every other source.
double hwlocLaneMBps(int sm) {
  if (sm > 0 && sm < 70) return 20000.0;
  if (sm >= 100) return 50000.0;
  return 25000.0;  // unknown model: the Volta-to-Hopper rate covers most files
}

struct PciType {
  unsigned cls = 0;
  unsigned vendor = 0;
  unsigned device = 0;
};

class HwlocXmlReader {
 public:
  HwlocXmlReader(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  HostTopology read();

 private:
  // Where I/O children of the object being walked hang in the graph.
  struct Context {
    int attach = -1;          // graph node the next PCI device links to
    int numa = -1;            // NUMA os index, -1 unknown
    bool host_bridge = false; // directly under a host bridge: bridges here are root ports
    bool upstream = false;    // `attach` is a switch's upstream port (children are its ports)
    std::string switch_id;    // vendor:device of that switch
  };

  [[noreturn]] void fail(const XmlElement* node, const std::string& what) const;
  PciType parsePciType(const XmlElement* obj) const;
  unsigned osdevType(const XmlElement* osdev) const;
  std::set<int> bitmapAttr(const XmlElement* obj, const char* name) const;
  double pciGBps(const XmlElement* obj) const;
  int numaOf(const XmlElement* obj, const Context& parent) const;

  void readNumaNodes(const XmlElement* root);
  void walk(const XmlElement* obj, Context ctx);
  void walkBridge(const XmlElement* obj, Context ctx);
  void addPciDevice(const XmlElement* obj, const Context& ctx);
  void addNic(const XmlElement* obj, const Context& ctx, const std::string& bus_id);
  std::string pciBusId(const XmlElement* obj) const;
  bool isNetworkOsDev(const XmlElement* osdev) const;
  bool isFabricOsDev(const XmlElement* osdev) const;
  void finishGpus();
  void readNvlinkMatrix(const XmlElement* dist);
  int nodeForRef(const std::string& type, const std::string& ref) const;

  const std::string& text_;
  const std::string& path_;
  std::unique_ptr<XmlDocument> doc_;
  int version_major_ = 2;
  HostTopology host_;
  std::map<int, int> numa_cpu_node_;            // NUMA os index -> Cpu node
  std::map<std::string, int> gp_node_;          // "Type:gp_index" -> graph node
  std::map<std::string, int> package_cpu_node_; // Package gp_index -> its first Cpu node
  std::string cpu_vendor_, arch_;
  std::vector<std::pair<std::string, std::string>> cpu_attrs_;  // NCCL's <cpu> ones, if known
  int intel_model_ = 0;
};

// Diagnostics point at the element's name.
void HwlocXmlReader::fail(const XmlElement* node, const std::string& what) const {
  doc_->fail(node, what);
}

PciType HwlocXmlReader::parsePciType(const XmlElement* obj) const {
  // "0302 [10de:1db8] [10de:131d] a1 00": class, [vendor:device], [subvendor:subdevice], rev.
  // Blanks may separate the pieces; the subsystem ids and revision are not used.
  const std::string text = xmlAttr(obj, "pci_type");
  size_t pos = 0;
  auto skipBlanks = [&] {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  };
  auto hex16 = [&](unsigned* out) {
    skipBlanks();
    ParsedNumber<long long> n = parseLeadingInteger(std::string_view(text).substr(pos), 16);
    if (!n || n.value < 0 || n.value > 0xffff) return false;
    *out = static_cast<unsigned>(n.value);
    pos += n.length;
    return true;
  };
  auto punct = [&](char c) {
    skipBlanks();
    if (pos >= text.size() || text[pos] != c) return false;
    ++pos;
    return true;
  };
  PciType t;
  if (!(hex16(&t.cls) && punct('[') && hex16(&t.vendor) && punct(':') && hex16(&t.device) &&
        punct(']'))) {
    fail(obj, "bad pci_type: got '" + text +
                  "', expected e.g. '0302 [10de:1db8] [10de:131d] a1 00'");
  }
  return t;
}

double HwlocXmlReader::pciGBps(const XmlElement* obj) const {
  const char* attr = obj->Attribute("pci_link_speed");
  if (!attr) return pcieGBps(0, 0);  // absent: the table's documented default link
  std::string text = attr;
  ParsedNumber<double> raw = parseDouble(text);
  if (!raw || raw.value < 0.0 || raw.value > 1e4) {
    fail(obj, "bad pci_link_speed: got '" + text + "', expected GB/s between 0 and 10000");
  }
  return pcieGBpsFromEncodedRate(raw.value);
}

int HwlocXmlReader::numaOf(const XmlElement* obj, const Context& parent) const {
  if (!obj->Attribute("nodeset")) return parent.numa;
  std::set<int> nodes = bitmapAttr(obj, "nodeset");
  if (nodes.size() == 1) return *nodes.begin();
  // Memory-only nodes (DAX or persistent memory, CXL, HBM, a Grace GPU's memory) join the
  // nodeset of the package they hang off, with its cpuset as their locality: nodes that share
  // one cpuset are one package's, and Linux numbers the node of its CPUs first. Different cpusets
  // (a Machine, a Group, sub-NUMA clusters): locality unknown at this level.
  const NumaNode* first = nullptr;
  for (const NumaNode& numa : host_.numa_nodes) {  // in id order
    if (!nodes.count(numa.id)) continue;
    if (first == nullptr) {
      first = &numa;
    } else if (numa.cpus != first->cpus) {
      return -1;
    }
  }
  return first != nullptr && !first->cpus.empty() ? first->id : -1;
}

void HwlocXmlReader::readNumaNodes(const XmlElement* root) {
  std::vector<const XmlElement*> numa_objects;
  forEachXmlDescendant(root, "object", [&](const XmlElement* obj) {
    if (xmlAttr(obj, "type") == "NUMANode") numa_objects.push_back(obj);
  });
  for (const XmlElement* obj : numa_objects) {
    const char* os = obj->Attribute("os_index");
    ParsedNumber<long long> os_id = parseInteger(os ? os : "");
    if (os && (!os_id || os_id.value < 0 || os_id.value > 4095)) {
      fail(obj, "bad NUMANode os_index: got '" + std::string(os) + "', expected 0..4095");
    }
    int id = static_cast<int>(os ? os_id.value : static_cast<long long>(host_.numa_nodes.size()));
    if (numa_cpu_node_.count(id)) fail(obj, "duplicate NUMANode os_index " + std::to_string(id));
    std::set<int> cpus = bitmapAttr(obj, "cpuset");
    host_.numa_nodes.push_back({id, formatCpulist(cpus)});
    numa_cpu_node_[id] = host_.graph.addNode(makeCpuNode(id));
    const XmlElement* pkg = obj->Parent() ? obj->Parent()->ToElement() : nullptr;
    while (pkg && xmlAttr(pkg, "type") != "Package") {
      pkg = pkg->Parent() ? pkg->Parent()->ToElement() : nullptr;
    }
    if (pkg && pkg->Attribute("gp_index")) {
      package_cpu_node_.emplace(xmlAttr(pkg, "gp_index"), numa_cpu_node_[id]);
    }
  }
  if (host_.numa_nodes.empty()) {
    // Single-node machines may omit NUMANode objects in old exports: the machine is one node.
    const XmlElement* machine = root->FirstChildElement("object");
    std::set<int> cpus = bitmapAttr(machine, "cpuset");
    host_.numa_nodes.push_back({0, formatCpulist(cpus)});
    numa_cpu_node_[0] = host_.graph.addNode(makeCpuNode(0));
    host_.warnings.push_back(path_ + ": no NUMANode objects; the machine is taken as one node");
  }
  std::sort(host_.numa_nodes.begin(), host_.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  double smp = smpGBps(cpu_vendor_, arch_, intel_model_);
  // What NCCL writes on its <cpu> elements, so that NCCL XML written from this host prices the
  // link between sockets as read here.
  for (const auto& [id, node] : numa_cpu_node_) host_.graph.nodes[node].attrs = cpu_attrs_;
  for (auto a = numa_cpu_node_.begin(); a != numa_cpu_node_.end(); ++a) {
    for (auto b = std::next(a); b != numa_cpu_node_.end(); ++b) {
      host_.graph.addLink({a->second, b->second, LinkKind::Smp, 0, smp, kSmpHopLatencyUs});
    }
  }
}

void HwlocXmlReader::walk(const XmlElement* obj, Context ctx) {
  std::string type = xmlAttr(obj, "type");
  if (type == "Bridge") return walkBridge(obj, ctx);
  if (type == "PCIDev") return addPciDevice(obj, ctx);
  if (type == "OSDev") {
    if (isNetworkOsDev(obj)) addNic(obj, ctx, "");  // a NIC without a PCI parent (virtual)
    return;
  }
  // CPU-side object: its nodeset says which NUMA node I/O below it is local to.
  ctx.numa = numaOf(obj, ctx);
  auto it = numa_cpu_node_.find(ctx.numa);
  ctx.attach = it != numa_cpu_node_.end() ? it->second : numa_cpu_node_.begin()->second;
  ctx.host_bridge = false;
  ctx.upstream = false;
  for (const XmlElement* child = obj->FirstChildElement("object"); child;
       child = child->NextSiblingElement("object")) {
    walk(child, ctx);
  }
}

void HwlocXmlReader::walkBridge(const XmlElement* obj, Context ctx) {
  std::string bridge_type = xmlAttr(obj, "bridge_type");
  Context inner = ctx;
  if (bridge_type.compare(0, 2, "0-") == 0) {
    // Host bridge: part of the CPU, not a hop of its own.
    inner.host_bridge = true;
    inner.upstream = false;
  } else if (ctx.host_bridge) {
    // Root port of the CPU: NCCL folds it into the CPU too.
    inner.host_bridge = false;
    inner.upstream = false;
  } else {
    PciType t = parsePciType(obj);
    const std::string sw = formatHex(t.vendor) + ":" + formatHex(t.device);
    if (ctx.upstream && sw == ctx.switch_id) {
      // Downstream port of the switch whose upstream port is `ctx.attach`.
      inner.upstream = false;
    } else {
      Node node;
      node.kind = NodeKind::PciSwitch;
      node.id = xmlAttr(obj, "pci_busid");
      node.name = sw;
      node.numa_node = ctx.numa;
      int idx = host_.graph.addNode(node);
      host_.graph.addLink({ctx.attach, idx, LinkKind::Pci, 0, pciGBps(obj), kPcieHopLatencyUs});
      inner.attach = idx;
      inner.upstream = true;
      inner.switch_id = sw;
    }
  }
  for (const XmlElement* child = obj->FirstChildElement("object"); child;
       child = child->NextSiblingElement("object")) {
    walk(child, inner);
  }
}

/// A bad bitmap is a ParseError at `obj`, like every other bad attribute.
std::set<int> HwlocXmlReader::bitmapAttr(const XmlElement* obj, const char* name) const {
  try {
    return parseHwlocBitmap(xmlAttr(obj, name), name);
  } catch (const InvalidArgument& e) {
    fail(obj, e.what());
  }
}

unsigned HwlocXmlReader::osdevType(const XmlElement* osdev) const {
  const char* attr = osdev->Attribute("osdev_type");
  if (!attr) return 0;
  ParsedNumber<long long> kind = parseInteger(attr);
  if (!kind || kind.value < 0 || kind.value > 0xffffffffLL) {
    fail(osdev,
         "bad osdev_type: got '" + std::string(attr) + "', expected an unsigned 32-bit integer");
  }
  return static_cast<unsigned>(kind.value);
}

bool HwlocXmlReader::isNetworkOsDev(const XmlElement* osdev) const {
  unsigned kind = osdevType(osdev);
  // hwloc 2 numbers the kinds (NETWORK=2, OPENFABRICS=3); hwloc 3 writes flags
  // (NETWORK=1<<4, OPENFABRICS=1<<5). See hwloc's hwloc_obj_osdev_type_e in each release.
  if (version_major_ >= 3) return (kind & ((1u << 4) | (1u << 5))) != 0;
  return kind == 2 || kind == 3;
}

/// An RDMA device (OpenFabrics: mlx5_0, hfi1_0), what NCCL_IB_HCA names.
bool HwlocXmlReader::isFabricOsDev(const XmlElement* osdev) const {
  if (!isNetworkOsDev(osdev)) return false;
  unsigned kind = osdevType(osdev);
  return version_major_ >= 3 ? (kind & (1u << 5)) != 0 : kind == 3;
}

/// hwloc writes `%04x:%02x:%02x.%01x` (the domain may be longer: VMD's 10000); GPUs, NICs and
/// NVSwitches are matched by it (NVLink, live probe), so a missing or odd one is refused.
std::string HwlocXmlReader::pciBusId(const XmlElement* obj) const {
  std::string id = xmlAttr(obj, "pci_busid");
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!isPciBusId(id, 8)) {
    fail(obj, "pci_busid: got '" + id + "', expected a PCI bus id such as 0000:07:00.0");
  }
  return id;
}

void HwlocXmlReader::addPciDevice(const XmlElement* obj, const Context& ctx) {
  PciType t = parsePciType(obj);
  std::string bus_id = pciBusId(obj);
  std::string subtype = xmlAttr(obj, "subtype");
  std::string gp = xmlAttr(obj, "gp_index");
  bool nvidia = t.vendor == kNvidiaVendor;
  bool gpu = nvidia && (t.cls == 0x0302 || t.cls == 0x0300);
  bool nvswitch = subtype == "NVSwitch" || (nvidia && t.cls == 0x0680);
  // Any network controller (02xx, as NCCL classes NICs: Ethernet, InfiniBand 0207, Omni-Path
  // 0208, ...) and any device carrying an RDMA device: ConnectX-2/3 VPI HCAs report the
  // serial-bus InfiniBand class 0c06.
  bool rdma = false;
  for (const XmlElement* osdev = obj->FirstChildElement("object"); osdev && !rdma;
       osdev = osdev->NextSiblingElement("object")) {
    rdma = std::string(xmlAttr(osdev, "type")) == "OSDev" && isFabricOsDev(osdev);
  }
  bool nic = (t.cls >> 8) == 0x02 || rdma;
  if (nic) return addNic(obj, ctx, bus_id);
  if (!gpu && !nvswitch) return;
  // GPUs and NVSwitches are found again by bus id (paths, the NVLink matrix, the live probe);
  // a second device under one id made two GPUs one, with an X path between them.
  if (host_.graph.findNode(NodeKind::Gpu, bus_id) >= 0 ||
      host_.graph.findNode(NodeKind::NvSwitch, bus_id) >= 0) {
    fail(obj, "pci_busid " + bus_id + " appears twice, expected one PCI device per bus id");
  }
  Node node;
  node.kind = gpu ? NodeKind::Gpu : NodeKind::NvSwitch;
  node.id = bus_id;
  node.numa_node = ctx.numa;
  for (const XmlElement* osdev = obj->FirstChildElement("object"); osdev;
       osdev = osdev->NextSiblingElement("object")) {
    for (const XmlElement* info = osdev->FirstChildElement("info"); info;
         info = info->NextSiblingElement("info")) {
      if (std::string(xmlAttr(info, "name")) == "GPUModel") {
        node.name = xmlAttr(info, "value");
      }
    }
  }
  int idx = host_.graph.addNode(node);
  host_.graph.addLink({ctx.attach, idx, LinkKind::Pci, 0, pciGBps(obj), kPcieHopLatencyUs});
  if (!gp.empty()) gp_node_["PCIDev:" + gp] = idx;
  for (const XmlElement* osdev = obj->FirstChildElement("object"); osdev;
       osdev = osdev->NextSiblingElement("object")) {
    if (osdev->Attribute("gp_index")) {
      gp_node_[std::string("OSDev:") + xmlAttr(osdev, "gp_index")] = idx;
    }
  }
}

void HwlocXmlReader::addNic(const XmlElement* obj, const Context& ctx, const std::string& bus_id) {
  // One NIC per PCI function; its name is the RDMA device (what NCCL_IB_HCA names) when there
  // is one, else the network interface.
  std::string name, netdev;
  auto consider = [&](const XmlElement* osdev) {
    if (!isNetworkOsDev(osdev)) return;
    (isFabricOsDev(osdev) ? name : netdev) = xmlAttr(osdev, "name");
  };
  if (bus_id.empty()) {
    consider(obj);
  } else {
    for (const XmlElement* osdev = obj->FirstChildElement("object"); osdev;
         osdev = osdev->NextSiblingElement("object")) {
      consider(osdev);
    }
  }
  if (name.empty()) name = netdev;
  if (name.empty()) name = bus_id;
  Nic nic;
  nic.name = name;
  nic.bus_id = bus_id;
  nic.numa_node = ctx.numa;
  host_.nics.push_back(nic);
  Node node;
  node.kind = NodeKind::Nic;
  node.id = bus_id.empty() ? name : bus_id;
  node.name = name;
  node.numa_node = ctx.numa;
  node.index = static_cast<int>(host_.nics.size()) - 1;
  int idx = host_.graph.addNode(node);
  if (!bus_id.empty()) {
    host_.graph.addLink({ctx.attach, idx, LinkKind::Pci, 0, pciGBps(obj), kPcieHopLatencyUs});
  }
}

void HwlocXmlReader::finishGpus() {
  std::vector<int> gpu_nodes = host_.graph.nodesOfKind(NodeKind::Gpu);
  // CUDA's default order (CUDA_DEVICE_ORDER=PCI_BUS_ID as NCCL sees it): ascending bus id; the
  // ids are fixed-width lower-case hex, so string order is bus order.
  std::sort(gpu_nodes.begin(), gpu_nodes.end(), [&](int a, int b) {
    return host_.graph.nodes[a].id < host_.graph.nodes[b].id;
  });
  for (size_t i = 0; i < gpu_nodes.size(); ++i) {
    Node& node = host_.graph.nodes[gpu_nodes[i]];
    node.index = static_cast<int>(i);
    Gpu gpu;
    gpu.index = node.index;
    gpu.bus_id = node.id;
    gpu.name = node.name;
    gpu.sm = smFromGpuName(node.name);
    gpu.numa_node = node.numa_node;
    for (const NumaNode& numa : host_.numa_nodes) {
      if (numa.id == gpu.numa_node) gpu.cpu_affinity = numa.cpus;
    }
    host_.gpus.push_back(gpu);
  }
}

int HwlocXmlReader::nodeForRef(const std::string& type, const std::string& ref) const {
  if (type == "Package") {
    auto it = package_cpu_node_.find(ref);
    return it == package_cpu_node_.end() ? -1 : it->second;
  }
  auto it = gp_node_.find(type + ":" + ref);
  return it == gp_node_.end() ? -1 : it->second;
}

void HwlocXmlReader::readNvlinkMatrix(const XmlElement* dist) {
  ParsedNumber<long long> nbobjs = parseInteger(xmlAttr(dist, "nbobjs"));
  if (!nbobjs || nbobjs.value <= 0 || nbobjs.value > 4096) {
    fail(dist, "bad nbobjs: got '" + std::string(xmlAttr(dist, "nbobjs")) + "', expected 1..4096");
  }
  const int n = static_cast<int>(nbobjs.value);
  // Heterogeneous matrices name each object "Type:gp_index"; homogeneous ones give the type once
  // and bare indexes (gp indexes when indexing="gp").
  std::string common_type = xmlAttr(dist, "type");
  std::vector<int> nodes;
  for (const XmlElement* idx = dist->FirstChildElement("indexes"); idx;
       idx = idx->NextSiblingElement("indexes")) {
    for (const std::string& token : splitWords(idx->GetText() ? idx->GetText() : "")) {
      size_t colon = token.find(':');
      std::string type = colon == std::string::npos ? common_type : token.substr(0, colon);
      std::string ref = colon == std::string::npos ? token : token.substr(colon + 1);
      int node = nodeForRef(type, ref);
      if (node < 0) {
        host_.warnings.push_back(path_ + ": NVLinkBandwidth object " + token +
                                 " is not a GPU, NVSwitch or package of this file; ignored");
      } else if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
        // Its rows would overwrite the first one's: another object's links lost without a word.
        fail(idx, "NVLinkBandwidth object " + token +
                      " appears twice in <indexes>, expected each object once");
      }
      nodes.push_back(node);
    }
  }
  std::vector<double> values;
  for (const XmlElement* vals = dist->FirstChildElement("u64values"); vals;
       vals = vals->NextSiblingElement("u64values")) {
    for (const std::string& token : splitWords(vals->GetText() ? vals->GetText() : "")) {
      ParsedNumber<double> v = parseDouble(token);
      if (!v || v.value < 0.0 || v.value > 1e12) {
        fail(vals, "bad NVLinkBandwidth value: got '" + token + "', expected MB/s in [0, 1e12]");
      }
      values.push_back(v.value);
    }
  }
  if (static_cast<int>(nodes.size()) != n || values.size() != static_cast<size_t>(n) * n) {
    fail(dist, "NVLinkBandwidth matrix size: got " + std::to_string(nodes.size()) +
                   " objects and " + std::to_string(values.size()) + " values, expected " +
                   std::to_string(n) + " and " + std::to_string(n * n));
  }
  // hwloc itself reads every NVSwitch of the matrix as a port of one fabric (its
  // HWLOC_DISTANCES_TRANSFORM_MERGE_SWITCH_PORTS), and the files list no switch-to-switch trunks:
  // GPU links to any switch are summed onto the first, so every switched GPU reaches every other.
  int fabric = -1;
  for (int node : nodes) {
    if (node >= 0 && host_.graph.nodes[node].kind == NodeKind::NvSwitch && fabric < 0) fabric = node;
  }
  std::map<std::pair<int, int>, double> mbps_by_pair;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      double ab = values[i * n + j], ba = values[j * n + i];
      double mbps = (ab > 0 && ba > 0) ? std::min(ab, ba) : std::max(ab, ba);
      if (mbps <= 0 || nodes[i] < 0 || nodes[j] < 0) continue;
      auto rep = [&](int node) {
        return host_.graph.nodes[node].kind == NodeKind::NvSwitch ? fabric : node;
      };
      int a = rep(nodes[i]), b = rep(nodes[j]);
      if (a == b) continue;
      mbps_by_pair[{std::min(a, b), std::max(a, b)}] += mbps;
    }
  }
  for (const auto& [pair, mbps] : mbps_by_pair) {
    const Node& a = host_.graph.nodes[pair.first];
    int sm = smFromGpuName(a.kind == NodeKind::Gpu ? a.name : host_.graph.nodes[pair.second].name);
    int lanes = std::max(1, static_cast<int>(std::lround(mbps / hwlocLaneMBps(sm))));
    host_.graph.addLink({pair.first, pair.second, LinkKind::NvLink, lanes,
                         lanes * nvlinkLaneGBps(sm), kNvlinkHopLatencyUs});
  }
}

HostTopology HwlocXmlReader::read() {
  // A UTF-8 byte order mark (Windows editors add one) may open any XML document.
  const size_t bom = text_.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  size_t first = text_.find_first_not_of(" \t\r\n", bom);
  if (first == std::string::npos || text_[first] != '<') {
    std::string head = text_.substr(first == std::string::npos ? 0 : first, 10);
    std::string what = head.compare(0, 7, "Machine") == 0
                           ? "lstopo console output is not supported: got text starting '" +
                                 head + "', expected hwloc XML; export it with `lstopo FILE.xml`"
                           : "not hwloc XML: got text starting '" + head + "', expected '<'";
    throw ParseError(path_, 1, 1, what);
  }
  doc_ = std::make_unique<XmlDocument>(text_, path_, false);
  const XmlElement* root = doc_->root();
  if (root == nullptr || std::string(root->Name()) != "topology") {
    throw ParseError(path_, 1, 1,
                     std::string("not an hwloc topology: got root element <") +
                         (root ? root->Name() : "") + ">, expected <topology>");
  }
  if (const char* version = root->Attribute("version")) {
    // "2.0", "3.0": the major number decides how osdev_type is encoded.
    ParsedNumber<long long> major = parseLeadingInteger(version);
    if (!major || major.value < 0 || major.value > 1000) {
      fail(root, "bad topology version: got '" + std::string(version) + "', expected e.g. '2.0'");
    }
    version_major_ = static_cast<int>(major.value);
  }
  auto info = [&](const char* name) -> std::string {
    std::string value;
    bool found = false;
    forEachXmlDescendant(root, "info", [&](const XmlElement* el) {
      if (!found && xmlAttr(el, "name") == name) {
        value = xmlAttr(el, "value");
        found = true;
      }
    });
    return value;
  };
  host_.hostname = info("HostName");
  host_.source = path_;
  host_.format = "hwloc-xml";
  cpu_vendor_ = info("CPUVendor");
  arch_ = info("Architecture");
  // Only refines the SMP bandwidth estimate: absent or unreadable means an unknown model (0).
  ParsedNumber<long long> model = parseInteger(info("CPUModelNumber"));
  if (model && model.value >= 0 && model.value < (1 << 20)) {
    intel_model_ = static_cast<int>(model.value);
  }
  // NCCL's names: hwloc says aarch64 and ppc64le where NCCL writes arm64 and ppc64.
  const std::string arch = arch_ == "aarch64" ? "arm64" : arch_ == "ppc64le" ? "ppc64" : arch_;
  ParsedNumber<long long> family = parseInteger(info("CPUFamilyNumber"));
  const std::pair<const char*, std::string> cpu_attrs[] = {
      {"arch", arch},
      {"vendor", cpu_vendor_},
      {"familyid", family && family.value >= 0 ? std::to_string(family.value) : ""},
      {"modelid", intel_model_ > 0 ? std::to_string(intel_model_) : ""}};
  for (const auto& [key, value] : cpu_attrs) {
    if (!value.empty()) cpu_attrs_.emplace_back(key, value);
  }
  const XmlElement* machine = root->FirstChildElement("object");
  if (!machine) throw ParseError(path_, 1, 1, "hwloc topology without a Machine object");
  readNumaNodes(root);
  Context ctx;
  ctx.attach = numa_cpu_node_.begin()->second;
  walk(machine, ctx);
  finishGpus();
  bool matrix = false;
  for (const XmlElement* dist = root->FirstChildElement(); dist;
       dist = dist->NextSiblingElement()) {
    std::string tag = dist->Name();
    if ((tag == "distances2" || tag == "distances2hetero") &&
        std::string(xmlAttr(dist, "name")) == "NVLinkBandwidth") {
      readNvlinkMatrix(dist);
      matrix = true;
    }
  }
  if (!matrix && !host_.gpus.empty()) {
    host_.warnings.push_back(path_ + ": no NVLinkBandwidth matrix; GPUs are joined by PCIe only");
  }
  computePaths(&host_);
  return host_;
}

}  // namespace

HostTopology readHwlocXml(const std::string& text, const std::string& path) {
  return HwlocXmlReader(text, path).read();
}

int smFromGpuName(const std::string& name) {
  // Model families by marketing name (NVIDIA's CUDA GPUs compute-capability list). Every name
  // precedes the names it contains ("A100" before "A10", "GH200" before "H200"; " Ada" before
  // "RTX 50", which "RTX 5000 Ada Generation" contains).
  static const struct {
    const char* token;
    int sm;
  } kFamilies[] = {
      {"GB300", 103}, {"B300", 103}, {"GB200", 100}, {"B200", 100}, {"B100", 100},
      {"GB10", 121},  {"GH200", 90}, {"H200", 90},   {"H100", 90},  {"H800", 90},
      {"H20", 90},    {"L40", 89},   {"L4", 89},     {" Ada", 89},  {"RTX 40", 89},
      {"RTX 50", 120}, {"RTX PRO", 120}, {"RTX 6000D", 120}, {"A100", 80}, {"A800", 80},
      {"A30", 80},    {"A40", 86},   {"A10", 86},    {"RTX 30", 86}, {"A6000", 86},
      {"V100", 70},   {"T4", 75},    {"P100", 60},
  };
  for (const auto& family : kFamilies) {
    if (name.find(family.token) != std::string::npos) return family.sm;
  }
  return 0;
}

}  // namespace torch_topo::topo
