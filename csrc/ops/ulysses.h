// SPDX-License-Identifier: Apache-2.0
// Ulysses layout exchange: pack several tensors into one all-to-all buffer and unpack the
// received buffer (layer: csrc/ops). The exchange itself is one c10d all_to_all_single.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch_topo::ops {

/// Packs `tensors` into one contiguous 1-D buffer for one equal-split all_to_all_single over
/// `world` ranks. The buffer is `world` equal chunks; chunk j holds, one after the other, the
/// j-th slice along `scatter_dim` of every tensor (contiguous, original dim order).
///
/// Slicing: a tensor whose size n along `scatter_dim` is a multiple of `world` gives rank j the
/// rows [j*n/world, (j+1)*n/world). When `replicate[i]` is true and n divides `world` (GQA/MQA
/// with kv_heads < world), rank j gets the single row j / (world / n): the head its query heads
/// use. Anything else is a ValueError naming the tensor, the size and the rule.
///
/// Args:
///   tensors: same dtype, device and number of dims; at least one.
///   scatter_dim: dimension to split (negative counts from the end).
///   world: number of ranks in the exchange (>= 1).
///   replicate: one flag per tensor, or empty for all false.
/// CUDA tensors use the kernels of cuda/ulysses_pack.cu; other devices use ATen copies.
at::Tensor packScatter(const std::vector<at::Tensor>& tensors, int64_t scatter_dim,
                       int64_t world, const std::vector<bool>& replicate);

/// Shape of tensor i's slice in one chunk of a buffer made by packScatter (what a receiver
/// gets from each sender): `shape` with `scatter_dim` divided by `world`, or 1 when replicated.
std::vector<int64_t> sliceShape(at::IntArrayRef shape, int64_t scatter_dim, int64_t world,
                                bool replicate);

/// Unpacks a received all-to-all buffer: chunk j came from rank j and holds one slice per entry
/// of `slice_shapes`. Output i concatenates its `world` slices along `gather_dim` in rank order.
/// When `reduce_replicas[i]` = r > 1, the slices of each run of r consecutive ranks are summed
/// (in fp32 for lower-precision types) instead: the gradient of a head packScatter replicated to
/// r ranks. Empty `reduce_replicas` means no reduction.
std::vector<at::Tensor> unpackGather(const at::Tensor& buffer,
                                     const std::vector<std::vector<int64_t>>& slice_shapes,
                                     int64_t gather_dim, int64_t world,
                                     const std::vector<int64_t>& reduce_replicas);

}  // namespace torch_topo::ops
