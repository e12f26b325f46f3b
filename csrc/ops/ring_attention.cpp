// SPDX-License-Identifier: Apache-2.0
// Ring attention helpers (layer: csrc/ops): LSE merge and zigzag index math.
#include "ops/ring_attention.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace torch_topo::ops {
namespace {

int64_t chunkLength(int64_t seq_len, int64_t world, const char* where) {
  TORCH_CHECK_VALUE(world >= 1, where, ": group size must be >= 1: got ", world);
  TORCH_CHECK_VALUE(seq_len % (2 * world) == 0, where, ": sequence length ", seq_len,
                    " is not divisible by 2 x group size = ", 2 * world,
                    "; pad the sequence to a multiple of ", 2 * world);
  return seq_len / (2 * world);
}

}  // namespace

void mergeAttnBlock(at::Tensor& out, at::Tensor& lse, const at::Tensor& block_out,
                    const at::Tensor& block_lse) {
  TORCH_CHECK_VALUE(out.scalar_type() == at::kFloat && lse.scalar_type() == at::kFloat,
                    "mergeAttnBlock: the running out and lse must be float32: got ",
                    out.scalar_type(), " and ", lse.scalar_type());
  TORCH_CHECK_VALUE(out.sizes() == block_out.sizes(), "mergeAttnBlock: block_out shape ",
                    block_out.sizes(), ", expected ", out.sizes());
  TORCH_CHECK_VALUE(lse.sizes() == block_lse.sizes(), "mergeAttnBlock: block_lse shape ",
                    block_lse.sizes(), ", expected ", lse.sizes());
  TORCH_CHECK_VALUE(out.dim() == lse.dim() + 1 && out.sizes().slice(0, lse.dim()) == lse.sizes(),
                    "mergeAttnBlock: lse shape ", lse.sizes(), " must be out shape ",
                    out.sizes(), " without the last dim");
  const at::Tensor b_lse = block_lse.to(at::kFloat);
  out.sub_(at::sigmoid(b_lse - lse).unsqueeze(-1) * (out - block_out.to(at::kFloat)));
  lse.sub_(at::log_sigmoid(lse - b_lse));
}

at::Tensor zigzagIndex(int64_t seq_len, int64_t world, int64_t rank) {
  const int64_t c = chunkLength(seq_len, world, "zigzagIndex");
  TORCH_CHECK_VALUE(rank >= 0 && rank < world, "zigzagIndex: rank ", rank,
                    " out of range, expected [0, ", world, ")");
  const auto opts = at::TensorOptions().dtype(at::kLong);
  return at::cat({at::arange(rank * c, (rank + 1) * c, opts),
                  at::arange((2 * world - 1 - rank) * c, (2 * world - rank) * c, opts)});
}

at::Tensor zigzagShard(const at::Tensor& x, int64_t dim, int64_t world, int64_t rank) {
  TORCH_CHECK_VALUE(dim >= -x.dim() && dim < x.dim(), "zigzagShard: dim ", dim,
                    " out of range for a tensor with ", x.dim(), " dims");
  const int64_t c = chunkLength(x.size(dim), world, "zigzagShard");
  TORCH_CHECK_VALUE(rank >= 0 && rank < world, "zigzagShard: rank ", rank,
                    " out of range, expected [0, ", world, ")");
  return at::cat({x.narrow(dim, rank * c, c), x.narrow(dim, (2 * world - 1 - rank) * c, c)},
                 dim);
}

at::Tensor zigzagUnshard(const std::vector<at::Tensor>& shards, int64_t dim) {
  TORCH_CHECK_VALUE(!shards.empty(), "zigzagUnshard: no shards given");
  const int64_t world = static_cast<int64_t>(shards.size());
  const at::Tensor& first = shards.front();
  TORCH_CHECK_VALUE(dim >= -first.dim() && dim < first.dim(), "zigzagUnshard: dim ", dim,
                    " out of range for a tensor with ", first.dim(), " dims");
  TORCH_CHECK_VALUE(first.size(dim) % 2 == 0, "zigzagUnshard: shard length ", first.size(dim),
                    " along dim ", dim, " is odd, expected two equal zigzag chunks");
  const int64_t c = first.size(dim) / 2;
  std::vector<at::Tensor> chunks(2 * world);
  for (int64_t r = 0; r < world; ++r) {
    TORCH_CHECK_VALUE(shards[r].sizes() == first.sizes(), "zigzagUnshard: shard ", r,
                      " has shape ", shards[r].sizes(), ", expected ", first.sizes(),
                      " like shard 0");
    chunks[r] = shards[r].narrow(dim, 0, c);
    chunks[2 * world - 1 - r] = shards[r].narrow(dim, c, c);
  }
  return at::cat(chunks, dim);
}

}  // namespace torch_topo::ops
