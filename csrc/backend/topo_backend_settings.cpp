// SPDX-License-Identifier: Apache-2.0
// TopoBackend's schedule settings (layer: csrc/backend): the levels, hierarchical thresholds and
// one-exchange sizes that Python (torch_topo.hierarchy) sets per device type once the group's
// hosts are known, and the flat/hierarchical decisions they led to.
#include "backend/topo_backend.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

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

const std::vector<std::string>& TopoBackend::hierarchicalOps() {
  // The ops whose collective() call passes a schedule (topo_backend_collectives.cpp,
  // topo_backend_gather.cpp, topo_backend_reduce.cpp).
  static const std::vector<std::string> ops{
      "allreduce", "allgather", "_allgather_base", "reduce_scatter", "_reduce_scatter_base",
      "broadcast", "reduce"};
  return ops;
}

void TopoBackend::setHierarchicalThresholds(c10::DeviceType type,
                                            std::map<std::string, std::vector<topo::SizeRange>> sizes) {
  const auto& known = hierarchicalOps();
  for (const auto& entry : sizes) {
    // A misspelt or nccl-tests-style name ("all_reduce") was kept and never looked up: the op
    // stayed flat without a word.
    TOPO_CHECK_ARGUMENT(std::find(known.begin(), known.end(), entry.first) != known.end(),
                        "set_hierarchical_thresholds: op '", entry.first,
                        "' has no hierarchical schedule; expected one of ", c10::Join(", ", known));
  }
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
