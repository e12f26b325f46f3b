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

int64_t normalizeDim(int64_t dim, int64_t ndim, const char* where) {
  TORCH_CHECK_VALUE(dim >= -ndim && dim < ndim, where, ": dim out of range: got ", dim,
                    ", expected in [", -ndim, ", ", ndim, ")");
  return dim < 0 ? dim + ndim : dim;
}

// The Ulysses exchanges on [b, s, h, d] (heads side by side, either scatter dim): one kernel
// launch for all tensors.
bool useCudaKernel(const std::vector<at::Tensor>& views, int64_t cat_dim) {
  if (!views.front().is_cuda() || views.front().dim() != 5 || cat_dim != 2 ||
      views.size() > cuda::kMaxPackTensors) {
    return false;
  }
  for (const at::Tensor& v : views) {
    if (v.stride(4) != 1 && v.size(4) > 1) return false;
  }
  return true;
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
                       int64_t cat_dim, int64_t world, const std::vector<bool>& replicate) {
  TORCH_CHECK_VALUE(!tensors.empty(), "packScatter: no tensors given");
  TORCH_CHECK_VALUE(replicate.empty() || replicate.size() == tensors.size(),
                    "packScatter: replicate has ", replicate.size(), " flags for ",
                    tensors.size(), " tensors");
  const at::Tensor& first = tensors.front();
  const int64_t sd = normalizeDim(scatter_dim, first.dim(), "packScatter");
  const int64_t cd = normalizeDim(cat_dim, first.dim(), "packScatter");
  std::vector<at::Tensor> views;
  std::vector<int64_t> first_slice;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK_VALUE(t.scalar_type() == first.scalar_type(), "packScatter: tensor ", i,
                      " has dtype ", t.scalar_type(), ", expected ", first.scalar_type(),
                      " like tensor 0");
    TORCH_CHECK_VALUE(t.device() == first.device(), "packScatter: tensor ", i, " is on ",
                      t.device(), ", expected ", first.device(), " like tensor 0");
    TORCH_CHECK_VALUE(t.dim() == first.dim(), "packScatter: tensor ", i, " has ", t.dim(),
                      " dims, expected ", first.dim(), " like tensor 0");
    const bool rep = !replicate.empty() && replicate[i];
    std::vector<int64_t> slice = sliceShape(t.sizes(), sd, world, rep);
    if (i == 0) first_slice = slice;
    for (int64_t k = 0; k < t.dim(); ++k) {
      TORCH_CHECK_VALUE(k == cd || slice[k] == first_slice[k], "packScatter: tensor ", i,
                        " has slice shape ", at::IntArrayRef(slice), ", expected ",
                        at::IntArrayRef(first_slice), " like tensor 0 except in dim ", cd);
    }
    at::Tensor src = t;
    int64_t n = t.size(sd);
    if (slice[sd] == 1 && n < world) {  // replicated: rank j takes row j / (world / n)
      src = t.index_select(sd, at::arange(world, t.options().dtype(at::kLong))
                                   .div(world / n, "floor"));
      n = world;
    }
    views.push_back(src.unflatten(sd, {world, n / world}).movedim(sd, 0));
  }
  if (useCudaKernel(views, cd)) {
    return cuda::packHeadsCuda(views);
  }
  return views.size() == 1 ? views.front().contiguous() : at::cat(views, cd + 1);
}

std::vector<at::Tensor> unpackGather(const at::Tensor& buffer,
                                     const std::vector<int64_t>& cat_sizes, int64_t cat_dim,
                                     int64_t gather_dim,
                                     const std::vector<int64_t>& reduce_replicas) {
  TORCH_CHECK_VALUE(buffer.dim() >= 2, "unpackGather: buffer must be [world, *slice]: got "
                    "shape ", buffer.sizes());
  TORCH_CHECK_VALUE(reduce_replicas.empty() || reduce_replicas.size() == cat_sizes.size(),
                    "unpackGather: reduce_replicas has ", reduce_replicas.size(),
                    " entries for ", cat_sizes.size(), " tensors");
  const int64_t world = buffer.size(0);
  const int64_t ndim = buffer.dim() - 1;
  const int64_t cd = normalizeDim(cat_dim, ndim, "unpackGather");
  const int64_t gd = normalizeDim(gather_dim, ndim, "unpackGather");
  const int64_t total = std::accumulate(cat_sizes.begin(), cat_sizes.end(), int64_t{0});
  TORCH_CHECK_VALUE(total == buffer.size(cd + 1), "unpackGather: slices of ",
                    at::IntArrayRef(cat_sizes), " along dim ", cd, " add up to ", total,
                    ", the buffer has ", buffer.size(cd + 1),
                    "; did every rank pack the same shapes?");
  std::vector<at::Tensor> outputs;
  const std::vector<at::Tensor> parts = buffer.split_with_sizes(cat_sizes, cd + 1);
  for (size_t i = 0; i < parts.size(); ++i) {
    at::Tensor part = parts[i];
    const int64_t r = reduce_replicas.empty() ? 1 : reduce_replicas[i];
    TORCH_CHECK_VALUE(r >= 1 && world % r == 0, "unpackGather: reduce_replicas[", i, "] = ", r,
                      ", expected a divisor of the group size ", world);
    if (r > 1) {
      // Replica gradients are summed in fp32 so bf16 heads shared by many ranks lose no bits
      // beyond the final rounding.
      const auto t = buffer.scalar_type();
      const auto acc = (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
      part = part.unflatten(0, {world / r, r}).sum(1, false, acc).to(t);
    }
    outputs.push_back(part.movedim(0, gd).flatten(gd, gd + 1));
  }
  return outputs;
}

}  // namespace torch_topo::ops
