// SPDX-License-Identifier: Apache-2.0
// TopoBackend: the c10d backend "topo" (layer: csrc/backend). It serves CPU and CUDA tensors of
// one process group by routing each op, on the tensors' device type, to inner backends (Gloo,
// NCCL) built by the Python creator, and composes what an inner backend lacks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>

#include "backend/device_route.h"
#include "backend/schedules/schedule.h"
#include "backend/topo_work.h"

// The c10d C++ API changes every minor release; overrides that exist only in some releases are
// guarded with this (torch/version.h).
#define TORCH_TOPO_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||             \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace torch_topo::backend {

/// One recorded choice of `chooseHierarchical`: op name, payload bytes, "flat" or "hierarchical".
using Decision = std::tuple<std::string, int64_t, std::string>;

/// The "topo" backend.
///
/// Every c10d collective of the base class is overridden (docs/backend.md lists the other
/// virtuals and why they keep the base behaviour); each validates what is detectable locally
/// (root and peer ranks, list lengths, sizes, dtype/ReduceOp pairs) with a ValueError that
/// starts `TopoBackend::<op>: `, then runs on the inner backend of the tensors' device type.
/// What the inner backend lacks is composed: AVG and PREMUL_SUM on Gloo are a SUM followed by
/// one local scaling (the epilogue of the op's TopoWork).
///
/// Fast path: an op that needs no schedule, no epilogue and no coalescing returns the inner
/// backend's own Work, issued on the caller's stream: no TopoWork, no stream hop, no event pair
/// (`passesThrough`), except the collectives of a stream route where ops can run
/// hierarchically, which all take the internal stream (`orderedOnInternal`). Everything else
/// runs as described below.
///
/// Ordering: flat inner collectives are issued on the calling thread, in program order, inside
/// the op call. A hierarchical schedule waits between dependent steps: on CUDA with stream
/// waits inside the call; on CPU it runs on the route's ScheduleWorker, one FIFO thread over the
/// route's level backends (which nothing else uses), so the call returns at once. Hence every
/// rank issues the same inner collectives in the same order on each inner backend; barrier()
/// first waits for the queued schedules (CPU) or orders the caller's stream after the internal
/// stream (CUDA), so it returns after every earlier op, as NCCL's own barrier does.
///
/// Thread safety: like c10d's backends, one thread issues ops at a time per group; the
/// decision log, levels and thresholds are guarded by a mutex so Python may read them from
/// another thread.
class TopoBackend : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    explicit Options(std::chrono::milliseconds timeout = kBackendDefaultTimeout);
    static c10::intrusive_ptr<Options> create(
        std::chrono::milliseconds timeout = kBackendDefaultTimeout);
    /// Log every flat/hierarchical decision to stderr. Set from TopoConfig.debug (which has
    /// read TORCH_TOPO_DEBUG); the C++ side reads no environment variable itself.
    bool debug = false;
    /// Issue every op as the inner backend's own call: no one-step Gloo exchanges (set from
    /// TopoConfig.use_topo_aware_collectives=False, which also leaves the group without levels).
    bool plain = false;
#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
    c10::intrusive_ptr<c10d::Backend::Options> clone() const override;
#endif
  };

  /// Builds the inner backend of one device type from the group's store, rank, size and
  /// current options (the creator's Gloo side of a group whose ranks all bound a CUDA device).
  using InnerFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      const c10::intrusive_ptr<c10d::Backend::Options>& options)>;

  /// `inner` maps a device type to the flat inner backend of this group for it (same ranks,
  /// same rank order). `lazy` maps a device type to the factory of an inner backend built at
  /// the first op on that device type, or never: every rank of the group must give the same
  /// device types as lazy, since a barrier without a device avoids them. `store` is the
  /// creator's prefixed store, used by split() and the factories.
  TopoBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
              c10::intrusive_ptr<Options> options,
              std::unordered_map<c10::DeviceType, c10::intrusive_ptr<c10d::Backend>> inner,
              std::unordered_map<c10::DeviceType, InnerFactory> lazy = {});
  ~TopoBackend() override;

  const std::string getBackendName() const override { return "topo"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }

  // ---- collectives (topo_backend_collectives.cpp) ----
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;

  // ---- gathers, scatters, all-to-all (topo_backend_gather.cpp) ----
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
  /// `input` of every rank into `output` on the root (group size x input elements, rank-major,
  /// contiguous); `output` is unused elsewhere. Runs as the inner backend's list gather into
  /// views of `output` (Gloo has no gather_single of its own).
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // ---- point to point, barrier, coalescing (topo_backend_p2p.cpp) ----
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  bool supportsCoalescing() const override { return true; }
  /// Ops issued until endCoalescing() run as usual; endCoalescing() returns one work over all
  /// of them. An inner backend that coalesces natively (NCCL) gets its own start before the
  /// first op on it (not before: NCCL's group would hold back this thread's NCCL ops on other
  /// groups during a CPU-only block) and its own end; a block only on it returns its end work,
  /// whose wait() is the one that orders the caller's stream after the grouped launch. Where
  /// that route's collectives take the internal stream (`orderedOnInternal`), the end is issued
  /// as one of them: the internal stream waits for the grouped launch, so later hierarchical
  /// ops follow the block unwaited, and the block returns that op's work (a streamed TopoWork).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  /// Ends a block that failed before its end (an op refused after others were posted): its
  /// posted ops stay in flight, as unbatched ones would, and this backend holds their work until
  /// it reports completion or the backend shuts down. Dropping it would cancel Gloo's transfers,
  /// and the peers' matching ops (and the group's next collective) would wait out the timeout.
  /// A no-op outside a block.
  void abandonCoalescing();

  // ---- lifecycle, sequence numbers, splitting (topo_backend.cpp) ----
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  /// Stops the schedules, shuts the inner backends down and frees them (joining Gloo's
  /// threads); every later op is a ValueError.
  void shutdown() override;
  void abort() override;
  /// Sets the group's default timeout here and on every inner backend.
  void setTimeout(std::chrono::milliseconds timeout) override;
  /// The first inner backend's error that is not SUCCESS, else SUCCESS.
  c10d::ErrorType getError() override;
#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
  void addEphemeralTimeout(const std::chrono::milliseconds& timeout) override;
  /// Also binds the inner backend of the device's type (torch binds only the backends it
  /// registered, and ours builds its inner communicators itself).
  void setBoundDeviceId(std::optional<at::Device> device) override;
#endif
#if TORCH_TOPO_TORCH_AT_LEAST(2, 15)
  /// False while a built inner backend has not made its communicator yet (NCCL without a
  /// bound device), so split() callers see what they would see with that backend alone.
  bool isInitialized() override;
#endif
  bool supportsSplitting() const override { return true; }
  /// Splits every inner backend given eagerly (they all support it in the torch versions we
  /// build against), on every rank of the group, and wraps the children; null when this rank
  /// is not in `ranks`. A lazy side stays lazy in the child, built or not here.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts)
      override;
  /// A split child's members as ranks of its parent, in child rank order (the order split()
  /// was given, which torch sorted before 2.14 and no longer does); empty for other groups.
  const std::vector<int>& splitRanks() const { return splitRanks_; }
  void eagerConnectSingleDevice(at::Device device) override;
  /// Called on ranks outside a new group when the parent was split from; a no-op because the
  /// creator never builds inner communicators by splitting (see docs/backend.md).
  void performNocolorSplit(at::Device device) {}

  // ---- schedules (used by the schedules helper and Python) ----
  /// Stores the hierarchical levels of one device type.
  void setLevels(c10::DeviceType type, Levels levels);
  /// The c10d op names with a hierarchical schedule: the keys setHierarchicalThresholds takes.
  static const std::vector<std::string>& hierarchicalOps();
  /// Per-op minimum payload (bytes) from which the hierarchical schedule is used; an op that
  /// is absent always runs flat, a name not in hierarchicalOps() is an ArgumentError.
  void setHierarchicalThresholds(c10::DeviceType type,
                                 std::map<std::string, std::vector<topo::SizeRange>> sizes);
  /// Largest all-reduce (bytes) a two-rank group across hosts runs as one exchange.
  void setOneStepAllReduceMaxBytes(c10::DeviceType type, int64_t maxBytes);
  /// The latest flat/hierarchical decisions, oldest first (bounded, kMaxDecisions).
  std::vector<Decision> lastDecisions() const;
  /// The fast path's rule: an op runs as the inner backend's own call, returning its Work,
  /// exactly when it needs neither the internal stream (a hierarchical schedule, or any
  /// collective on a route with levels: `orderedOnInternal`) nor a local epilogue nor
  /// coalescing.
  static bool passesThrough(bool onInternal, bool hasEpilogue, bool coalescing) {
    return !onInternal && !hasEpilogue && !coalescing;
  }
  /// Whether an op of `type` on `route` must run on the route's internal stream even when flat:
  /// every collective of a stream route where some op can run hierarchically, so that it is
  /// ordered with those as a plain NCCL group's collectives are on their one stream. On the
  /// inner group's own stream it would follow a hierarchical op only through the caller's
  /// stream, which an async op's caller has not made wait: unwaited, the two read stale values,
  /// and kernels of several communicators running at once can deadlock (NCCL's "Using multiple
  /// NCCL communicators concurrently"). A coalesced block's grouped launch (`COALESCED`) counts.
  static bool orderedOnInternal(const DeviceRoute& route, c10d::OpType type) {
    const bool p2p = type == c10d::OpType::SEND || type == c10d::OpType::RECV ||
                     type == c10d::OpType::RECVANYSOURCE;
    return route.streamed && !p2p && route.mayRunHierarchical();
  }
  /// The inner backend of a device type (null if none, or lazy and not built yet): for
  /// Python-side helpers and tests.
  c10::intrusive_ptr<c10d::Backend> innerBackend(c10::DeviceType type) const;

  /// The flat form of a collective: one call on the device's inner backend.
  using InnerFn = std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend& inner)>;
  /// The hierarchical form: a schedule of schedules/hierarchical.h over the levels; it returns
  /// the temporaries it allocated (kept alive until the op's end event on stream devices).
  using HierFn = std::function<std::vector<at::Tensor>(const Levels& levels)>;
  /// `hier` where the call holds one strided tensor (the schedules' form), else none: a
  /// multi-tensor call stays flat, and so does a sparse one (CPU sparse tensors arrive through
  /// allreduce), which only the inner backend's own all-reduce can take.
  static HierFn single(const std::vector<at::Tensor>& tensors, HierFn hier) {
    return tensors.size() == 1 && tensors.front().layout() == at::kStrided ? std::move(hier)
                                                                           : nullptr;
  }
  /// `hier` unless `t` is complex and `op` PRODUCT (the only other op torch lets through with
  /// complex tensors, on reduce-scatter): a level reduce moves the real view, whose fold is the
  /// complex one only for sums, while the flat route folds complex values itself.
  static HierFn foldable(const at::Tensor& t, const c10d::ReduceOp& op, HierFn hier) {
    return t.is_complex() && op.op_ == c10d::ReduceOp::PRODUCT ? nullptr : std::move(hier);
  }
  using Epilogue = std::function<void()>;
  /// What one op issued: the inner work still in flight (null when the steps already
  /// completed or were only enqueued) and temporaries to keep alive.
  struct Issued {
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<at::Tensor> buffers;
  };

 private:
  static constexpr size_t kMaxDecisions = 256;

  /// The route of a set of tensors: all on one device type with an inner backend (built now if
  /// it is lazy), else a ValueError naming the op.
  DeviceRoute& routeFor(const char* op, const std::vector<at::Tensor>& tensors);
  /// The route a Python setter configures; ValueError naming `setter` where none serves `type`.
  DeviceRoute& routeToConfigure(c10::DeviceType type, const char* setter);
  /// Builds the lazy inner backend of `type` and its route; null when `type` has no factory.
  DeviceRoute* buildLazyRoute(c10::DeviceType type);
  void addRoute(c10::DeviceType type, const c10::intrusive_ptr<c10d::Backend>& backend);
  /// Picks flat or hierarchical for a collective from the levels and thresholds, and logs the
  /// choice. `refused`: a dtype the inner collectives refuse, which keeps the op flat.
  bool chooseHierarchical(DeviceRoute& route, const char* op, int64_t bytes, bool hasHier,
                          std::optional<c10::ScalarType> refused = std::nullopt);
  /// Starts a hierarchical schedule: inline on stream devices, on the route's worker on CPU.
  Issued runHierarchical(DeviceRoute& route, const HierFn& hier);
  /// Runs one op on its route. `direct` ops without epilogue outside a coalesced group return
  /// the inner work as is (`passesThrough`); the others run on the internal stream for stream
  /// devices, else on the calling thread, wrapped with their epilogue in a TopoWork.
  c10::intrusive_ptr<c10d::Work> launch(DeviceRoute& route, c10d::OpType type, const char* op,
                                        const std::vector<at::Tensor>& outputs,
                                        const std::vector<at::Tensor>& inputs,
                                        const std::function<Issued()>& issue,
                                        Epilogue epilogue = nullptr, bool direct = true);
  /// The stream-device part of `launch`: `issue` runs with the route's internal stream current,
  /// which then waits for the inner work; the op's work ends with an event on that stream.
  c10::intrusive_ptr<c10d::Work> onInternal(DeviceRoute& route, c10d::OpType type, const char* op,
                                            const std::vector<at::Tensor>& outputs,
                                            const std::vector<at::Tensor>& inputs,
                                            const std::function<Issued()>& issue,
                                            Epilogue epilogue = nullptr);
  /// The ops with a hierarchical form: chooseHierarchical, then launch.
  c10::intrusive_ptr<c10d::Work> collective(DeviceRoute& route, c10d::OpType type, const char* op,
                                            const std::vector<at::Tensor>& outputs,
                                            const std::vector<at::Tensor>& inputs,
                                            const InnerFn& flat, const HierFn& hier = nullptr,
                                            Epilogue epilogue = nullptr);
  /// The inner ReduceOp for `op` on `route`, and the epilogue that completes AVG/PREMUL_SUM
  /// over `outputs` where the inner backend lacks them; ValueError for invalid dtype pairs.
  c10d::ReduceOp prepareReduce(const char* opName, DeviceRoute& route, const c10d::ReduceOp& op,
                               const std::vector<at::Tensor>& tensors,
                               const std::vector<at::Tensor>& outputs, Epilogue* epilogue) const;
  /// Gloo reads and writes a CPU tensor as one dense block from its data pointer, so a strided
  /// view (x[:, ::2]) came back wrong with its storage neighbours overwritten. Replaces each
  /// tensor of `tensors` that is not contiguous by a contiguous copy and returns the step that
  /// writes the results back (null when none was replaced). Stream routes keep their tensors:
  /// NCCL refuses such tensors itself.
  static Epilogue stageContiguous(const DeviceRoute& route, std::vector<at::Tensor>& tensors);
  /// `first`, then `second`; either may be null.
  static Epilogue then(Epilogue first, Epilogue second);
  /// ValueError naming `op` once shutdown() has freed the inner backends.
  void checkLive(const char* op) const;
  void checkRank(const char* op, const char* what, int64_t rank) const;
  /// `whole` must hold group-size blocks of `block`'s numel, in `block`'s dtype
  /// (_allgather_base's output, _reduce_scatter_base's input).
  void checkBlocks(const char* op, const char* wholeName, const at::Tensor& whole,
                   const at::Tensor& block) const;
  /// ValueError where a coalesced op mixes dtypes and the route's inner backend cannot.
  static void checkCoalescedDtypes(const char* op, const DeviceRoute& route,
                                   const std::vector<at::Tensor>& tensors);
  DeviceRoute& barrierRoute(const c10d::BarrierOptions& opts);
  /// Inside a coalesced block, before an op on `route` reading `inputs`: starts the route's
  /// native coalescing on first use, or notes that the block holds ops of another kind.
  void joinCoalesced(DeviceRoute& route, const std::vector<at::Tensor>& inputs);
  /// Calls `fn` on every inner and level backend of every built route.
  void forEachBackend(const std::function<void(c10d::Backend&)>& fn);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<Options> options_;
  std::unordered_map<c10::DeviceType, std::unique_ptr<DeviceRoute>> routes_;
  /// Factories of every device type given as lazy, built or not (a split child gets them all);
  /// `lazyTypes_` lists those types.
  std::unordered_map<c10::DeviceType, InnerFactory> lazy_;
  std::vector<c10::DeviceType> lazyTypes_;
  /// Guards routes_ and lazy_ against innerBackend() from another thread while the issuing
  /// thread builds a lazy route.
  mutable std::mutex routesMutex_;
  /// Set by shutdown(), which destroy_process_group may call from another thread than the
  /// one issuing ops.
  std::atomic<bool> shutDown_{false};
  uint64_t seq_ = 0;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
  std::vector<DeviceRoute*> coalescedNative_;
  /// The inputs of the block's ops on stream routes: an end issued on the internal stream keeps
  /// them (with the ops' outputs) until the grouped launch is done with them.
  std::vector<at::Tensor> coalescedInputs_;
  /// The block holds an op on a route that does not coalesce natively (CPU).
  bool coalescedOther_ = false;
  /// Works of abandoned blocks (abandonCoalescing); declared after routes_, so freed before
  /// the inner backends their ops ran on.
  std::vector<c10::intrusive_ptr<c10d::Work>> abandoned_;
  bool debug_ = false;
  bool plain_ = false;
  /// The store of the last split() and its child (null on a rank outside the child). torch
  /// before 2.14 calls split() once per device type of the parent, and "topo" serves cpu and
  /// cuda with this one backend: a member's second split would rendezvous on the first child's
  /// store keys and hang, and a non-member's would run NCCL's no-colour split a second time,
  /// which no member matches (torch 2.14 splits each backend once). The store is held so that
  /// its address names one splitGroup call; the weak pointer lets the child die with its group.
  c10::intrusive_ptr<c10d::Store> lastSplitStore_;
  std::vector<int> splitRanks_;
  c10::weak_intrusive_ptr<c10d::Backend> lastSplitChild_{
      c10::weak_intrusive_ptr<c10d::Backend>(c10::intrusive_ptr<c10d::Backend>())};
  /// One logged choice; op names are string literals, so logging allocates nothing.
  struct DecisionRecord {
    const char* op;
    int64_t bytes;
    bool hierarchical;
  };
  mutable std::mutex decisionsMutex_;
  std::deque<DecisionRecord> decisions_;
};

}  // namespace torch_topo::backend
