# SPDX-License-Identifier: Apache-2.0
"""Functional collectives (torch.distributed._functional_collectives), their autograd forms and
DTensor on a CPU DeviceMesh, each run on the "topo" world group and on a plain Gloo group over
the same ranks (run on every rank of a RankPool, flat or hierarchical by the pool's config).

Every case returns the problems it saw on this rank (empty: topo matched). Integer-valued data
throughout, so every summation order gives the same bits and results are compared exactly; a
call Gloo refuses must fail with the same error kind on "topo".
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from op_coverage import _outcome, _same
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor


def _ints(rank: int, shape, dtype=torch.float32, salt: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(31 * rank + salt)
    return torch.randint(-8, 9, shape, generator=g).to(dtype)


def _waited(t):
    return fc.wait_tensor(t) if isinstance(t, fc.AsyncCollectiveTensor) else t


def _with_grad(rank, fn, x):
    """fn(x)'s value and x's gradient under a rank-dependent upstream gradient."""
    x = x.clone().requires_grad_(True)
    y = _waited(fn(x))
    weight = torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape) * (rank + 1)
    (y * weight).sum().backward()
    return y.detach(), x.grad


def _funcol_calls(rank: int, size: int) -> dict:
    """name -> fn(group) over this rank's inputs: dim-0 and dim-1 forms, transposed and sliced
    inputs, uneven and empty all-to-all blocks, zero-element tensors."""
    ins = [(rank + j) % 3 for j in range(size)]  # rows rank sends to j
    outs = [(j + rank) % 3 for j in range(size)]  # rows j sends to rank
    grad_ins = [n + 1 for n in ins]
    grad_outs = [n + 1 for n in outs]
    x = _ints(rank, (2 * size, 3))
    return {
        "all_reduce_transposed": lambda g: fc.all_reduce(_ints(rank, (4, 6)).t(), "sum", g),
        "all_reduce_avg": lambda g: fc.all_reduce(_ints(rank, (7,)), "avg", g),
        "all_reduce_max_int": lambda g: fc.all_reduce(_ints(rank, (7,), torch.int64), "max", g),
        "all_reduce_empty": lambda g: fc.all_reduce(torch.empty(0, 3), "sum", g),
        "all_gather_dim1_sliced": lambda g: fc.all_gather_tensor(
            _ints(rank, (3, 4))[:, ::2], 1, g),
        "all_gather_transposed": lambda g: fc.all_gather_tensor(_ints(rank, (3, 4)).t(), 0, g),
        "all_gather_empty": lambda g: fc.all_gather_tensor(torch.empty(2, 0), 1, g),
        "reduce_scatter_dim1": lambda g: fc.reduce_scatter_tensor(
            _ints(rank, (3, 2 * size)), "sum", 1, g),
        "reduce_scatter_transposed_avg": lambda g: fc.reduce_scatter_tensor(
            _ints(rank, (3, 2 * size)).t(), "avg", 0, g),
        "reduce_scatter_empty": lambda g: fc.reduce_scatter_tensor(torch.empty(size, 0), "sum",
                                                                   0, g),
        "all_to_all_even_transposed": lambda g: fc.all_to_all_single(
            _ints(rank, (3, 2 * size)).t(), None, None, g),
        "all_to_all_uneven": lambda g: fc.all_to_all_single(
            _ints(rank, (sum(ins), 2)), outs, ins, g),
        "all_to_all_empty": lambda g: fc.all_to_all_single(torch.empty(0, 2), [0] * size,
                                                           [0] * size, g),
        "broadcast_transposed": lambda g: fc.broadcast(_ints(rank, (4, 2)).t(), size - 1, g),
        "broadcast_complex": lambda g: fc.broadcast(
            torch.complex(_ints(rank, (3,)), _ints(rank, (3,), salt=1)), 0, g),
        "all_gather_autograd": lambda g: _with_grad(
            rank, lambda t: fc.all_gather_tensor_autograd(t, 1, g), _ints(rank, (2, 3))),
        "reduce_scatter_autograd": lambda g: _with_grad(
            rank, lambda t: fc.reduce_scatter_tensor_autograd(t, "sum", 0, g), x),
        "all_to_all_autograd_uneven": lambda g: _with_grad(
            rank, lambda t: fc.all_to_all_single_autograd(t, grad_outs, grad_ins, g),
            _ints(rank, (sum(grad_ins), 2))),
        "waits_out_of_order": lambda g: list(reversed(
            [_waited(t) for t in reversed([fc.all_reduce(_ints(rank, (3,), salt=i), "sum", g)
                                           for i in range(4)])])),
    }


def _compare(rank, size, ref, calls: dict) -> list[str]:
    bad = []
    for name, fn in calls.items():
        got = _outcome(lambda r, s, g, fn=fn: _materialize(fn(g)), rank, size, dist.group.WORLD)
        want = _outcome(lambda r, s, g, fn=fn: _materialize(fn(g)), rank, size, ref)
        if got[0] == want[0] == "ok":
            same = _same(got[1], want[1])
        else:
            same = got[0] == want[0] and got[1] == want[1]
        if not same:
            bad.append(f"{name}: topo {repr(got)[:300]} gloo {repr(want)[:300]}")
    return bad


def _materialize(value):
    """Waited, local, detached copies (DTensors as their local shard and placements)."""
    if isinstance(value, DTensor):
        return [_materialize(value.to_local()), str(value.placements)]
    if isinstance(value, torch.Tensor):
        return _waited(value).detach().clone()
    if isinstance(value, (list, tuple)):
        return [_materialize(v) for v in value]
    return value


def funcol(rank, size, ref):
    return _compare(rank, size, ref, _funcol_calls(rank, size))


_PLACEMENTS = {"S0": Shard(0), "S1": Shard(1), "R": Replicate(), "P": Partial(),
               "Pmax": Partial("max")}


def _dtensor(rank, mesh, name, shape):
    x = _ints(0, shape, salt=5)  # the same full tensor on every rank
    placement = _PLACEMENTS[name]
    if isinstance(placement, Partial):
        # Local pieces whose reduction is x: x on rank 0 and zeros elsewhere (sum), x minus 0
        # or 1 (max).
        local = (torch.zeros_like(x) if rank else x.clone()) if name == "P" else x - rank % 2
        return DTensor.from_local(local, mesh, [placement], run_check=False)
    return distribute_tensor(x, mesh, [placement])


def _dtensor_calls(rank: int, size: int) -> dict:
    calls = {}
    # Even and uneven shapes (size + 1 rows, 2 * size - 1 columns: the last shard is short).
    for shape in ((2 * size, 2 * size), (size + 1, 2 * size - 1)):
        for src, dst in itertools.product(_PLACEMENTS, ["S0", "S1", "R", "P"]):
            if src != dst:
                calls[f"redistribute {src}->{dst} {shape}"] = (
                    lambda m, src=src, dst=dst, shape=shape: (
                        lambda d: [d, d.full_tensor()])(
                        _dtensor(rank, m, src, shape).redistribute(m, [_PLACEMENTS[dst]])))

    def matmul(mesh):
        # Column-parallel then row-parallel weights, a replicated input, and the backward pass.
        x = distribute_tensor(_ints(0, (3, 4 * size), salt=1), mesh,
                              [Replicate()]).requires_grad_(True)
        a = distribute_tensor(_ints(0, (4 * size, 2 * size), salt=2), mesh,
                              [Shard(1)]).requires_grad_(True)
        c = distribute_tensor(_ints(0, (2 * size, 5), salt=3), mesh,
                              [Shard(0)]).requires_grad_(True)
        y = (x @ a) @ c
        (y * y).sum().backward()
        return [y.full_tensor(), x.grad.full_tensor(), a.grad, c.grad]

    calls["matmul and backward"] = matmul
    return calls


def dtensor(rank, size, ref):
    """DTensor on a 1-D CPU mesh over "topo" against the same mesh over Gloo."""
    meshes = {id(dist.group.WORLD): DeviceMesh.from_group(dist.group.WORLD, "cpu"),
              id(ref): DeviceMesh.from_group(ref, "cpu")}
    calls = {name: (lambda g, fn=fn: fn(meshes[id(g)]))
             for name, fn in _dtensor_calls(rank, size).items()}
    return _compare(rank, size, ref, calls)


def _mixed_inputs(rank: int, size: int) -> list[torch.Tensor]:
    # int64 values past float32's 24-bit mantissa: a pass through a float32 buffer rounds them.
    return [torch.arange(2 * size, dtype=torch.float32) + 3 * rank,
            torch.arange(3 * size, dtype=torch.int64) + (1 << 40) + 7 * rank,
            torch.arange(size, dtype=torch.float64) / 4 + rank]


def mixed_dtype_reduce_scatter_coalesced(rank, size, ref):
    """reduce_scatter_tensor_coalesced over tensors of several dtypes, which plain Gloo reduces
    each in its own dtype (torch 2.11 to 2.15; funcol's reduce_scatter_tensor_coalesced issues
    it): "topo" refused it ("coalesces one dtype only"). Checked against Gloo's own call and
    against the sums of every rank's inputs, rebuilt here."""
    every = [_mixed_inputs(r, size) for r in range(size)]
    want = [sum(inputs[k] for inputs in every).chunk(size)[rank] for k in range(len(every[0]))]

    def by_backend(r, s, group):
        inputs = _mixed_inputs(r, s)
        outputs = [torch.empty(t.numel() // s, dtype=t.dtype) for t in inputs]
        opts = dist.ReduceScatterOptions()
        opts.reduceOp = dist.ReduceOp.SUM
        group.reduce_scatter_tensor_coalesced(outputs, inputs, opts).wait()
        return outputs

    def by_funcol(r, s, group):
        return [fc.wait_tensor(t) for t in fc.reduce_scatter_tensor_coalesced(
            _mixed_inputs(r, s), "sum", [0, 0, 0], group)]

    bad = []
    for name, fn in (("ProcessGroup", by_backend), ("funcol", by_funcol)):
        got = _outcome(fn, rank, size, dist.group.WORLD)
        gloo = _outcome(fn, rank, size, ref)
        if not (got[0] == "ok" and _same(got[1], want)):
            bad.append(f"{name}: topo {repr(got)[:300]}, want {want}")
        if not (gloo[0] == "ok" and _same(gloo[1], want)):
            bad.append(f"{name}: the Gloo reference itself gave {repr(gloo)[:300]}")
    return bad
