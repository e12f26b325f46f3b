// SPDX-License-Identifier: Apache-2.0
// Communication/compute overlap ops: chunked matmul -> reduce_scatter and all_gather -> matmul,
// chunk k's collective in flight while chunk k+1 computes (layer: csrc/ops).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace torch_topo::ops {

/// Options of one overlapped call. Plain aggregate (c10d Types.hpp style).
struct OverlapOptions {
  /// Row chunks per rank block; each chunk is one collective. 1 means no pipelining.
  int64_t chunks = 4;
  /// Collectives allowed in flight at once; bounds the chunk buffers alive (>= 1).
  int64_t maxInflight = 2;
  /// Record host timestamps per chunk (`ChunkTiming`). Costs two clock reads and one future
  /// callback per chunk.
  bool recordTiming = false;
  /// Test hook: sleep a random 0..N microseconds before each chunk's compute (on this rank,
  /// seeded by `delaySeed`), so ranks reach the chunks at different moments.
  int64_t computeDelayMaxUs = 0;
  /// Test hook: likewise before each collective is issued.
  int64_t commDelayMaxUs = 0;
  uint64_t delaySeed = 0;
};

/// Host timestamps (seconds on a steady clock, shared by all calls of the process) of one chunk.
/// On CPU they are the real durations. On CUDA they only say when work was enqueued; measure
/// device time with CUDA events around the call instead.
struct ChunkTiming {
  int64_t chunk = 0;
  double computeStartS = 0;
  double computeEndS = 0;
  /// When the collective was handed to the process group.
  double commIssueS = 0;
  /// When its Work completed (its future's callback ran); for a Work without a future (Gloo's
  /// reduce_scatter), when the consumer's wait on it returned: an upper bound.
  double commEndS = 0;
};

/// Result of an overlapped op: the output, optionally the gathered input (all_gather_matmul
/// keeps it for the weight gradient) and the per-chunk timings when requested.
struct OverlapResult {
  at::Tensor out;
  at::Tensor gathered;
  std::vector<ChunkTiming> timing;
};

/// out = reduce_scatter_dim0(x @ weight^T) over `group`, chunked.
///
/// Args: x [M, K] with M divisible by the group size P; weight [N, K]. Returns out [M / P, N]:
/// rank r holds rows [r*M/P, (r+1)*M/P) of the sum over ranks. Chunk c of every rank block is
/// computed and reduce-scattered while chunk c+1 computes.
///
/// Ordering: every rank must call with the same shapes and chunks (it is a collective).
/// CUDA: matmuls run on the caller's current stream; each collective is issued from a
/// high-priority communication stream of (group, device) that first waits on an event recorded
/// after its chunk's matmul; the caller's stream waits on the collectives' end events before
/// the call returns. The host never blocks; chunk buffers stay referenced until the caller's
/// stream waited on them (no recordStream), and at most `maxInflight` are alive.
/// CPU: the collectives run asynchronously in the backend while this thread computes.
OverlapResult matmulReduceScatter(const at::Tensor& x, const at::Tensor& weight,
                                  const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                  const OverlapOptions& options);

/// out = all_gather_dim0(x) @ weight^T over `group`, chunked.
///
/// Args: x [M_local, K]; weight [N, K]. Returns out [P * M_local, N] (rank-major rows, as
/// all_gather_into_tensor orders them) and, when `keepGathered`, the gathered x [P*M_local, K].
/// Chunk c's all-gather is in flight while chunk c-1 computes. Ordering and stream contract as
/// `matmulReduceScatter`.
OverlapResult allGatherMatmul(const at::Tensor& x, const at::Tensor& weight,
                              const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                              const OverlapOptions& options, bool keepGathered);

/// Seconds on the steady clock the ops' timestamps use, for callers bracketing a call.
double nowSeconds();

}  // namespace torch_topo::ops
