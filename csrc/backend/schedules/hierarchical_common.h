// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the hierarchical schedules (layer: csrc/backend): the chunked level
// pipeline, chunk sizing, reduction-op rewriting and the rank <-> (host, local) layout.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "backend/schedules/schedule.h"

namespace torch_topo::backend::hier {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

/// Who is where, derived once per call from a `Levels` and checked for consistency.
struct Layout {
  int64_t group_size = 1;
  int64_t rank = 0;        // this process's group rank
  int64_t hosts = 1;
  int64_t local_size = 1;  // ranks on this host
  int64_t max_local = 1;   // ranks on the largest host (the padded row count when uneven)
  bool uniform = true;
};

/// Checks `levels` (sizes agree with the inner backends, the groups a shape needs exist) and
/// returns its layout. `where` names the schedule in the error message.
Layout describeLevels(const Levels& levels, const char* where);

/// Row of each group rank in a (host, local) table, as an int64 index tensor on `device`:
/// local-major (row = local * hosts + host: what rail-then-intra gathers produce) or
/// host-major with `row_stride` rows per host (row = host * row_stride + local).
at::Tensor rankRows(const Levels& levels, bool local_major, int64_t row_stride, c10::Device device);

/// Cuts `total` elements into chunks of `elems` (the last one shorter).
struct Chunking {
  int64_t total = 0;
  int64_t elems = 1;

  int64_t count() const { return (total + elems - 1) / elems; }
  int64_t begin(int64_t k) const { return k * elems; }
  int64_t length(int64_t k) const { return std::min(elems, total - k * elems); }
  /// Chunk k of a 1-D buffer that stores `rows` values per element chunk by chunk (a
  /// [rows][length] table per chunk, e.g. one row per rank).
  at::Tensor of(const at::Tensor& flat, int64_t k, int64_t rows = 1) const {
    return flat.narrow(0, begin(k) * rows, length(k) * rows);
  }
};

/// Chunking of `total` elements into about `chunk_bytes` of the collective's full buffer
/// divided over `parts` ranks, rounded down to a multiple of `grain` (and at least `grain`).
Chunking planChunks(int64_t total, int64_t chunk_bytes, int64_t elem_size, int64_t parts,
                    int64_t grain);

/// The op every level runs: SUM for AVG and PREMUL_SUM, the op itself otherwise.
c10d::ReduceOp innerReduceOp(const c10d::ReduceOp& op);

/// Applies the once-per-group part of AVG (divide by the group size; truncating for integers,
/// as NCCL's integer average does) or PREMUL_SUM (multiply by its factor) to a fully reduced
/// tensor; other ops leave it unchanged.
void scaleReduced(at::Tensor& tensor, const c10d::ReduceOp& op, int64_t group_size);

/// A contiguous 1-D working buffer holding `t`'s values, zero-padded to a multiple of `grain`
/// elements: `t`'s own memory when it is contiguous, needs no padding and `force_copy` is
/// false, else a copy (then `staged` is true and `unstage` writes results back).
at::Tensor stageFlat(const at::Tensor& t, int64_t grain, bool force_copy, bool& staged);

/// Working buffers of the schedules that keep the tensor's shape (all-reduce, reduce,
/// broadcast): the tensor staged flat (stageFlat) and cut into pipeline chunks. On uniform
/// hosts the buffer is padded to whole multiples of local_size and `shard` holds this rank's
/// 1/local_size of it, chunked alike (shard chunk k belongs to chunk k), so every rail carries
/// an equal share; on uneven hosts `shard` stays undefined.
struct InPlaceBuffers {
  int64_t grain = 1;
  bool staged = false;
  at::Tensor buf;
  Chunking chunks;
  at::Tensor shard;
  Chunking shards;
};
InPlaceBuffers inPlaceBuffers(const Levels& levels, const Layout& lay, const at::Tensor& tensor,
                              bool force_copy);

/// Copies the first t.numel() elements of `flat` back into `t` (any strides).
void unstage(at::Tensor& t, const at::Tensor& flat);

/// Waits for `work` (a no-op for null: the rank takes no part in that step).
void waitWork(const WorkPtr& work);

/// Inner collective wrappers: one options struct filled in one place. On Gloo the all-reduce
/// (two ranks), reduce-scatter and all-gather are peer exchanges (gloo_exchanges.h): their
/// Works complete only in wait(), which every schedule step does.
WorkPtr allReduceOn(c10d::Backend& g, at::Tensor& t, const c10d::ReduceOp& op,
                    std::chrono::milliseconds timeout);
WorkPtr reduceScatterOn(c10d::Backend& g, at::Tensor& out, at::Tensor& in,
                        const c10d::ReduceOp& op, std::chrono::milliseconds timeout);
WorkPtr allGatherOn(c10d::Backend& g, at::Tensor& out, at::Tensor& in,
                    std::chrono::milliseconds timeout);
WorkPtr broadcastOn(c10d::Backend& g, at::Tensor& t, int64_t root,
                    std::chrono::milliseconds timeout);
WorkPtr reduceOn(c10d::Backend& g, at::Tensor& t, int64_t root, const c10d::ReduceOp& op,
                 std::chrono::milliseconds timeout);
/// Scatter of `rows` (rows.size(0) == group size, on root) into `out`; `rows` is ignored
/// elsewhere.
WorkPtr scatterOn(c10d::Backend& g, at::Tensor& out, const at::Tensor& rows, int64_t root,
                  std::chrono::milliseconds timeout);
/// Gather of `in` into `rows` (rows.size(0) == group size, on root only).
WorkPtr gatherOn(c10d::Backend& g, const at::Tensor& rows, at::Tensor& in, int64_t root,
                 std::chrono::milliseconds timeout);

/// Cross-host steps a pipeline keeps in flight (see runPipeline).
constexpr int64_t kSlowStepsInFlight = 3;

/// The three levels of one chunk. Each returns the Work of the step it issued, or null where
/// this rank takes no part. The pipeline waits `fast_in(k)` before issuing `slow(k)`, and
/// issues the next chunks' `fast_in` and `slow` (up to kSlowStepsInFlight slow steps in
/// flight) before it waits `slow(k)` and issues `fast_out(k)`; `finish(k)` (local copies only)
/// runs for every chunk after all steps completed, so an output written there can alias an
/// input read by any step.
struct Stages {
  std::function<WorkPtr(int64_t)> fast_in;
  std::function<WorkPtr(int64_t)> slow;
  std::function<WorkPtr(int64_t)> fast_out;
  std::function<void(int64_t)> finish;
};

/// Runs `stages` over `chunks` chunks in the order described at `Stages`.
void runPipeline(int64_t chunks, const Stages& stages);

}  // namespace torch_topo::backend::hier
