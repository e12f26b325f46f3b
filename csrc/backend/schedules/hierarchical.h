// SPDX-License-Identifier: Apache-2.0
// Two-level (intra-host, then inter-host) collective schedules over the inner groups of a
// `Levels` (layer: csrc/backend). TopoBackend calls these from its hierarchical dispatch path.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "backend/schedules/schedule.h"

namespace torch_topo::backend {

/// Temporaries a schedule allocated. On CPU every step has completed when a schedule returns,
/// so the caller may drop them. On CUDA the steps are only enqueued (each Work::wait() made the
/// current stream wait) on the internal stream they were allocated on, so only that stream's
/// later, ordered ops can reuse them; the caller's Work holds them too (docs/design.md §4).
using ScheduleBuffers = std::vector<at::Tensor>;

/// How every schedule below behaves.
///
/// Ordering: inner collectives are issued on the calling thread in one program order that is
/// the same on every rank, and Work::wait() separates dependent steps (never future callbacks).
/// Pipelining: the buffer is cut into chunks of about `levels.chunk_bytes` (measured on the
/// collective's full buffer); chunk k+1's intra-host step is issued before chunk k's inter-host
/// step is waited, so the slow and the fast links work at the same time.
/// Shapes: hosts of equal size (`levels.uniform`) use the NIC rails, every rank moving a
/// 1/local_size shard across hosts; hosts of different sizes (e.g. 3 + 5) go through local
/// rank 0 of each host (`levels.leaders`). Sizes not divisible by the local size are padded.
/// Reductions: AVG and PREMUL_SUM run as SUM on every level and are scaled once at the end,
/// for the whole group (Gloo has neither op, and one scaling is one rounding).
/// Tensors: any strides and dtype the inner backends accept; non-contiguous tensors are staged
/// through contiguous copies. Group ranks may be placed on hosts in any order (e.g.
/// interleaved); outputs are always in group-rank order.
/// Timeout: `timeout` is passed to every inner collective; kUnsetTimeout keeps theirs.
/// Errors: a bad argument raises c10::ValueError naming the schedule; inner failures propagate.

/// All-reduce of `tensor` in place over the whole group.
ScheduleBuffers hierarchicalAllReduce(
    const Levels& levels,
    at::Tensor& tensor,
    const c10d::ReduceOp& op,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

/// All-gather: `output` (group_size * input.numel() elements, any shape) receives every rank's
/// `input` in group-rank order. `input` may be a slice of `output` (FSDP2's in-place form).
ScheduleBuffers hierarchicalAllGather(
    const Levels& levels,
    at::Tensor& output,
    const at::Tensor& input,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

/// All-gather, list form: outputs[r] receives rank r's `input` (group_size tensors).
ScheduleBuffers hierarchicalAllGatherList(
    const Levels& levels,
    std::vector<at::Tensor>& outputs,
    const at::Tensor& input,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

/// Reduce-scatter: `input` holds group_size blocks of output.numel() elements in group-rank
/// order; `output` receives the reduction of every rank's block for this rank.
ScheduleBuffers hierarchicalReduceScatter(
    const Levels& levels,
    at::Tensor& output,
    const at::Tensor& input,
    const c10d::ReduceOp& op,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

/// Reduce-scatter, list form: inputs[r] is the block for rank r (group_size tensors).
ScheduleBuffers hierarchicalReduceScatterList(
    const Levels& levels,
    at::Tensor& output,
    const std::vector<at::Tensor>& inputs,
    const c10d::ReduceOp& op,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

/// Broadcast of `tensor` from group rank `root` to every rank, in place.
ScheduleBuffers hierarchicalBroadcast(
    const Levels& levels,
    at::Tensor& tensor,
    int64_t root,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

/// Reduce of `tensor` to group rank `root`, in place there; other ranks' tensors are left
/// unchanged.
ScheduleBuffers hierarchicalReduce(
    const Levels& levels,
    at::Tensor& tensor,
    int64_t root,
    const c10d::ReduceOp& op,
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout);

}  // namespace torch_topo::backend
