// SPDX-License-Identifier: Apache-2.0
// CUDA pack/unpack kernels of the Ulysses exchange (layer: csrc/ops). Built from
// ulysses_pack.cu with CUDA, from ulysses_pack_stub.cpp (which throws) without.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace torch_topo::ops::cuda {

/// Copies the slices of contiguous `src`, viewed as [outer, n, inner], into `buffer` (1-D, same
/// dtype and device): rank j's slice goes to buffer[j * chunk_numel + offset ...] laid out as
/// [outer, rows, inner]. rows = n / world, or 1 with `replicate` (row j / (world / n)).
void packSliceCuda(const at::Tensor& src, at::Tensor& buffer, int64_t outer, int64_t n,
                   int64_t inner, int64_t world, bool replicate, int64_t chunk_numel,
                   int64_t offset);

/// Inverse gather: `dst` (contiguous) viewed as [outer, world * rows, inner] receives, for each
/// rank j, the slice at buffer[j * chunk_numel + offset ...] laid out as [outer, rows, inner].
void unpackSliceCuda(const at::Tensor& buffer, at::Tensor& dst, int64_t outer, int64_t rows,
                     int64_t inner, int64_t world, int64_t chunk_numel, int64_t offset);

}  // namespace torch_topo::ops::cuda
