// SPDX-License-Identifier: Apache-2.0
// Hierarchical broadcast (layer: csrc/backend): the root's host scatters shards, each rail
// broadcasts its shard across hosts, every host all-gathers; through leaders when uneven.
#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/argument_error.h"
#include "backend/schedules/hierarchical.h"
#include "backend/schedules/hierarchical_common.h"

namespace torch_topo::backend {

ScheduleBuffers hierarchicalBroadcast(const Levels& levels, at::Tensor& tensor, int64_t root,
                                      std::chrono::milliseconds timeout) {
  const hier::Layout lay = hier::describeLevels(levels, "hierarchicalBroadcast");
  TOPO_CHECK_ARGUMENT(root >= 0 && root < lay.group_size, "hierarchicalBroadcast: root ", root,
                      " outside the group's ranks 0..", lay.group_size - 1);
  const int64_t root_host = levels.host_of_rank[root];
  const int64_t root_local = levels.local_of_rank[root];
  const bool on_root_host = levels.host_index == root_host;
  c10d::Backend& intra = *levels.intra;
  hier::InPlaceBuffers work = hier::inPlaceBuffers(levels, lay, tensor, /*force_copy=*/false);
  // Everything the stages capture lives at function scope: they run after the branches end.
  const bool leader = levels.local_rank == 0;
  // Uneven hosts: the root's host hears the root directly; other hosts hear their leader.
  const bool root_is_leader = root_local == 0;
  hier::Stages stages;
  if (lay.uniform) {
    // Every rail carries 1/local_size of the tensor, so all NICs of a host work at once.
    c10d::Backend& rail = *levels.rail;
    stages.fast_in = [&](int64_t k) -> hier::WorkPtr {
      if (!on_root_host) {
        return {};
      }
      at::Tensor s = work.shards.of(work.shard, k);
      at::Tensor c = work.chunks.of(work.buf, k).view({work.grain, s.numel()});
      return hier::scatterOn(intra, s, c, root_local, timeout);
    };
    stages.slow = [&](int64_t k) {
      at::Tensor s = work.shards.of(work.shard, k);
      return hier::broadcastOn(rail, s, root_host, timeout);
    };
    stages.fast_out = [&](int64_t k) {
      at::Tensor s = work.shards.of(work.shard, k);
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::allGatherOn(intra, c, s, timeout);
    };
  } else {
    stages.fast_in = [&](int64_t k) -> hier::WorkPtr {
      if (!on_root_host || root_is_leader) {
        return {};
      }
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::broadcastOn(intra, c, root_local, timeout);
    };
    stages.slow = [&](int64_t k) -> hier::WorkPtr {
      if (!leader) {
        return {};
      }
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::broadcastOn(*levels.leaders, c, root_host, timeout);
    };
    stages.fast_out = [&](int64_t k) -> hier::WorkPtr {
      if (on_root_host && !root_is_leader) {
        return {};
      }
      at::Tensor c = work.chunks.of(work.buf, k);
      return hier::broadcastOn(intra, c, 0, timeout);
    };
  }
  hier::runPipeline(work.chunks.count(), stages);
  if (work.staged && lay.rank != root) {
    hier::unstage(tensor, work.buf);
  }
  return {work.buf, work.shard};
}

}  // namespace torch_topo::backend
