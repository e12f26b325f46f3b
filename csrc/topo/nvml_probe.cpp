// SPDX-License-Identifier: Apache-2.0
// NVML loaded with dlopen, and the GPUs/NVLinks it reports added to a host graph (layer:
// csrc/topo). The declarations below mirror nvml.h; the header is not needed to build.
#include "topo/nvml_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "topo/cpulist.h"
#include "topo/link_tables.h"
#include "topo/sysfs_probe.h"

namespace torch_topo::topo {
namespace {

constexpr const char* kNvmlCheckFix = "check the GPUs with nvidia-smi -q";

// nvml.h types, by value as the C API defines them (nvmlPciInfo_t layout of the _v3 call).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlErrorArgumentVersionMismatch = 25;
constexpr int kNvmlNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

// GPU fabric info as nvml.h declares it (NVIDIA/go-nvml gen/nvml/nvml.h): nvmlGpuFabricInfo_t of
// r535 (CUDA 12.2 header, go-nvml 075f45f, the clique id then named partitionId), and
// nvmlGpuFabricInfo_v3_t of r580 (CUDA 13.0 header, go-nvml 9da9e13; unchanged in 13.3,
// 2f9e261), whose fields up to healthMask are r550's nvmlGpuFabricInfo_v2_t (CUDA 12.4, f7ceebd).
struct NvmlGpuFabricInfo {
  unsigned char cluster_uuid[16];  // NVML_GPU_FABRIC_UUID_LEN
  NvmlReturn status;
  unsigned int clique_id;
  unsigned char state;  // nvmlGpuFabricState_t
};
struct NvmlGpuFabricInfoV3 {
  unsigned int version;
  unsigned char cluster_uuid[16];
  NvmlReturn status;
  unsigned int clique_id;
  unsigned char state;
  unsigned int health_mask;
  unsigned char health_summary;  // v3 only
};
// NVML_STRUCT_VERSION(GpuFabricInfo, v) = sizeof(nvmlGpuFabricInfo_v<v>_t) | v << 24.
constexpr unsigned kNvmlGpuFabricInfoV2 =
    offsetof(NvmlGpuFabricInfoV3, health_summary) | (2u << 24);
constexpr unsigned kNvmlGpuFabricInfoV3 = sizeof(NvmlGpuFabricInfoV3) | (3u << 24);
static_assert(kNvmlGpuFabricInfoV2 == 0x02000024 && kNvmlGpuFabricInfoV3 == 0x03000028,
              "nvml.h's nvmlGpuFabricInfo_v2_t has 36 bytes and _v3_t 40");

template <typename Raw>
NvmlFabricInfo toFabricInfo(NvmlReturn result, const Raw& raw) {
  NvmlFabricInfo info;
  info.result = result;
  std::copy(std::begin(raw.cluster_uuid), std::end(raw.cluster_uuid), info.cluster_uuid.begin());
  info.status = raw.status;
  info.clique_id = raw.clique_id;
  info.state = static_cast<NvmlFabricState>(raw.state);
  return info;
}

std::string formatBusId(const NvmlPciInfo& pci) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.0", pci.domain & 0xffff, pci.bus & 0xff,
                pci.device & 0x1f);
  return text;
}

class DlNvml : public NvmlApi {
 public:
  explicit DlNvml(const std::string& library) {
    handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* err = dlerror();
      reason_ = err ? err : (library + ": cannot be loaded");
      return;
    }
    init_ = sym<NvmlReturn (*)()>("nvmlInit_v2");
    shutdown_ = sym<NvmlReturn (*)()>("nvmlShutdown");
    count_ = sym<NvmlReturn (*)(unsigned*)>("nvmlDeviceGetCount_v2");
    handle_by_index_ = sym<NvmlReturn (*)(unsigned, NvmlDevice*)>("nvmlDeviceGetHandleByIndex_v2");
    pci_ = sym<NvmlReturn (*)(NvmlDevice, NvmlPciInfo*)>("nvmlDeviceGetPciInfo_v3");
    name_ = sym<NvmlReturn (*)(NvmlDevice, char*, unsigned)>("nvmlDeviceGetName");
    cc_ = sym<NvmlReturn (*)(NvmlDevice, int*, int*)>("nvmlDeviceGetCudaComputeCapability");
    link_state_ = sym<NvmlReturn (*)(NvmlDevice, unsigned, int*)>("nvmlDeviceGetNvLinkState");
    link_remote_ =
        sym<NvmlReturn (*)(NvmlDevice, unsigned, NvmlPciInfo*)>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
    link_type_ = sym<NvmlReturn (*)(NvmlDevice, unsigned, int*)>(
        "nvmlDeviceGetNvLinkRemoteDeviceType");
    // Optional: added in r470 drivers; older ones leave the NUMA node to sysfs.
    numa_ = sym<NvmlReturn (*)(NvmlDevice, unsigned*)>("nvmlDeviceGetNumaNodeId");
    // Optional too: only asked where the NUMA query names a node without CPUs.
    cpu_affinity_ =
        sym<NvmlReturn (*)(NvmlDevice, unsigned, unsigned long*)>("nvmlDeviceGetCpuAffinity");
    // Optional: r550 added the versioned call; r535 has only the plain one.
    fabric_v_ =
        sym<NvmlReturn (*)(NvmlDevice, NvmlGpuFabricInfoV3*)>("nvmlDeviceGetGpuFabricInfoV");
    fabric_ = sym<NvmlReturn (*)(NvmlDevice, NvmlGpuFabricInfo*)>("nvmlDeviceGetGpuFabricInfo");
    if (!init_ || !count_ || !handle_by_index_ || !pci_) {
      reason_ = library + ": missing nvmlInit_v2/nvmlDeviceGetCount_v2/nvmlDeviceGetPciInfo_v3 "
                          "(driver older than r418?)";
      return;
    }
    NvmlReturn rc = init_();
    if (rc != kNvmlSuccess) {
      reason_ = "nvmlInit_v2 failed with NVML error " + std::to_string(rc) +
                " (no NVIDIA driver loaded, or no GPU visible in this container)";
      return;
    }
    initialised_ = true;
  }

  ~DlNvml() override {
    if (initialised_ && shutdown_) shutdown_();
    if (handle_) dlclose(handle_);
  }

  bool available() const override { return initialised_; }
  std::string unavailableReason() const override { return initialised_ ? "" : reason_; }

  int deviceCount() override {
    unsigned n = 0;
    if (!initialised_ || count_(&n) != kNvmlSuccess) return 0;
    return static_cast<int>(n);
  }

  bool pciBusId(int dev, std::string* bus_id) override {
    NvmlPciInfo pci{};
    NvmlDevice d = device(dev);
    if (!d || pci_(d, &pci) != kNvmlSuccess) return false;
    *bus_id = formatBusId(pci);
    return true;
  }

  bool name(int dev, std::string* name) override {
    char text[kNvmlNameBufferSize] = {};
    NvmlDevice d = device(dev);
    if (!d || !name_ || name_(d, text, sizeof(text)) != kNvmlSuccess) return false;
    *name = text;
    return true;
  }

  bool computeCapability(int dev, int* sm) override {
    int major = 0, minor = 0;
    NvmlDevice d = device(dev);
    if (!d || !cc_ || cc_(d, &major, &minor) != kNvmlSuccess) return false;
    *sm = major * 10 + minor;
    return true;
  }

  bool numaNode(int dev, int* node) override {
    unsigned id = 0;
    NvmlDevice d = device(dev);
    if (!d || !numa_ || numa_(d, &id) != kNvmlSuccess) return false;
    *node = static_cast<int>(id);
    return true;
  }

  bool cpuAffinity(int dev, std::set<int>* cpus) override {
    // nvml.h's bitmask: CPU k is bit k % B of word k / B, B the bits of an unsigned long.
    constexpr long kWordBits = sizeof(unsigned long) * CHAR_BIT;
    std::vector<unsigned long> words(kMaxCpuId / kWordBits);
    NvmlDevice d = device(dev);
    if (!d || !cpu_affinity_ ||
        cpu_affinity_(d, static_cast<unsigned>(words.size()), words.data()) != kNvmlSuccess) {
      return false;
    }
    cpus->clear();
    for (size_t w = 0; w < words.size(); ++w) {
      for (long bit = 0; bit < kWordBits; ++bit) {
        if ((words[w] >> bit) & 1ul) cpus->insert(static_cast<int>(w * kWordBits + bit));
      }
    }
    return !cpus->empty();
  }

  bool nvlinkRemote(int dev, int link, std::string* remote_bus_id, NvlinkPeer* kind) override {
    int active = 0;
    NvmlPciInfo pci{};
    NvmlDevice d = device(dev);
    if (!d || !link_state_ || !link_remote_) return false;
    if (link_state_(d, static_cast<unsigned>(link), &active) != kNvmlSuccess || !active) {
      return false;
    }
    if (link_remote_(d, static_cast<unsigned>(link), &pci) != kNvmlSuccess) return false;
    *remote_bus_id = formatBusId(pci);
    // NVML_NVLINK_DEVICE_TYPE_GPU = 0, _IBMNPU = 1, _SWITCH = 2, _UNKNOWN = 0xFF.
    int type = 0xff;
    if (!link_type_ || link_type_(d, static_cast<unsigned>(link), &type) != kNvmlSuccess) type = 0xff;
    *kind = type == 0 ? NvlinkPeer::Gpu
            : type == 1 ? NvlinkPeer::Cpu
            : type == 2 ? NvlinkPeer::Switch
                        : NvlinkPeer::Unknown;
    return true;
  }

  bool gpuFabric(int dev, NvmlFabricInfo* info) override {
    NvmlDevice d = device(dev);
    if (!d || (!fabric_v_ && !fabric_)) return false;
    if (!fabric_v_) {
      NvmlGpuFabricInfo raw{};
      NvmlReturn rc = fabric_(d, &raw);
      *info = toFabricInfo(rc, raw);
      return true;
    }
    // v2 first: every driver with the call knows it (r550 on), and it holds all the probe
    // reads; v3 only for a driver that has dropped v2 (deprecated since r580's nvml.h).
    NvmlGpuFabricInfoV3 raw{};
    raw.version = kNvmlGpuFabricInfoV2;
    NvmlReturn rc = fabric_v_(d, &raw);
    if (rc == kNvmlErrorArgumentVersionMismatch) {
      raw = {};
      raw.version = kNvmlGpuFabricInfoV3;
      rc = fabric_v_(d, &raw);
    }
    *info = toFabricInfo(rc, raw);
    return true;
  }

 private:
  template <typename Fn>
  Fn sym(const char* name) {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  NvmlDevice device(int dev) {
    NvmlDevice d = nullptr;
    if (!initialised_ || dev < 0 || handle_by_index_(static_cast<unsigned>(dev), &d) != kNvmlSuccess) {
      return nullptr;
    }
    return d;
  }

  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string reason_;
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*count_)(unsigned*) = nullptr;
  NvmlReturn (*handle_by_index_)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*pci_)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*name_)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*cc_)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*link_state_)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*link_remote_)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  NvmlReturn (*numa_)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*cpu_affinity_)(NvmlDevice, unsigned, unsigned long*) = nullptr;
  NvmlReturn (*link_type_)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*fabric_v_)(NvmlDevice, NvmlGpuFabricInfoV3*) = nullptr;
  NvmlReturn (*fabric_)(NvmlDevice, NvmlGpuFabricInfo*) = nullptr;
};

int cpuNodeFor(Graph* graph, int numa) {
  for (int idx : graph->nodesOfKind(NodeKind::Cpu)) {
    if (graph->nodes[idx].index == numa) return idx;
  }
  std::vector<int> cpus = graph->nodesOfKind(NodeKind::Cpu);
  if (!cpus.empty()) return cpus.front();
  return graph->addNode(makeCpuNode(0));
}

const NumaNode* listedNode(const std::vector<NumaNode>& nodes, int id) {
  for (const NumaNode& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

bool hasCpus(const std::vector<NumaNode>& nodes, int id) {
  const NumaNode* n = listedNode(nodes, id);
  return n && !n->cpus.empty();
}

// The listed node sharing most CPUs with `cpus` (the first on a tie), -1 when none shares any.
int nodeOfCpus(const std::vector<NumaNode>& nodes, const std::set<int>& cpus) {
  int best = -1;
  size_t best_shared = 0;
  for (const NumaNode& n : nodes) {
    std::set<int> own = parseCpulist(n.cpus, "NUMA node " + std::to_string(n.id) + " cpulist");
    size_t shared = std::count_if(own.begin(), own.end(), [&](int c) { return cpus.count(c); });
    if (shared > best_shared) {
      best = n.id;
      best_shared = shared;
    }
  }
  return best;
}

// The GPU's CPU-side NUMA node from the node NVML named (-1: none), `pci_node` the PCI tree's.
// Where the GPU's memory is a NUMA node (GH200, GB200), NVML names that node, which has no CPUs:
// a node the host lists without CPUs, or does not list, gives way to the node NVML's CPU
// affinity for the GPU falls in. Failing that, a listed CPU-less node gives way to the PCI
// tree's node if that one has CPUs, else to none (the probe then asks sysfs); an unlisted node
// stays, since hwloc leaves out the nodes outside this process's cpuset. A host that knows no
// node's CPUs cannot tell, and keeps NVML's node. NVML's node, where replaced, is taken as the
// GPU's memory's (`memory_node`).
int cpuSideNode(NvmlApi* nvml, int dev, int nvml_node, int pci_node,
                const std::vector<NumaNode>& nodes, int* memory_node) {
  if (nvml_node < 0) return pci_node;
  bool known_cpus =
      std::any_of(nodes.begin(), nodes.end(), [](const NumaNode& n) { return !n.cpus.empty(); });
  if (!known_cpus || hasCpus(nodes, nvml_node)) return nvml_node;
  std::set<int> affinity;
  int by_affinity = nvml->cpuAffinity(dev, &affinity) ? nodeOfCpus(nodes, affinity) : -1;
  bool listed = listedNode(nodes, nvml_node) != nullptr;
  if (by_affinity < 0 && !listed) return nvml_node;
  *memory_node = nvml_node;
  if (by_affinity >= 0) return by_affinity;
  return hasCpus(nodes, pci_node) ? pci_node : -1;
}

const char* fabricStateName(NvmlFabricState state) {
  switch (state) {
    case NvmlFabricState::NotSupported:
      return "not supported";
    case NvmlFabricState::NotStarted:
      return "not started";
    case NvmlFabricState::InProgress:
      return "in progress";
    case NvmlFabricState::Completed:
      return "completed";
  }
  return "unknown";
}

// The GPU's multi-node NVLink domain, "<cluster uuid as hex>/<clique id>", "" without one. Hosts
// without multi-node NVLink answer "not supported" (result or state) or lack the call: no
// warning. A query that fails otherwise, or a registration that has not completed, leaves the
// domain unknown: the GPU is taken as having none (its peers on other hosts then cost NIC time)
// and a warning says why.
std::string nvlinkDomain(NvmlApi* nvml, int dev, const Gpu& gpu,
                         std::vector<std::string>* warnings) {
  NvmlFabricInfo f;
  if (!nvml->gpuFabric(dev, &f) || f.result == kNvmlErrorNotSupported ||
      (f.result == kNvmlSuccess && f.state == NvmlFabricState::NotSupported)) {
    return "";
  }
  std::string problem;
  if (f.result != kNvmlSuccess) {
    problem = "GPU fabric query: got NVML error " + std::to_string(f.result) +
              ", expected success or not supported";
  } else if (f.state != NvmlFabricState::Completed) {
    problem = "GPU fabric state: got " + std::to_string(static_cast<int>(f.state)) + " (" +
              fabricStateName(f.state) + "), expected 3 (completed)";
  }
  if (!problem.empty()) {
    warnings->push_back("probe:nvml failed: NVML device " + std::to_string(dev) + " (GPU " +
                        std::to_string(gpu.index) + ", " + gpu.bus_id + "): " + problem +
                        "; its NVLink domain is unknown, taken as none (other hosts reached "
                        "through NICs); check the Fabric section of nvidia-smi -q");
    return "";
  }
  // Completed with an error status and a zero cluster UUID is what single-host H100s report
  // (meta-pytorch/torchcomms PR 936, 1385), so neither is a domain nor worth a warning; a
  // GB200 whose registration failed looks the same (Azure/azhpc-images PR 506) and stays
  // silent too.
  bool zero_uuid = std::all_of(f.cluster_uuid.begin(), f.cluster_uuid.end(),
                               [](unsigned char b) { return b == 0; });
  if (f.status != kNvmlSuccess || zero_uuid) return "";
  std::string domain;
  char hex[3];
  for (unsigned char b : f.cluster_uuid) {
    std::snprintf(hex, sizeof(hex), "%02x", b);
    domain += hex;
  }
  return domain + "/" + std::to_string(f.clique_id);
}

}  // namespace

std::unique_ptr<NvmlApi> loadNvml(const std::string& library) {
  return std::make_unique<DlNvml>(library);
}

void addNvmlGpus(NvmlApi* nvml, HostTopology* host) {
  if (!nvml || !nvml->available()) return;
  struct Found {
    int dev;
    Gpu gpu;
  };
  std::vector<Found> found;
  std::set<std::string> bus_ids;
  int count = nvml->deviceCount();
  for (int dev = 0; dev < count; ++dev) {
    Found f{dev, {}};
    // Per-device failures cost that GPU only; the message shape is the probe's (probe.h).
    std::string what = "probe:nvml failed: NVML device " + std::to_string(dev) + ": PCI bus id ";
    if (!nvml->pciBusId(dev, &f.gpu.bus_id) || !isPciBusId(f.gpu.bus_id)) {
      host->warnings.push_back(what + "unreadable, got '" + f.gpu.bus_id +
                               "', expected dddd:bb:dd.f; GPU skipped; " + kNvmlCheckFix);
      continue;
    }
    if (!bus_ids.insert(f.gpu.bus_id).second) {
      host->warnings.push_back(what + f.gpu.bus_id + " repeats an earlier device's; GPU skipped; " +
                               kNvmlCheckFix);
      continue;
    }
    nvml->name(dev, &f.gpu.name);
    nvml->computeCapability(dev, &f.gpu.sm);
    int numa = -1;
    if (nvml->numaNode(dev, &numa)) f.gpu.numa_node = numa;
    found.push_back(f);
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.gpu.bus_id < b.gpu.bus_id; });
  Graph& graph = host->graph;
  std::map<std::string, int> node_of_bus;
  for (size_t i = 0; i < found.size(); ++i) {
    Gpu& gpu = found[i].gpu;
    gpu.index = static_cast<int>(i);
    int node = graph.findNode(NodeKind::Gpu, gpu.bus_id);
    gpu.numa_node = cpuSideNode(nvml, found[i].dev, gpu.numa_node,
                                node < 0 ? -1 : graph.nodes[node].numa_node, host->numa_nodes,
                                &gpu.memory_numa_node);
    if (node < 0) {
      Node n;
      n.kind = NodeKind::Gpu;
      n.id = gpu.bus_id;
      n.numa_node = gpu.numa_node;
      node = graph.addNode(n);
      graph.addLink({cpuNodeFor(&graph, gpu.numa_node), node, LinkKind::Pci, 0, pcieGBps(0, 0),
                     kPcieHopLatencyUs});
    }
    Node& n = graph.nodes[node];
    n.name = gpu.name;
    n.index = gpu.index;
    n.numa_node = gpu.numa_node;
    for (const NumaNode& numa : host->numa_nodes) {
      if (numa.id == gpu.numa_node) gpu.cpu_affinity = numa.cpus;
    }
    node_of_bus[gpu.bus_id] = node;
    gpu.nvlink_domain = nvlinkDomain(nvml, found[i].dev, gpu, &host->warnings);
    host->gpus.push_back(gpu);
  }
  // Lanes per peer; a GPU pair is counted from the lower index only (NVML reports it twice).
  for (size_t i = 0; i < found.size(); ++i) {
    std::map<std::pair<std::string, NvlinkPeer>, int> lanes;
    for (int link = 0; link < NvmlApi::kMaxLinks; ++link) {
      std::string remote;
      NvlinkPeer kind = NvlinkPeer::Unknown;
      if (nvml->nvlinkRemote(found[i].dev, link, &remote, &kind) && remote != found[i].gpu.bus_id) {
        ++lanes[{remote, kind}];
      }
    }
    int self = node_of_bus[found[i].gpu.bus_id];
    double lane_gbps = nvlinkLaneGBps(found[i].gpu.sm);
    for (const auto& [peer_key, n] : lanes) {
      const auto& [remote, kind] = peer_key;
      auto peer = node_of_bus.find(remote);
      int other;
      if (kind == NvlinkPeer::Cpu) {
        // POWER9/POWER8 NVLink to the CPU: the link ends at the GPU's own socket.
        other = cpuNodeFor(&graph, found[i].gpu.numa_node);
      } else if (peer != node_of_bus.end()) {
        if (graph.nodes[peer->second].index < static_cast<int>(i)) continue;
        other = peer->second;
      } else {
        other = graph.findNode(NodeKind::NvSwitch, remote);
        if (other < 0) {
          Node sw;
          sw.kind = NodeKind::NvSwitch;
          sw.id = remote;
          sw.name = "NVSwitch";
          other = graph.addNode(sw);
        }
      }
      graph.addLink({self, other, LinkKind::NvLink, n, n * lane_gbps, kNvlinkHopLatencyUs});
    }
  }
}

}  // namespace torch_topo::topo
