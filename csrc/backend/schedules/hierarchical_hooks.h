// SPDX-License-Identifier: Apache-2.0
// TopoBackend's hierarchical hooks (layer: csrc/backend): one adapter per c10d op from its
// arguments to the schedule in hierarchical.h, in the shape runCollective takes.
#pragma once

#include <functional>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "backend/schedules/hierarchical.h"

namespace torch_topo::backend::hooks {

/// What runCollective calls when it picks the hierarchical form. The schedule has completed
/// (CPU) or is enqueued on the current stream (CUDA) when it returns, so no inner Work is left:
/// the hook returns null and the caller's epilogue runs at once. The schedule's temporaries are
/// freed on return: on CUDA they were allocated on the backend's internal stream, which has
/// already waited for every step that used them, so the caching allocator hands them only to
/// later work on that stream.
/// Lifetime: hooks hold references to the op's arguments; runCollective calls them before the
/// op returns. A null hook (several tensors per call: no hierarchical form) keeps the op flat.
/// Reductions get the caller's inner op (AVG and PREMUL_SUM already turned into SUM, its
/// epilogue scaling once), so the group is scaled exactly once.
using Hook = std::function<c10::intrusive_ptr<c10d::Work>(const Levels&)>;

template <typename Run>
Hook makeHook(bool applies, Run run) {
  if (!applies) {
    return nullptr;
  }
  return [run](const Levels& levels) -> c10::intrusive_ptr<c10d::Work> {
    run(levels);
    return {};
  };
}

inline Hook allReduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& inner) {
  return makeHook(tensors.size() == 1, [&tensors, &inner](const Levels& lv) {
    hierarchicalAllReduce(lv, tensors[0], inner.reduceOp, inner.timeout);
  });
}

inline Hook reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& inner) {
  return makeHook(tensors.size() == 1, [&tensors, &inner](const Levels& lv) {
    hierarchicalReduce(lv, tensors[0], inner.rootRank, inner.reduceOp, inner.timeout);
  });
}

inline Hook broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  return makeHook(tensors.size() == 1, [&tensors, &opts](const Levels& lv) {
    hierarchicalBroadcast(lv, tensors[0], opts.rootRank, opts.timeout);
  });
}

inline Hook reduceScatter(std::vector<at::Tensor>& outputs,
                          std::vector<std::vector<at::Tensor>>& inputs,
                          const c10d::ReduceScatterOptions& inner) {
  return makeHook(outputs.size() == 1 && inputs.size() == 1,
                  [&outputs, &inputs, &inner](const Levels& lv) {
                    hierarchicalReduceScatterList(lv, outputs[0], inputs[0], inner.reduceOp,
                                                  inner.timeout);
                  });
}

inline Hook reduceScatterBase(at::Tensor& output, at::Tensor& input,
                              const c10d::ReduceScatterOptions& inner) {
  return makeHook(true, [&output, &input, &inner](const Levels& lv) {
    hierarchicalReduceScatter(lv, output, input, inner.reduceOp, inner.timeout);
  });
}

inline Hook allGather(std::vector<std::vector<at::Tensor>>& outputs,
                      std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  return makeHook(outputs.size() == 1 && inputs.size() == 1,
                  [&outputs, &inputs, &opts](const Levels& lv) {
                    hierarchicalAllGatherList(lv, outputs[0], inputs[0], opts.timeout);
                  });
}

inline Hook allGatherBase(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts) {
  return makeHook(true, [&output, &input, &opts](const Levels& lv) {
    hierarchicalAllGather(lv, output, input, opts.timeout);
  });
}

}  // namespace torch_topo::backend::hooks
