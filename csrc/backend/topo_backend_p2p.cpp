// SPDX-License-Identifier: Apache-2.0
// TopoBackend point-to-point, barrier and coalescing (layer: csrc/backend).
#include "backend/topo_backend.h"

#include <algorithm>

#include <c10/util/Exception.h>

#include "backend/argument_error.h"

namespace torch_topo::backend {

// Point-to-point works pass through only on stream devices: Gloo's send/recv works have no
// future, and every work of ours must have one (TopoWork's contract).

c10::intrusive_ptr<c10d::Work> TopoBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                 int tag) {
  checkRank("send", "destination rank", dstRank);
  auto& route = routeFor("send", tensors);
  return launch(route, c10d::OpType::SEND, "send", {}, tensors,
                [&] { return Issued{route.inner->send(tensors, dstRank, tag), {}}; }, nullptr,
                route.streamed);
}

c10::intrusive_ptr<c10d::Work> TopoBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                 int tag) {
  checkRank("recv", "source rank", srcRank);
  auto& route = routeFor("recv", tensors);
  return launch(route, c10d::OpType::RECV, "recv", tensors, {},
                [&] { return Issued{route.inner->recv(tensors, srcRank, tag), {}}; }, nullptr,
                route.streamed);
}

c10::intrusive_ptr<c10d::Work> TopoBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  auto& route = routeFor("recvAnysource", tensors);
  return launch(route, c10d::OpType::RECVANYSOURCE, "recvAnysource", tensors, {},
                [&] { return Issued{route.inner->recvAnysource(tensors, tag), {}}; }, nullptr,
                route.streamed);
}

DeviceRoute& TopoBackend::barrierRoute(const c10d::BarrierOptions& opts) {
  // A barrier carries no tensor: the device named in the options, else the CPU inner backend
  // (object collectives and barrier arrive on the CPU path) unless it is lazy, else any.
  // Whether a lazy side was built differs between ranks (a send builds it on two), so it
  // never decides where a barrier without a device goes.
  checkLive("barrier");
  if (opts.device) {
    auto it = routes_.find(opts.device->type());
    if (it != routes_.end()) return *it->second;
    if (DeviceRoute* built = buildLazyRoute(opts.device->type())) return *built;
  }
  auto eager = [this](c10::DeviceType type) {
    return std::find(lazyTypes_.begin(), lazyTypes_.end(), type) == lazyTypes_.end();
  };
  auto cpu = routes_.find(c10::DeviceType::CPU);
  if (cpu != routes_.end() && eager(c10::DeviceType::CPU)) return *cpu->second;
  for (auto& [type, route] : routes_) {
    if (eager(type)) return *route;
  }
  if (routes_.empty()) return *buildLazyRoute(lazyTypes_.front());
  return *routes_.begin()->second;
}

c10::intrusive_ptr<c10d::Work> TopoBackend::barrier(const c10d::BarrierOptions& opts) {
  auto& route = barrierRoute(opts);
  // A barrier orders after every earlier op; schedules still queued on a worker are not yet in
  // the inner backend's queue, so they are waited for here.
  for (auto& [type, r] : routes_) r->drainSchedules();
  // The inner barrier is issued as is: NCCL's barrier runs its own allreduce on its streams.
  ++seq_;
  if (coalescing_) joinCoalesced(route, {});
  // On a plain NCCL group the barrier's allreduce follows the group's earlier collectives on
  // their stream, so its wait() returns after them; ours ran on the internal stream and the
  // level groups, which NCCL's barrier knows nothing of. The caller's stream, which NCCL's
  // barrier follows and its wait() drains, waits for them first.
  if (route.streamed && !coalescing_) route.orderCurrentAfterInternal();
  auto inner = route.inner->barrier(opts);
  // NCCL's barrier work blocks the host in wait() (on the end of its allreduce), which a
  // wrapper completed from the future (set at enqueue) would skip.
  if (route.streamed && !coalescing_) return inner;
  auto work = TopoWork::pending(rank_, c10d::OpType::BARRIER, "barrier", {}, {inner}, nullptr);
  if (coalescing_) coalesced_.push_back(work);
  return work;
}

void TopoBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  for (auto& [type, r] : routes_) r->drainSchedules();
  barrierRoute(opts).inner->monitoredBarrier(opts, waitAllRanks);
}

void TopoBackend::startCoalescing() {
  if (coalescing_) {
    TOPO_ARGUMENT_ERROR(
        "TopoBackend::startCoalescing: already coalescing; call "
        "endCoalescing() first");
  }
  coalescing_ = true;
  coalesced_.clear();
  coalescedNative_.clear();
  coalescedInputs_.clear();
  coalescedOther_ = false;
}

void TopoBackend::joinCoalesced(DeviceRoute& route, const std::vector<at::Tensor>& inputs) {
  if (route.streamed) coalescedInputs_.insert(coalescedInputs_.end(), inputs.begin(), inputs.end());
  if (!route.streamed || !route.inner->supportsCoalescing()) {
    coalescedOther_ = true;
  } else if (std::find(coalescedNative_.begin(), coalescedNative_.end(), &route) ==
             coalescedNative_.end()) {
    // The block's ops run on the inner group's stream, which follows the caller's: the caller's
    // stream first waits for the hierarchical ops queued on the internal stream (see launch).
    if (route.mayRunHierarchical()) route.orderCurrentAfterInternal();
    route.inner->startCoalescing();
    coalescedNative_.push_back(&route);
  }
}

c10::intrusive_ptr<c10d::Work> TopoBackend::endCoalescing() {
  if (!coalescing_) {
    TOPO_ARGUMENT_ERROR("TopoBackend::endCoalescing: startCoalescing() was not called");
  }
  coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(coalesced_);
  std::vector<at::Tensor> outputs;
  for (auto& w : works) {
    auto r = w->result();
    outputs.insert(outputs.end(), r.begin(), r.end());
  }
  std::vector<at::Tensor> inputs = std::move(coalescedInputs_);
  coalescedInputs_.clear();
  // A natively coalesced group is launched by its end; the per-op works of its ops were made
  // before that launch and say nothing about its completion.
  std::vector<c10::intrusive_ptr<c10d::Work>> native;
  for (auto* route : coalescedNative_) {
    auto onRoute = [route](const std::vector<at::Tensor>& all) {
      std::vector<at::Tensor> mine;
      for (const auto& t : all) {
        if (t.device().type() == route->type) mine.push_back(t);
      }
      return mine;
    };
    auto routeOutputs = onRoute(outputs);
    auto routeInputs = onRoute(inputs);
    auto end = [route] { return Issued{route->inner->endCoalescing(), {}}; };
    // Where the route's collectives take the internal stream, so does the grouped launch's end:
    // returning NCCL's end work left the internal stream unordered after the block, so a
    // hierarchical op issued before anyone waited read the block's tensors while NCCL still
    // wrote them (a block of a barrier alone has no device to order and stays NCCL's).
    const bool onStream = orderedOnInternal(*route, c10d::OpType::COALESCED) &&
                          (!routeOutputs.empty() || !routeInputs.empty());
    auto w = onStream ? onInternal(*route, c10d::OpType::COALESCED, "coalesced", routeOutputs,
                                   routeInputs, end)
                      : end().work;
    if (w) native.push_back(w);
  }
  coalescedNative_.clear();
  if (!coalescedOther_ && native.size() == 1) return native.front();
  works.insert(works.end(), native.begin(), native.end());
  return TopoWork::pending(rank_, c10d::OpType::COALESCED, "coalesced", std::move(outputs),
                           std::move(works), nullptr);
}

void TopoBackend::abandonCoalescing() {
  if (!coalescing_) return;
  auto work = endCoalescing();
  // Gloo's p2p works report completion only once waited, so those stay until shutdown.
  abandoned_.erase(std::remove_if(abandoned_.begin(), abandoned_.end(),
                                  [](const auto& w) { return w->isCompleted(); }),
                   abandoned_.end());
  abandoned_.push_back(std::move(work));
}

}  // namespace torch_topo::backend
