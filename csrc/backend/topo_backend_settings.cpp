// SPDX-License-Identifier: Apache-2.0
// TopoBackend's schedule settings (layer: csrc/backend): the levels, hierarchical thresholds and
// one-exchange sizes that Python (torch_topo.hierarchy) sets per device type once the group's
// hosts are known, and the flat/hierarchical decisions they led to.
#include "backend/topo_backend.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>

#include "backend/argument_error.h"

namespace torch_topo::backend {

DeviceRoute& TopoBackend::routeToConfigure(c10::DeviceType type, const char* setter) {
  auto it = routes_.find(type);
  if (it == routes_.end()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", setter, ": no inner backend for ", type));
  }
  return *it->second;
}

void TopoBackend::setLevels(c10::DeviceType type, Levels levels) {
  DeviceRoute& route = routeToConfigure(type, "set_levels");
  std::lock_guard<std::mutex> lock(decisionsMutex_);
  route.levels = std::move(levels);
}

void TopoBackend::setHierarchicalThresholds(c10::DeviceType type,
                                            std::map<std::string, std::vector<topo::SizeRange>> sizes) {
  DeviceRoute& route = routeToConfigure(type, "set_hierarchical_thresholds");
  std::lock_guard<std::mutex> lock(decisionsMutex_);
  route.hierarchicalSizes = std::move(sizes);
}

void TopoBackend::setOneStepAllReduceMaxBytes(c10::DeviceType type, int64_t maxBytes) {
  DeviceRoute& route = routeToConfigure(type, "set_one_step_all_reduce_max_bytes");
  std::lock_guard<std::mutex> lock(decisionsMutex_);
  route.oneStepAllReduceMaxBytes = maxBytes;
}

std::vector<Decision> TopoBackend::lastDecisions() const {
  std::lock_guard<std::mutex> lock(decisionsMutex_);
  std::vector<Decision> out;
  out.reserve(decisions_.size());
  for (const auto& d : decisions_) {
    out.emplace_back(d.op, d.bytes, d.hierarchical ? "hierarchical" : "flat");
  }
  return out;
}

}  // namespace torch_topo::backend
