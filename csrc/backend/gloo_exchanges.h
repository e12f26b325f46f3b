// SPDX-License-Identifier: Apache-2.0
// Collectives on Gloo as one exchange step (layer: csrc/backend). Gloo's all-to-all posts every
// send and receive at once, so one step costs one link latency, where Gloo's own rings take
// P - 1 or 2 (P - 1) dependent steps: on a 1 ms host link, or with ranks on busy cores, the steps
// and not the bytes set the time of small and medium messages. Reductions fold the received
// blocks locally in rank order.
//
// Reduce-scatter: Gloo has none of its own. torch's ProcessGroupGloo runs an all-reduce of the
// whole input and keeps its block, so every rank sends 2 (P-1)/P of the input instead of
// (P-1)/P, and the returned Work finishes (and copies its block) only inside wait(): it never
// reports completion and has no future. Here each rank sends block j of its input to rank j in
// one all-to-all and folds the P blocks it receives.
//
// All-reduce of two ranks (a rail between two hosts, a data-parallel pair): Gloo's ring takes
// two dependent steps across the link (reduce-scatter, then all-gather); one all-gather moves
// the same bytes in one step, then both ranks fold the two blocks in rank order, so they hold
// the same bits.
//
// All-gather: Gloo's ring takes P - 1 steps; an all-to-all that sends the same block to every
// rank moves the same bytes in one.
//
// Each Work completes from the exchange's own future, so callers that poll or chain on it see
// the real completion.
#pragma once

#include <chrono>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace torch_topo::backend {

/// What Gloo's typed collectives are handed: they know no complex type (torch's Python layer
/// hands them real views too), so a complex tensor travels as its real view. Moving bytes and
/// summing give the same bits on it; the exchanges fold the complex tensors themselves.
at::Tensor onWire(const at::Tensor& t);

// Each function returns the Work of the one-step form where it applies (a Gloo backend; for
// the all-reduce a dense tensor on two ranks; for the all-gather a dense input and a contiguous
// output), else null: the caller then issues the backend's own collective. The decision lives
// here so that the flat ops and the schedules' steps make the same one.

/// Reduce-scatters `input` (group size x output.numel() elements, rank-major blocks) into
/// `output` with `op` (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR; AVG and PREMUL_SUM are composed
/// by the caller). The blocks are folded in rank order: block 0 op block 1 op ... op block P-1.
c10::intrusive_ptr<c10d::Work> oneStepReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                    const at::Tensor& input,
                                                    const c10d::ReduceOp& op,
                                                    std::chrono::milliseconds timeout);
/// The same with the input as one block per rank (the list form); stacked only where it applies.
c10::intrusive_ptr<c10d::Work> oneStepReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                    at::TensorList blocks,
                                                    const c10d::ReduceOp& op,
                                                    std::chrono::milliseconds timeout);

/// All-reduces `tensor` in place over a group of two ranks with `op` (as above): one all-gather,
/// then block 0 op block 1.
c10::intrusive_ptr<c10d::Work> oneStepAllReduce(c10d::Backend& backend, at::Tensor tensor,
                                                const c10d::ReduceOp& op,
                                                std::chrono::milliseconds timeout);

/// All-gathers `input` from every rank into `output` (group size x input.numel() elements,
/// rank-major) in one all-to-all.
c10::intrusive_ptr<c10d::Work> oneStepAllGather(c10d::Backend& backend, at::Tensor output,
                                                const at::Tensor& input,
                                                std::chrono::milliseconds timeout);

// Peer-to-peer forms, for the hierarchical schedules' steps on their private level groups
// (intra, rail, leaders), where nothing else sends point to point. Every send and receive is
// posted at once (one step, like the all-to-all) and Gloo sends from and receives into the
// tensors' own memory: no staging copy of the input (the all-to-all all-gather sends a P-fold
// copy), no flat copy of the output (Gloo's all-gather), no copy of a rank's own block, and
// no hop through Gloo's worker threads. Their Works have no future (Gloo's send/recv works
// have none) and complete in wait(), where the fold runs: callers must wait on them. A wait()
// without a bound of its own bounds each step by `timeout`, else by the group's current timeout
// (set_timeout included). Null where they do not apply (not Gloo, sparse or non-contiguous
// tensors, output overlapping input).

/// All-gather of `input` into `output` (rank-major blocks), as `oneStepAllGather`.
c10::intrusive_ptr<c10d::Work> peerAllGather(c10d::Backend& backend, at::Tensor output,
                                             const at::Tensor& input,
                                             std::chrono::milliseconds timeout);

/// Reduce-scatter of `input` into `output`, folded in rank order as `oneStepReduceScatter`.
c10::intrusive_ptr<c10d::Work> peerReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                 const at::Tensor& input,
                                                 const c10d::ReduceOp& op,
                                                 std::chrono::milliseconds timeout);

/// All-reduce of `tensor` in place over two ranks: one exchange, then block 0 op block 1.
c10::intrusive_ptr<c10d::Work> peerAllReduce(c10d::Backend& backend, at::Tensor tensor,
                                             const c10d::ReduceOp& op,
                                             std::chrono::milliseconds timeout);

}  // namespace torch_topo::backend
