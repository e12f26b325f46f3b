// SPDX-License-Identifier: Apache-2.0
// CUDA pack kernel of the Ulysses exchange (layer: csrc/ops): one launch writes every tensor's
// slices, heads side by side, straight into the all-to-all buffer.
#include "ops/cuda/ulysses_pack.h"

#include <algorithm>
#include <cstdint>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

namespace torch_topo::ops::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;  // grid-stride beyond this

// Everything in units of the copied word (1-16 bytes), so offsets stay integer.
struct PackArgs {
  const char* src[kMaxPackTensors];
  int64_t stride[kMaxPackTensors][4];  // world, b, s', h'_i (in words)
  int64_t heads_end[kMaxPackTensors];  // cumulative h'_i along the buffer's head dim
  int64_t batch, seq, heads, words_per_row;  // b, s', H', d in words
  int64_t total;                              // words in the buffer
};

template <typename Word>
__global__ void packHeadsKernel(PackArgs a, Word* __restrict__ out) {
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < a.total;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t dw = w % a.words_per_row;
    int64_t t = w / a.words_per_row;
    const int64_t hh = t % a.heads;
    t /= a.heads;
    const int64_t si = t % a.seq;
    t /= a.seq;
    const int64_t bi = t % a.batch;
    const int64_t j = t / a.batch;
    int i = 0;
    while (hh >= a.heads_end[i]) ++i;
    const int64_t h = hh - (i == 0 ? 0 : a.heads_end[i - 1]);
    const Word* src = reinterpret_cast<const Word*>(a.src[i]);
    out[w] = src[j * a.stride[i][0] + bi * a.stride[i][1] + si * a.stride[i][2] +
                 h * a.stride[i][3] + dw];
  }
}

// Widest word (16 bytes down to 1) that divides the row, every base pointer and every stride.
int64_t wordBytes(const std::vector<at::Tensor>& views, int64_t row_bytes) {
  for (int64_t w : {16, 8, 4, 2}) {
    bool ok = row_bytes % w == 0;
    for (const at::Tensor& v : views) {
      ok = ok && reinterpret_cast<uintptr_t>(v.const_data_ptr()) % w == 0;
      for (int k = 0; k < 4; ++k) ok = ok && (v.stride(k) * v.element_size()) % w == 0;
    }
    if (ok) return w;
  }
  return 1;
}

template <typename Word>
void launch(const PackArgs& args, at::Tensor& out) {
  const int64_t blocks = std::clamp<int64_t>((args.total + kThreadsPerBlock - 1) /
                                                 kThreadsPerBlock, 1, kMaxBlocks);
  packHeadsKernel<Word><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0,
                          c10::cuda::getCurrentCUDAStream()>>>(
      args, static_cast<Word*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

at::Tensor packHeadsCuda(const std::vector<at::Tensor>& views) {
  TORCH_CHECK_VALUE(!views.empty() && views.size() <= kMaxPackTensors, "packHeadsCuda: got ",
                    views.size(), " tensors, expected 1 to ", kMaxPackTensors);
  const at::Tensor& first = views.front();
  const c10::cuda::CUDAGuard guard(first.device());
  int64_t heads = 0;
  for (const at::Tensor& v : views) heads += v.size(3);
  at::Tensor out = at::empty({first.size(0), first.size(1), first.size(2), heads, first.size(4)},
                             first.options());
  if (out.numel() == 0) return out;
  const int64_t elem = first.element_size();
  const int64_t word = wordBytes(views, first.size(4) * elem);
  PackArgs args{};
  int64_t end = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    const at::Tensor& v = views[i];
    args.src[i] = static_cast<const char*>(v.const_data_ptr());
    for (int k = 0; k < 4; ++k) args.stride[i][k] = v.stride(k) * elem / word;
    end += v.size(3);
    args.heads_end[i] = end;
  }
  args.batch = first.size(1);
  args.seq = first.size(2);
  args.heads = heads;
  args.words_per_row = first.size(4) * elem / word;
  args.total = out.numel() * elem / word;
  switch (word) {
    case 16: launch<uint4>(args, out); break;
    case 8: launch<uint2>(args, out); break;
    case 4: launch<uint32_t>(args, out); break;
    case 2: launch<uint16_t>(args, out); break;
    default: launch<uint8_t>(args, out); break;
  }
  return out;
}

}  // namespace torch_topo::ops::cuda
