// SPDX-License-Identifier: Apache-2.0
// ScheduleWorker and ScheduleWork (layer: csrc/backend).
#include "backend/schedule_worker.h"

#include <pthread.h>

#include <exception>
#include <utility>

namespace torch_topo::backend {

ScheduleWork::ScheduleWork(int rank, c10d::OpType type)
    : c10d::Work(rank, type),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get())) {}

void ScheduleWork::settle(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue());
  }
}

ScheduleWorker::ScheduleWorker() : thread_([this] { loop(); }) {
  // So that top, perf and gdb tell it from the Gloo threads it waits on.
  pthread_setname_np(thread_.native_handle(), "topo_schedule");
}

ScheduleWorker::~ScheduleWorker() { stop(); }

void ScheduleWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  takeParked();
}

std::vector<ScheduleWorker::Task> ScheduleWorker::takeParked() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(parked_);
}

c10::intrusive_ptr<c10d::Work> ScheduleWorker::submit(int rank, c10d::OpType type,
                                                      std::function<void()> task) {
  auto work = c10::make_intrusive<ScheduleWork>(rank, type);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stopping_, "ScheduleWorker::submit: the backend was shut down");
    queue_.push_back(Task{std::move(task), work, CallerMode{}});
    ++submitted_;
  }
  cv_.notify_all();
  takeParked();
  return work;
}

void ScheduleWorker::drain() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = submitted_;
    cv_.wait(lock, [&] { return finished_ >= target; });
  }
  takeParked();
}

void ScheduleWorker::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left to run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      const CallerModeGuard mode(task.mode);
      task.run();
    } catch (...) {
      error = std::current_exception();
    }
    // Settled outside the lock: the future's callbacks (TopoWork's epilogue) may take a while.
    task.work->settle(error);
    lock.lock();
    parked_.push_back(std::move(task));
    ++finished_;
    cv_.notify_all();
  }
}

}  // namespace torch_topo::backend
