// SPDX-License-Identifier: Apache-2.0
// The one-step Gloo collectives and the Work that folds received blocks (layer: csrc/backend).
#include "backend/gloo_exchanges.h"

#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace torch_topo::backend {

namespace {

void foldInto(at::Tensor& acc, const at::Tensor& block, c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: acc.add_(block); return;
    case c10d::ReduceOp::PRODUCT: acc.mul_(block); return;
    case c10d::ReduceOp::MIN: at::minimum_out(acc, acc, block); return;
    case c10d::ReduceOp::MAX: at::maximum_out(acc, acc, block); return;
    case c10d::ReduceOp::BAND: acc.bitwise_and_(block); return;
    case c10d::ReduceOp::BOR: acc.bitwise_or_(block); return;
    case c10d::ReduceOp::BXOR: acc.bitwise_xor_(block); return;
    default:
      C10_THROW_ERROR(ValueError, c10::str("gloo_exchanges: ReduceOp ",
                                           static_cast<int>(op), " has no local fold; AVG and "
                                           "PREMUL_SUM arrive here as SUM"));
  }
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
      error = std::current_exception();
    }
    settle(error);
    return c10d::Work::wait(timeout);
  }

  void abort() override { exchange_->abort(); }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void settle(std::exception_ptr error) {
    std::call_once(once_, [&] {
      if (!error) {
        try {
          const auto blocks = received_.view({ranks_, -1});
          at::Tensor acc = blocks.select(0, 0).clone();
          for (int64_t r = 1; r < ranks_; ++r) foldInto(acc, blocks.select(0, r), op_);
          output_.copy_(acc.view(output_.sizes()));
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

}  // namespace

c10::intrusive_ptr<c10d::Work> oneStepReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                    const at::Tensor& input,
                                                    const c10d::ReduceOp& op,
                                                    std::chrono::milliseconds timeout) {
  if (!isGloo(backend) || !isDense(input)) return {};
  const int64_t ranks = backend.getSize();
  TORCH_CHECK_VALUE(input.numel() == output.numel() * ranks,
                    "oneStepReduceScatter: input has ", input.numel(), " elements, expected ",
                    output.numel(), " x ", ranks);
  at::Tensor send = input.contiguous().view({ranks, -1});
  at::Tensor received = at::empty_like(send);
  std::vector<int64_t> even;  // no split sizes: equal blocks
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  auto exchange = backend.alltoall_base(received, send, even, even, opts);
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
  auto exchange = backend._allgather_base(received, send, opts);
  return foldAfter(c10d::OpType::ALLREDUCE, std::move(exchange), std::move(received),
                   std::move(tensor), op, 2);
}

c10::intrusive_ptr<c10d::Work> oneStepAllGather(c10d::Backend& backend, at::Tensor output,
                                                const at::Tensor& input,
                                                std::chrono::milliseconds timeout) {
  if (!isGloo(backend) || !isDense(input) || !output.is_contiguous()) return {};
  const int64_t ranks = backend.getSize();
  TORCH_CHECK_VALUE(output.numel() == input.numel() * ranks, "oneStepAllGather: output has ",
                    output.numel(), " elements, expected ", input.numel(), " x ", ranks);
  // Block j of the send buffer goes to rank j: every block is this rank's input.
  at::Tensor send = input.reshape({1, -1}).expand({ranks, input.numel()}).contiguous();
  at::Tensor received = output.view({ranks, -1});
  std::vector<int64_t> even;
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  return backend.alltoall_base(received, send, even, even, opts);
}

}  // namespace torch_topo::backend
