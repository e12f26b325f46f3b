// SPDX-License-Identifier: Apache-2.0
// Hierarchical reduce (layer: csrc/backend): intra-host reduce-scatter, rail reduce of each
// shard to the root's host, gather there; through leaders when hosts are uneven.
#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/argument_error.h"
#include "backend/schedules/hierarchical.h"
#include "backend/schedules/hierarchical_common.h"

namespace torch_topo::backend {

ScheduleBuffers hierarchicalReduce(const Levels& levels, at::Tensor& tensor, int64_t root,
                                   const c10d::ReduceOp& op, std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, "hierarchicalReduce");
  TOPO_CHECK_ARGUMENT(root >= 0 && root < lay.group_size, "hierarchicalReduce: root ", root,
                      " outside the group's ranks 0..", lay.group_size - 1);
  const c10d::ReduceOp inner = hier::innerReduceOp(op);
  const int64_t root_host = levels.host_of_rank[root];
  const int64_t root_local = levels.local_of_rank[root];
  const bool on_root_host = levels.host_index == root_host;
  const bool is_root = lay.rank == root;
  c10d::Backend& intra = *levels.intra;
  // Inner reduces use their buffer as scratch on every rank; a copy keeps the promise that
  // only the root's tensor changes.
  hier::InPlaceBuffers work = hier::inPlaceBuffers(levels, lay, tensor, /*force_copy=*/!is_root);
  // Everything the stages capture lives at function scope: they run after the branches end.
  const bool leader = levels.local_rank == 0;
  hier::Stages stages;
  if (lay.uniform) {
    c10d::Backend& rail = *levels.rail;
    stages.fast_in = [&](int64_t k) {
      at::Tensor c = work.chunks.of(work.buf, k);
      at::Tensor s = work.shards.of(work.shard, k);
      return hier::reduceScatterOn(intra, s, c, inner, timeout);
    };
    stages.slow = [&](int64_t k) {
      at::Tensor s = work.shards.of(work.shard, k);
      return hier::reduceOn(rail, s, root_host, inner, timeout);
    };
    stages.fast_out = [&](int64_t k) -> hier::WorkPtr {
      if (!on_root_host) {
        return {};
      }
      at::Tensor s = work.shards.of(work.shard, k);
      at::Tensor c = work.chunks.of(work.buf, k).view({work.grain, s.numel()});
      return hier::gatherOn(intra, c, s, root_local, timeout);
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
      return hier::reduceOn(*levels.leaders, c, root_host, inner, timeout);
    };
    // The root's leader holds the result; a root elsewhere on that host hears it from there.
    stages.fast_out = [&](int64_t k) -> hier::WorkPtr {
      if (!on_root_host || root_local == 0) {
        return {};
      }
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::broadcastOn(intra, c, 0, timeout);
    };
  }
  hier::runPipeline(work.chunks.count(), stages);
  if (is_root) {
    at::Tensor result = work.buf.narrow(0, 0, tensor.numel());
    hier::scaleReduced(result, op, lay.group_size);
    if (work.staged) {
      hier::unstage(tensor, work.buf);
    }
  }
  return {work.buf, work.shard};
}

}  // namespace torch_topo::backend
