// SPDX-License-Identifier: Apache-2.0
// Live probe: hwloc (or /sys) base graph, NICs from /sys (EFA's with aws-ofi-nccl's latency), GPUs
// from NVML, each source isolated so that a failing one costs its own facts and a warning, never
// the probe (layer: csrc/topo).
#include "topo/probe.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <set>
#include <vector>

#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/link_tables.h"
#include "topo/net_plugin_latency.h"
#include "topo/nvml_probe.h"
#include "topo/paths.h"
#include "topo/sysfs_probe.h"

namespace torch_topo::topo {
namespace {

// Runs one stage of the probe. Any exception (a reader's ParseError, a fake's or a driver
// library's own) becomes "probe:<source> failed: <reason>; <fix>" and false: the caller goes on
// without that stage's facts.
template <typename Fn>
bool runIsolated(const std::string& source, const std::string& fix,
                 std::vector<std::string>* notes, Fn&& stage) {
  std::string reason;
  try {
    stage();
    return true;
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "an exception that is not a std::exception";
  }
  notes->push_back("probe:" + source + " failed: " + reason + "; " + fix);
  return false;
}

// CPU nodes joined pairwise by SMP links, for a host whose NUMA nodes came from /sys.
void addCpuNodes(HostTopology* host) {
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

std::string nicKey(const Nic& nic) { return nic.bus_id.empty() ? nic.name : nic.bus_id; }

// Makes `nics` the host's NICs: a NIC hwloc placed in the PCI tree keeps its place (joined by bus
// id), a new one hangs off the CPU of its NUMA node, and NIC nodes of no listed NIC go.
void attachNics(std::vector<Nic> nics, HostTopology* host) {
  Graph& graph = host->graph;
  std::set<std::string> listed;
  for (size_t i = 0; i < nics.size(); ++i) {
    Nic& nic = nics[i];
    int node = graph.findNode(NodeKind::Nic, nicKey(nic));
    if (node < 0) {
      Node n;
      n.kind = NodeKind::Nic;
      n.id = nicKey(nic);
      n.numa_node = nic.numa_node;
      node = graph.addNode(n);
      int cpu = cpuNodeOf(graph, nic.numa_node < 0 ? host->numa_nodes.front().id : nic.numa_node);
      // Without a bus id there is no PCIe hop to model (a file that names a NIC only).
      if (!nic.bus_id.empty() && cpu >= 0) {
        graph.addLink({cpu, node, LinkKind::Pci, 0, pcieGBps(0, 0), kPcieHopLatencyUs});
      }
    }
    graph.nodes[node].name = nic.name;
    graph.nodes[node].index = static_cast<int>(i);
    if (nic.numa_node < 0) nic.numa_node = graph.nodes[node].numa_node;
    listed.insert(nicKey(nic));
  }
  removeNodes(&graph,
              [&](const Node& n) { return n.kind == NodeKind::Nic && !listed.count(n.id); });
  host->nics = std::move(nics);
}

// hwloc lists only the NUMA nodes this process may use (a container's cpuset), while NVML and
// /sys place GPUs and NICs on any node: a node named by a device joins the list with unknown
// CPUs, so the host's JSON, which the ranks exchange, is one the reader accepts.
void listDeviceNumaNodes(HostTopology* host) {
  std::set<int> nodes;
  for (const Gpu& gpu : host->gpus) nodes.insert(gpu.numa_node);
  for (const Nic& nic : host->nics) nodes.insert(nic.numa_node);
  for (const NumaNode& numa : host->numa_nodes) nodes.erase(numa.id);
  for (int id : nodes) {
    if (id >= 0) host->numa_nodes.push_back({id, ""});
  }
  std::sort(host->numa_nodes.begin(), host->numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
}

std::string hostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name)) != 0) return "localhost";
  return name;
}

const std::string kPinFix = "or pin this host's topology with TORCH_TOPO_FILE";

// NUMA nodes, CPUs and the PCI tree: hwloc's export, else /sys, else one NUMA node of unknown
// CPUs. Appends the sources used to `sources`.
HostTopology probeBase(HwlocApi* hwloc, const std::string& sysfs_root,
                       std::vector<std::string>* sources, std::vector<std::string>* notes) {
  HostTopology host;
  if (hwloc && hwloc->available()) {
    bool ok = runIsolated(
        "hwloc",
        "NUMA nodes and CPUs from " + sysfs_root + " instead, no PCI tree; report the error " +
            kPinFix + " (`lstopo FILE.xml` on this host)",
        notes, [&] { host = readHwlocXml(hwloc->exportXml(), "probe:hwloc"); });
    if (ok) {
      sources->push_back("hwloc");
      return host;
    }
  } else {
    notes->push_back("probe:hwloc: " +
                     (hwloc ? hwloc->unavailableReason() : std::string("no hwloc given")) +
                     "; NUMA nodes and CPUs from " + sysfs_root + ", no PCI tree");
  }
  host = HostTopology{};
  bool ok = runIsolated(
      "sysfs", "taking one NUMA node with unknown CPUs (no NUMA binding); " + kPinFix, notes,
      [&] { host.numa_nodes = readSysfsNumaNodes(sysfs_root); });
  if (ok) sources->push_back("sysfs");
  if (!ok) host.numa_nodes = {{0, ""}};
  addCpuNodes(&host);
  return host;
}

// Replaces hwloc's GPUs by NVML's (hwloc sees NVIDIA PCI functions even where no driver can use
// them, and NVML's per-link view replaces hwloc's NVLinkBandwidth matrix, which came from NVML).
// Throws Unavailable for `require_gpus` without a GPU.
void probeGpus(NvmlApi* nvml, const std::string& sysfs_root, bool require_gpus,
               HostTopology* host, std::vector<std::string>* sources,
               std::vector<std::string>* notes) {
  size_t hwloc_gpus = host->gpus.size();
  host->gpus.clear();
  std::string seen = hwloc_gpus ? " (hwloc saw " + std::to_string(hwloc_gpus) +
                                      " NVIDIA PCI GPUs)"
                                : std::string();
  std::string fix = "install the NVIDIA driver (" + std::string(kNvmlLibrary) +
                    ") and check CUDA_VISIBLE_DEVICES and the container's GPU access, " + kPinFix;
  bool found = false;
  std::string reason;
  if (nvml && nvml->available()) {
    HostTopology with_gpus = *host;
    std::vector<Link> links;
    for (const Link& link : with_gpus.graph.links) {
      if (link.kind != LinkKind::NvLink) links.push_back(link);
    }
    with_gpus.graph.links = std::move(links);
    found = runIsolated("nvml", "reporting zero GPUs" + seen + "; " + fix, notes,
                        [&] { addNvmlGpus(nvml, &with_gpus); });
    if (found) {
      *host = std::move(with_gpus);
      sources->push_back("nvml");
      std::set<std::string> claimed;
      for (const Gpu& gpu : host->gpus) claimed.insert(gpu.bus_id);
      removeNodes(&host->graph, [&](const Node& n) {
        return n.kind == NodeKind::Gpu && !claimed.count(n.id);  // a GPU NVML skipped
      });
    } else {
      reason = notes->back();
    }
  } else {
    reason = nvml ? nvml->unavailableReason() : "no NVML given";
    // On a host where hwloc saw NVIDIA GPUs a missing NVML is a fault; elsewhere it is the
    // normal state of a CPU machine.
    notes->push_back("probe:nvml" + std::string(hwloc_gpus ? " failed: " : ": ") + reason +
                     "; reporting zero GPUs" + seen + (hwloc_gpus ? "; " + fix : ""));
  }
  if (!found) {
    removeNodes(&host->graph, [](const Node& n) { return n.kind == NodeKind::Gpu; });
    if (require_gpus) throw Unavailable("probe: no GPU: NVML unavailable: " + reason + "; " + fix);
  }
  if (require_gpus && host->gpus.empty()) {
    throw Unavailable("probe: no GPU: NVML sees 0 devices; " + fix);
  }
  for (Gpu& gpu : host->gpus) {
    if (gpu.numa_node >= 0) continue;
    gpu.numa_node = readSysfsPciNumaNode(sysfs_root, gpu.bus_id);
    for (const NumaNode& numa : host->numa_nodes) {
      if (numa.id == gpu.numa_node) gpu.cpu_affinity = numa.cpus;
    }
  }
}

}  // namespace

HostTopology probeHost(HwlocApi* hwloc, NvmlApi* nvml, const std::string& sysfs_root,
                       bool require_gpus) {
  std::vector<std::string> sources, notes;
  HostTopology host = probeBase(hwloc, sysfs_root, &sources, &notes);
  host.hostname = hostName();
  probeGpus(nvml, sysfs_root, require_gpus, &host, &sources, &notes);
  // hwloc's NIC objects carry no speed and include no RDMA-only view of a port: /sys names the
  // NICs and gives their rates; hwloc's list stands in when /sys cannot be read.
  std::vector<Nic> nics = host.nics;
  runIsolated("sysfs", "NICs from hwloc only, line rates unknown; " + kPinFix, &notes,
              [&] { nics = readSysfsNics(sysfs_root); });
  runIsolated("aws-ofi-nccl",
              "EFA NICs without the plugin's latency (0), so NCCL's estimates leave it out; set "
              "OFI_NCCL_NET_LATENCY to a number or unset it",
              &notes, [&] { setEfaNicLatencies(sysfs_root, &nics); });
  attachNics(std::move(nics), &host);
  listDeviceNumaNodes(&host);
  host.format.clear();  // a live probe, not a file format
  host.source = sources.empty() ? "probe:none" : "probe:";
  for (size_t i = 0; i < sources.size(); ++i) host.source += (i ? "+" : "") + sources[i];
  computePaths(&host);
  host.warnings.insert(host.warnings.end(), notes.begin(), notes.end());
  return host;
}

HostTopology probeThisHost(bool require_gpus) {
  std::unique_ptr<HwlocApi> hwloc = loadHwloc();
  std::unique_ptr<NvmlApi> nvml = loadNvml();
  return probeHost(hwloc.get(), nvml.get(), "/sys", require_gpus);
}

}  // namespace torch_topo::topo
