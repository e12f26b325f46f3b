// SPDX-License-Identifier: Apache-2.0
// TopoWork: completion, epilogue and future of one TopoBackend op (layer: csrc/backend).
#include "backend/topo_work.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include <ATen/core/ivalue.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace torch_topo::backend {

namespace {

c10::intrusive_ptr<c10::ivalue::Future> makeTensorListFuture(std::vector<c10::Device> devices) {
  return c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), std::move(devices));
}

}  // namespace

bool isTimeoutError(const std::exception_ptr& error) {
  if (!error) return false;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.find("imed out") != std::string::npos ||
           what.find("imeout") != std::string::npos;
  } catch (...) {
    return false;
  }
}

TopoWork::TopoWork(int rank, c10d::OpType opType, const std::string& title,
                   std::vector<at::Tensor> outputs)
    // The base class opens the profiler range "topo:<op>" and closes it in finish().
    : c10d::Work(rank, opType, title.c_str(), std::optional<std::vector<at::Tensor>>(outputs)),
      title_(title),
      outputs_(std::move(outputs)) {}

TopoWork::~TopoWork() {
  // Dropped before its end and never waited: no stream was ordered after the op, so its
  // tensors go back to the allocator only after the internal stream's current point.
  if (!end_ || waited_) return;
  try {
    if (end_->query()) return;
    c10::impl::VirtualGuardImpl impl(stream_->device_type());
    for (const auto& t : keepAlive_) {
      if (t.defined() && t.has_storage()) {
        impl.recordDataPtrOnStream(t.storage().data_ptr(), *stream_);
      }
    }
  } catch (...) {
    // A destructor must not throw; a failed query means the device has already failed.
  }
}

c10::intrusive_ptr<TopoWork> TopoWork::pending(
    int rank, c10d::OpType opType, const std::string& op, std::vector<at::Tensor> outputs,
    std::vector<c10::intrusive_ptr<c10d::Work>> inner, std::function<void()> epilogue) {
  auto work = c10::make_intrusive<TopoWork>(rank, opType, "topo:" + op, std::move(outputs));
  // A backend may return no work for an op with nothing to wait for (an empty coalesced end).
  for (auto& w : inner) {
    if (w) work->inner_.push_back(std::move(w));
  }
  work->epilogue_ = std::move(epilogue);
  work->future_ = makeTensorListFuture({});
  work->attachCallbacks();
  return work;
}

c10::intrusive_ptr<TopoWork> TopoWork::streamed(
    int rank, c10d::OpType opType, const std::string& op, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> keepAlive, c10::Stream stream, c10::Event end,
    c10::intrusive_ptr<c10::ivalue::Future> future) {
  auto work = c10::make_intrusive<TopoWork>(rank, opType, "topo:" + op, std::move(outputs));
  work->keepAlive_ = std::move(keepAlive);
  work->stream_ = stream;
  work->end_.emplace(std::move(end));
  work->future_ = std::move(future);
  // Everything is enqueued: from the host's point of view the op is done; errors of enqueued
  // NCCL work surface through the inner backend's own watchdog.
  work->status_ = Status::COMPLETED;
  work->finish();
  return work;
}

void TopoWork::attachCallbacks() {
  // Inner works without a future (gloo's send/recv) complete only through wait(); the others
  // complete this work from their callbacks, so DDP's reducer sees the future fire without
  // anyone calling wait().
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
  bool all = true;
  for (auto& w : inner_) {
    if (w->retrieveOpType() == c10d::OpType::SEND || w->retrieveOpType() == c10d::OpType::RECV ||
        w->retrieveOpType() == c10d::OpType::RECVANYSOURCE) {
      all = false;
      break;
    }
    try {
      futures.push_back(w->getFuture());
    } catch (const c10::Error&) {
      all = false;
      break;
    }
    if (!futures.back()) {
      all = false;
      break;
    }
  }
  if (inner_.empty()) {
    complete(nullptr);
    return;
  }
  if (!all) return;
  futureSettles_ = true;
  // A future without devices (gloo's) is marked after the op's last step; a device future
  // (NCCL's) when the op is queued, so only the former can settle isCompleted().
  settledByFutures_ = std::all_of(futures.begin(), futures.end(),
                                  [](const auto& f) { return f->devices().empty(); });
  // A device future carries events that whoever uses its value waits on. A future without
  // devices here said "done" without them: a block of CPU and CUDA ops fired its future when
  // Gloo finished, and `fut.wait()` or a then() callback read the CUDA outputs before NCCL
  // wrote them. Ours takes the inner devices and is marked after their events (markFuture).
  std::vector<c10::Device> devices;
  for (auto& f : futures) {
    const std::vector<c10::Device> own = f->devices();
    if (own.empty()) continue;
    deviceFutures_.push_back(f);
    devices.insert(devices.end(), own.begin(), own.end());
  }
  if (!devices.empty()) future_ = makeTensorListFuture(std::move(devices));
  remaining_ = static_cast<int>(futures.size());
  c10::intrusive_ptr<TopoWork> self = c10::intrusive_ptr<TopoWork>::reclaim_copy(this);
  for (auto& f : futures) {
    f->addCallback([self](c10::ivalue::Future& done) {
      if (done.hasError()) {
        self->complete(done.exception_ptr());
      } else if (--self->remaining_ == 0) {
        self->complete(nullptr);
      }
    });
  }
}

void TopoWork::complete(std::exception_ptr error) {
  std::call_once(completeOnce_, [&] {
    if (!error && epilogue_) {
      try {
        // On the thread that completes the op (Gloo's, or the waiter's): the scaling and the
        // copy-back write into the caller's tensors.
        const CallerModeGuard mode(callerMode_);
        epilogue_();
      } catch (...) {
        error = std::current_exception();
      }
    }
    error_ = error;
    status_ = !error ? Status::COMPLETED
                     : (isTimeoutError(error) ? Status::TIMEDOUT : Status::ERROR);
    if (error) {
      future_->setErrorIfNeeded(error);
    } else {
      markFuture();
    }
    finish(error);
  });
}

void TopoWork::markFuture() {
  if (deviceFutures_.empty()) {
    future_->markCompleted(c10::IValue(outputs_));
    return;
  }
  // Any thread may get here (a Gloo callback, wait(), isCompleted()): pool streams of the
  // future's devices wait on every inner future's events and are current while ours records its
  // own (as c10's then() callbacks run), so its users wait for the inner ops and for nothing
  // queued on the completing thread's streams.
  const std::vector<c10::Device> devices = future_->devices();
  c10::impl::VirtualGuardImpl impl(devices.front().type());
  std::vector<c10::Stream> streams;
  for (const auto& device : devices) streams.push_back(impl.getStreamFromGlobalPool(device));
  c10::MultiStreamGuard current(streams);
  for (auto& f : deviceFutures_) f->wait();  // complete already: a stream wait, no host block
  future_->markCompleted(c10::IValue(outputs_));
}

bool TopoWork::isCompleted() {
  if (end_) return end_->query();
  // Gloo marks its future just before its own completed flag: a caller woken by this work's
  // future could otherwise poll an inner work in between and read "not completed". The status
  // is set a moment before the future is marked, so both are asked: a caller told "completed"
  // can read the future's value at once.
  if (settledByFutures_ && status_ != Status::PENDING && future_->completed()) return true;
  // Polled even once complete: an NCCL work's future is set when the op is queued, so only
  // the inner work knows whether the GPU has finished it.
  for (auto& w : inner_) {
    if (!w->isCompleted()) return false;
  }
  std::exception_ptr error;
  for (auto& w : inner_) {
    if ((error = w->exception())) break;
  }
  complete(error);
  return true;
}

bool TopoWork::isSuccess() const { return status_ == Status::COMPLETED; }

std::exception_ptr TopoWork::exception() const {
  return status_ == Status::PENDING ? nullptr : error_;
}

int TopoWork::sourceRank() const {
  TORCH_CHECK(inner_.size() == 1, "TopoWork::sourceRank: only a recv has a source rank (", title_,
              ")");
  return inner_.front()->sourceRank();
}

std::vector<at::Tensor> TopoWork::result() { return outputs_; }

void TopoWork::synchronize() {
  if (!end_) return;
  waited_ = true;
  c10::impl::VirtualGuardImpl impl(end_->device_type());
  end_->block(impl.getStream(c10::Device(end_->device_type(), end_->device_index())));
}

void TopoWork::blockCurrentStream() {
  if (end_) {
    synchronize();
  } else {
    c10d::Work::blockCurrentStream();
  }
}

void TopoWork::awaitOnHost(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!end_->query()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str("TopoWork::wait: ", title_, " did not complete within ",
                               timeout.count(), " ms; it is still running: wait() again to "
                               "complete it"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool TopoWork::wait(std::chrono::milliseconds timeout) {
  if (end_) {
    // A caller's own timeout blocks the host until the op ends, as ProcessGroupNCCL's
    // wait(timeout) does. When it runs out the op is left running (NCCL would abort its
    // communicator), as this work's pending mode and Gloo leave theirs.
    if (timeout != kNoTimeout) awaitOnHost(timeout);
    synchronize();
    return true;
  }
  // Every inner wait runs even when the callbacks already completed this work: an NCCL work
  // (its future is set at enqueue) orders the caller's stream, or blocks the host for a
  // barrier, only in its own wait().
  try {
    for (auto& w : inner_) w->wait(timeout);
  } catch (...) {
    // A caller's own `timeout` that ran out while the op is still in flight ("Operation timed
    // out!") leaves the op running, as the inner backend does: a later wait() still completes
    // it, epilogue included. Failing the work here lost the AVG scaling for good.
    if (timeout != kNoTimeout && anyInFlight()) throw;
    complete(std::current_exception());
  }
  complete(nullptr);
  if (error_) std::rethrow_exception(error_);
  return true;
}

void TopoWork::abort() {
  for (auto& w : inner_) w->abort();
}

bool TopoWork::anyInFlight() {
  return std::any_of(inner_.begin(), inner_.end(), [](auto& w) { return !w->isCompleted(); });
}

c10::intrusive_ptr<c10::ivalue::Future> TopoWork::getFuture() {
  // Without inner futures only wait() or isCompleted() can complete the work, so a caller
  // waiting on the future alone would wait forever; Gloo's own send/recv works refuse too.
  TORCH_CHECK(futureSettles_ || status_ != Status::PENDING, "TopoWork::getFuture: ", title_,
              " has no future until it completes: its inner work (Gloo's send, recv or a "
              "coalesced block holding them) completes only in wait(); call wait() first");
  return future_;
}

}  // namespace torch_topo::backend
