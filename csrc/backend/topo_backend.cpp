// SPDX-License-Identifier: Apache-2.0
// TopoBackend core: routing, the flat/hierarchical decision, op launch on CPU and stream
// devices, lifecycle and splitting (layer: csrc/backend).
#include "backend/topo_backend.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend/argument_error.h"
#include "backend/caller_mode.h"

namespace torch_topo::backend {

namespace {

bool holdsInferenceTensor(const std::vector<at::Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const at::Tensor& t) { return t.defined() && t.is_inference(); });
}

}  // namespace

TopoBackend::Options::Options(std::chrono::milliseconds timeout)
    : c10d::Backend::Options("topo", timeout) {}

c10::intrusive_ptr<TopoBackend::Options> TopoBackend::Options::create(
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<Options>(timeout);
}

#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
c10::intrusive_ptr<c10d::Backend::Options> TopoBackend::Options::clone() const {
  return c10::make_intrusive<Options>(*this);
}
#endif

TopoBackend::TopoBackend(
    c10::intrusive_ptr<c10d::Store> store, int rank, int size,
    c10::intrusive_ptr<Options> options,
    std::unordered_map<c10::DeviceType, c10::intrusive_ptr<c10d::Backend>> inner,
    std::unordered_map<c10::DeviceType, InnerFactory> lazy)
    : c10d::Backend(rank, size),
      store_(std::move(store)),
      options_(options ? std::move(options) : Options::create()),
      lazy_(std::move(lazy)),
      debug_(options_->debug),
      plain_(options_->plain) {
  if (inner.empty() && lazy_.empty()) {
    TOPO_ARGUMENT_ERROR(
        "TopoBackend: no inner backend given, expected at least one "
        "device type (e.g. {\"cpu\": gloo})");
  }
  for (auto& [type, backend] : inner) addRoute(type, backend);
  for (auto& [type, factory] : lazy_) {
    if (!factory) {
      TOPO_ARGUMENT_ERROR(
          c10::str("TopoBackend: lazy inner backend for ", type, " has no factory"));
    }
    if (routes_.count(type)) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend: ", type,
                                   " given both as an inner "
                                   "backend and as a lazy one, expected one of them"));
    }
    lazyTypes_.push_back(type);
  }
  init();
}

void TopoBackend::addRoute(c10::DeviceType type, const c10::intrusive_ptr<c10d::Backend>& backend) {
  if (!backend) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend: inner backend for ", type, " is None"));
  }
  if (backend->getSize() != size_ || backend->getRank() != rank_) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend: inner backend for ", type, " has rank ",
                                 backend->getRank(), " of ", backend->getSize(), ", expected rank ",
                                 rank_, " of ", size_));
  }
  std::lock_guard<std::mutex> lock(routesMutex_);
  routes_.emplace(type, std::make_unique<DeviceRoute>(type, backend));
}

DeviceRoute* TopoBackend::buildLazyRoute(c10::DeviceType type) {
  InnerFactory factory;
  {
    std::lock_guard<std::mutex> lock(routesMutex_);
    auto it = lazy_.find(type);
    if (it == lazy_.end()) return nullptr;
    factory = it->second;
  }
  // The factory runs outside the lock: it may take the GIL and wait on the store. It stays in
  // `lazy_` for split(), and is not called again: routeFor finds the route from now on.
  addRoute(type, factory(store_, rank_, size_, options_));
  std::lock_guard<std::mutex> lock(routesMutex_);
  return routes_.at(type).get();
}

TopoBackend::~TopoBackend() = default;

DeviceRoute& TopoBackend::routeFor(const char* op, const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": got no tensors"));
  }
  const auto type = tensors.front().device().type();
  for (const auto& t : tensors) {
    if (!t.defined()) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": got an undefined tensor"));
    }
    if (t.device().type() != type) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": tensors on ", tensors.front().device(),
                                   " and ", t.device(), ", expected one device type per call"));
    }
  }
  checkLive(op);
  auto it = routes_.find(type);
  if (it == routes_.end()) {
    if (DeviceRoute* built = buildLazyRoute(type)) return *built;
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": no inner backend for device ", type,
                                 " in this group; the creator builds one per "
                                 "available device type"));
  }
  return *it->second;
}

void TopoBackend::checkLive(const char* op) const {
  if (shutDown_) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op,
                                 ": the group was shut down "
                                 "(destroy_process_group); create a new group"));
  }
}

void TopoBackend::checkRank(const char* op, const char* what, int64_t rank) const {
  if (rank < 0 || rank >= size_) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": ", what, " out of range: got ", rank,
                                 ", expected 0 <= ", what, " < ", size_));
  }
}

void TopoBackend::checkBlocks(const char* op, const char* wholeName, const at::Tensor& whole,
                              const at::Tensor& block) const {
  if (whole.numel() != block.numel() * size_) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": ", wholeName, " has ", whole.numel(),
                                 " elements, expected ", block.numel(), " x group size ", size_,
                                 " = ", block.numel() * size_));
  }
  if (whole.scalar_type() != block.scalar_type()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": input dtype ", whole.scalar_type(),
                                 " and output dtype ", block.scalar_type(), " differ"));
  }
}

void TopoBackend::checkCoalescedDtypes(const char* op, const DeviceRoute& route,
                                       const std::vector<at::Tensor>& tensors) {
  if (route.mixedDtypeCoalescing) return;
  for (const auto& t : tensors) {
    if (t.scalar_type() != tensors.front().scalar_type()) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": tensors of dtypes ",
                                   tensors.front().scalar_type(), " and ", t.scalar_type(), " on ",
                                   route.inner->getBackendName(),
                                   ", which coalesces one dtype "
                                   "only; issue one call per dtype"));
    }
  }
}

bool TopoBackend::chooseHierarchical(DeviceRoute& route, const char* op, int64_t bytes,
                                     bool hasHier, std::optional<c10::ScalarType> refused) {
  bool hierarchical = false;
  const std::vector<topo::SizeRange>* sizes = nullptr;  // where the group's model takes it
  // Inside a coalesced group the inner ops must stay single calls: NCCL would deadlock on the
  // waits between a schedule's steps. A dtype the inner collectives refuse stays flat: a
  // schedule's steps differ between ranks (only the root's host scatters in a broadcast), so
  // the refusal would come on some ranks only, leaving the others waiting in the level groups
  // and every later op there out of step; flat, the inner backend refuses on every rank.
  if (hasHier && !refused && route.levels.valid() && !coalescing_) {
    auto it = route.hierarchicalSizes.find(op);
    if (it != route.hierarchicalSizes.end() && !it->second.empty()) sizes = &it->second;
    hierarchical = sizes && topo::anyContains(*sizes, bytes);
  }
  {
    std::lock_guard<std::mutex> lock(decisionsMutex_);
    if (decisions_.size() == kMaxDecisions) decisions_.pop_front();
    decisions_.push_back({op, bytes, hierarchical});
  }
  if (debug_) {
    // Say why, so a user can tell "the model says flat is faster" from "no schedule applies".
    // The model is the cost model for GPU ranks, the size rule otherwise (torch_topo.hierarchy).
    const bool everySize = sizes && *sizes == std::vector<topo::SizeRange>{topo::SizeRange{}};
    const char* why = !hasHier                ? "no hierarchical schedule for this op"
                      : refused               ? "dtype refused by the inner backend"
                      : !route.levels.valid() ? "group has no intra/inter-host levels"
                      : coalescing_           ? "inside a coalesced group"
                      : !sizes                ? "the group's model never prefers the schedule"
                      : everySize             ? "every size: hierarchical=always, or the model "
                                                "prefers it from below 1 KiB up"
                                              : "the group's model takes it";
    std::fprintf(stderr, "[torch_topo rank %d] %s %lld bytes on %s: %s (%s",
                 rank_, op, static_cast<long long>(bytes),
                 c10::DeviceTypeName(route.type).c_str(), hierarchical ? "hierarchical" : "flat",
                 why);
    if (sizes && !everySize) {
      const char* sep = " at";
      for (const topo::SizeRange& r : *sizes) {
        if (r.below < 0) {
          std::fprintf(stderr, "%s %lld bytes and more", sep, static_cast<long long>(r.from));
        } else {
          std::fprintf(stderr, "%s %lld to %lld bytes", sep, static_cast<long long>(r.from),
                       static_cast<long long>(r.below - 1));
        }
        sep = ",";
      }
    }
    std::fprintf(stderr, ")\n");
  }
  return hierarchical;
}

TopoBackend::Issued TopoBackend::runHierarchical(DeviceRoute& route, const HierFn& hier) {
  if (route.streamed) return Issued{nullptr, hier(route.levels)};
  // On the host a schedule blocks between its steps: it runs on the route's worker so that the
  // op stays asynchronous (`hier` captures its tensors and options by value for this).
  auto work = route.scheduleWorker().submit(rank_, c10d::OpType::UNKNOWN,
                                            [hier, levels = route.levels] { hier(levels); });
  return Issued{std::move(work), {}};
}

c10::intrusive_ptr<c10d::Work> TopoBackend::launch(
    DeviceRoute& route, c10d::OpType type, const char* op, const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs,
    const std::function<Issued()>& issue, Epilogue epilogue, bool direct) {
  // What runs here on the caller's thread (a schedule on a stream device, the one-step
  // exchanges' packing, an epilogue in stream mode) and later elsewhere writes into the
  // caller's tensors, which may require grad or be inference tensors (made under
  // torch.inference_mode() and used outside it: Gloo writes them through raw pointers, where
  // our copies and folds need inference mode). The works made here take this state along.
  const CallerModeGuard mode(CallerMode{c10::InferenceMode::is_enabled() ||
                                        holdsInferenceTensor(outputs) ||
                                        holdsInferenceTensor(inputs)});
  ++seq_;
  // The inner backend's own call and Work are all the op needs: on a stream device it orders
  // itself after the caller's stream, as a plain group of that backend would. Not where ops can
  // run hierarchically: there every collective takes the internal stream (`orderedOnInternal`
  // says why), as a plain NCCL group's collectives all take its one stream.
  if (passesThrough(!direct || orderedOnInternal(route, type), epilogue != nullptr,
                    coalescing_)) {
    return issue().work;
  }
  if (coalescing_) {
    if (route.streamed && epilogue) {
      // The epilogue would run when the op is queued, before NCCL's grouped launch at
      // endCoalescing, and on no stream that the block's end work orders.
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op,
                                   ": this form needs a local step "
                                   "after the collective, which a coalesced block on ",
                                   route.type,
                                   " cannot order; issue it outside the "
                                   "block"));
    }
    joinCoalesced(route, inputs);
  }
  if (!route.streamed || coalescing_) {
    // CPU (and any coalesced group): the inner work stays in flight; the epilogue runs when it
    // completes. NCCL coalesces natively, so its steps must not move to our stream there.
    // A CPU schedule allocates its buffers on the worker, which keeps them until it is done.
    auto issued = issue();
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
    if (issued.work) pending.push_back(issued.work);
    auto work = TopoWork::pending(rank_, type, op, outputs, std::move(pending), std::move(epilogue));
    if (coalescing_) coalesced_.push_back(work);
    return work;
  }
  return onInternal(route, type, op, outputs, inputs, issue, std::move(epilogue));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::onInternal(
    DeviceRoute& route, c10d::OpType type, const char* op, const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs, const std::function<Issued()>& issue,
    Epilogue epilogue) {
  const c10::Device device =
      !outputs.empty() ? outputs.front().device()
                       : (!inputs.empty() ? inputs.front().device() : c10::Device(route.type));
  c10::DeviceGuard deviceGuard(device);
  StreamScope scope(route, device);
  auto issued = issue();
  // A stream-level wait: the internal stream waits on the inner backend's stream.
  if (issued.work) issued.work->wait();
  if (epilogue) epilogue();
  auto future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device});
  // Completed while the internal stream is current, so the future's own events follow the op.
  future->markCompleted(c10::IValue(outputs));
  std::vector<at::Tensor> keepAlive(inputs);
  keepAlive.insert(keepAlive.end(), outputs.begin(), outputs.end());
  keepAlive.insert(keepAlive.end(), issued.buffers.begin(), issued.buffers.end());
  return TopoWork::streamed(rank_, type, op, outputs, std::move(keepAlive),
                            route.internalStream(device), scope.end(), std::move(future));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::collective(
    DeviceRoute& route, c10d::OpType type, const char* op, const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs, const InnerFn& flat, const HierFn& hier,
    Epilogue epilogue) {
  int64_t bytes = 0;
  for (const auto& t : inputs) bytes += static_cast<int64_t>(t.numel()) * t.element_size();
  std::optional<c10::ScalarType> refused = refusedDtype(route, inputs);
  if (!refused) refused = refusedDtype(route, outputs);
  if (chooseHierarchical(route, op, bytes, hier != nullptr, refused)) {
    return launch(route, type, op, outputs, inputs, [&] { return runHierarchical(route, hier); },
                  std::move(epilogue), /*direct=*/false);
  }
  return launch(route, type, op, outputs, inputs,
                [&] { return Issued{flat(*route.inner), {}}; }, std::move(epilogue));
}

TopoBackend::Epilogue TopoBackend::stageContiguous(const DeviceRoute& route,
                                                   std::vector<at::Tensor>& tensors) {
  if (route.streamed) return nullptr;
  std::vector<std::pair<at::Tensor, at::Tensor>> staged;  // (caller's, contiguous copy)
  for (auto& t : tensors) {
    // Sparse tensors (CPU ones arrive through allreduce) have no strides to stage.
    if (t.layout() != at::kStrided || t.is_contiguous()) continue;
    staged.emplace_back(t, t.contiguous());
    t = staged.back().second;
  }
  if (staged.empty()) return nullptr;
  return [staged] {
    for (const auto& [caller, copy] : staged) caller.copy_(copy);
  };
}

TopoBackend::Epilogue TopoBackend::then(Epilogue first, Epilogue second) {
  if (!first) return second;
  if (!second) return first;
  return [first = std::move(first), second = std::move(second)] {
    first();
    second();
  };
}

void TopoBackend::setSequenceNumberForGroup() { seq_ = 0; }

uint64_t TopoBackend::getSequenceNumberForGroup() { return seq_; }

void TopoBackend::shutdown() {
  abandoned_.clear();
  for (auto& [type, route] : routes_) route->stopSchedules();
  forEachBackend([&](c10d::Backend& backend) { backend.shutdown(); });
  // Gloo's shutdown() is a no-op: its worker threads live as long as the backend, and DDP or a
  // module global keeps the group alive into interpreter exit, where a worker that drops the
  // last reference to a finished work's Python tensor is killed by Python while it unwinds a
  // noexcept destructor (std::terminate, SIGABRT after a clean run). Freeing the inner backends
  // here joins those threads now; ProcessGroup.shutdown runs without the GIL, so they can take
  // it to finish.
  std::unordered_map<c10::DeviceType, std::unique_ptr<DeviceRoute>> routes;
  {
    std::lock_guard<std::mutex> lock(routesMutex_);
    routes.swap(routes_);
    lazy_.clear();
    shutDown_ = true;
  }
}

void TopoBackend::forEachBackend(const std::function<void(c10d::Backend&)>& fn) {
  for (auto& [type, route] : routes_) {
    for (auto& backend : route->backends()) fn(*backend);
  }
}

void TopoBackend::abort() {
  forEachBackend([&](c10d::Backend& backend) { backend.abort(); });
}

void TopoBackend::setTimeout(std::chrono::milliseconds timeout) {
  options_->timeout = timeout;
  forEachBackend([&](c10d::Backend& backend) { backend.setTimeout(timeout); });
}

c10d::ErrorType TopoBackend::getError() {
  for (auto& [type, route] : routes_) {
    const auto error = route->inner->getError();
    if (error != c10d::ErrorType::SUCCESS) return error;
  }
  return c10d::ErrorType::SUCCESS;
}

#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
void TopoBackend::addEphemeralTimeout(const std::chrono::milliseconds& timeout) {
  forEachBackend([&](c10d::Backend& backend) { backend.addEphemeralTimeout(timeout); });
}

void TopoBackend::setBoundDeviceId(std::optional<at::Device> device) {
  c10d::Backend::setBoundDeviceId(device);
  if (!device) return;
  auto it = routes_.find(device->type());
  if (it != routes_.end()) it->second->inner->setBoundDeviceId(device);
}
#endif

#if TORCH_TOPO_TORCH_AT_LEAST(2, 15)
bool TopoBackend::isInitialized() {
  std::lock_guard<std::mutex> lock(routesMutex_);
  for (auto& [type, route] : routes_) {
    if (!route->inner->isInitialized()) return false;
  }
  return true;
}
#endif

c10::intrusive_ptr<c10d::Backend> TopoBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  checkLive("split");
  // The same store is the same splitGroup call (held in lastSplitStore_, so its address cannot
  // have been reused): its answer again, the live child or null.
  if (store == lastSplitStore_) {
    if (auto child = lastSplitChild_.lock()) return child;
    return nullptr;
  }
  // Each eager inner backend is split on every rank, in one order everywhere, member or not:
  // NCCL's split on a non-member is that rank's part (NCCL_SPLIT_NOCOLOR) of the ncclCommSplit
  // the members wait in, and Gloo's returns null at once. Stopping at the first null child, as
  // before, left the members waiting whenever the cpu side came first. A lazy side is not
  // split: whether it was built differs between ranks (a send builds it on two), so the child
  // gets its factory instead, on every rank alike.
  std::vector<c10::DeviceType> types;
  for (auto& [type, route] : routes_) {
    if (std::find(lazyTypes_.begin(), lazyTypes_.end(), type) == lazyTypes_.end()) {
      types.push_back(type);
    }
  }
  std::sort(types.begin(), types.end());
  if (types.empty()) {
    TOPO_ARGUMENT_ERROR(
        "TopoBackend::split: every inner backend of the group is lazy; "
        "split needs one given eagerly to split from");
  }
  std::unordered_map<c10::DeviceType, c10::intrusive_ptr<c10d::Backend>> children;
  bool member = true;
  for (auto type : types) {
    auto& route = routes_.at(type);
    if (!route->inner->supportsSplitting()) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::split: inner backend ",
                                   route->inner->getBackendName(), " for ", type,
                                   " cannot split; use new_group instead"));
    }
#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
    auto innerOpts = route->inner->getBackendOptions()->clone();
#else
    // Before 2.14 options cannot be copied without their concrete type: the split borrows the
    // inner backend's own options, and the parent's fields are put back however it ends.
    auto innerOpts = route->inner->getBackendOptions();
    struct Restore {
      c10::intrusive_ptr<c10d::Backend::Options> live;
      c10d::Backend::Options saved;
      ~Restore() {
        live->timeout = saved.timeout;
        live->group_name = saved.group_name;
        live->group_desc = saved.group_desc;
        live->global_ranks_in_group = saved.global_ranks_in_group;
      }
    } restore{innerOpts, *innerOpts};
#endif
    innerOpts->timeout = opts->timeout;
    innerOpts->group_name = opts->group_name;
    innerOpts->group_desc = opts->group_desc;
    innerOpts->global_ranks_in_group = opts->global_ranks_in_group;
    auto child = route->inner->split(c10::make_intrusive<c10d::PrefixStore>(
                                         c10::DeviceTypeName(type, true), store),
                                     ranks, innerOpts);
    if (child) {
      children.emplace(type, child);
    } else {
      member = false;  // this rank is not in `ranks`
    }
  }
  lastSplitStore_ = store;
  lastSplitChild_ = c10::weak_intrusive_ptr<c10d::Backend>(c10::intrusive_ptr<c10d::Backend>());
  if (!member) return nullptr;
  auto childOpts = Options::create(opts->timeout);
  childOpts->group_name = opts->group_name;
  childOpts->group_desc = opts->group_desc;
  childOpts->global_ranks_in_group = opts->global_ranks_in_group;
  childOpts->debug = debug_;  // a split group logs and issues as its parent does
  childOpts->plain = plain_;
  // A lazy side stays lazy in the child, built from the child's store at its first op there.
  std::unordered_map<c10::DeviceType, InnerFactory> lazy;
  {
    std::lock_guard<std::mutex> lock(routesMutex_);
    lazy = lazy_;
  }
  auto first = children.begin()->second;
  auto topoChild = c10::make_intrusive<TopoBackend>(
      store, first->getRank(), first->getSize(), childOpts, std::move(children), std::move(lazy));
  topoChild->splitRanks_ = ranks;
  c10::intrusive_ptr<c10d::Backend> child = topoChild;
  lastSplitChild_ = c10::weak_intrusive_ptr<c10d::Backend>(child);
  return child;
}

void TopoBackend::eagerConnectSingleDevice(at::Device device) {
  auto it = routes_.find(device.type());
  if (it != routes_.end()) it->second->inner->eagerConnectSingleDevice(device);
}

c10::intrusive_ptr<c10d::Backend> TopoBackend::innerBackend(c10::DeviceType type) const {
  std::lock_guard<std::mutex> lock(routesMutex_);
  auto it = routes_.find(type);
  return it == routes_.end() ? nullptr : it->second->inner;
}

}  // namespace torch_topo::backend
