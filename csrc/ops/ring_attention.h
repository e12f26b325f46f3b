// SPDX-License-Identifier: Apache-2.0
// Ring attention helpers (layer: csrc/ops): the fp32 log-sum-exp merge of attention blocks and
// the zigzag sequence layout that balances causal work. The ring itself runs from Python.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch_topo::ops {

/// Merges one attention block into the running result, in place:
///   out' = out - sigmoid(block_lse - lse) * (out - block_out)
///   lse' = lse - logsigmoid(lse - block_lse)
/// which equals softmax-weighting both partial results by exp(lse_x - lse') without ever
/// exponentiating a large lse (the form used by zhuzilin/ring-flash-attention, utils.py).
///
/// Args:
///   out: float32 [..., s, d] running output (may be a view, e.g. one zigzag half).
///   lse: float32 [..., s] running log-sum-exp.
///   block_out: [..., s, d] block output, any floating dtype (promoted to fp32).
///   block_lse: [..., s] block log-sum-exp, any floating dtype.
void mergeAttnBlock(at::Tensor& out, at::Tensor& lse, const at::Tensor& block_out,
                    const at::Tensor& block_lse);

/// Global positions held by `rank` in the zigzag layout: the sequence is cut into 2 * world
/// equal chunks and rank r holds chunks r and 2 * world - 1 - r, so under a causal mask every
/// rank does the same work at every ring step. int64 [seq_len / world] on CPU.
/// ValueError when seq_len is not a multiple of 2 * world.
at::Tensor zigzagIndex(int64_t seq_len, int64_t world, int64_t rank);

/// This rank's zigzag shard of the full sequence `x` along `dim` (a copy).
at::Tensor zigzagShard(const at::Tensor& x, int64_t dim, int64_t world, int64_t rank);

/// Inverse of zigzagShard: `shards[r]` is rank r's shard; returns the full sequence.
at::Tensor zigzagUnshard(const std::vector<at::Tensor>& shards, int64_t dim);

}  // namespace torch_topo::ops
