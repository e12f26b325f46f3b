// SPDX-License-Identifier: Apache-2.0
// Python bindings of the backend layer: torch_topo._C.TopoBackend, a subclass of torch's c10d
// Backend type, so a ProcessGroup can register it like Gloo or NCCL (layer: csrc/bindings).
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "backend/argument_error.h"
#include "backend/topo_backend.h"
#include "bindings/bindings.h"
#include "bindings/gil_releasing_holder.h"

namespace torch_topo::bindings {

namespace {

using backend::Levels;
using backend::TopoBackend;
using BackendPtr = c10::intrusive_ptr<c10d::Backend>;

using PySizeRanges =
    std::map<std::string, std::vector<std::pair<int64_t, std::optional<int64_t>>>>;

/// set_hierarchical_thresholds' ranges; ValueError naming the op for an empty or negative one.
std::map<std::string, std::vector<topo::SizeRange>> sizeRanges(const PySizeRanges& sizes) {
  std::map<std::string, std::vector<topo::SizeRange>> out;
  for (const auto& [op, ranges] : sizes) {
    for (const auto& [from, below] : ranges) {
      if (from < 0 || (below && *below <= from)) {
        throw py::value_error(c10::str("set_hierarchical_thresholds: ", op, ": range (", from,
                                       ", ", below ? std::to_string(*below) : "None",
                                       ") is empty or negative; expected 0 <= from < below"));
      }
      out[op].push_back({from, below.value_or(-1)});
    }
  }
  return out;
}

c10::DeviceType parseDeviceType(const std::string& name) {
  try {
    return c10::Device(name).type();
  } catch (const c10::Error&) {
    C10_THROW_ERROR(ValueError, "TopoBackend: unknown device type " + name +
                                    ", expected e.g. \"cpu\" or \"cuda\"");
  }
}

/// torch_topo._C.TopoArgumentError (ValueError and RuntimeError) for backend::ArgumentError,
/// wherever pybind11 translates it: the translator list is shared with torch's own module, so
/// this covers the ProcessGroup methods torch binds, which is where the backend's checks fail.
void defArgumentError(py::module_& m) {
  py::tuple bases = py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_RuntimeError));
  static PyObject* type = makeException(
      m, "TopoArgumentError", bases.ptr(),
      "A collective called with bad arguments: a ValueError, and a RuntimeError as Gloo and "
      "NCCL raise for the same calls.");
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const backend::ArgumentError& e) {
      PyErr_SetString(type, e.what_without_backtrace());
    }
  });
}

}  // namespace

void defBackend(py::module_& m) {
  // The base Python type c10d.Backend must be registered before we derive from it.
  py::module_::import("torch.distributed");
  defArgumentError(m);

  auto cls = py::class_<TopoBackend, c10d::Backend, GilReleasingHolder<TopoBackend>>(
      m, "TopoBackend", R"(The c10d backend "topo" of one process group.

Routes each op on the tensors' device type to a flat inner backend (Gloo for CPU, NCCL for
CUDA) and composes what the inner backend lacks (AVG, PREMUL_SUM on Gloo). Built by the
creator registered by ``import torch_topo``; see docs/backend.md.)");
  cls.attr("HIERARCHICAL_OPS") = py::tuple(py::cast(TopoBackend::hierarchicalOps()));

  py::class_<TopoBackend::Options, c10d::Backend::Options, c10::intrusive_ptr<TopoBackend::Options>>(
      cls, "Options", "Options of TopoBackend: the base c10d options (timeout, group name).")
      .def(py::init([](std::chrono::milliseconds timeout) {
             return TopoBackend::Options::create(timeout);
           }),
           py::arg("timeout") = kBackendDefaultTimeout,
           R"(Args:
    timeout (datetime.timedelta): default timeout of the group's ops.)")
      .def_readwrite("debug", &TopoBackend::Options::debug,
                     "Log every flat/hierarchical decision to stderr (TopoConfig.debug).")
      .def_readwrite("plain", &TopoBackend::Options::plain,
                     "Issue every op as the inner backend's own call, without the one-step Gloo "
                     "exchanges (TopoConfig.use_topo_aware_collectives=False).");

  cls.def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      c10::intrusive_ptr<TopoBackend::Options> options,
                      const std::map<std::string, BackendPtr>& inner,
                      const std::map<std::string, TopoBackend::InnerFactory>& lazy) {
            std::unordered_map<c10::DeviceType, BackendPtr> table;
            for (const auto& [name, b] : inner) table.emplace(parseDeviceType(name), b);
            std::unordered_map<c10::DeviceType, TopoBackend::InnerFactory> factories;
            for (const auto& [name, f] : lazy) factories.emplace(parseDeviceType(name), f);
            return GilReleasingHolder<TopoBackend>(c10::make_intrusive<TopoBackend>(
                store, rank, size, std::move(options), std::move(table), std::move(factories)));
          }),
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"), py::arg("inner"),
          py::arg("lazy") = std::map<std::string, TopoBackend::InnerFactory>{},
          R"(Args:
    store (torch.distributed.Store): the creator's prefixed store.
    rank (int): this rank in the group.
    size (int): group size.
    options (TopoBackend.Options): timeout and group name.
    inner (dict[str, torch.distributed.Backend]): device type ("cpu", "cuda") to the flat
        inner backend of the same ranks.
    lazy (dict[str, Callable]): device type to a factory
        ``(store, rank, size, options) -> Backend`` called at the first op on that device
        type (or never); the same types on every rank.)")
      .def(
          "set_levels",
          [](TopoBackend& self, const std::string& deviceType, BackendPtr intra, BackendPtr rail,
             BackendPtr leaders, int localRank, int localSize, int hostIndex, int hostCount,
             bool uniform, std::vector<int> hostOfRank, std::vector<int> localOfRank,
             int64_t chunkBytes) {
            Levels levels = makeLevels(std::move(intra), std::move(rail), std::move(leaders),
                                       localRank, localSize, hostIndex, hostCount, uniform,
                                       std::move(hostOfRank), std::move(localOfRank), chunkBytes);
            self.setLevels(parseDeviceType(deviceType), std::move(levels));
          },
          py::arg("device_type"), py::arg("intra"), py::arg("rail"), py::arg("leaders"),
          py::arg("local_rank"), py::arg("local_size"), py::arg("host_index"),
          py::arg("host_count"), py::arg("uniform"), py::arg("host_of_rank"),
          py::arg("local_of_rank"), py::arg("chunk_bytes"),
          R"(Stores the hierarchical levels of one device type (see schedules/schedule.h).

Args:
    device_type (str): "cpu" or "cuda".
    intra (Backend | None): the ranks of my host; rank = local rank.
    rail (Backend | None): my local index across hosts; rank = host index.
    leaders (Backend | None): local rank 0 of each host; None on non-leaders.
    local_rank, local_size, host_index, host_count (int): my place in the hierarchy.
    uniform (bool): every host holds local_size ranks.
    host_of_rank, local_of_rank (list[int]): per group rank.
    chunk_bytes (int): pipelining grain of the two levels.)")
      .def(
          "set_hierarchical_thresholds",
          [](TopoBackend& self, const std::string& deviceType, const PySizeRanges& sizes) {
            self.setHierarchicalThresholds(parseDeviceType(deviceType), sizeRanges(sizes));
          },
          py::arg("device_type"), py::arg("sizes"),
          R"(Sets at which payloads each op uses its hierarchical schedule.

Args:
    device_type (str): "cpu" or "cuda".
    sizes (dict[str, list[tuple[int, int | None]]]): c10d op name (one of
        TopoBackend.HIERARCHICAL_OPS, e.g. "allreduce") to the payload ranges in bytes (input
        bytes: one rank's share for the all-gathers), each (from, below) with below None for
        no upper end, e.g. {"allreduce": [(0, None)]} for every size; an op that is absent
        always runs flat; another name is a ValueError.)")
      .def(
          "set_one_step_all_reduce_max_bytes",
          [](TopoBackend& self, const std::string& deviceType, int64_t maxBytes) {
            self.setOneStepAllReduceMaxBytes(parseDeviceType(deviceType), maxBytes);
          },
          py::arg("device_type"), py::arg("max_bytes"),
          R"(Sets the largest all-reduce (bytes) that a two-rank group across hosts runs as one
exchange (an all-gather and a local fold) instead of the inner backend's own; larger ones
are the inner backend's call. Default: no limit.)")
      .def("split_ranks", &TopoBackend::splitRanks,
           R"(A split child's members as ranks of its parent, in child rank order; [] for a group
not made by split.)")
      .def("abandon_coalescing", &TopoBackend::abandonCoalescing,
           R"(Ends a coalesced block that raised before its end; its posted ops stay in flight,
held by the backend until they complete or it shuts down. A no-op outside a block.)")
      .def("last_decisions", &TopoBackend::lastDecisions,
           R"(The latest flat/hierarchical choices, oldest first: list of (op, bytes, choice).)")
      .def(
          "inner_backend",
          [](const TopoBackend& self, const std::string& deviceType) {
            return self.innerBackend(parseDeviceType(deviceType));
          },
          py::arg("device_type"),
          R"(The flat inner backend of a device type, or None (also while a lazy one is unbuilt).

Args:
    device_type (str): "cpu" or "cuda".)")
      // Without the GIL: freeing the inner Gloo backends joins threads that may need it.
      .def("shutdown", &TopoBackend::shutdown, py::call_guard<py::gil_scoped_release>(),
           R"(Frees the inner backends; later ops raise ValueError (destroy_process_group).)")
      .def("perform_nocolor_split", &TopoBackend::performNocolorSplit, py::arg("device"),
           py::call_guard<py::gil_scoped_release>(),
           R"(Called by torch on ranks outside a new group; a no-op (see docs/backend.md).

Args:
    device (torch.device): the bound device.)");
}

}  // namespace torch_topo::bindings
