// SPDX-License-Identifier: Apache-2.0
// Ulysses layout exchange: pack several tensors into one all-to-all buffer and unpack the
// received buffer (layer: csrc/ops). The exchange itself is one c10d all_to_all_single.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch_topo::ops {

/// Packs `tensors` for one equal-split all_to_all_single over `world` ranks. Returns a
/// contiguous [world, *slice] tensor: entry j holds every tensor's j-th slice along
/// `scatter_dim`, side by side along `cat_dim` (so Q, K and V of one position travel together:
/// a receiver attends on views of what arrives, see unpackGather). With one tensor already in
/// that order (the attention output at batch 1) the result is a view of it, no copy.
///
/// Slicing: a tensor whose size n along `scatter_dim` is a multiple of `world` gives rank j the
/// rows [j*n/world, (j+1)*n/world). When `replicate[i]` is true and n divides `world` (GQA/MQA
/// with kv_heads < world), rank j gets the single row j / (world / n): the head its query heads
/// use. Anything else is a ValueError naming the tensor, the size and the rule.
///
/// Args:
///   tensors: same dtype, device and number of dims, equal slice shapes except along cat_dim.
///   scatter_dim: dimension split over the ranks (negative counts from the end).
///   cat_dim: dimension along which the slices lie side by side.
///   world: number of ranks in the exchange (>= 1).
///   replicate: one flag per tensor, or empty for all false.
/// CUDA tensors of 4 dims [b, s, h, d] with cat_dim 2 and scatter_dim 1 or 2 (the Ulysses
/// exchanges) take one kernel launch for all tensors (cuda/ulysses_pack.cu); the rest ATen.
at::Tensor packScatter(const std::vector<at::Tensor>& tensors, int64_t scatter_dim,
                       int64_t cat_dim, int64_t world, const std::vector<bool>& replicate);

/// Shape of tensor i's slice in one entry of a buffer made by packScatter (what a receiver
/// gets from each sender): `shape` with `scatter_dim` divided by `world`, or 1 when replicated.
std::vector<int64_t> sliceShape(at::IntArrayRef shape, int64_t scatter_dim, int64_t world,
                                bool replicate);

/// Unpacks a received buffer [world, *slice] (entry j from rank j): splits it along `cat_dim`
/// into slices of `cat_sizes`, and concatenates each tensor's `world` slices along
/// `gather_dim` in rank order. When `reduce_replicas[i]` = r > 1, the slices of each run of r
/// consecutive ranks are summed (in fp32 for 16-bit types) instead: the gradient of a head
/// packScatter replicated to r ranks. Outputs are views of `buffer` where the gathered layout
/// is one (gather along the sequence at batch 1), copies otherwise.
std::vector<at::Tensor> unpackGather(const at::Tensor& buffer,
                                     const std::vector<int64_t>& cat_sizes, int64_t cat_dim,
                                     int64_t gather_dim,
                                     const std::vector<int64_t>& reduce_replicas);

}  // namespace torch_topo::ops
