// SPDX-License-Identifier: Apache-2.0
// Entry points of the pybind11 module torch_topo._C, one per layer (layer: csrc/bindings).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/python.h>

#include "backend/schedules/schedule.h"

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

/// A Python exception class torch_topo._C.`name` deriving from `bases` (a class or a tuple of
/// classes), added to `m`; the module's attribute keeps it alive with the interpreter.
PyObject* makeException(py::module_& m, const char* name, PyObject* bases, const char* doc);

/// The schedules' Levels from the arguments Python hands over (set_levels, _ScheduleLevels);
/// ValueError for a chunk size that is not positive.
backend::Levels makeLevels(c10::intrusive_ptr<c10d::Backend> intra,
                           c10::intrusive_ptr<c10d::Backend> rail,
                           c10::intrusive_ptr<c10d::Backend> leaders, int local_rank,
                           int local_size, int host_index, int host_count, bool uniform,
                           std::vector<int> host_of_rank, std::vector<int> local_of_rank,
                           int64_t chunk_bytes);

}  // namespace torch_topo::bindings
