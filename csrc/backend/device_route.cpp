// SPDX-License-Identifier: Apache-2.0
// DeviceRoute and StreamScope (layer: csrc/backend).
#include "backend/device_route.h"

#include <algorithm>
#include <utility>

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include "backend/argument_error.h"

namespace torch_topo::backend {

DeviceRoute::DeviceRoute(c10::DeviceType type, c10::intrusive_ptr<c10d::Backend> inner)
    : type(type),
      inner(std::move(inner)),
      streamed(type != c10::DeviceType::CPU),
      // NCCL reduces with AVG and PREMUL_SUM natively; Gloo has neither.
      nativeAvg(this->inner->getBackendName() == "nccl"),
      // Gloo packs a coalesced all-gather into one buffer of the first tensor's dtype (torch
      // 2.14 returns garbage for the others); NCCL groups one call per tensor.
      mixedDtypeCoalescing(this->inner->getBackendName() != "gloo"),
      glooDtypesOnly(this->inner->getBackendName() == "gloo") {}

bool glooTakesDtype(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16:
    case c10::ScalarType::Char:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
    case c10::ScalarType::Bool:
    case c10::ScalarType::ComplexHalf:
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble:
      return true;
    default:
      return false;
  }
}

std::optional<c10::ScalarType> refusedDtype(const DeviceRoute& route,
                                            const std::vector<at::Tensor>& tensors) {
  if (!route.glooDtypesOnly) return std::nullopt;
  for (const auto& t : tensors) {
    if (!glooTakesDtype(t.scalar_type())) return t.scalar_type();
  }
  return std::nullopt;
}

void checkListShapes(const char* op, const DeviceRoute& route, const char* listName,
                     const std::vector<at::Tensor>& list, const char* likeName,
                     const at::Tensor& like) {
  if (!route.glooDtypesOnly) return;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].sizes() != like.sizes()) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": ", listName, " ", i, " has shape ",
                                   list[i].sizes(), ", expected the ", likeName, "'s shape ",
                                   like.sizes(), " (Gloo's list form takes equal shapes only)"));
    }
  }
}

std::vector<c10::intrusive_ptr<c10d::Backend>> DeviceRoute::backends() const {
  std::vector<c10::intrusive_ptr<c10d::Backend>> all{inner};
  for (const auto& level : {levels.intra, levels.rail, levels.leaders}) {
    if (level && std::find(all.begin(), all.end(), level) == all.end()) all.push_back(level);
  }
  return all;
}

bool DeviceRoute::mayRunHierarchical() const {
  return levels.valid() &&
         std::any_of(hierarchicalSizes.begin(), hierarchicalSizes.end(),
                     [](const auto& entry) { return !entry.second.empty(); });
}

ScheduleWorker& DeviceRoute::scheduleWorker() {
  if (!worker_) worker_ = std::make_unique<ScheduleWorker>();
  return *worker_;
}

void DeviceRoute::drainSchedules() {
  if (worker_) worker_->drain();
}

void DeviceRoute::stopSchedules() {
  if (worker_) worker_->stop();
}

c10::Stream DeviceRoute::internalStream(c10::Device device) {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  auto it = streams_.find(device.index());
  if (it == streams_.end()) {
    c10::impl::VirtualGuardImpl impl(device.type());
    it = streams_.emplace(device.index(), impl.getStreamFromGlobalPool(device, false)).first;
  }
  return it->second;
}

void DeviceRoute::orderCurrentAfterInternal() {
  std::lock_guard<std::mutex> lock(streamsMutex_);
  c10::impl::VirtualGuardImpl impl(type);
  for (const auto& [index, internal] : streams_) {
    c10::Event queued(type);
    queued.record(internal);
    queued.block(impl.getStream(c10::Device(type, index)));
  }
}

StreamScope::StreamScope(DeviceRoute& route, c10::Device device) : device_(device) {
  c10::impl::VirtualGuardImpl impl(device.type());
  c10::Stream caller = impl.getStream(device);
  c10::Stream internal = route.internalStream(device);
  c10::Event ready(device.type());
  ready.record(caller);
  ready.block(internal);
  previous_ = impl.exchangeStream(internal);
}

StreamScope::~StreamScope() {
  c10::impl::VirtualGuardImpl impl(device_.type());
  impl.exchangeStream(*previous_);
}

c10::Event StreamScope::end() {
  c10::impl::VirtualGuardImpl impl(device_.type());
  c10::Event done(device_.type());
  done.record(impl.getStream(device_));
  return done;
}

}  // namespace torch_topo::backend
