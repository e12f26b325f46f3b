# SPDX-License-Identifier: Apache-2.0
"""Cases on how "topo" routes an op (run on every rank of a RankPool; an empty list passes):
which ops pass straight to the inner backend, and which split source new groups get."""

from __future__ import annotations

import torch
import torch.distributed as dist
from gloo_reference import R, _diff, seeded


def split_source_takes_request() -> bool:
    """torch 2.15 added `_get_split_source(pg, requested_backend)`; older releases take `pg`."""
    import inspect

    import torch.distributed.distributed_c10d as c10d

    return len(inspect.signature(c10d._get_split_source.__wrapped__).parameters) > 1


def split_source(fn, group, requested="topo"):
    """`fn` (torch's `_get_split_source` or our guard) as torch calls it for a child of backend
    `requested`; releases before 2.15 pick without it."""
    return fn(group, requested) if split_source_takes_request() else fn(group)


def split_source_alike(rank, size, ref):
    """Every rank, in or out of the new groups, finds no split source in the topo world group
    (torch alone would pick the TopoBackend before 2.15; 2.15 splits only with a bound device,
    which CPU groups lack); Gloo and topo children of ranks [0, 1] work."""
    import torch.distributed.distributed_c10d as c10d

    bad = []
    world = dist.group.WORLD
    own = split_source(c10d._get_split_source.__wrapped__, world)
    if type(own).__name__ != "TopoBackend" and not split_source_takes_request():
        bad.append("torch's own split source is not the TopoBackend: the test proves nothing")
    if split_source(c10d._get_split_source, world) is not None:
        bad.append("a split source was found for a topo parent")
    pair = [0, 1]
    for backend in ("gloo", None):
        group = dist.new_group(pair, backend=backend)
        if rank in pair:
            x = seeded(rank, (4,), torch.int64)
            want = seeded(0, (4,), torch.int64) + seeded(1, (4,), torch.int64)
            dist.all_reduce(x, group=group)
            _diff(f"all_reduce on a {backend or 'topo'} child of topo", x, want, bad)
    return bad


def pass_through_on_cpu(rank, size, ref):
    """Flat ops without an epilogue return Gloo's own work (no "topo:" profiler range); AVG
    (composed), coalesced ops and point-to-point (TopoWork keeps a future) still wrap."""
    from torch.profiler import profile

    def topo_ranges(fn):
        with profile() as prof:
            fn()
        return {e.name for e in prof.events() if e.name.startswith("topo:")}

    bad = []
    t = seeded(rank, (8,), torch.float32)
    if got := topo_ranges(lambda: dist.broadcast(t, 0)):
        bad.append(f"flat broadcast was wrapped: {got}")
    if "topo:allreduce" not in topo_ranges(lambda: dist.all_reduce(t, op=R.AVG)):
        bad.append("AVG all_reduce (SUM + local scaling) was not wrapped")
    if size > 1:
        peer = (rank + 1) % size, (rank - 1) % size
        got = torch.empty_like(t)
        ranges = topo_ranges(lambda: [w.wait() for w in (dist.irecv(got, peer[1]),
                                                         dist.isend(t, peer[0]))])
        if not {"topo:send", "topo:recv"} <= ranges:
            bad.append(f"CPU point-to-point was not wrapped: {ranges}")
    return bad
