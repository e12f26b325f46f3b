// SPDX-License-Identifier: Apache-2.0
// Live probe: hwloc (or /sys) base graph, NICs from /sys, GPUs from NVML (layer: csrc/topo).
#include "topo/probe.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <vector>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/link_tables.h"
#include "topo/nvml_probe.h"
#include "topo/paths.h"

namespace torch_topo::topo {
namespace {

// Reads a one-line sysfs attribute; false when absent or unreadable (EINVAL for a link that is
// down is normal: /sys/class/net/X/speed of a virtual or unplugged interface).
bool readLine(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in || !std::getline(in, *out)) return false;
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return true;
}

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = opendir(path.c_str());
  if (!dir) return names;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

int readNumaNode(const std::string& device_dir) {
  std::string text;
  if (!readLine(device_dir + "/numa_node", &text)) return -1;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  return (end != text.c_str() && v >= 0 && v < 4096) ? static_cast<int>(v) : -1;
}

// The PCI address a /sys/class/<x>/<dev>/device link resolves to, "" for virtual devices.
std::string pciBusIdOf(const std::string& device_link) {
  char resolved[PATH_MAX];
  if (!realpath(device_link.c_str(), resolved)) return "";
  std::string path = resolved;
  std::string base = path.substr(path.rfind('/') + 1);
  static const std::regex kBusId("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
  return std::regex_match(base, kBusId) ? base : "";
}

void readSysfsNumaNodes(const std::string& root, HostTopology* host) {
  std::string node_dir = root + "/devices/system/node";
  for (const std::string& name : listDir(node_dir)) {
    if (name.size() < 5 || name.compare(0, 4, "node") != 0 ||
        name.find_first_not_of("0123456789", 4) != std::string::npos) {
      continue;
    }
    std::string cpus;
    readLine(node_dir + "/" + name + "/cpulist", &cpus);
    std::string where = node_dir + "/" + name + "/cpulist";
    host->numa_nodes.push_back({std::atoi(name.c_str() + 4), formatCpulist(parseCpulist(cpus, where))});
  }
  if (host->numa_nodes.empty()) {
    // Kernels without NUMA support have no node directory: all online CPUs form node 0.
    std::string cpus;
    std::string where = root + "/devices/system/cpu/online";
    readLine(where, &cpus);
    host->numa_nodes.push_back({0, formatCpulist(parseCpulist(cpus, where))});
  }
  std::sort(host->numa_nodes.begin(), host->numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  std::vector<int> cpu_nodes;
  for (const NumaNode& numa : host->numa_nodes) {
    cpu_nodes.push_back(host->graph.addNode(makeCpuNode(numa.id)));
  }
  double smp = smpGBps("", "", 0);
  for (size_t a = 0; a < cpu_nodes.size(); ++a) {
    for (size_t b = a + 1; b < cpu_nodes.size(); ++b) {
      host->graph.addLink({cpu_nodes[a], cpu_nodes[b], LinkKind::Smp, 0, smp, kSmpHopLatencyUs});
    }
  }
}

// Gbit/s from an IB port rate ("100 Gb/sec (4X EDR)"), 0 when unreadable.
double parseIbRate(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  return (end != text.c_str() && v > 0 && v < 1e5) ? v : 0.0;
}

std::vector<Nic> readSysfsNics(const std::string& root) {
  std::vector<Nic> nics;
  std::string net = root + "/class/net";
  for (const std::string& name : listDir(net)) {
    if (name == "lo") continue;
    Nic nic;
    nic.name = name;
    nic.bus_id = pciBusIdOf(net + "/" + name + "/device");
    nic.numa_node = readNumaNode(net + "/" + name + "/device");
    std::string speed;
    // Mbit/s; -1 or EINVAL when the link is down or the driver does not say (virtio, veth).
    if (readLine(net + "/" + name + "/speed", &speed)) {
      double mbit = std::strtod(speed.c_str(), nullptr);
      if (mbit > 0 && mbit < 1e7) nic.speed_gbps = mbit / 1000.0;
    }
    nics.push_back(nic);
  }
  std::string ib = root + "/class/infiniband";
  for (const std::string& name : listDir(ib)) {
    Nic nic;
    nic.name = name;
    nic.bus_id = pciBusIdOf(ib + "/" + name + "/device");
    nic.numa_node = readNumaNode(ib + "/" + name + "/device");
    std::string rate;
    if (readLine(ib + "/" + name + "/ports/1/rate", &rate)) nic.speed_gbps = parseIbRate(rate);
    nics.push_back(nic);
  }
  return nics;
}

// Rebuilds `graph` without the nodes `drop` selects (and their links).
template <typename Pred>
void removeNodes(Graph* graph, Pred drop) {
  Graph kept;
  std::vector<int> remap(graph->nodes.size(), -1);
  for (size_t i = 0; i < graph->nodes.size(); ++i) {
    if (!drop(graph->nodes[i])) remap[i] = kept.addNode(graph->nodes[i]);
  }
  for (Link link : graph->links) {
    if (remap[link.a] < 0 || remap[link.b] < 0) continue;
    link.a = remap[link.a];
    link.b = remap[link.b];
    kept.addLink(link);
  }
  *graph = std::move(kept);
}

int cpuNodeOf(const Graph& graph, int numa) {
  for (int idx : graph.nodesOfKind(NodeKind::Cpu)) {
    if (graph.nodes[idx].index == numa) return idx;
  }
  return -1;
}

void attachNics(std::vector<Nic> nics, HostTopology* host) {
  Graph& graph = host->graph;
  for (size_t i = 0; i < nics.size(); ++i) {
    Nic& nic = nics[i];
    int node = graph.findNode(NodeKind::Nic, nic.bus_id.empty() ? nic.name : nic.bus_id);
    if (node < 0) {
      Node n;
      n.kind = NodeKind::Nic;
      n.id = nic.bus_id.empty() ? nic.name : nic.bus_id;
      n.name = nic.name;
      n.numa_node = nic.numa_node;
      n.index = static_cast<int>(i);
      node = graph.addNode(n);
      int cpu = cpuNodeOf(graph, nic.numa_node < 0 ? host->numa_nodes.front().id : nic.numa_node);
      // A virtual interface (veth, bridge, virtio without PCI id) has no PCIe hop to model.
      if (!nic.bus_id.empty() && cpu >= 0) {
        graph.addLink({cpu, node, LinkKind::Pci, 0, pcieGBps(0, 0), kPcieHopLatencyUs});
      }
    }
    if (nic.numa_node < 0) nic.numa_node = graph.nodes[node].numa_node;
  }
  host->nics = std::move(nics);
}

std::string hostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name)) != 0) return "localhost";
  return name;
}

}  // namespace

HostTopology probeHost(HwlocApi* hwloc, NvmlApi* nvml, const std::string& sysfs_root,
                       bool require_gpus) {
  HostTopology host;
  std::vector<std::string> sources;
  if (hwloc && hwloc->available()) {
    try {
      host = readHwlocXml(hwloc->exportXml(), "probe:hwloc");
    } catch (const Error& e) {
      throw Error(std::string("probe: while reading hwloc's live topology: ") + e.what());
    }
    sources.push_back("hwloc");
  } else {
    readSysfsNumaNodes(sysfs_root, &host);
    host.warnings.push_back(
        "probe: hwloc unavailable (" +
        (hwloc ? hwloc->unavailableReason() : std::string("no hwloc given")) +
        "); NUMA nodes and CPUs from " + sysfs_root + ", no PCI tree");
    sources.push_back("sysfs");
  }
  host.hostname = hostName();
  // GPUs come from NVML alone: hwloc sees NVIDIA PCI functions even where no driver can use them.
  size_t hwloc_gpus = host.gpus.size();
  host.gpus.clear();
  bool nvml_ok = nvml && nvml->available();
  removeNodes(&host.graph, [&](const Node& n) { return n.kind == NodeKind::Gpu && !nvml_ok; });
  if (nvml_ok) {
    // NVML's per-link view replaces hwloc's NVLinkBandwidth matrix (hwloc got it from NVML).
    std::vector<Link> links;
    for (const Link& link : host.graph.links) {
      if (link.kind != LinkKind::NvLink) links.push_back(link);
    }
    host.graph.links = std::move(links);
    addNvmlGpus(nvml, &host);
    sources.push_back("nvml");
  } else {
    std::string reason = nvml ? nvml->unavailableReason() : "no NVML given";
    if (require_gpus) {
      throw Unavailable("probe: no GPU: NVML unavailable: " + reason +
                        "; install the NVIDIA driver (" + kNvmlLibrary +
                        ") or pin a topology with TORCH_TOPO_FILE");
    }
    host.warnings.push_back("probe:nvml: " + reason + "; reporting zero GPUs" +
                            (hwloc_gpus ? " (hwloc saw " + std::to_string(hwloc_gpus) +
                                              " NVIDIA PCI GPUs)"
                                        : std::string()));
  }
  if (require_gpus && host.gpus.empty()) {
    throw Unavailable("probe: no GPU: NVML sees 0 devices; check CUDA_VISIBLE_DEVICES and the "
                      "container's GPU access, or pin a topology with TORCH_TOPO_FILE");
  }
  for (Gpu& gpu : host.gpus) {
    if (gpu.numa_node >= 0) continue;
    gpu.numa_node = readNumaNode(sysfs_root + "/bus/pci/devices/" + gpu.bus_id);
    for (const NumaNode& numa : host.numa_nodes) {
      if (numa.id == gpu.numa_node) gpu.cpu_affinity = numa.cpus;
    }
  }
  // hwloc's NIC objects carry no speed; /sys is the one source of names, speeds and RDMA devices.
  host.nics.clear();
  attachNics(readSysfsNics(sysfs_root), &host);
  host.source = "probe:";
  for (size_t i = 0; i < sources.size(); ++i) host.source += (i ? "+" : "") + sources[i];
  computePaths(&host);
  return host;
}

HostTopology probeThisHost(bool require_gpus) {
  std::unique_ptr<HwlocApi> hwloc = loadHwloc();
  std::unique_ptr<NvmlApi> nvml = loadNvml();
  return probeHost(hwloc.get(), nvml.get(), "/sys", require_gpus);
}

}  // namespace torch_topo::topo
