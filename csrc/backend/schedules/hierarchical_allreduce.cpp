// SPDX-License-Identifier: Apache-2.0
// Hierarchical all-reduce (layer: csrc/backend): intra-host reduce-scatter, all-reduce of the
// shard along the NIC rail, intra-host all-gather; through host leaders when hosts are uneven.
#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/schedules/hierarchical.h"
#include "backend/schedules/hierarchical_common.h"

namespace torch_topo::backend {

ScheduleBuffers hierarchicalAllReduce(const Levels& levels, at::Tensor& tensor,
                                      const c10d::ReduceOp& op,
                                      std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, "hierarchicalAllReduce");
  const c10d::ReduceOp inner = hier::innerReduceOp(op);
  c10d::Backend& intra = *levels.intra;
  hier::InPlaceBuffers work = hier::inPlaceBuffers(levels, lay, tensor, /*force_copy=*/false);
  // Everything the stages capture lives at function scope: they run after the branches end.
  const bool leader = levels.local_rank == 0;
  hier::Stages stages;
  if (lay.uniform) {
    // Each rank owns 1/local_size of the chunk across hosts, so every rail carries an equal
    // share and no byte crosses hosts twice.
    c10d::Backend& rail = *levels.rail;
    stages.fast_in = [&](int64_t k) {
      at::Tensor in = work.chunks.of(work.buf, k);
      at::Tensor out = work.shards.of(work.shard, k);
      return hier::reduceScatterOn(intra, out, in, inner, timeout);
    };
    stages.slow = [&](int64_t k) {
      at::Tensor s = work.shards.of(work.shard, k);
      return hier::allReduceOn(rail, s, inner, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor s = work.shards.of(work.shard, k);
      hier::scaleReduced(s, op, lay.group_size);  // on the work.shard: 1/local_size of the work
      at::Tensor out = work.chunks.of(work.buf, k);
      return hier::allGatherOn(intra, out, s, timeout);
    };
  } else {
    stages.fast_in = [&](int64_t k) {
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::reduceOn(intra, c, 0, inner, timeout);
    };
    stages.slow = [&](int64_t k) -> hier::WorkPtr {
      if (!leader) {
        return {};
      }
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::allReduceOn(*levels.leaders, c, inner, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor c = work.chunks.of(work.buf, k);
      if (leader) {
        hier::scaleReduced(c, op, lay.group_size);
      }
      return hier::broadcastOn(intra, c, 0, timeout);
    };
  }
  hier::runPipeline(work.chunks.count(), stages);
  if (work.staged) {
    hier::unstage(tensor, work.buf);
  }
  return {work.buf, work.shard};
}

}  // namespace torch_topo::backend
