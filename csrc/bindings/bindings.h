// SPDX-License-Identifier: Apache-2.0
// Entry points of the pybind11 module torch_topo._C, one per layer (layer: csrc/bindings).
#pragma once

#include <torch/python.h>

namespace torch_topo::bindings {

namespace py = pybind11;

/// Exceptions and the topology core: graph, readers, probes, cost model, planner.
void defTopo(py::module_& m);
/// Live probes (hwloc, NVML, /sys) and the cluster assembled from per-rank records.
void defProbe(py::module_& m);
/// Cost model, placement and doctor.
void defPlanner(py::module_& m);
/// The c10d backend "topo" and its Work.
void defBackend(py::module_& m);
/// Hierarchical schedules' direct entry points (tests and benchmarks).
void defSchedules(py::module_& m);
/// Sequence-parallel attention ops.
void defOps(py::module_& m);
/// Communication/compute overlap ops.
void defOverlap(py::module_& m);

}  // namespace torch_topo::bindings
