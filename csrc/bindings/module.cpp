// SPDX-License-Identifier: Apache-2.0
// The torch_topo._C module: one call per layer, so each layer's bindings live in its own file.
#include "bindings/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch-topo native core: topology model, c10d backend \"topo\" and ops";
  m.attr("cuda_built") = static_cast<bool>(TORCH_TOPO_WITH_CUDA);
  torch_topo::bindings::defTopo(m);
  torch_topo::bindings::defProbe(m);
  torch_topo::bindings::defPlanner(m);
  torch_topo::bindings::defBackend(m);
  torch_topo::bindings::defSchedules(m);
  torch_topo::bindings::defOps(m);
  torch_topo::bindings::defOverlap(m);
}
