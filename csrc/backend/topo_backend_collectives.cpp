// SPDX-License-Identifier: Apache-2.0
// TopoBackend reductions and broadcast: the ops with a ReduceOp or a hierarchical form
// (layer: csrc/backend).
#include "backend/topo_backend.h"

#include <c10/util/Exception.h>

#include "backend/argument_error.h"
#include "backend/gloo_exchanges.h"
#include "backend/schedules/hierarchical.h"

namespace torch_topo::backend {

c10::intrusive_ptr<c10d::Work> TopoBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  checkRank("broadcast", "root rank", opts.rootRank);
  auto& route = routeFor("broadcast", tensors);
  std::vector<at::Tensor> dense = tensors;
  Epilogue copyBack = stageContiguous(route, dense);
  return collective(route, c10d::OpType::BROADCAST, "broadcast", tensors, dense,
                    [&](c10d::Backend& b) { return b.broadcast(dense, opts); },
                    single(dense, [=](const Levels& lv) mutable {
                      return hierarchicalBroadcast(lv, dense[0], opts.rootRank, opts.timeout);
                    }),
                    std::move(copyBack));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  auto& route = routeFor("allreduce", tensors);
  std::vector<at::Tensor> dense = tensors;
  Epilogue copyBack = stageContiguous(route, dense);
  Epilogue epilogue;
  c10d::AllreduceOptions inner = opts;
  inner.reduceOp = prepareReduce("allreduce", route, opts.reduceOp, dense, dense, &epilogue);
  return collective(route, c10d::OpType::ALLREDUCE, "allreduce", tensors, dense,
                    [&](c10d::Backend& b) {
                      // One exchange instead of Gloo's two ring steps pays where the two ranks
                      // sit on different hosts (levels exist only then) and the link's latency
                      // sets the time. On one host Gloo's own all-reduce costs less per call
                      // (about 100 us less at 4 B with two ranks: wrapper_overhead.py), and
                      // so it does across hosts once the message outweighs the saved latency
                      // (Gloo's all-gather and the fold are slower per byte: 2-4x from 1 MiB).
                      // A sparse tensor has no nbytes: it goes to Gloo's sparse all-reduce.
                      if (dense.size() == 1 && route.levels.valid() &&
                          dense[0].layout() == at::kStrided &&
                          static_cast<int64_t>(dense[0].nbytes()) <=
                              route.oneStepAllReduceMaxBytes) {
                        if (auto w = oneStepAllReduce(b, dense[0], inner.reduceOp,
                                                      opts.timeout)) {
                          return w;
                        }
                      }
                      return b.allreduce(dense, inner);
                    },
                    single(dense, [=](const Levels& lv) mutable {
                      return hierarchicalAllReduce(lv, dense[0], inner.reduceOp, opts.timeout);
                    }),
                    then(std::move(epilogue), std::move(copyBack)));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  auto& route = routeFor("allreduce_sparse", tensors);
  Epilogue epilogue;
  c10d::AllreduceOptions inner = opts;
  inner.reduceOp =
      prepareReduce("allreduce_sparse", route, opts.reduceOp, tensors, tensors, &epilogue);
  return collective(route, c10d::OpType::ALLREDUCE, "allreduce_sparse", tensors, tensors,
                    [&](c10d::Backend& b) { return b.allreduce_sparse(tensors, inner); },
                    nullptr, std::move(epilogue));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  auto& route = routeFor("allreduce_coalesced", tensors);
  checkCoalescedDtypes("allreduce_coalesced", route, tensors);
  std::vector<at::Tensor> dense = tensors;
  Epilogue copyBack = stageContiguous(route, dense);
  Epilogue epilogue;
  c10d::AllreduceCoalescedOptions inner = opts;
  inner.reduceOp =
      prepareReduce("allreduce_coalesced", route, opts.reduceOp, dense, dense, &epilogue);
  return collective(route, c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                    dense, [&](c10d::Backend& b) { return b.allreduce_coalesced(dense, inner); },
                    nullptr, then(std::move(epilogue), std::move(copyBack)));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  checkRank("reduce", "root rank", opts.rootRank);
  auto& route = routeFor("reduce", tensors);
  std::vector<at::Tensor> dense = tensors;
  Epilogue copyBack = stageContiguous(route, dense);
  Epilogue epilogue;
  c10d::ReduceOptions inner = opts;
  // Only the root holds the reduced value, so only the root scales.
  const std::vector<at::Tensor> scaled =
      rank_ == opts.rootRank ? dense : std::vector<at::Tensor>{};
  inner.reduceOp = prepareReduce("reduce", route, opts.reduceOp, dense, scaled, &epilogue);
  return collective(route, c10d::OpType::REDUCE, "reduce", tensors, dense,
                    [&](c10d::Backend& b) { return b.reduce(dense, inner); },
                    single(dense, [=](const Levels& lv) mutable {
                      return hierarchicalReduce(lv, dense[0], inner.rootRank, inner.reduceOp,
                                                opts.timeout);
                    }),
                    then(std::move(epilogue), std::move(copyBack)));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (inputs.size() != outputs.size()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::reduce_scatter: ", inputs.size(),
                                 " input lists for ", outputs.size(),
                                 " outputs, expected one list per output"));
  }
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (static_cast<int>(inputs[i].size()) != size_) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::reduce_scatter: input list holds ",
                                   inputs[i].size(), " tensors, expected one per rank (", size_,
                                   ")"));
    }
    for (const auto& t : inputs[i]) {
      if (t.numel() != outputs[i].numel()) {
        TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::reduce_scatter: input has ", t.numel(),
                                     " elements, expected the output's ", outputs[i].numel()));
      }
      flat.push_back(t);
    }
  }
  auto& route = routeFor("reduce_scatter", outputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkListShapes("reduce_scatter", route, "input tensor", inputs[i], "output", outputs[i]);
  }
  Epilogue epilogue;
  c10d::ReduceScatterOptions inner = opts;
  inner.reduceOp = prepareReduce("reduce_scatter", route, opts.reduceOp, outputs, outputs,
                                 &epilogue);
  return collective(
      route, c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, flat,
      [&](c10d::Backend& b) {
        if (outputs.size() == 1 && !plain_) {
          if (auto w =
                  oneStepReduceScatter(b, outputs[0], inputs[0], inner.reduceOp, opts.timeout)) {
            return w;
          }
        }
        return b.reduce_scatter(outputs, inputs, inner);
      },
      foldable(outputs[0], inner.reduceOp,
               single(outputs,
                      [=](const Levels& lv) mutable {
                        return hierarchicalReduceScatterList(lv, outputs[0], inputs[0],
                                                             inner.reduceOp, opts.timeout);
                      })),
      std::move(epilogue));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkBlocks("_reduce_scatter_base", "input", input, output);
  auto& route = routeFor("_reduce_scatter_base", {output, input});
  Epilogue epilogue;
  c10d::ReduceScatterOptions inner = opts;
  inner.reduceOp =
      prepareReduce("_reduce_scatter_base", route, opts.reduceOp, {input}, {output}, &epilogue);
  return collective(
      route, c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output}, {input},
      [&](c10d::Backend& b) {
        auto w =
            plain_ ? nullptr : oneStepReduceScatter(b, output, input, inner.reduceOp, opts.timeout);
        return w ? w : b._reduce_scatter_base(output, input, inner);
      },
      foldable(output, inner.reduceOp,
               [=](const Levels& lv) mutable {
                 return hierarchicalReduceScatter(lv, output, input, inner.reduceOp, opts.timeout);
               }),
      std::move(epilogue));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (inputs.size() != outputs.size()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::reduce_scatter_tensor_coalesced: ", inputs.size(),
                                 " inputs for ", outputs.size(), " outputs, expected as many"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkBlocks("reduce_scatter_tensor_coalesced", "input", inputs[i], outputs[i]);
  }
  // No checkCoalescedDtypes: Gloo reduces each pair of this op in its own dtype (torch 2.11,
  // 2.14 and 2.15), so mixed dtypes are as valid here as on plain Gloo.
  auto& route = routeFor("reduce_scatter_tensor_coalesced", outputs);
  Epilogue epilogue;
  c10d::ReduceScatterOptions inner = opts;
  inner.reduceOp = prepareReduce("reduce_scatter_tensor_coalesced", route, opts.reduceOp, inputs,
                                 outputs, &epilogue);
  return collective(route, c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", outputs,
                    inputs,
                    [&](c10d::Backend& b) {
                      return b.reduce_scatter_tensor_coalesced(outputs, inputs, inner);
                    },
                    nullptr, std::move(epilogue));
}

}  // namespace torch_topo::backend
