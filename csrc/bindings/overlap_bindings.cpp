// SPDX-License-Identifier: Apache-2.0
// Python bindings of the overlap layer (layer: csrc/bindings): the two chunked ops and the
// clock their timestamps use. Autograd lives in torch_topo/ops/overlap.py.
#include <torch/csrc/utils/pybind.h>

#include "bindings/bindings.h"
#include "ops/overlap.h"

namespace torch_topo::bindings {

namespace {

// torch binds ProcessGroup with its own holder type, so take a reference and re-wrap it; the
// Python object keeps the group alive for the duration of the call.
c10::intrusive_ptr<c10d::ProcessGroup> ownGroup(c10d::ProcessGroup& group) {
  return c10::intrusive_ptr<c10d::ProcessGroup>::unsafe_reclaim_from_nonowning(&group);
}

ops::OverlapOptions makeOptions(int64_t chunks, int64_t maxInflight, bool recordTiming,
                                int64_t computeDelayMaxUs, int64_t commDelayMaxUs,
                                uint64_t delaySeed) {
  ops::OverlapOptions options;
  options.chunks = chunks;
  options.maxInflight = maxInflight;
  options.recordTiming = recordTiming;
  options.computeDelayMaxUs = computeDelayMaxUs;
  options.commDelayMaxUs = commDelayMaxUs;
  options.delaySeed = delaySeed;
  return options;
}

py::tuple toPython(ops::OverlapResult&& result) {
  py::list timing;
  for (const auto& t : result.timing) {
    timing.append(py::make_tuple(t.chunk, t.computeStartS, t.computeEndS, t.commIssueS,
                                 t.commEndS));
  }
  return py::make_tuple(result.out, result.gathered, timing);
}

constexpr const char* kCommonArgs = R"(
    group: the torch.distributed.ProcessGroup (any backend: "topo", gloo, nccl).
    chunks: row chunks per rank block, one collective each (>= 1, <= rows per rank).
    max_inflight: collectives in flight at once; bounds live chunk buffers.
    record_timing: return per-chunk host timestamps (chunk, compute_start, compute_end,
        comm_issue, comm_end), seconds on `now_seconds()`'s clock.
    compute_delay_max_us, comm_delay_max_us, delay_seed: test hook, random pauses before
        each chunk's compute / collective issue.

Returns:
    (out, gathered, timing); gathered is None unless requested.)";

}  // namespace

void defOverlap(py::module_& m) {
  using namespace pybind11::literals;
  static const std::string mrsDoc =
      std::string(R"(out = reduce_scatter_dim0(x @ weight.T), chunked and overlapped.

Args:
    x: [M, K] tensor, M divisible by the group size.
    weight: [N, K] tensor.)") + kCommonArgs;
  m.def(
      "overlap_matmul_reduce_scatter",
      [](const at::Tensor& x, const at::Tensor& weight, c10d::ProcessGroup& group,
         int64_t chunks, int64_t maxInflight, bool recordTiming, int64_t computeDelayMaxUs,
         int64_t commDelayMaxUs, uint64_t delaySeed) {
        auto options = makeOptions(chunks, maxInflight, recordTiming, computeDelayMaxUs,
                                   commDelayMaxUs, delaySeed);
        ops::OverlapResult result;
        {
          py::gil_scoped_release release;
          result = ops::matmulReduceScatter(x, weight, ownGroup(group), options);
        }
        return toPython(std::move(result));
      },
      mrsDoc.c_str(), "x"_a, "weight"_a, "group"_a, "chunks"_a = 4, "max_inflight"_a = 2,
      "record_timing"_a = false, "compute_delay_max_us"_a = 0, "comm_delay_max_us"_a = 0,
      "delay_seed"_a = 0);

  static const std::string agmDoc =
      std::string(R"(out = all_gather_dim0(x) @ weight.T, chunked and overlapped.

Args:
    x: [M_local, K] tensor (this rank's rows).
    weight: [N, K] tensor.
    keep_gathered: also return all_gather_dim0(x) (the weight gradient needs it).)") +
      kCommonArgs;
  m.def(
      "overlap_all_gather_matmul",
      [](const at::Tensor& x, const at::Tensor& weight, c10d::ProcessGroup& group,
         int64_t chunks, int64_t maxInflight, bool keepGathered, bool recordTiming,
         int64_t computeDelayMaxUs, int64_t commDelayMaxUs, uint64_t delaySeed) {
        auto options = makeOptions(chunks, maxInflight, recordTiming, computeDelayMaxUs,
                                   commDelayMaxUs, delaySeed);
        ops::OverlapResult result;
        {
          py::gil_scoped_release release;
          result = ops::allGatherMatmul(x, weight, ownGroup(group), options, keepGathered);
        }
        return toPython(std::move(result));
      },
      agmDoc.c_str(), "x"_a, "weight"_a, "group"_a, "chunks"_a = 4, "max_inflight"_a = 2,
      "keep_gathered"_a = false, "record_timing"_a = false, "compute_delay_max_us"_a = 0,
      "comm_delay_max_us"_a = 0, "delay_seed"_a = 0);

  m.def("overlap_now_seconds", &ops::nowSeconds,
        R"(Seconds on the steady clock the overlap ops' timestamps use.)");
}

}  // namespace torch_topo::bindings
