// SPDX-License-Identifier: Apache-2.0
// Python bindings of the probe layer (layer: csrc/bindings).
#include "bindings/bindings.h"

namespace torch_topo::bindings {

void defProbe(py::module_& m) {}

}  // namespace torch_topo::bindings
