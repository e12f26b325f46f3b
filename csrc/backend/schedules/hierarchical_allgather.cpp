// SPDX-License-Identifier: Apache-2.0
// Hierarchical all-gather (layer: csrc/backend): rail all-gather across hosts first, then an
// intra-host all-gather; through host leaders when hosts are uneven.
#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/argument_error.h"
#include "backend/schedules/hierarchical.h"
#include "backend/schedules/hierarchical_common.h"

namespace torch_topo::backend {
namespace {

constexpr const char* kWhere = "hierarchicalAllGather";

/// Gathers every rank's `input` into row r of `out2d` ([group_size][n], any strides).
ScheduleBuffers allGatherRows(const Levels& levels, const hier::Layout& lay, at::Tensor& out2d,
                              const at::Tensor& input, std::chrono::milliseconds timeout) {
  bool staged = false;
  at::Tensor in = hier::stageFlat(input, 1, /*force_copy=*/false, staged);
  const int64_t n = in.numel();
  const int64_t g = lay.group_size;
  const int64_t h = lay.hosts;
  const hier::Chunking chunks =
      hier::planChunks(n, levels.chunk_bytes, in.element_size(), g, /*grain=*/1);
  c10d::Backend& intra = *levels.intra;
  // Everything the stages capture lives at function scope: they run after the branches end.
  const int64_t pad = lay.max_local;  // uneven: host tables padded to the largest host
  const bool leader = levels.local_rank == 0;
  hier::Stages stages;
  at::Tensor across;  // what crossed hosts, chunk by chunk
  at::Tensor table;   // the full gathered table, chunk by chunk, before reordering to ranks
  at::Tensor rows;    // row of each group rank in `table`
  int64_t table_rows = g;
  if (lay.uniform) {
    // Rail first: each rank fetches only its own local index from the other hosts, so the
    // host link carries every remote byte once; the fast intra step then replicates it.
    across = at::empty({h * n}, in.options());
    table = at::empty({g * n}, in.options());
    rows = hier::rankRows(levels, /*local_major=*/true, 0, in.device());
    c10d::Backend& rail = *levels.rail;
    stages.slow = [&](int64_t k) {
      at::Tensor src = chunks.of(in, k);
      at::Tensor dst = chunks.of(across, k, h);
      return hier::allGatherOn(rail, dst, src, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor src = chunks.of(across, k, h);
      at::Tensor dst = chunks.of(table, k, g);
      return hier::allGatherOn(intra, dst, src, timeout);
    };
  } else {
    // Leaders exchange host tables padded to the largest host (Gloo and NCCL gather equal
    // sizes), then each leader hands the whole table to its host.
    across = at::empty({pad * n}, in.options());
    table = at::empty({h * pad * n}, in.options());
    rows = hier::rankRows(levels, /*local_major=*/false, pad, in.device());
    table_rows = h * pad;
    stages.fast_in = [&](int64_t k) {
      at::Tensor src = chunks.of(in, k);
      at::Tensor dst = chunks.of(across, k, pad).narrow(0, 0, lay.local_size * src.numel());
      return hier::allGatherOn(intra, dst, src, timeout);
    };
    stages.slow = [&](int64_t k) -> hier::WorkPtr {
      if (!leader) {
        return {};
      }
      at::Tensor src = chunks.of(across, k, pad);
      at::Tensor dst = chunks.of(table, k, h * pad);
      return hier::allGatherOn(*levels.leaders, dst, src, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor t = chunks.of(table, k, h * pad);
      return hier::broadcastOn(intra, t, 0, timeout);
    };
  }
  stages.finish = [&](int64_t k) {
    const int64_t len = chunks.length(k);
    at::Tensor t = chunks.of(table, k, table_rows).view({table_rows, len});
    out2d.narrow(1, chunks.begin(k), len).copy_(t.index_select(0, rows));
  };
  hier::runPipeline(chunks.count(), stages);
  return {in, across, table};
}

void checkGather(const at::Tensor& out, const at::Tensor& input, int64_t group_size,
                 const char* what) {
  TOPO_CHECK_ARGUMENT(out.scalar_type() == input.scalar_type() && out.device() == input.device(),
                      kWhere, ": ", what, " is ", out.scalar_type(), " on ", out.device(),
                      ", expected ", input.scalar_type(), " on ", input.device(),
                      " like the input");
  TOPO_CHECK_ARGUMENT(out.numel() == group_size * input.numel(), kWhere, ": ", what, " has ",
                      out.numel(), " elements, expected group size ", group_size, " x ",
                      input.numel());
}

}  // namespace

ScheduleBuffers hierarchicalAllGather(const Levels& levels, at::Tensor& output,
                                      const at::Tensor& input,
                                      std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, kWhere);
  checkGather(output, input, lay.group_size, "output");
  // Written only in `finish`, after every step has read the input: an input that is a slice
  // of the output (FSDP2) is safe without a copy.
  const bool direct = output.is_contiguous();
  at::Tensor out2d = direct ? output.view({lay.group_size, input.numel()})
                            : at::empty({lay.group_size, input.numel()}, input.options());
  ScheduleBuffers bufs = allGatherRows(levels, lay, out2d, input, timeout);
  if (!direct) {
    output.copy_(out2d.view(output.sizes()));
    bufs.push_back(out2d);
  }
  return bufs;
}

ScheduleBuffers hierarchicalAllGatherList(const Levels& levels, std::vector<at::Tensor>& outputs,
                                          const at::Tensor& input,
                                          std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, kWhere);
  TOPO_CHECK_ARGUMENT(static_cast<int64_t>(outputs.size()) == lay.group_size, kWhere, ": got ",
                      outputs.size(), " output tensors, expected group size ", lay.group_size);
  for (const auto& out : outputs) {
    checkGather(out, input, 1, "an output tensor");
  }
  at::Tensor out2d = at::empty({lay.group_size, input.numel()}, input.options());
  ScheduleBuffers bufs = allGatherRows(levels, lay, out2d, input, timeout);
  for (int64_t r = 0; r < lay.group_size; ++r) {
    outputs[r].copy_(out2d[r].view(outputs[r].sizes()));
  }
  bufs.push_back(out2d);
  return bufs;
}

}  // namespace torch_topo::backend
