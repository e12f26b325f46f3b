// SPDX-License-Identifier: Apache-2.0
// Python bindings of the ops layer (layer: csrc/bindings).
#include "bindings/bindings.h"

namespace torch_topo::bindings {

void defOps(py::module_& m) {}

}  // namespace torch_topo::bindings
