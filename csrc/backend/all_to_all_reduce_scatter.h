// SPDX-License-Identifier: Apache-2.0
// Reduce-scatter as one all-to-all plus a local reduction (layer: csrc/backend).
//
// Gloo has no reduce-scatter of its own: torch's ProcessGroupGloo runs an all-reduce of the whole
// input and keeps its block, so every rank sends 2 (P-1)/P of the input instead of (P-1)/P, and
// the returned Work finishes (and copies its block) only inside wait(): it never reports
// completion, and it has no future. Here each rank sends block j of its input to rank j in one
// all-to-all and folds the P blocks it receives, in rank order; the Work completes from the
// all-to-all's own future, so callers that poll or chain on it see the real completion.
#pragma once

#include <chrono>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace torch_topo::backend {

/// True where `backend` reduce-scatters through an all-reduce (Gloo) and the all-to-all form
/// moves half the data.
bool reduceScatterViaAllToAll(const c10d::Backend& backend);

/// Reduce-scatters `input` (group size x output.numel() elements, rank-major blocks) into
/// `output` with `op` (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR; AVG and PREMUL_SUM are composed
/// by the caller). The blocks are folded in rank order: block 0 op block 1 op ... op block P-1.
c10::intrusive_ptr<c10d::Work> allToAllReduceScatter(c10d::Backend& backend, at::Tensor output,
                                                     const at::Tensor& input,
                                                     const c10d::ReduceOp& op,
                                                     std::chrono::milliseconds timeout);

}  // namespace torch_topo::backend
