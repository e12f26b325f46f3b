// SPDX-License-Identifier: Apache-2.0
// Python bindings of the ops layer (layer: csrc/bindings): Ulysses pack/unpack, the LSE merge
// and zigzag index math. The autograd functions and the exchanges live in torch_topo/ops/.
#include "bindings/bindings.h"
#include "ops/ring_attention.h"
#include "ops/ulysses.h"

namespace torch_topo::bindings {

void defOps(py::module_& m) {
  using py::arg;
  const auto release = py::call_guard<py::gil_scoped_release>();
  m.def("ulysses_pack", &ops::packScatter, release, arg("tensors"), arg("scatter_dim"),
        arg("cat_dim"), arg("world"), arg("replicate") = std::vector<bool>{},
        R"(Packs tensors into one [world, *slice] buffer for one equal-split all_to_all_single.

Args:
    tensors: same dtype, device and number of dims; slice shapes equal except along cat_dim.
    scatter_dim: dimension split over the ranks (rank j gets slice j).
    cat_dim: dimension along which the tensors' slices lie side by side.
    world: group size.
    replicate: per tensor, allow a size dividing `world` (GQA: rank j gets row j // (world // n)).
Returns:
    contiguous [world, *slice]; entry j holds every tensor's slice j (a view of a single tensor
    already in that order).)");
  m.def("ulysses_slice_shape", &ops::sliceShape, arg("shape"), arg("scatter_dim"), arg("world"),
        arg("replicate") = false,
        R"(Shape of one rank's slice of a tensor packed by ulysses_pack.

Args:
    shape: the packed tensor's shape.
    scatter_dim: dimension split over the ranks.
    world: group size.
    replicate: as in ulysses_pack.)");
  m.def("ulysses_unpack", &ops::unpackGather, release, arg("buffer"), arg("cat_sizes"),
        arg("cat_dim"), arg("gather_dim"), arg("reduce_replicas") = std::vector<int64_t>{},
        R"(Unpacks a received [world, *slice] buffer into one tensor per slice along cat_dim.

Args:
    buffer: entry j from rank j.
    cat_sizes: each tensor's extent along cat_dim in a slice.
    cat_dim: dimension along which the slices lie side by side.
    gather_dim: dimension along which the ranks' slices are concatenated (rank order).
    reduce_replicas: per tensor, sum runs of this many ranks' slices (replica gradients).
Returns:
    views of the buffer where the gathered layout allows, copies otherwise.)");
  m.def(
      "merge_attn_block",
      [](at::Tensor out, at::Tensor lse, const at::Tensor& block_out,
         const at::Tensor& block_lse) { ops::mergeAttnBlock(out, lse, block_out, block_lse); },
      release, arg("out"), arg("lse"), arg("block_out"), arg("block_lse"),
      R"(Merges an attention block into (out, lse) in place, in fp32, through the log-sum-exp.

Args:
    out: float32 [..., s, d] running output.
    lse: float32 [..., s] running log-sum-exp.
    block_out: [..., s, d] block output.
    block_lse: [..., s] block log-sum-exp.)");
  m.def("zigzag_index", &ops::zigzagIndex, arg("seq_len"), arg("world"), arg("rank"),
        R"(Global positions of rank's zigzag shard (chunks rank and 2*world-1-rank of 2*world).

Args:
    seq_len: global sequence length, a multiple of 2 * world.
    world: group size.
    rank: rank in the group.)");
  m.def("zigzag_shard", &ops::zigzagShard, release, arg("x"), arg("dim"), arg("world"),
        arg("rank"),
        R"(This rank's zigzag shard of the full sequence x along dim.

Args:
    x: full tensor.
    dim: sequence dimension.
    world: group size.
    rank: rank in the group.)");
  m.def("zigzag_unshard", &ops::zigzagUnshard, release, arg("shards"), arg("dim"),
        R"(Full sequence from every rank's zigzag shard (in rank order).

Args:
    shards: one shard per rank.
    dim: sequence dimension.)");
}

}  // namespace torch_topo::bindings
