// SPDX-License-Identifier: Apache-2.0
// Python bindings of the hierarchical schedules (layer: csrc/bindings): direct entry points over
// caller-built inner backends, so tests and benchmarks can run a schedule without TopoBackend.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/schedules/hierarchical.h"
#include "bindings/bindings.h"

namespace torch_topo::bindings {

namespace {

using backend::Levels;
using BackendPtr = c10::intrusive_ptr<c10d::Backend>;

}  // namespace

backend::Levels makeLevels(c10::intrusive_ptr<c10d::Backend> intra,
                           c10::intrusive_ptr<c10d::Backend> rail,
                           c10::intrusive_ptr<c10d::Backend> leaders, int local_rank,
                           int local_size, int host_index, int host_count, bool uniform,
                           std::vector<int> host_of_rank, std::vector<int> local_of_rank,
                           int64_t chunk_bytes) {
  TORCH_CHECK_VALUE(chunk_bytes > 0, "_ScheduleLevels: chunk_bytes: got ", chunk_bytes,
                    ", expected > 0");
  Levels lv;
  lv.intra = std::move(intra);
  lv.rail = std::move(rail);
  lv.leaders = std::move(leaders);
  lv.local_rank = local_rank;
  lv.local_size = local_size;
  lv.host_index = host_index;
  lv.host_count = host_count;
  lv.uniform = uniform;
  lv.host_of_rank = std::move(host_of_rank);
  lv.local_of_rank = std::move(local_of_rank);
  lv.chunk_bytes = chunk_bytes;
  return lv;
}

void defSchedules(py::module_& m) {
  py::class_<Levels>(m, "_ScheduleLevels", R"(Inner groups of one device type for the
hierarchical schedules (the C++ `Levels`); built by tests and benchmarks.)")
      .def(py::init(&makeLevels), py::arg("intra"), py::arg("rail"), py::arg("leaders"),
           py::arg("local_rank"), py::arg("local_size"), py::arg("host_index"),
           py::arg("host_count"), py::arg("uniform"), py::arg("host_of_rank"),
           py::arg("local_of_rank"), py::arg("chunk_bytes") = int64_t{4} << 20,
           R"(Args:
    intra: backend of this host's ranks (rank = local rank).
    rail: backend of this local index across hosts (rank = host index), or None.
    leaders: backend of local rank 0 of every host (rank = host index); None elsewhere.
    local_rank, local_size, host_index, host_count: this rank's place.
    uniform: every host holds local_size ranks (rails are used), else leaders are.
    host_of_rank, local_of_rank: host index and local rank of every group rank.
    chunk_bytes: pipelining grain of the two levels.)")
      .def_readonly("chunk_bytes", &Levels::chunk_bytes)
      .def_readonly("uniform", &Levels::uniform);

  const auto release = py::call_guard<py::gil_scoped_release>();
  m.def(
      "_hierarchical_all_reduce",
      [](const Levels& lv, at::Tensor t, const c10d::ReduceOp& op) {
        backend::hierarchicalAllReduce(lv, t, op);
      },
      py::arg("levels"), py::arg("tensor"), py::arg("op"), release,
      R"(Hierarchical all-reduce in place.

Args:
    levels: a _ScheduleLevels.
    tensor: the tensor to reduce (any strides).
    op: a torch.distributed.ReduceOp.)");
  m.def(
      "_hierarchical_all_gather",
      [](const Levels& lv, at::Tensor out, const at::Tensor& in) {
        backend::hierarchicalAllGather(lv, out, in);
      },
      py::arg("levels"), py::arg("output"), py::arg("input"), release,
      R"(Hierarchical all-gather into one tensor (group-rank order).

Args:
    levels: a _ScheduleLevels.
    output: group_size x input.numel() elements; input may be a slice of it.
    input: this rank's tensor.)");
  m.def(
      "_hierarchical_all_gather_list",
      [](const Levels& lv, std::vector<at::Tensor> outs, const at::Tensor& in) {
        backend::hierarchicalAllGatherList(lv, outs, in);
      },
      py::arg("levels"), py::arg("outputs"), py::arg("input"), release,
      R"(Hierarchical all-gather, list form.

Args:
    levels: a _ScheduleLevels.
    outputs: one tensor per group rank, each like input.
    input: this rank's tensor.)");
  m.def(
      "_hierarchical_reduce_scatter",
      [](const Levels& lv, at::Tensor out, const at::Tensor& in, const c10d::ReduceOp& op) {
        backend::hierarchicalReduceScatter(lv, out, in, op);
      },
      py::arg("levels"), py::arg("output"), py::arg("input"), py::arg("op"), release,
      R"(Hierarchical reduce-scatter of one tensor.

Args:
    levels: a _ScheduleLevels.
    output: this rank's block.
    input: group_size blocks of output.numel() elements in group-rank order.
    op: a torch.distributed.ReduceOp.)");
  m.def(
      "_hierarchical_reduce_scatter_list",
      [](const Levels& lv, at::Tensor out, const std::vector<at::Tensor>& ins,
         const c10d::ReduceOp& op) { backend::hierarchicalReduceScatterList(lv, out, ins, op); },
      py::arg("levels"), py::arg("output"), py::arg("inputs"), py::arg("op"), release,
      R"(Hierarchical reduce-scatter, list form.

Args:
    levels: a _ScheduleLevels.
    output: this rank's block.
    inputs: one block per group rank.
    op: a torch.distributed.ReduceOp.)");
  m.def(
      "_hierarchical_broadcast",
      [](const Levels& lv, at::Tensor t, int64_t root) {
        backend::hierarchicalBroadcast(lv, t, root);
      },
      py::arg("levels"), py::arg("tensor"), py::arg("root"), release,
      R"(Hierarchical broadcast in place.

Args:
    levels: a _ScheduleLevels.
    tensor: the root's data, overwritten elsewhere.
    root: group rank of the source.)");
  m.def(
      "_hierarchical_reduce",
      [](const Levels& lv, at::Tensor t, int64_t root, const c10d::ReduceOp& op) {
        backend::hierarchicalReduce(lv, t, root, op);
      },
      py::arg("levels"), py::arg("tensor"), py::arg("root"), py::arg("op"), release,
      R"(Hierarchical reduce to the root, in place there.

Args:
    levels: a _ScheduleLevels.
    tensor: this rank's contribution; the result on root.
    root: group rank of the destination.
    op: a torch.distributed.ReduceOp.)");
}

}  // namespace torch_topo::bindings
