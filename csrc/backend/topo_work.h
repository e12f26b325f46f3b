// SPDX-License-Identifier: Apache-2.0
// TopoWork: the c10d::Work that every TopoBackend op returns (layer: csrc/backend). It wraps
// the inner backends' works of one op, runs the op's local epilogue (e.g. the AVG scaling) once
// and completes its future (valid for every collective; see getFuture for send/recv).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "backend/caller_mode.h"

namespace torch_topo::backend {

/// The result of one TopoBackend op.
///
/// Two completion modes share one class and one completion path (`complete`):
///  - pending mode (CPU ops, every op inside a coalesced block, and a block's end unless it is
///    one NCCL group alone): the inner works are still in flight; the epilogue runs when the last of them finishes, either from
///    the inner futures' callbacks or from `wait()`, whichever comes first (exactly once).
///    `wait()` always asks the inner works too, and so does `isCompleted()` unless every inner
///    future is host-side (gloo's, marked when its op is done): an NCCL work's future is set
///    when the op is queued, so its callback says nothing about the GPU, and this work's
///    future takes its devices and follows its events instead (`markFuture`);
///  - stream mode (CUDA and other stream devices): every inner step and the epilogue were
///    already enqueued on the backend's internal stream, which ends with `end_`; completion is a
///    stream-level fact, `wait()` makes the caller's current stream wait on `end_`.
///
/// Ordering: an op's inner collectives were all issued, in program order, on the thread that
/// called the op, before this object exists. The work only waits; it never issues collectives,
/// so completion order cannot reorder inner collectives across ranks.
///
/// Thread safety: `wait`, `isCompleted` and the inner futures' callbacks may race; `complete`
/// runs its body once (std::call_once) and the status is atomic. The epilogue touches only the
/// op's own output tensors.
class TopoWork : public c10d::Work {
 public:
  enum class Status { PENDING, COMPLETED, TIMEDOUT, ERROR };

  /// Pending mode. `inner` are the still-running inner works (may be empty: then the op is
  /// complete at construction); `epilogue` is a local step run after they succeed.
  static c10::intrusive_ptr<TopoWork> pending(
      int rank, c10d::OpType opType, const std::string& op, std::vector<at::Tensor> outputs,
      std::vector<c10::intrusive_ptr<c10d::Work>> inner, std::function<void()> epilogue);

  /// Stream mode: `end` was recorded on `stream` (the internal stream) after the last step of
  /// the op; `future` was completed with the outputs while that stream was current.
  /// `keepAlive` (the op's tensors) live as long as the work; a work destroyed before `end`
  /// without a wait() first records them on `stream`, so the caching allocator cannot reuse
  /// their memory before the op is done with it (what ProcessGroupNCCL does for its tensors).
  static c10::intrusive_ptr<TopoWork> streamed(
      int rank, c10d::OpType opType, const std::string& op, std::vector<at::Tensor> outputs,
      std::vector<at::Tensor> keepAlive, c10::Stream stream, c10::Event end,
      c10::intrusive_ptr<c10::ivalue::Future> future);

  TopoWork(int rank, c10d::OpType opType, const std::string& title,
           std::vector<at::Tensor> outputs);
  ~TopoWork() override;

  /// True once the op has finished (successfully or not). Pending mode: polls the inner works
  /// and, when all finished, completes (runs the epilogue) on the polling thread. Stream mode:
  /// queries `end_` (non-blocking).
  bool isCompleted() override;
  /// True when complete without error.
  bool isSuccess() const override;
  /// The error of a failed op (inner failure, timeout or epilogue), else null.
  std::exception_ptr exception() const override;
  /// The peer of a recvAnysource, from the inner work.
  int sourceRank() const override;
  /// The op's output tensors.
  std::vector<at::Tensor> result() override;
  /// Sequences later work on the output tensors after this op without blocking the host:
  /// stream mode makes the current stream wait on `end_`; pending mode (CPU) has nothing to do.
  void synchronize() override;
  /// Stream mode: `synchronize()` (the base class would spin on a status that is set when the
  /// op is queued); pending mode: the base class's.
  void blockCurrentStream() override;
  /// Pending mode: waits on every inner work (each bounded by `timeout`, or the inner
  /// backend's own timeout when unset), then runs the epilogue if not yet run; rethrows the
  /// first error and sets status TIMEDOUT or ERROR. A `timeout` that runs out while an inner
  /// work is still in flight raises and leaves the work pending, as c10d's works do. Stream
  /// mode: `synchronize()` (no host block); with a `timeout`, the host first waits for the op
  /// up to it (DistBackendError when it runs out, the op left running).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /// Aborts the inner works still in flight.
  void abort() override;
  /// Completed with the output tensors (or the error) when the op completes; never null, so
  /// DDP's reducer can wait on it. Where inner futures have devices, so has this one, and its
  /// events follow theirs: waiting on it orders the caller's stream after the inner ops. A work
  /// whose inner works have no future (CPU send/recv and coalesced blocks of them) raises while
  /// pending, as Gloo's do: nothing would complete it.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  Status status() const { return status_.load(); }

 private:
  /// Runs once: on success the epilogue, then the future and the base Work state are settled.
  void complete(std::exception_ptr error);
  /// Completes the future with the outputs, after the events of `deviceFutures_`.
  void markFuture();
  void attachCallbacks();
  /// Some inner work has not finished (polled).
  bool anyInFlight();
  /// Stream mode: blocks the host until `end_` is reached, or raises after `timeout`.
  void awaitOnHost(std::chrono::milliseconds timeout);

  std::string title_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;
  std::vector<c10::intrusive_ptr<c10d::Work>> inner_;
  std::function<void()> epilogue_;
  std::optional<c10::Stream> stream_;
  std::optional<c10::Event> end_;
  std::atomic<bool> waited_{false};
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::once_flag completeOnce_;
  std::atomic<Status> status_{Status::PENDING};
  std::atomic<int> remaining_{0};
  /// The inner futures are host-side (no devices): their callbacks mean the op is done.
  std::atomic<bool> settledByFutures_{false};
  /// The inner futures' callbacks (or an empty inner list) complete this work without wait().
  bool futureSettles_ = false;
  /// The inner futures with devices (NCCL's, a streamed TopoWork's): marked when their op was
  /// queued, with events that this work's future follows.
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> deviceFutures_;
  std::exception_ptr error_;
  /// The issuing thread's, for the epilogue wherever it runs.
  CallerMode callerMode_;
};

/// Classifies an inner failure: gloo and NCCL both say "timed out"/"timeout" in the message.
bool isTimeoutError(const std::exception_ptr& error);

}  // namespace torch_topo::backend
