// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the hierarchical schedules: level pipeline, chunking, op rewriting and
// layout checks (layer: csrc/backend).
#include "backend/schedules/hierarchical_common.h"

#include <algorithm>
#include <string>

#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend/argument_error.h"
#include "backend/gloo_exchanges.h"

namespace torch_topo::backend::hier {

namespace {

// onWire for a reduction: only SUM gives the same bits on the real view.
at::Tensor reducibleOnWire(const at::Tensor& t, const c10d::ReduceOp& op, const char* step) {
  // TopoBackend refuses the bitwise ops on complex tensors before any schedule starts.
  const char* name = op.op_ == c10d::ReduceOp::PRODUCT ? "PRODUCT"
                     : op.op_ == c10d::ReduceOp::MIN   ? "MIN"
                     : op.op_ == c10d::ReduceOp::MAX   ? "MAX"
                                                       : "other than SUM";
  TOPO_CHECK_ARGUMENT(!t.is_complex() || op.op_ == c10d::ReduceOp::SUM, step,
                      ": got a complex tensor with ReduceOp.", name,
                      ", expected SUM, AVG or "
                      "PREMUL_SUM (a level group reduces complex values as their real view)");
  return onWire(t);
}

}  // namespace

Layout describeLevels(const Levels& levels, const char* where) {
  Layout lay;
  lay.group_size = static_cast<int64_t>(levels.host_of_rank.size());
  TOPO_CHECK_ARGUMENT(
      lay.group_size > 0 && levels.local_of_rank.size() == levels.host_of_rank.size(), where,
      ": levels: got host_of_rank of ", levels.host_of_rank.size(), " and local_of_rank of ",
      levels.local_of_rank.size(), " entries, expected one per group rank");
  TOPO_CHECK_ARGUMENT(levels.intra, where, ": levels: no intra-host group");
  lay.hosts = levels.host_count;
  TOPO_CHECK_ARGUMENT(lay.hosts >= 1 && levels.host_index >= 0 && levels.host_index < lay.hosts,
                      where, ": levels: host_index ", levels.host_index, " outside 0..",
                      lay.hosts - 1);
  std::vector<int64_t> per_host(lay.hosts, 0);
  lay.rank = -1;
  for (int64_t r = 0; r < lay.group_size; ++r) {
    const int h = levels.host_of_rank[r];
    TOPO_CHECK_ARGUMENT(h >= 0 && h < lay.hosts, where, ": levels: host_of_rank[", r, "] is ", h,
                        ", expected 0..", lay.hosts - 1);
    ++per_host[h];
    if (h == levels.host_index && levels.local_of_rank[r] == levels.local_rank) {
      lay.rank = r;
    }
  }
  TOPO_CHECK_ARGUMENT(lay.rank >= 0, where, ": levels: no group rank has host ", levels.host_index,
                      " and local rank ", levels.local_rank);
  lay.local_size = per_host[levels.host_index];
  lay.max_local = *std::max_element(per_host.begin(), per_host.end());
  TOPO_CHECK_ARGUMENT(
      levels.local_size == lay.local_size && levels.intra->getSize() == lay.local_size, where,
      ": levels: local_size ", levels.local_size, " and intra group of ", levels.intra->getSize(),
      " ranks, expected ", lay.local_size, " (ranks of host ", levels.host_index,
      " in host_of_rank)");
  lay.uniform = levels.uniform;
  if (lay.uniform) {
    TOPO_CHECK_ARGUMENT(std::all_of(per_host.begin(), per_host.end(),
                                    [&](int64_t n) { return n == lay.local_size; }),
                        where, ": levels: uniform is set but hosts hold different rank counts");
    TOPO_CHECK_ARGUMENT(levels.rail && levels.rail->getSize() == lay.hosts, where,
                        ": levels: uniform hosts need a rail group of ", lay.hosts, " ranks");
  } else if (levels.local_rank == 0) {
    TOPO_CHECK_ARGUMENT(levels.leaders && levels.leaders->getSize() == lay.hosts, where,
                        ": levels: uneven hosts need a leaders group of ", lay.hosts,
                        " ranks on local rank 0");
  }
  return lay;
}

at::Tensor rankRows(const Levels& levels, bool local_major, int64_t row_stride,
                    c10::Device device) {
  const auto n = static_cast<int64_t>(levels.host_of_rank.size());
  // Pinned for a device: a copy from pageable memory would block the host until the internal
  // stream, which just waited on the caller's, caught up with all earlier compute. The host
  // allocator keeps the pinned block until the copy is done.
  const bool pinned = device.type() != c10::DeviceType::CPU;
  at::Tensor rows = at::empty({n}, at::TensorOptions(at::kLong).pinned_memory(pinned));
  auto* p = rows.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t h = levels.host_of_rank[r];
    const int64_t l = levels.local_of_rank[r];
    p[r] = local_major ? l * levels.host_count + h : h * row_stride + l;
  }
  return rows.to(device, at::kLong, /*non_blocking=*/pinned);
}

Chunking planChunks(int64_t total, int64_t chunk_bytes, int64_t elem_size, int64_t parts,
                    int64_t grain) {
  const int64_t per_part =
      chunk_bytes / std::max<int64_t>(elem_size, 1) / std::max<int64_t>(parts, 1);
  return Chunking{total, std::max(grain, per_part / grain * grain)};
}

c10d::ReduceOp innerReduceOp(const c10d::ReduceOp& op) {
  if (op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
  return op;
}

void scaleReduced(at::Tensor& tensor, const c10d::ReduceOp& op, int64_t group_size) {
  if (op.op_ == c10d::ReduceOp::AVG) {
    if (at::isIntegralType(tensor.scalar_type(), /*includeBool=*/true)) {
      tensor.div_(group_size, "trunc");
    } else {
      tensor.div_(group_size);
    }
  } else if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TOPO_CHECK_ARGUMENT(supplement,
                        "PREMUL_SUM: the op carries no factor; build it with "
                        "torch.distributed._make_nccl_premul_sum");
    TOPO_CHECK_ARGUMENT(
        at::isFloatingType(tensor.scalar_type()) || at::isComplexType(tensor.scalar_type()),
        "PREMUL_SUM: got dtype ", tensor.scalar_type(), ", expected a floating-point tensor");
    if (supplement->tensor_factor.defined()) {
      tensor.mul_(supplement->tensor_factor.to(tensor.device()).reshape({}));
    } else {
      tensor.mul_(supplement->double_factor);
    }
  }
}

at::Tensor stageFlat(const at::Tensor& t, int64_t grain, bool force_copy, bool& staged) {
  const int64_t n = t.numel();
  const int64_t padded = (n + grain - 1) / grain * grain;
  staged = force_copy || padded != n || !t.is_contiguous();
  if (!staged) {
    return t.view(-1);
  }
  at::Tensor flat = at::empty({padded}, t.options().memory_format(at::MemoryFormat::Contiguous));
  flat.narrow(0, 0, n).view(t.sizes()).copy_(t);
  // Padding only ever meets padding in a reduction and is dropped; zeros keep it defined.
  flat.narrow(0, n, padded - n).zero_();
  return flat;
}

InPlaceBuffers inPlaceBuffers(const Levels& levels, const Layout& lay, const at::Tensor& tensor,
                              bool force_copy) {
  InPlaceBuffers w;
  w.grain = lay.uniform ? lay.local_size : 1;
  w.buf = stageFlat(tensor, w.grain, force_copy, w.staged);
  w.chunks = planChunks(w.buf.numel(), levels.chunk_bytes, w.buf.element_size(), 1, w.grain);
  if (lay.uniform) {
    w.shard = at::empty({w.buf.numel() / w.grain}, w.buf.options());
    w.shards = Chunking{w.shard.numel(), w.chunks.elems / w.grain};
  }
  return w;
}

void unstage(at::Tensor& t, const at::Tensor& flat) {
  t.copy_(flat.narrow(0, 0, t.numel()).view(t.sizes()));
}

void waitWork(const WorkPtr& work) {
  if (work) {
    work->wait();
  }
}

WorkPtr allReduceOn(c10d::Backend& g, at::Tensor& t, const c10d::ReduceOp& op,
                    std::chrono::milliseconds timeout) {
  if (auto w = peerAllReduce(g, t, op, timeout)) return w;
  if (auto w = oneStepAllReduce(g, t, op, timeout)) return w;
  c10d::AllreduceOptions opts;
  opts.reduceOp = op;
  opts.timeout = timeout;
  std::vector<at::Tensor> ts{reducibleOnWire(t, op, "allReduceOn")};
  return g.allreduce(ts, opts);
}

WorkPtr reduceScatterOn(c10d::Backend& g, at::Tensor& out, at::Tensor& in,
                        const c10d::ReduceOp& op, std::chrono::milliseconds timeout) {
  if (auto w = peerReduceScatter(g, out, in, op, timeout)) return w;
  if (auto w = oneStepReduceScatter(g, out, in, op, timeout)) return w;
  c10d::ReduceScatterOptions opts;
  opts.reduceOp = op;
  opts.timeout = timeout;
  at::Tensor wireOut = reducibleOnWire(out, op, "reduceScatterOn");
  at::Tensor wireIn = onWire(in);
  return g._reduce_scatter_base(wireOut, wireIn, opts);
}

WorkPtr allGatherOn(c10d::Backend& g, at::Tensor& out, at::Tensor& in,
                    std::chrono::milliseconds timeout) {
  if (auto w = peerAllGather(g, out, in, timeout)) return w;
  if (auto w = oneStepAllGather(g, out, in, timeout)) return w;
  c10d::AllgatherOptions opts;
  opts.timeout = timeout;
  at::Tensor wireOut = onWire(out);
  at::Tensor wireIn = onWire(in);
  return g._allgather_base(wireOut, wireIn, opts);
}

WorkPtr broadcastOn(c10d::Backend& g, at::Tensor& t, int64_t root,
                    std::chrono::milliseconds timeout) {
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  opts.timeout = timeout;
  std::vector<at::Tensor> ts{onWire(t)};
  return g.broadcast(ts, opts);
}

WorkPtr reduceOn(c10d::Backend& g, at::Tensor& t, int64_t root, const c10d::ReduceOp& op,
                 std::chrono::milliseconds timeout) {
  c10d::ReduceOptions opts;
  opts.reduceOp = op;
  opts.rootRank = root;
  opts.timeout = timeout;
  std::vector<at::Tensor> ts{reducibleOnWire(t, op, "reduceOn")};
  return g.reduce(ts, opts);
}

WorkPtr scatterOn(c10d::Backend& g, at::Tensor& out, const at::Tensor& rows, int64_t root,
                  std::chrono::milliseconds timeout) {
  c10d::ScatterOptions opts;
  opts.rootRank = root;
  opts.timeout = timeout;
  std::vector<at::Tensor> outs{onWire(out)};
  // c10d wants the per-rank list on the root only (Gloo and NCCL reject it elsewhere).
  std::vector<std::vector<at::Tensor>> ins;
  if (g.getRank() == root) {
    ins.push_back(onWire(rows).unbind(0));
  }
  return g.scatter(outs, ins, opts);
}

WorkPtr gatherOn(c10d::Backend& g, const at::Tensor& rows, at::Tensor& in, int64_t root,
                 std::chrono::milliseconds timeout) {
  c10d::GatherOptions opts;
  opts.rootRank = root;
  opts.timeout = timeout;
  std::vector<at::Tensor> ins{onWire(in)};
  std::vector<std::vector<at::Tensor>> outs;
  if (g.getRank() == root) {
    outs.push_back(onWire(rows).unbind(0));
  }
  return g.gather(outs, ins, opts);
}

void runPipeline(int64_t chunks, const Stages& stages) {
  std::vector<WorkPtr> slow(chunks);
  std::vector<WorkPtr> fast_out(chunks);
  // Up to kSlowStepsInFlight cross-host steps stay in flight while the next chunks' fast_in
  // steps run: the host link then always has queued data, even when one chunk's intra-host
  // step is slowed by busy cores. Only then is the oldest waited and its fast_out issued.
  // Every rank runs this same sequence, so each inner group sees its collectives in one order
  // everywhere.
  const auto drain = [&](int64_t k) {
    waitWork(slow[k]);
    slow[k].reset();
    if (stages.fast_out) {
      fast_out[k] = stages.fast_out(k);
    }
  };
  int64_t drained = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    if (stages.fast_in) {
      waitWork(stages.fast_in(k));
    }
    if (stages.slow) {
      slow[k] = stages.slow(k);
    }
    if (k - drained + 1 >= kSlowStepsInFlight) {
      drain(drained++);
    }
  }
  while (drained < chunks) {
    drain(drained++);
  }
  for (auto& w : fast_out) {
    waitWork(w);
  }
  if (stages.finish) {
    for (int64_t k = 0; k < chunks; ++k) {
      stages.finish(k);
    }
  }
}

}  // namespace torch_topo::backend::hier
