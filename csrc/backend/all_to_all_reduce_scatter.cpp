// SPDX-License-Identifier: Apache-2.0
// allToAllReduceScatter and the Work that folds the received blocks (layer: csrc/backend).
#include "backend/all_to_all_reduce_scatter.h"

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
      C10_THROW_ERROR(ValueError, c10::str("allToAllReduceScatter: ReduceOp ",
                                           static_cast<int>(op), " has no local fold; AVG and "
                                           "PREMUL_SUM arrive here as SUM"));
  }
}

/// Completes after the all-to-all and the fold: from the all-to-all's future callback, or from
/// wait(), whichever comes first (the fold runs once).
class FoldWork : public c10d::Work {
 public:
  FoldWork(c10::intrusive_ptr<c10d::Work> exchange, at::Tensor received, at::Tensor output,
           c10d::ReduceOp::RedOpType op, int64_t ranks)
      : c10d::Work(-1, c10d::OpType::_REDUCE_SCATTER_BASE),
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

}  // namespace

bool reduceScatterViaAllToAll(const c10d::Backend& backend) {
  return backend.getBackendName() == "gloo";
}

c10::intrusive_ptr<c10d::Work> allToAllReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                     const at::Tensor& input,
                                                     const c10d::ReduceOp& op,
                                                     std::chrono::milliseconds timeout) {
  const int64_t ranks = backend.getSize();
  TORCH_CHECK_VALUE(input.numel() == output.numel() * ranks,
                    "allToAllReduceScatter: input has ", input.numel(), " elements, expected ",
                    output.numel(), " x ", ranks);
  at::Tensor send = input.contiguous().view({ranks, -1});
  at::Tensor received = at::empty_like(send);
  std::vector<int64_t> even;  // no split sizes: equal blocks
  c10d::AllToAllOptions opts;
  opts.timeout = timeout;
  auto exchange = backend.alltoall_base(received, send, even, even, opts);
  auto work = c10::make_intrusive<FoldWork>(std::move(exchange), std::move(received),
                                            std::move(output), op.op_, ranks);
  work->attach();
  return work;
}

}  // namespace torch_topo::backend
