// SPDX-License-Identifier: Apache-2.0
// CUDA pack/unpack kernels of the Ulysses exchange (layer: csrc/ops): one pass per tensor that
// writes each destination rank's slice straight into the all-to-all buffer.
#include "ops/cuda/ulysses_pack.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

namespace torch_topo::ops::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;

// The copies move raw elements, so one instantiation per element size covers every dtype.
template <typename T>
__global__ void packSliceKernel(const T* __restrict__ src, T* __restrict__ buffer, int64_t outer,
                                int64_t n, int64_t inner, int64_t world, int64_t rows,
                                int64_t ranks_per_row, int64_t chunk_numel, int64_t offset,
                                int64_t total) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in = e % inner;
    int64_t t = e / inner;
    const int64_t row = t % rows;
    t /= rows;
    const int64_t o = t % outer;
    const int64_t j = t / outer;
    const int64_t src_row = ranks_per_row > 0 ? j / ranks_per_row : j * rows + row;
    buffer[j * chunk_numel + offset + (o * rows + row) * inner + in] =
        src[(o * n + src_row) * inner + in];
  }
}

template <typename T>
__global__ void unpackSliceKernel(const T* __restrict__ buffer, T* __restrict__ dst,
                                  int64_t outer, int64_t rows, int64_t inner, int64_t world,
                                  int64_t chunk_numel, int64_t offset, int64_t total) {
  const int64_t gathered = world * rows;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in = e % inner;
    const int64_t t = e / inner;
    const int64_t g = t % gathered;
    const int64_t o = t / gathered;
    const int64_t j = g / rows;
    const int64_t row = g % rows;
    dst[e] = buffer[j * chunk_numel + offset + (o * rows + row) * inner + in];
  }
}

int gridFor(int64_t total) {
  // Grid-stride loops: cap the grid so huge buffers do not overflow gridDim.x.
  const int64_t blocks = (total + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(blocks, 1), 65535));
}

template <typename Launch>
void dispatchElementSize(int64_t element_size, const char* where, Launch&& launch) {
  switch (element_size) {
    case 1: launch(uint8_t{}); break;
    case 2: launch(uint16_t{}); break;
    case 4: launch(uint32_t{}); break;
    case 8: launch(uint64_t{}); break;
    default:
      TORCH_CHECK_VALUE(false, where, ": element size ", element_size,
                        " bytes is not supported by the CUDA kernels, expected 1, 2, 4 or 8");
  }
}

}  // namespace

void packSliceCuda(const at::Tensor& src, at::Tensor& buffer, int64_t outer, int64_t n,
                   int64_t inner, int64_t world, bool replicate, int64_t chunk_numel,
                   int64_t offset) {
  const c10::cuda::CUDAGuard guard(src.device());
  const int64_t rows = replicate ? 1 : n / world;
  const int64_t ranks_per_row = replicate ? world / n : 0;
  const int64_t total = world * outer * rows * inner;
  if (total == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  dispatchElementSize(src.element_size(), "packSliceCuda", [&](auto tag) {
    using T = decltype(tag);
    packSliceKernel<T><<<gridFor(total), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(src.const_data_ptr()), static_cast<T*>(buffer.data_ptr()), outer,
        n, inner, world, rows, ranks_per_row, chunk_numel, offset, total);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void unpackSliceCuda(const at::Tensor& buffer, at::Tensor& dst, int64_t outer, int64_t rows,
                     int64_t inner, int64_t world, int64_t chunk_numel, int64_t offset) {
  const c10::cuda::CUDAGuard guard(buffer.device());
  const int64_t total = outer * world * rows * inner;
  if (total == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  dispatchElementSize(buffer.element_size(), "unpackSliceCuda", [&](auto tag) {
    using T = decltype(tag);
    unpackSliceKernel<T><<<gridFor(total), kThreadsPerBlock, 0, stream>>>(
        static_cast<const T*>(buffer.const_data_ptr()), static_cast<T*>(dst.data_ptr()), outer,
        rows, inner, world, chunk_numel, offset, total);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace torch_topo::ops::cuda
