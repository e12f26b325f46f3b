// SPDX-License-Identifier: Apache-2.0
// Test doubles of NvmlApi and HwlocApi whose answers come from real topology files, so the probe
// logic runs on machines without GPUs or hwloc.
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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
/// need not be bus order), and one NVML link per NVLink lane of the graph.
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
    *node = gpus_.at(dev).numa_node;
    return *node >= 0;
  }
  bool nvlinkRemote(int dev, int link, std::string* remote, NvlinkPeer* kind) override {
    const auto& links = links_[gpus_.at(dev).bus_id];
    if (link >= static_cast<int>(links.size())) return false;
    *remote = links[link].first;
    *kind = links[link].second;
    return true;
  }

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
};

/// hwloc whose live topology is a stored XML file.
class FileHwloc : public HwlocApi {
 public:
  explicit FileHwloc(const std::string& path) : xml_(slurp(path)) {}
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  std::string exportXml() override { return xml_; }

 private:
  std::string xml_;
};

}  // namespace torch_topo::topo::testing
