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
  // Uniform hosts split every chunk into local_size shards, so chunks are padded to that grain.
  const int64_t grain = lay.uniform ? lay.local_size : 1;
  bool staged = false;
  at::Tensor buf = hier::stageFlat(tensor, grain, /*force_copy=*/false, staged);
  const hier::Chunking chunks =
      hier::planChunks(buf.numel(), levels.chunk_bytes, buf.element_size(), 1, grain);
  // Everything the stages capture lives at function scope: they run after the branches end.
  const bool leader = levels.local_rank == 0;
  hier::Chunking shards;
  hier::Stages stages;
  at::Tensor shard;
  if (lay.uniform) {
    // Each rank owns 1/local_size of the chunk across hosts, so every rail carries an equal
    // share and no byte crosses hosts twice.
    shard = at::empty({buf.numel() / grain}, buf.options());
    shards = hier::Chunking{shard.numel(), chunks.elems / grain};
    c10d::Backend& rail = *levels.rail;
    stages.fast_in = [&](int64_t k) {
      at::Tensor in = chunks.of(buf, k);
      at::Tensor out = shards.of(shard, k);
      return hier::reduceScatterOn(intra, out, in, inner, timeout);
    };
    stages.slow = [&](int64_t k) {
      at::Tensor s = shards.of(shard, k);
      return hier::allReduceOn(rail, s, inner, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor s = shards.of(shard, k);
      hier::scaleReduced(s, op, lay.group_size);  // on the shard: 1/local_size of the work
      at::Tensor out = chunks.of(buf, k);
      return hier::allGatherOn(intra, out, s, timeout);
    };
  } else {
    stages.fast_in = [&](int64_t k) {
      at::Tensor c = chunks.of(buf, k);
      return hier::reduceOn(intra, c, 0, inner, timeout);
    };
    stages.slow = [&](int64_t k) -> hier::WorkPtr {
      if (!leader) {
        return {};
      }
      at::Tensor c = chunks.of(buf, k);
      return hier::allReduceOn(*levels.leaders, c, inner, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor c = chunks.of(buf, k);
      if (leader) {
        hier::scaleReduced(c, op, lay.group_size);
      }
      return hier::broadcastOn(intra, c, 0, timeout);
    };
  }
  hier::runPipeline(chunks.count(), stages);
  if (staged) {
    hier::unstage(tensor, buf);
  }
  return {buf, shard};
}

}  // namespace torch_topo::backend
