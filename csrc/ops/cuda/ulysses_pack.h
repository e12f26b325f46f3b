// SPDX-License-Identifier: Apache-2.0
// CUDA pack kernel of the Ulysses exchange (layer: csrc/ops). Built from ulysses_pack.cu with
// CUDA, from ulysses_pack_stub.cpp (which throws) without.
#pragma once

#include <cstddef>
#include <vector>

#include <ATen/core/Tensor.h>

namespace torch_topo::ops::cuda {

/// Most tensors one launch packs (Q, K, V and room for one more).
inline constexpr size_t kMaxPackTensors = 4;

/// Writes the contiguous [world, b, s', H', d] all-to-all buffer from up to kMaxPackTensors
/// send views [world, b, s', h'_i, d] (any strides, last dim contiguous; as packScatter builds
/// them for either Ulysses exchange), side by side along the heads, H' = sum of h'_i: one
/// launch for all of them, each thread moving 16 bytes where the head dim, pointers and
/// strides allow (8, 4, 2 or 1 otherwise), the grid sized to the data.
at::Tensor packHeadsCuda(const std::vector<at::Tensor>& views);

}  // namespace torch_topo::ops::cuda
