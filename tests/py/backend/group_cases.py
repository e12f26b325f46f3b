# SPDX-License-Identifier: Apache-2.0
"""The group around the ops, run on every rank of a RankPool against a plain Gloo group over the
same ranks (an empty list passes): barrier and sequence numbers, object collectives, subgroups
over non-contiguous ranks, and the decision log.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from gloo_reference import _diff, ref_reduce, seeded, topo_op


def barrier_and_seq(rank, size, ref):
    bad = []
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    before = backend._get_sequence_number_for_group()
    dist.barrier()
    t = torch.ones(1)
    dist.all_reduce(t)
    after = backend._get_sequence_number_for_group()
    if after - before != 2:
        bad.append(f"sequence number moved by {after - before}, expected 2")
    if dist.get_backend() != "topo":
        bad.append(f"get_backend() = {dist.get_backend()}")
    if backend.name() != "topo":
        bad.append(f"backend name {backend.name()}")
    return bad


def object_collectives(rank, size, ref):
    bad = []
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "x": [rank] * rank})
    if objs != [{"rank": r, "x": [r] * r} for r in range(size)]:
        bad.append(f"all_gather_object {objs}")
    box = [f"from {rank}"]
    dist.broadcast_object_list(box, src=size - 1)
    if box != [f"from {size - 1}"]:
        bad.append(f"broadcast_object_list {box}")
    out = [None]
    dist.scatter_object_list(out, [f"to {r}" for r in range(size)] if rank == 0 else None, src=0)
    if out != [f"to {rank}"]:
        bad.append(f"scatter_object_list {out}")
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(rank * 10, gathered, dst=0)
    if rank == 0 and gathered != [r * 10 for r in range(size)]:
        bad.append(f"gather_object {gathered}")
    return bad


def subgroups(rank, size, ref):
    """new_group over non-contiguous ranks (even ranks, and the reversed odd ranks)."""
    bad = []
    even = list(range(0, size, 2))
    odd = list(range(1, size, 2))[::-1]
    g_even = dist.new_group(even)
    g_odd = dist.new_group(odd) if odd else None
    r_even = dist.new_group(even, backend="gloo")
    r_odd = dist.new_group(odd, backend="gloo") if odd else None
    mine, mine_ref = (g_even, r_even) if rank in even else (g_odd, r_odd)
    if dist.get_backend(mine) != "topo":
        bad.append(f"subgroup backend {dist.get_backend(mine)}")
    for op in ("SUM", "AVG", "MAX"):
        x = seeded(rank, (6,), torch.float32, salt=11)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, op=topo_op(op, None), group=mine)
        gop, scale = ref_reduce(op)
        dist.all_reduce(b, op=gop, group=mine_ref)
        if scale:
            scale(b, dist.get_world_size(mine))
        _diff(f"subgroup all_reduce {op}", a, b, bad)
    n = dist.get_world_size(mine)
    x = seeded(rank, (2,), torch.float64)
    got = [torch.empty_like(x) for _ in range(n)]
    want = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(got, x, group=mine)
    dist.all_gather(want, x, group=mine_ref)
    for i in range(n):
        _diff(f"subgroup all_gather [{i}]", got[i], want[i], bad)
    root = (even if rank in even else odd)[-1]
    a = seeded(rank, (3,), torch.float32)
    b = a.clone()
    dist.broadcast(a, root, group=mine)
    dist.broadcast(b, root, group=mine_ref)
    _diff("subgroup broadcast (global root)", a, b, bad)
    return bad


def decisions_logged(rank, size, ref):
    """runCollective records (op, bytes, choice); without levels every op stays flat."""
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    backend.set_hierarchical_thresholds("cpu", {"allreduce": [(0, None)], "allgather": [(0, None)]})
    bad = []
    x = torch.ones(10, dtype=torch.float64)
    dist.all_reduce(x)
    out = torch.empty(10 * size, dtype=torch.float64)
    dist.all_gather_into_tensor(out, x)
    dist.broadcast(x, 0)
    got = backend.last_decisions()[-3:]
    want = [("allreduce", 80, "flat"), ("_allgather_base", 80, "flat"), ("broadcast", 80, "flat")]
    if got != want:
        bad.append(f"decisions {got}, expected {want}")
    backend.set_hierarchical_thresholds("cpu", {})
    return bad
