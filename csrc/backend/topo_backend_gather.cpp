// SPDX-License-Identifier: Apache-2.0
// TopoBackend gathers, scatters and all-to-all: data movement without a ReduceOp
// (layer: csrc/backend).
#include "backend/topo_backend.h"

#include <memory>
#include <numeric>

#include <c10/util/Exception.h>

#include "backend/argument_error.h"
#include "backend/gloo_exchanges.h"
#include "backend/schedules/hierarchical.h"

namespace torch_topo::backend {

namespace {

/// One list per input, each with one tensor per rank of the input's size and dtype.
std::vector<at::Tensor> checkGatherLists(const char* op,
                                         const std::vector<std::vector<at::Tensor>>& lists,
                                         const std::vector<at::Tensor>& inputs, int size) {
  if (lists.size() != inputs.size()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": ", lists.size(), " output lists for ",
                                 inputs.size(), " inputs, expected one list per input"));
  }
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < lists.size(); ++i) {
    if (static_cast<int>(lists[i].size()) != size) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": output list holds ", lists[i].size(),
                                   " tensors, expected one per rank (", size, ")"));
    }
    for (const auto& t : lists[i]) {
      if (t.numel() != inputs[i].numel() || t.scalar_type() != inputs[i].scalar_type()) {
        TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::", op, ": output tensor of ", t.numel(), " ",
                                     t.scalar_type(), " elements, expected the input's ",
                                     inputs[i].numel(), " ", inputs[i].scalar_type()));
      }
      flat.push_back(t);
    }
  }
  return flat;
}

// allgather_coalesced lays its outputs out rank-major: outputs[r][i] receives rank r's inputs[i].
std::vector<at::Tensor> checkCoalescedGatherLists(
    const std::vector<std::vector<at::Tensor>>& lists, const std::vector<at::Tensor>& inputs,
    int size) {
  if (static_cast<int>(lists.size()) != size) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::allgather_coalesced: ", lists.size(),
                                 " output lists, expected one per rank (", size, ")"));
  }
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) {
    if (list.size() != inputs.size()) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::allgather_coalesced: an output list holds ",
                                   list.size(), " tensors for ", inputs.size(),
                                   " inputs, expected one per input"));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].numel() != inputs[i].numel() ||
          list[i].scalar_type() != inputs[i].scalar_type()) {
        TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::allgather_coalesced: output ", i, " has ",
                                     list[i].numel(), " ", list[i].scalar_type(),
                                     " elements, expected input ", i, "'s ", inputs[i].numel(), " ",
                                     inputs[i].scalar_type()));
      }
      flat.push_back(list[i]);
    }
  }
  return flat;
}

void checkSplits(const char* which, const std::vector<int64_t>& splits, const at::Tensor& t,
                 int size) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    if (rows % size != 0) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::alltoall_base: ", which, " dim 0 is ", rows,
                                   ", expected a multiple of the group size ", size,
                                   " when no split sizes are given"));
    }
    return;
  }
  if (static_cast<int>(splits.size()) != size) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::alltoall_base: ", splits.size(), " ", which,
                                 " split sizes, expected one per rank (", size, ")"));
  }
  int64_t total = 0;
  for (auto s : splits) {
    if (s < 0) {
      TOPO_ARGUMENT_ERROR(
          c10::str("TopoBackend::alltoall_base: ", which, " split size ", s, " is negative"));
    }
    total += s;
  }
  if (total != rows) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::alltoall_base: ", which, " split sizes sum to ",
                                 total, ", expected dim 0 = ", rows));
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TopoBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto flat = checkGatherLists("allgather", outputs, inputs, size_);
  auto& route = routeFor("allgather", inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkListShapes("allgather", route, "output tensor", outputs[i], "input", inputs[i]);
  }
  return collective(route, c10d::OpType::ALLGATHER, "allgather", flat, inputs,
                    [&](c10d::Backend& b) { return b.allgather(outputs, inputs, opts); },
                    single(inputs, [=](const Levels& lv) mutable {
                      return hierarchicalAllGatherList(lv, outputs[0], inputs[0], opts.timeout);
                    }));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::_allgather_base(at::Tensor& output,
                                                            at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  checkBlocks("_allgather_base", "output", output, input);
  auto& route = routeFor("_allgather_base", {output, input});
  return collective(route, c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, {input},
                    [&](c10d::Backend& b) {
                      auto w = plain_ ? nullptr : oneStepAllGather(b, output, input, opts.timeout);
                      return w ? w : b._allgather_base(output, input, opts);
                    },
                    [=](const Levels& lv) mutable {
                      return hierarchicalAllGather(lv, output, input, opts.timeout);
                    });
}

c10::intrusive_ptr<c10d::Work> TopoBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto flat = checkCoalescedGatherLists(outputs, inputs, size_);
  auto& route = routeFor("allgather_coalesced", inputs);
  checkCoalescedDtypes("allgather_coalesced", route, inputs);
  return collective(route, c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", flat, inputs,
                    [&](c10d::Backend& b) { return b.allgather_coalesced(outputs, inputs, opts); });
}

c10::intrusive_ptr<c10d::Work> TopoBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  if (inputs.size() != outputs.size()) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::allgather_into_tensor_coalesced: ", inputs.size(),
                                 " inputs for ", outputs.size(), " outputs, expected as many"));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkBlocks("allgather_into_tensor_coalesced", "output", outputs[i], inputs[i]);
  }
  auto& route = routeFor("allgather_into_tensor_coalesced", inputs);
  checkCoalescedDtypes("allgather_into_tensor_coalesced", route, inputs);
  return collective(route, c10d::OpType::COALESCED, "allgather_into_tensor_coalesced", outputs,
                    inputs, [&](c10d::Backend& b) {
                      return b.allgather_into_tensor_coalesced(outputs, inputs, opts);
                    });
}

c10::intrusive_ptr<c10d::Work> TopoBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  checkRank("gather", "root rank", opts.rootRank);
  std::vector<at::Tensor> flat;
  if (rank_ == opts.rootRank) flat = checkGatherLists("gather", outputs, inputs, size_);
  auto& route = routeFor("gather", inputs);
  return launch(route, c10d::OpType::GATHER, "gather", flat, inputs,
                [&] { return Issued{route.inner->gather(outputs, inputs, opts), {}}; });
}

#if TORCH_TOPO_TORCH_AT_LEAST(2, 14)
c10::intrusive_ptr<c10d::Work> TopoBackend::gather_single(at::Tensor& output, at::Tensor& input,
                                                          const c10d::GatherOptions& opts) {
  checkRank("gather_single", "root rank", opts.rootRank);
  std::vector<at::Tensor> inputs{input};
  std::vector<at::Tensor> outputs;
  if (rank_ == opts.rootRank) {
    checkBlocks("gather_single", "output", output, input);
    outputs.push_back(output);
  }
  std::vector<at::Tensor> routed(inputs);
  routed.insert(routed.end(), outputs.begin(), outputs.end());
  auto& route = routeFor("gather_single", routed);
  // A strided root output gathers into a contiguous copy, as scatter's outputs do: refused on
  // the root alone, it left the other ranks' sends waiting out the group's timeout.
  std::vector<at::Tensor> dense = outputs;
  Epilogue copyBack = stageContiguous(route, dense);
  std::vector<std::vector<at::Tensor>> lists;
  if (!dense.empty()) {
    if (!dense[0].is_contiguous()) {  // a stream route stages nothing
      TOPO_ARGUMENT_ERROR(
          "TopoBackend::gather_single: output is not contiguous, "
          "expected one contiguous buffer of group size x input elements");
    }
    // Rank r's block, shaped like the input; narrow rather than split: empty inputs work too.
    const int64_t n = input.numel();
    lists.emplace_back();
    for (int r = 0; r < size_; ++r) {
      lists.back().push_back(dense[0].view({-1}).narrow(0, r * n, n).view(input.sizes()));
    }
  }
  return launch(
      route, c10d::OpType::GATHER, "gather_single", outputs, inputs,
      [&] { return Issued{route.inner->gather(lists, inputs, opts), {}}; }, std::move(copyBack));
}
#endif

c10::intrusive_ptr<c10d::Work> TopoBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  checkRank("scatter", "root rank", opts.rootRank);
  std::vector<at::Tensor> flat;
  if (rank_ == opts.rootRank) flat = checkGatherLists("scatter", inputs, outputs, size_);
  auto& route = routeFor("scatter", outputs);
  std::vector<at::Tensor> dense = outputs;
  Epilogue copyBack = stageContiguous(route, dense);
  // Gloo sends each of the root's tensors as one dense block from its first element: a strided
  // one reached its rank with the storage's values, not its own. They are only read, so their
  // copies need no write-back.
  std::vector<std::vector<at::Tensor>> denseInputs = inputs;
  for (auto& list : denseInputs) stageContiguous(route, list);
  return launch(route, c10d::OpType::SCATTER, "scatter", outputs, flat,
                [&] { return Issued{route.inner->scatter(dense, denseInputs, opts), {}}; },
                std::move(copyBack));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& opts) {
  checkSplits("input", inputSplits, input, size_);
  checkSplits("output", outputSplits, output, size_);
  auto& route = routeFor("alltoall_base", {output, input});
  std::vector<at::Tensor> out{output}, in{input};
  Epilogue copyBack = stageContiguous(route, out);
  stageContiguous(route, in);  // the input is only read: its write-back is not needed
  return launch(route, c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {input}, [&] {
    return Issued{route.inner->alltoall_base(out[0], in[0], outputSplits, inputSplits, opts), {}};
  }, std::move(copyBack));
}

c10::intrusive_ptr<c10d::Work> TopoBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  if (static_cast<int>(outputs.size()) != size_ || static_cast<int>(inputs.size()) != size_) {
    TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::alltoall: ", inputs.size(), " inputs and ",
                                 outputs.size(), " outputs, expected one per rank (", size_, ")"));
  }
  const auto dtype = inputs.front().scalar_type();
  bool even = true;
  for (int r = 0; r < size_; ++r) {
    if (inputs[r].scalar_type() != dtype || outputs[r].scalar_type() != dtype) {
      TOPO_ARGUMENT_ERROR(c10::str("TopoBackend::alltoall: tensors of rank ", r, " are ",
                                   inputs[r].scalar_type(), " in and ", outputs[r].scalar_type(),
                                   " out, expected ", dtype, " throughout"));
    }
    even = even && inputs[r].numel() == inputs[0].numel() &&
           outputs[r].numel() == inputs[0].numel();
  }
  auto& route = routeFor("alltoall", inputs);
  // Gloo's list form needs equal sizes, and torch 2.11's Gloo has no list form at all ("does
  // not support alltoall"); NCCL's takes any sizes. Moving the lists as one flat all-to-all
  // with per-rank splits gives every inner backend of every release NCCL's semantics.
  if (even && route.type != c10::DeviceType::CPU) {
    return launch(route, c10d::OpType::ALLTOALL, "alltoall", outputs, inputs,
                  [&] { return Issued{route.inner->alltoall(outputs, inputs, opts), {}}; });
  }
  std::vector<int64_t> inSplits, outSplits;
  for (int r = 0; r < size_; ++r) {
    inSplits.push_back(inputs[r].numel());
    outSplits.push_back(outputs[r].numel());
  }
  // Allocated inside the op, on the internal stream where it has one: that stream's later
  // ops are the only ones that can reuse the buffers, so none can before this op is done.
  // That holds for the flattened inputs too: a non-contiguous one is a copy, which, made on
  // the caller's stream before the op, went back to that stream's pool when the call returned,
  // while the internal stream had yet to read it for the pack.
  auto received = std::make_shared<at::Tensor>();
  Epilogue unpack = [outputs, received, outSplits] {
    int64_t at = 0;
    for (size_t r = 0; r < outputs.size(); ++r) {
      outputs[r].copy_(received->narrow(0, at, outSplits[r]).view(outputs[r].sizes()));
      at += outSplits[r];
    }
  };
  return launch(route, c10d::OpType::ALLTOALL, "alltoall", outputs, inputs,
                [&] {
                  std::vector<at::Tensor> inFlat;
                  for (const auto& t : inputs) inFlat.push_back(t.reshape({-1}));
                  at::Tensor packed = at::cat(inFlat);
                  *received = at::empty(
                      {std::accumulate(outSplits.begin(), outSplits.end(), int64_t{0})},
                      packed.options());
                  return Issued{route.inner->alltoall_base(*received, packed, outSplits,
                                                           inSplits, opts),
                                {packed, *received}};
                },
                std::move(unpack));
}

}  // namespace torch_topo::backend
