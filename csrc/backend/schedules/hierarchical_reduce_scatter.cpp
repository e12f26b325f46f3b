// SPDX-License-Identifier: Apache-2.0
// Hierarchical reduce-scatter (layer: csrc/backend): intra-host reduce-scatter, then a rail
// reduce-scatter across hosts; through host leaders when hosts are uneven.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/argument_error.h"
#include "backend/schedules/hierarchical.h"
#include "backend/schedules/hierarchical_common.h"

namespace torch_topo::backend {
namespace {

constexpr const char* kWhere = "hierarchicalReduceScatter";

/// Reduces row r of every rank's `in2d` ([group_size][n], any strides) into rank r's `output`.
ScheduleBuffers reduceScatterRows(const Levels& levels, const hier::Layout& lay,
                                  at::Tensor& output, const at::Tensor& in2d,
                                  const c10d::ReduceOp& op, std::chrono::milliseconds timeout) {
  const c10d::ReduceOp inner = hier::innerReduceOp(op);
  const int64_t n = output.numel();
  const int64_t g = lay.group_size;
  const int64_t h = lay.hosts;
  const auto opts = output.options().memory_format(at::MemoryFormat::Contiguous);
  const hier::Chunking chunks =
      hier::planChunks(n, levels.chunk_bytes, output.element_size(), g, /*grain=*/1);
  c10d::Backend& intra = *levels.intra;
  at::Tensor result = at::empty({n}, opts);
  at::Tensor table;    // this rank's input reordered so that each level's blocks are adjacent
  at::Tensor partial;  // what crosses hosts, chunk by chunk
  at::Tensor rows;
  int64_t table_rows = g;
  // Everything the stages capture lives at function scope: they run after the branches end.
  const int64_t pad = lay.max_local;  // uneven: host blocks padded to the largest host
  const bool leader = levels.local_rank == 0;
  hier::Stages stages;
  // Reorders chunk k of the input into `table` rows and returns that chunk of the table.
  const auto fillTable = [&](int64_t k) {
    const int64_t len = chunks.length(k);
    at::Tensor t = chunks.of(table, k, table_rows);
    t.view({table_rows, len}).index_copy_(0, rows, in2d.narrow(1, chunks.begin(k), len));
    return t;
  };
  if (lay.uniform) {
    // Local-major rows: the intra step leaves this rank the sums, over its host, of the
    // blocks of its local index on every host; the rail then sends each host's block once.
    table = at::empty({g * n}, opts);
    partial = at::empty({h * n}, opts);
    rows = hier::rankRows(levels, /*local_major=*/true, 0, output.device());
    c10d::Backend& rail = *levels.rail;
    stages.fast_in = [&](int64_t k) {
      at::Tensor src = fillTable(k);
      at::Tensor dst = chunks.of(partial, k, h);
      return hier::reduceScatterOn(intra, dst, src, inner, timeout);
    };
    stages.slow = [&](int64_t k) {
      at::Tensor src = chunks.of(partial, k, h);
      at::Tensor dst = chunks.of(result, k);
      return hier::reduceScatterOn(rail, dst, src, inner, timeout);
    };
  } else {
    // Host-major rows padded to the largest host: leaders reduce-scatter whole host blocks
    // (equal sizes), then scatter the rows of their own host.
    table_rows = h * pad;
    table = at::zeros({table_rows * n}, opts);  // padding rows reduce with padding only
    partial = at::empty({pad * n}, opts);
    rows = hier::rankRows(levels, /*local_major=*/false, pad, output.device());
    stages.fast_in = [&](int64_t k) {
      at::Tensor t = fillTable(k);
      return hier::reduceOn(intra, t, 0, inner, timeout);
    };
    stages.slow = [&](int64_t k) -> hier::WorkPtr {
      if (!leader) {
        return {};
      }
      at::Tensor src = chunks.of(table, k, table_rows);
      at::Tensor dst = chunks.of(partial, k, pad);
      return hier::reduceScatterOn(*levels.leaders, dst, src, inner, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      const int64_t len = chunks.length(k);
      at::Tensor mine = chunks.of(result, k);
      at::Tensor host_rows =
          chunks.of(partial, k, pad).view({pad, len}).narrow(0, 0, lay.local_size);
      return hier::scatterOn(intra, mine, host_rows, 0, timeout);
    };
  }
  hier::runPipeline(chunks.count(), stages);
  hier::scaleReduced(result, op, g);
  output.copy_(result.view(output.sizes()));
  return {result, table, partial};
}

void checkScatter(const at::Tensor& output, const at::Tensor& in, int64_t blocks,
                  const char* what) {
  TOPO_CHECK_ARGUMENT(in.scalar_type() == output.scalar_type() && in.device() == output.device(),
                      kWhere, ": ", what, " is ", in.scalar_type(), " on ", in.device(),
                      ", expected ", output.scalar_type(), " on ", output.device(),
                      " like the output");
  TOPO_CHECK_ARGUMENT(in.numel() == blocks * output.numel(), kWhere, ": ", what, " has ",
                      in.numel(), " elements, expected ", blocks, " x ", output.numel());
}

}  // namespace

ScheduleBuffers hierarchicalReduceScatter(const Levels& levels, at::Tensor& output,
                                          const at::Tensor& input, const c10d::ReduceOp& op,
                                          std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, kWhere);
  checkScatter(output, input, lay.group_size, "input");
  // The result is written only after every step has read the input, so the two may alias.
  at::Tensor in2d = input.reshape({lay.group_size, output.numel()});
  ScheduleBuffers bufs = reduceScatterRows(levels, lay, output, in2d, op, timeout);
  bufs.push_back(in2d);
  return bufs;
}

ScheduleBuffers hierarchicalReduceScatterList(const Levels& levels, at::Tensor& output,
                                              const std::vector<at::Tensor>& inputs,
                                              const c10d::ReduceOp& op,
                                              std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, kWhere);
  TOPO_CHECK_ARGUMENT(static_cast<int64_t>(inputs.size()) == lay.group_size, kWhere, ": got ",
                      inputs.size(), " input tensors, expected group size ", lay.group_size);
  at::Tensor in2d = at::empty({lay.group_size, output.numel()},
                              output.options().memory_format(at::MemoryFormat::Contiguous));
  for (int64_t r = 0; r < lay.group_size; ++r) {
    checkScatter(output, inputs[r], 1, "an input tensor");
    in2d[r].view(inputs[r].sizes()).copy_(inputs[r]);
  }
  ScheduleBuffers bufs = reduceScatterRows(levels, lay, output, in2d, op, timeout);
  bufs.push_back(in2d);
  return bufs;
}

}  // namespace torch_topo::backend
