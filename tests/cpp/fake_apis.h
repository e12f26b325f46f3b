// SPDX-License-Identifier: Apache-2.0
// Test doubles of NvmlApi and HwlocApi whose answers come from real topology files, faulty
// variants of them, and a sysfs tree in a temporary directory, so the probe logic runs on
// machines without GPUs or hwloc.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "topo/cpulist.h"
#include "topo/graph.h"
#include "topo/hwloc_api.h"
#include "topo/nvml_api.h"

namespace torch_topo::topo::testing {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string dataFile(const std::string& rel) {
  return std::string(TORCH_TOPO_TEST_DATA) + "/" + rel;
}

/// NVML as the host described by `host` would answer: its GPUs in reverse order (NVML's order
/// need not be bus order), as NUMA node the GPU's memory's where the host has one (GB200's GPU
/// NUMA ID: nvmlDeviceGetNumaNodeId's answer there), else its NUMA node, its cpu_affinity as CPU
/// affinity unless withoutCpuAffinity, one NVML link per NVLink lane of the graph, and a GPU
/// fabric query answering "not supported" (a host without multi-node NVLink) unless setFabric
/// says otherwise.
class FakeNvml : public NvmlApi {
 public:
  explicit FakeNvml(const HostTopology& host) {
    for (auto it = host.gpus.rbegin(); it != host.gpus.rend(); ++it) gpus_.push_back(*it);
    for (const Link& link : host.graph.links) {
      if (link.kind != LinkKind::NvLink) continue;
      addLanes(host.graph, link.a, link.b, link.lanes);
      addLanes(host.graph, link.b, link.a, link.lanes);
    }
  }
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  int deviceCount() override { return static_cast<int>(gpus_.size()); }
  bool pciBusId(int dev, std::string* bus_id) override {
    *bus_id = gpus_.at(dev).bus_id;
    return true;
  }
  bool name(int dev, std::string* name) override {
    *name = gpus_.at(dev).name;
    return true;
  }
  bool computeCapability(int dev, int* sm) override {
    *sm = gpus_.at(dev).sm;
    return *sm > 0;
  }
  bool numaNode(int dev, int* node) override {
    const Gpu& gpu = gpus_.at(dev);
    *node = gpu.memory_numa_node >= 0 ? gpu.memory_numa_node : gpu.numa_node;
    return *node >= 0;
  }
  bool cpuAffinity(int dev, std::set<int>* cpus) override {
    if (!cpu_affinity_call_) return false;
    *cpus = parseCpulist(gpus_.at(dev).cpu_affinity, "FakeNvml cpu_affinity");
    return !cpus->empty();
  }
  /// A driver without nvmlDeviceGetCpuAffinity.
  void withoutCpuAffinity() { cpu_affinity_call_ = false; }
  bool nvlinkRemote(int dev, int link, std::string* remote, NvlinkPeer* kind) override {
    const auto& links = links_[gpus_.at(dev).bus_id];
    if (link >= static_cast<int>(links.size())) return false;
    *remote = links[link].first;
    *kind = links[link].second;
    return true;
  }
  bool gpuFabric(int dev, NvmlFabricInfo* info) override {
    auto it = fabric_.find(dev);
    if (it == fabric_.end()) it = fabric_.find(kAllDevices);
    if (it == fabric_.end()) {
      *info = NvmlFabricInfo{};
      return true;
    }
    if (it->second) *info = *it->second;
    return it->second.has_value();
  }
  /// The fabric NVML device `dev` reports (kAllDevices: every device without its own);
  /// nullopt: the driver lacks the fabric calls.
  static constexpr int kAllDevices = -1;
  void setFabric(int dev, std::optional<NvmlFabricInfo> info) { fabric_[dev] = info; }

 private:
  void addLanes(const Graph& graph, int from, int to, int lanes) {
    const Node& a = graph.nodes[from];
    const Node& b = graph.nodes[to];
    if (a.kind != NodeKind::Gpu) return;
    NvlinkPeer kind = b.kind == NodeKind::Gpu   ? NvlinkPeer::Gpu
                      : b.kind == NodeKind::Cpu ? NvlinkPeer::Cpu
                                                : NvlinkPeer::Switch;
    for (int i = 0; i < lanes; ++i) links_[a.id].push_back({b.id, kind});
  }
  std::vector<Gpu> gpus_;
  std::map<std::string, std::vector<std::pair<std::string, NvlinkPeer>>> links_;
  std::map<int, std::optional<NvmlFabricInfo>> fabric_;
  bool cpu_affinity_call_ = true;
};

/// NVML on a machine without the driver.
class AbsentNvml : public NvmlApi {
 public:
  bool available() const override { return false; }
  std::string unavailableReason() const override { return "libnvidia-ml.so.1: not found (fake)"; }
  int deviceCount() override { return 0; }
  bool pciBusId(int, std::string*) override { return false; }
  bool name(int, std::string*) override { return false; }
  bool computeCapability(int, int*) override { return false; }
  bool numaNode(int, int*) override { return false; }
  bool nvlinkRemote(int, int, std::string*, NvlinkPeer*) override { return false; }
  bool gpuFabric(int, NvmlFabricInfo*) override { return false; }
};

/// NVML that breaks the way drivers do; `device` is the NVML index the per-device faults hit.
class FaultyNvml : public FakeNvml {
 public:
  enum class Fault {
    Init,        // nvmlInit_v2 fails: unavailable with its reason
    Throw,       // a per-device call throws (a wrapper mapping NVML_ERROR_GPU_IS_LOST)
    NoBusId,     // nvmlDeviceGetPciInfo fails for `device`
    BadBusId,    // it answers garbage for `device`
    RepeatBusId,  // `device` answers device 0's bus id
    SelfLink      // `device`'s last NVLink leads back to itself
  };
  FaultyNvml(const HostTopology& host, Fault fault, int device = 0)
      : FakeNvml(host), fault_(fault), device_(device) {}
  bool available() const override { return fault_ != Fault::Init; }
  std::string unavailableReason() const override {
    return fault_ == Fault::Init ? "nvmlInit_v2 failed with NVML error 3 (fake)" : "";
  }
  bool pciBusId(int dev, std::string* bus_id) override {
    if (dev != device_) return FakeNvml::pciBusId(dev, bus_id);
    switch (fault_) {
      case Fault::NoBusId:
        return false;
      case Fault::BadBusId:
        *bus_id = "GPU-0000:zz";
        return true;
      case Fault::RepeatBusId:
        return FakeNvml::pciBusId(0, bus_id);
      default:
        return FakeNvml::pciBusId(dev, bus_id);
    }
  }
  bool name(int dev, std::string* name) override {
    if (fault_ == Fault::Throw && dev == device_) {
      throw std::runtime_error("NVML_ERROR_GPU_IS_LOST (fake)");
    }
    return FakeNvml::name(dev, name);
  }
  bool nvlinkRemote(int dev, int link, std::string* remote, NvlinkPeer* kind) override {
    if (fault_ == Fault::SelfLink && dev == device_ && link == kMaxLinks - 1) {
      *kind = NvlinkPeer::Gpu;
      return FakeNvml::pciBusId(dev, remote);
    }
    return FakeNvml::nvlinkRemote(dev, link, remote, kind);
  }

 private:
  Fault fault_;
  int device_;
};

/// hwloc whose live topology is the given XML text.
class TextHwloc : public HwlocApi {
 public:
  explicit TextHwloc(std::string xml) : xml_(std::move(xml)) {}
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  std::string exportXml() override { return xml_; }

 private:
  std::string xml_;
};

/// hwloc whose live topology is a stored XML file.
class FileHwloc : public TextHwloc {
 public:
  explicit FileHwloc(const std::string& path) : TextHwloc(slurp(path)) {}
};

/// hwloc built in whose export throws `what` (a discovery that failed, a library bug).
class ThrowingHwloc : public HwlocApi {
 public:
  explicit ThrowingHwloc(std::string what) : what_(std::move(what)) {}
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  std::string exportXml() override { throw std::runtime_error(what_); }

 private:
  std::string what_;
};

/// A sysfs tree in a temporary directory, shaped like the kernel's: /sys/class/net/X links to
/// the interface's directory under its device (or under devices/virtual/net), whose `device`
/// link leads to the PCI function or the virtio device below it. Removed on destruction.
class SysfsTree {
 public:
  SysfsTree() {
    char tmpl[] = "/tmp/torch_topo_sysfs_XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~SysfsTree() { std::filesystem::remove_all(root_); }
  SysfsTree(const SysfsTree&) = delete;
  SysfsTree& operator=(const SysfsTree&) = delete;

  const std::string& root() const { return root_; }
  std::string path(const std::string& rel) const { return root_ + "/" + rel; }

  void write(const std::string& rel, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(path(rel)).parent_path());
    std::ofstream(path(rel)) << text;
  }
  void link(const std::string& rel, const std::string& target_rel) const {
    std::filesystem::create_directories(std::filesystem::path(path(rel)).parent_path());
    std::filesystem::create_directories(path(target_rel));
    std::filesystem::create_directory_symlink(path(target_rel), path(rel));
  }
  /// A PCI function devices/pci0000:00/<bus_id> with its numa_node file ("" for none);
  /// returns its path relative to the root.
  std::string pciFunction(const std::string& bus_id, const std::string& numa_node) const {
    std::string dir = "devices/pci" + bus_id.substr(0, 7) + "/" + bus_id;
    std::filesystem::create_directories(path(dir));
    if (!numa_node.empty()) write(dir + "/numa_node", numa_node + "\n");
    std::filesystem::create_directories(path("bus/pci/devices"));
    std::filesystem::create_directory_symlink(path(dir), path("bus/pci/devices/" + bus_id));
    return dir;
  }
  /// Interface `name` of device `device_rel` ("" for a virtual one); `speed` is the text of its
  /// speed file, "" for none.
  void netdev(const std::string& name, const std::string& device_rel,
              const std::string& speed) const {
    std::string dir =
        device_rel.empty() ? "devices/virtual/net/" + name : device_rel + "/net/" + name;
    link("class/net/" + name, dir);
    if (!device_rel.empty()) link(dir + "/device", device_rel);
    if (!speed.empty()) write(dir + "/speed", speed + "\n");
  }
  /// RDMA device `name` of PCI function `device_rel` with port 1 rate text `rate`.
  void rdma(const std::string& name, const std::string& device_rel,
            const std::string& rate) const {
    std::string dir = device_rel + "/infiniband/" + name;
    link("class/infiniband/" + name, dir);
    link(dir + "/device", device_rel);
    write(dir + "/ports/1/rate", rate + "\n");
  }

 private:
  std::string root_;
};

}  // namespace torch_topo::topo::testing
