// SPDX-License-Identifier: Apache-2.0
// The one-step Gloo collectives and the Work that folds received blocks (layer: csrc/backend).
#include "backend/gloo_exchanges.h"

#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "backend/argument_error.h"
#include "backend/caller_mode.h"

namespace torch_topo::backend {

namespace {

// out = a op b. `out` may be `a` (an in-place fold); written straight into `out`, it gives the
// same bits as a copy of `a` folded with `b`.
void foldPair(at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
              c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: at::add_out(out, a, b); return;
    case c10d::ReduceOp::PRODUCT: at::mul_out(out, a, b); return;
    case c10d::ReduceOp::MIN: at::minimum_out(out, a, b); return;
    case c10d::ReduceOp::MAX: at::maximum_out(out, a, b); return;
    case c10d::ReduceOp::BAND: at::bitwise_and_out(out, a, b); return;
    case c10d::ReduceOp::BOR: at::bitwise_or_out(out, a, b); return;
    case c10d::ReduceOp::BXOR: at::bitwise_xor_out(out, a, b); return;
    default:
      TOPO_ARGUMENT_ERROR(c10::str("gloo_exchanges: ReduceOp ", static_cast<int>(op),
                                   " has no local fold; AVG and "
                                   "PREMUL_SUM arrive here as SUM"));
  }
}

// Folds `blocks` (rank order) into `out`: out = blocks[0] op blocks[1] op ..., the first pair
// written straight into `out`, the rest folded in place. `out` may be blocks[0] or blocks[1].
void foldBlocks(at::Tensor& out, const std::vector<at::Tensor>& blocks,
                c10d::ReduceOp::RedOpType op) {
  if (blocks.size() == 1) {
    out.copy_(blocks[0]);
    return;
  }
  foldPair(out, blocks[0], blocks[1], op);
  for (size_t r = 2; r < blocks.size(); ++r) foldPair(out, out, blocks[r], op);
}

/// Completes after the exchange and the fold: from the exchange's future callback (on Gloo's
/// thread), or from wait(), whichever comes first (the fold runs once).
class FoldWork : public c10d::Work {
 public:
  FoldWork(c10d::OpType type, c10::intrusive_ptr<c10d::Work> exchange, at::Tensor received,
           at::Tensor output, c10d::ReduceOp::RedOpType op, int64_t ranks)
      : c10d::Work(-1, type),
        exchange_(std::move(exchange)),
        received_(std::move(received)),
        output_(std::move(output)),
        op_(op),
        ranks_(ranks),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  void attach() {
    c10::intrusive_ptr<FoldWork> self = c10::intrusive_ptr<FoldWork>::reclaim_copy(this);
    exchange_->getFuture()->addCallback([self](c10::ivalue::Future& done) {
      self->settle(done.hasError() ? done.exception_ptr() : nullptr);
    });
  }

  bool isCompleted() override {
    if (exchange_->isCompleted()) settle(exchange_->exception());
    return c10d::Work::isCompleted();
  }

  bool wait(std::chrono::milliseconds timeout) override {
    std::exception_ptr error;
    try {
      exchange_->wait(timeout);
    } catch (...) {
      // The caller's own timeout ran out with the exchange still in flight: the op goes on,
      // and a later wait() folds it (settling now left the output unwritten for good).
      if (timeout != kNoTimeout && !exchange_->isCompleted()) throw;
      error = std::current_exception();
    }
    settle(error);
    return c10d::Work::wait(timeout);
  }

  void abort() override { exchange_->abort(); }

  // Gloo's own works answer result() with their outputs; a two-rank all-reduce across hosts
  // returns this work to the caller as is, so `work.result()` raised where Gloo's did not.
  std::vector<at::Tensor> result() override { return {output_}; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void settle(std::exception_ptr error) {
    std::call_once(once_, [&] {
      if (!error) {
        try {
          // On Gloo's thread or the waiter's, into the caller's output.
          const CallerModeGuard mode(callerMode_);
          const auto blocks = received_.view({ranks_, -1});
          // Folded in place when the output is one dense run (it never overlaps `received_`,
          // a fresh buffer); else through a temporary.
          const bool direct = output_.is_contiguous();
          at::Tensor acc = direct ? output_.view({-1}) : at::empty_like(blocks.select(0, 0));
          foldBlocks(acc, blocks.unbind(0), op_);
          if (!direct) output_.copy_(acc.view(output_.sizes()));
        } catch (...) {
          error = std::current_exception();
        }
      }
      received_ = at::Tensor();  // the buffer is as large as the input: free it now
      finish(error);
      if (error) {
        future_->setError(error);
      } else {
        future_->markCompleted(c10::IValue(std::vector<at::Tensor>{output_}));
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> exchange_;
  at::Tensor received_;
  at::Tensor output_;
  c10d::ReduceOp::RedOpType op_;
  int64_t ranks_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::once_flag once_;
  CallerMode callerMode_;  // the issuing thread's, for the fold wherever it runs
};

// Wraps an exchange whose `received` holds one block per rank.
c10::intrusive_ptr<c10d::Work> foldAfter(c10d::OpType type, c10::intrusive_ptr<c10d::Work> exchange,
                                         at::Tensor received, at::Tensor output,
                                         const c10d::ReduceOp& op, int64_t ranks) {
  auto work = c10::make_intrusive<FoldWork>(type, std::move(exchange), std::move(received),
                                            std::move(output), op.op_, ranks);
  work->attach();
  return work;
}

bool isGloo(const c10d::Backend& backend) { return backend.getBackendName() == "gloo"; }

bool isDense(const at::Tensor& t) { return t.layout() == c10::kStrided; }

// Sends and receives of one peer exchange; wait() waits for all of them, then runs `after`
// (the fold) once. Gloo's send/recv works have no future, so neither has this one.
class PeerWork : public c10d::Work {
 public:
  PeerWork(c10d::OpType type, std::vector<c10::intrusive_ptr<c10d::Work>> steps,
           std::function<void()> after, std::chrono::milliseconds stepTimeout)
      : c10d::Work(-1, type),
        steps_(std::move(steps)),
        after_(std::move(after)),
        stepTimeout_(stepTimeout) {}

  bool wait(std::chrono::milliseconds timeout) override {
    std::exception_ptr error;
    try {
      const auto bound = timeout != kNoTimeout ? timeout : stepTimeout_;
      for (auto& step : steps_) step->wait(bound);
      const CallerModeGuard mode(callerMode_);  // the fold writes into the caller's output
      if (after_) after_();
    } catch (...) {
      error = std::current_exception();
    }
    steps_.clear();
    after_ = nullptr;  // releases the buffers it holds
    if (!isCompleted()) finish(error);
    return c10d::Work::wait(timeout);
  }

  void abort() override {
    for (auto& step : steps_) step->abort();
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> steps_;
  std::function<void()> after_;
  std::chrono::milliseconds stepTimeout_;
  CallerMode callerMode_;  // the issuing thread's, for the fold
};

// The bound of a peer exchange's steps: the op's timeout, else the group's current one. Gloo's
// send and recv, waited without a bound, wait as long as their pair's timeout when the group
// connected, so a collective made of them ignored set_timeout (Gloo's own collectives follow it).
std::chrono::milliseconds stepTimeout(c10d::Backend& backend, std::chrono::milliseconds timeout) {
  return timeout != c10d::kUnsetTimeout ? timeout : backend.getBackendOptions()->timeout;
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  const auto* a0 = static_cast<const char*>(a.data_ptr());
  const auto* b0 = static_cast<const char*>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

bool peerApplies(const c10d::Backend& backend, const at::Tensor& a, const at::Tensor& b) {
  return isGloo(backend) && isDense(a) && isDense(b) && a.is_contiguous() && b.is_contiguous();
}

// Receive buffers of the peer exchanges, reused per thread. A schedule's steps ask for the
// same few sizes chunk after chunk, and every fresh multi-MiB allocation costs page faults and
// the kernel's zero-filling on first touch (a 64 MiB all-reduce on 2 x 2 emulated hosts spent
// about a fifth of its CPU time there: 0.45 s against 0.36 s with glibc told to keep freed
// memory). A buffer goes back to the pool of the thread that waited its exchange once its fold
// has run; each thread keeps at most kPooledBuffers (a schedule's intra step plus its
// kSlowStepsInFlight cross-host steps).
class ScratchPool {
 public:
  at::Tensor take(int64_t numel, const at::TensorOptions& options) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->numel() == numel && it->dtype() == options.dtype()) {
        at::Tensor t = it->view({-1});  // whatever shape its last user gave it
        free_.erase(it);
        return t;
      }
    }
    return at::empty({numel}, options);
  }

  void give(at::Tensor t) {
    if (free_.size() == kPooledBuffers) free_.erase(free_.begin());
    free_.push_back(std::move(t));
  }

 private:
  static constexpr size_t kPooledBuffers = 4;
  std::vector<at::Tensor> free_;
};

ScratchPool& scratchPool() {
  thread_local ScratchPool pool;
  return pool;
}

// Level groups are private to their schedule, so one tag serves every peer step: Gloo matches
// sends and receives of one tag and pair in posting order, which is program order everywhere.
constexpr int kPeerTag = 0x7e7;

c10::intrusive_ptr<c10d::Work> sendTo(c10d::Backend& backend, const at::Tensor& t, int peer) {
  std::vector<at::Tensor> ts{t};
  return backend.send(ts, peer, kPeerTag);
}

c10::intrusive_ptr<c10d::Work> recvFrom(c10d::Backend& backend, const at::Tensor& t, int peer) {
  std::vector<at::Tensor> ts{t};
  return backend.recv(ts, peer, kPeerTag);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> peerAllGather(c10d::Backend& backend, at::Tensor output,
                                             const at::Tensor& input,
                                             std::chrono::milliseconds timeout) {
  if (!peerApplies(backend, output, input)) return {};
  const int ranks = backend.getSize();
  const int me = backend.getRank();
  TOPO_CHECK_ARGUMENT(output.numel() == input.numel() * ranks, "peerAllGather: output has ",
                      output.numel(), " elements, expected ", input.numel(), " x ", ranks);
  const auto blocks = output.view({ranks, -1});
  const auto mine = input.view({-1});
  const bool inPlace = blocks.select(0, me).data_ptr() == mine.data_ptr();
  // An input inside another rank's block would be overwritten while it is sent.
  if (!inPlace && overlaps(output, input)) return {};
  std::vector<c10::intrusive_ptr<c10d::Work>> steps;
  // Receives first, so every peer's send finds its buffer posted.
  for (int r = 0; r < ranks; ++r) {
    if (r != me) steps.push_back(recvFrom(backend, blocks.select(0, r), r));
  }
  for (int r = 0; r < ranks; ++r) {
    if (r != me) steps.push_back(sendTo(backend, mine, r));
  }
  // An input that is this rank's block of the output (FSDP2) needs no copy; any other input
  // is only read, so its block can be written now.
  if (!inPlace) blocks.select(0, me).copy_(mine);
  return c10::make_intrusive<PeerWork>(c10d::OpType::_ALLGATHER_BASE, std::move(steps), nullptr,
                                       stepTimeout(backend, timeout));
}

c10::intrusive_ptr<c10d::Work> peerReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                 const at::Tensor& input,
                                                 const c10d::ReduceOp& op,
                                                 std::chrono::milliseconds timeout) {
  if (!peerApplies(backend, output, input) || overlaps(output, input)) return {};
  const int ranks = backend.getSize();
  const int me = backend.getRank();
  TOPO_CHECK_ARGUMENT(input.numel() == output.numel() * ranks, "peerReduceScatter: input has ",
                      input.numel(), " elements, expected ", output.numel(), " x ", ranks);
  const auto sendBlocks = input.view({ranks, -1});
  // Row `me` stays unused.
  at::Tensor received =
      scratchPool().take(sendBlocks.numel(), sendBlocks.options()).view(sendBlocks.sizes());
  std::vector<c10::intrusive_ptr<c10d::Work>> steps;
  std::vector<at::Tensor> fold;
  for (int r = 0; r < ranks; ++r) {
    if (r != me) steps.push_back(recvFrom(backend, received.select(0, r), r));
    fold.push_back(r == me ? sendBlocks.select(0, me) : received.select(0, r));
  }
  for (int r = 0; r < ranks; ++r) {
    if (r != me) steps.push_back(sendTo(backend, sendBlocks.select(0, r), r));
  }
  auto after = [output, fold = std::move(fold), received, op = op.op_]() mutable {
    at::Tensor out = output.view({-1});
    foldBlocks(out, fold, op);
    scratchPool().give(std::move(received));
  };
  return c10::make_intrusive<PeerWork>(c10d::OpType::_REDUCE_SCATTER_BASE, std::move(steps),
                                       std::move(after), stepTimeout(backend, timeout));
}

c10::intrusive_ptr<c10d::Work> peerAllReduce(c10d::Backend& backend, at::Tensor tensor,
                                             const c10d::ReduceOp& op,
                                             std::chrono::milliseconds timeout) {
  if (backend.getSize() != 2 || !peerApplies(backend, tensor, tensor)) return {};
  const int me = backend.getRank();
  const int peer = 1 - me;
  at::Tensor flat = tensor.view({-1});
  at::Tensor theirs = scratchPool().take(flat.numel(), flat.options());
  std::vector<c10::intrusive_ptr<c10d::Work>> steps{recvFrom(backend, theirs, peer),
                                                    sendTo(backend, flat, peer)};
  // The send has completed when the fold runs, so the tensor can take the result.
  auto after = [flat, theirs, me, op = op.op_]() mutable {
    foldBlocks(flat, me == 0 ? std::vector<at::Tensor>{flat, theirs}
                             : std::vector<at::Tensor>{theirs, flat}, op);
    scratchPool().give(std::move(theirs));
  };
  return c10::make_intrusive<PeerWork>(c10d::OpType::ALLREDUCE, std::move(steps),
                                       std::move(after), stepTimeout(backend, timeout));
}

c10::intrusive_ptr<c10d::Work> oneStepReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                    const at::Tensor& input,
                                                    const c10d::ReduceOp& op,
                                                    std::chrono::milliseconds timeout) {
  if (!isGloo(backend) || !isDense(input)) return {};
  const int64_t ranks = backend.getSize();
  TOPO_CHECK_ARGUMENT(input.numel() == output.numel() * ranks, "oneStepReduceScatter: input has ",
                      input.numel(), " elements, expected ", output.numel(), " x ", ranks);
  at::Tensor send = input.contiguous().view({ranks, -1});
  at::Tensor received = at::empty_like(send);
  std::vector<int64_t> even;  // no split sizes: equal blocks
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  at::Tensor wireOut = onWire(received);
  at::Tensor wireIn = onWire(send);
  auto exchange = backend.alltoall_base(wireOut, wireIn, even, even, opts);
  return foldAfter(c10d::OpType::_REDUCE_SCATTER_BASE, std::move(exchange), std::move(received),
                   std::move(output), op, ranks);
}

c10::intrusive_ptr<c10d::Work> oneStepReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                    at::TensorList blocks,
                                                    const c10d::ReduceOp& op,
                                                    std::chrono::milliseconds timeout) {
  if (!isGloo(backend)) return {};
  return oneStepReduceScatter(backend, std::move(output), at::stack(blocks), op, timeout);
}

c10::intrusive_ptr<c10d::Work> oneStepAllReduce(c10d::Backend& backend, at::Tensor tensor,
                                                const c10d::ReduceOp& op,
                                                std::chrono::milliseconds timeout) {
  // Dense only: DDP all-reduces sparse gradients too, which Gloo handles itself.
  if (!isGloo(backend) || backend.getSize() != 2 || !isDense(tensor)) return {};
  at::Tensor send = tensor.contiguous().view({-1});
  at::Tensor received = at::empty({2 * send.numel()}, send.options());
  c10d::AllgatherOptions opts;
  opts.timeout = timeout;
  at::Tensor wireOut = onWire(received);
  at::Tensor wireIn = onWire(send);
  auto exchange = backend._allgather_base(wireOut, wireIn, opts);
  return foldAfter(c10d::OpType::ALLREDUCE, std::move(exchange), std::move(received),
                   std::move(tensor), op, 2);
}

c10::intrusive_ptr<c10d::Work> oneStepAllGather(c10d::Backend& backend, at::Tensor output,
                                                const at::Tensor& input,
                                                std::chrono::milliseconds timeout) {
  if (!isGloo(backend) || !isDense(input) || !output.is_contiguous()) return {};
  const int64_t ranks = backend.getSize();
  TOPO_CHECK_ARGUMENT(output.numel() == input.numel() * ranks, "oneStepAllGather: output has ",
                      output.numel(), " elements, expected ", input.numel(), " x ", ranks);
  // Block j of the send buffer goes to rank j: every block is this rank's input.
  at::Tensor send = input.reshape({1, -1}).expand({ranks, input.numel()}).contiguous();
  at::Tensor received = onWire(output.view({ranks, -1}));
  send = onWire(send);
  std::vector<int64_t> even;
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  return backend.alltoall_base(received, send, even, even, opts);
}

at::Tensor onWire(const at::Tensor& t) { return t.is_complex() ? at::view_as_real(t) : t; }

}  // namespace torch_topo::backend
