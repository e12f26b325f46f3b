// SPDX-License-Identifier: Apache-2.0
// ScheduleWorker: the thread that runs a CPU route's hierarchical schedules (layer:
// csrc/backend). A schedule blocks on the host between its steps; run on the caller, that block
// made every async_op=True call synchronous, so DDP buckets, FSDP reduce-scatters and the
// overlap ops could not proceed while it travelled. One FIFO thread per route keeps the
// schedules' inner collectives in program order on every rank while the caller goes on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "backend/caller_mode.h"

namespace torch_topo::backend {

/// The Work of one queued schedule: completes (base-class wait/isCompleted/exception) and
/// fires its future when the worker has run it.
class ScheduleWork : public c10d::Work {
 public:
  ScheduleWork(int rank, c10d::OpType type);
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  /// Called once by the worker: settles the base Work first (so wait() returns), then the future.
  void settle(std::exception_ptr error);

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

/// Runs tasks one at a time, in submission order, on its own thread.
///
/// Tasks hold tensors that Python may own, and dropping the last reference to one takes the
/// GIL. The worker therefore never drops a finished task: it parks it, and the issuing thread
/// releases parked tasks on its next submit, drain or stop. Otherwise a caller that holds the
/// GIL while joining (a group freed by Python) would deadlock with the worker.
class ScheduleWorker {
 public:
  ScheduleWorker();
  /// stop().
  ~ScheduleWorker();
  ScheduleWorker(const ScheduleWorker&) = delete;
  ScheduleWorker& operator=(const ScheduleWorker&) = delete;

  /// Queues `task`; the returned work completes when it has run (with its exception, if any).
  c10::intrusive_ptr<c10d::Work> submit(int rank, c10d::OpType type, std::function<void()> task);
  /// Blocks until every task submitted before this call has run.
  void drain();
  /// Runs what is queued (schedules are collectives other ranks wait for), then joins the
  /// thread; later submits fail. Call it without the GIL where there is one.
  void stop();

 private:
  struct Task {
    std::function<void()> run;
    c10::intrusive_ptr<ScheduleWork> work;
    CallerMode mode;  // the submitting thread's
  };
  void loop();
  /// Takes the parked tasks out under the lock, for the caller to drop outside it.
  std::vector<Task> takeParked();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::vector<Task> parked_;
  uint64_t submitted_ = 0;
  uint64_t finished_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace torch_topo::backend
