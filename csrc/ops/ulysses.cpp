// SPDX-License-Identifier: Apache-2.0
// Ulysses pack/unpack (layer: csrc/ops): slices of several tensors go into one buffer so Q, K
// and V (or dQ, dK, dV) cross the group in a single all_to_all_single.
#include "ops/ulysses.h"

#include <numeric>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "ops/cuda/ulysses_pack.h"

namespace torch_topo::ops {
namespace {

int64_t product(at::IntArrayRef dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

int64_t normalizeDim(int64_t dim, int64_t ndim, const char* where) {
  TORCH_CHECK_VALUE(dim >= -ndim && dim < ndim, where, ": dim out of range: got ", dim,
                    ", expected in [", -ndim, ", ", ndim, ")");
  return dim < 0 ? dim + ndim : dim;
}

bool isLowPrecision(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16;
}

// The CUDA kernels copy raw elements of up to 8 bytes; wider types (complex128) use ATen.
bool useCudaKernels(const at::Tensor& t) {
  return t.is_cuda() && t.element_size() <= 8;
}

}  // namespace

std::vector<int64_t> sliceShape(at::IntArrayRef shape, int64_t scatter_dim, int64_t world,
                                bool replicate) {
  TORCH_CHECK_VALUE(world >= 1, "packScatter: world size must be >= 1: got ", world);
  const int64_t d = normalizeDim(scatter_dim, static_cast<int64_t>(shape.size()), "packScatter");
  const int64_t n = shape[d];
  std::vector<int64_t> out(shape.begin(), shape.end());
  if (n % world == 0) {
    out[d] = n / world;
  } else if (replicate && n > 0 && world % n == 0) {
    out[d] = 1;
  } else {
    TORCH_CHECK_VALUE(false, "packScatter: size ", n, " of dim ", d,
                      " cannot be split over the group: got ", n, " for a group of ", world,
                      ", expected a multiple of ", world,
                      replicate ? " or a divisor of it (replicated heads)" : "");
  }
  return out;
}

at::Tensor packScatter(const std::vector<at::Tensor>& tensors, int64_t scatter_dim,
                       int64_t world, const std::vector<bool>& replicate) {
  TORCH_CHECK_VALUE(!tensors.empty(), "packScatter: no tensors given");
  TORCH_CHECK_VALUE(replicate.empty() || replicate.size() == tensors.size(),
                    "packScatter: replicate has ", replicate.size(), " flags for ",
                    tensors.size(), " tensors");
  const at::Tensor& first = tensors.front();
  std::vector<std::vector<int64_t>> slices;
  int64_t chunk = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK_VALUE(t.scalar_type() == first.scalar_type(), "packScatter: tensor ", i,
                      " has dtype ", t.scalar_type(), ", expected ", first.scalar_type(),
                      " like tensor 0");
    TORCH_CHECK_VALUE(t.device() == first.device(), "packScatter: tensor ", i, " is on ",
                      t.device(), ", expected ", first.device(), " like tensor 0");
    TORCH_CHECK_VALUE(t.dim() == first.dim(), "packScatter: tensor ", i, " has ", t.dim(),
                      " dims, expected ", first.dim(), " like tensor 0");
    slices.push_back(sliceShape(t.sizes(), scatter_dim, world, !replicate.empty() && replicate[i]));
    chunk += product(slices.back());
  }
  const int64_t d = normalizeDim(scatter_dim, first.dim(), "packScatter");
  at::Tensor buffer = at::empty({world * chunk}, first.options());
  at::Tensor chunks = buffer.view({world, chunk});
  int64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor src = tensors[i].contiguous();
    const int64_t outer = product(src.sizes().slice(0, d));
    const int64_t n = src.size(d);
    const int64_t inner = product(src.sizes().slice(d + 1));
    const int64_t rows = slices[i][d];
    const bool replicated = rows * world != n;
    const int64_t numel = outer * rows * inner;
    if (useCudaKernels(src)) {
      cuda::packSliceCuda(src, buffer, outer, n, inner, world, replicated, chunk, offset);
    } else if (!replicated) {
      chunks.narrow(1, offset, numel)
          .view({world, outer, rows, inner})
          .copy_(src.view({outer, world, rows, inner}).permute({1, 0, 2, 3}));
    } else {
      // Rank j takes row j / (world / n): view the ranks as [n, world / n] and broadcast.
      const int64_t ranks_per_row = world / n;
      chunks.narrow(1, offset, numel)
          .view({n, ranks_per_row, outer, inner})
          .copy_(src.view({outer, n, inner}).permute({1, 0, 2}).unsqueeze(1).expand(
              {n, ranks_per_row, outer, inner}));
    }
    offset += numel;
  }
  return buffer;
}

std::vector<at::Tensor> unpackGather(const at::Tensor& buffer,
                                     const std::vector<std::vector<int64_t>>& slice_shapes,
                                     int64_t gather_dim, int64_t world,
                                     const std::vector<int64_t>& reduce_replicas) {
  TORCH_CHECK_VALUE(world >= 1, "unpackGather: world size must be >= 1: got ", world);
  TORCH_CHECK_VALUE(buffer.dim() == 1 && buffer.is_contiguous(),
                    "unpackGather: buffer must be 1-D and contiguous: got shape ",
                    buffer.sizes());
  TORCH_CHECK_VALUE(reduce_replicas.empty() || reduce_replicas.size() == slice_shapes.size(),
                    "unpackGather: reduce_replicas has ", reduce_replicas.size(),
                    " entries for ", slice_shapes.size(), " tensors");
  int64_t chunk = 0;
  for (const auto& s : slice_shapes) chunk += product(s);
  TORCH_CHECK_VALUE(buffer.numel() == world * chunk, "unpackGather: buffer has ",
                    buffer.numel(), " elements, expected ", world, " ranks x ", chunk,
                    " (the slices); did every rank pack the same shapes?");
  at::Tensor chunks = buffer.view({world, chunk});
  std::vector<at::Tensor> outputs;
  int64_t offset = 0;
  for (size_t i = 0; i < slice_shapes.size(); ++i) {
    const std::vector<int64_t>& s = slice_shapes[i];
    const int64_t d = normalizeDim(gather_dim, static_cast<int64_t>(s.size()), "unpackGather");
    const int64_t outer = product(at::IntArrayRef(s).slice(0, d));
    const int64_t rows = s[d];
    const int64_t inner = product(at::IntArrayRef(s).slice(d + 1));
    const int64_t numel = outer * rows * inner;
    const int64_t r = reduce_replicas.empty() ? 1 : reduce_replicas[i];
    TORCH_CHECK_VALUE(r >= 1 && world % r == 0, "unpackGather: reduce_replicas[", i, "] = ", r,
                      ", expected a divisor of the group size ", world);
    std::vector<int64_t> shape = s;
    shape[d] = rows * (world / r);
    at::Tensor src = chunks.narrow(1, offset, numel).view({world, outer, rows, inner});
    if (r > 1) {
      // Replica gradients are summed in fp32 so bf16 heads shared by many ranks lose no bits
      // beyond the final rounding.
      const auto acc = isLowPrecision(buffer.scalar_type()) ? at::kFloat : buffer.scalar_type();
      at::Tensor summed = src.view({world / r, r, outer, rows, inner}).sum(1, false, acc);
      outputs.push_back(summed.to(buffer.scalar_type())
                            .permute({1, 0, 2, 3})
                            .reshape(shape));
    } else {
      at::Tensor out = at::empty(shape, buffer.options());
      if (useCudaKernels(buffer)) {
        cuda::unpackSliceCuda(buffer, out, outer, rows, inner, world, chunk, offset);
      } else {
        out.view({outer, world, rows, inner}).copy_(src.permute({1, 0, 2, 3}));
      }
      outputs.push_back(out);
    }
    offset += numel;
  }
  return outputs;
}

}  // namespace torch_topo::ops
