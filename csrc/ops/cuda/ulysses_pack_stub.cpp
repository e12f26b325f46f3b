// SPDX-License-Identifier: Apache-2.0
// CPU-build stand-in for ulysses_pack.cu (layer: csrc/ops): CUDA tensors cannot reach this
// without a CUDA torch, but a CPU build of the extension on a CUDA torch could; say so clearly.
#include "ops/cuda/ulysses_pack.h"

#include <c10/util/Exception.h>

namespace torch_topo::ops::cuda {

at::Tensor packHeadsCuda(const std::vector<at::Tensor>&) {
  TORCH_CHECK(false,
              "packHeadsCuda: torch_topo was built without CUDA (TORCH_TOPO_BUILD_CUDA=0 or nvcc "
              "not found), so CUDA tensors cannot be packed; rebuild with CUDA or move the "
              "tensors to CPU");
}

}  // namespace torch_topo::ops::cuda
