# SPDX-License-Identifier: Apache-2.0
"""Rank program of benchmarks/emulated_collectives.py: times all_reduce, all_gather,
reduce_scatter and broadcast over a size sweep on a "topo" group and a plain "gloo" group in the
same processes (one after the other, never overlapping) and has rank 0 write the records as
JSON in benchmarks/collective_perf.py's format. Unlike that script it also runs before the
"topo" backend exists (gloo only, topo fields null).

Sizes follow nccl-tests: the size of all_reduce and broadcast is the buffer, of all_gather the
gathered output and of reduce_scatter the input; busbw = algbw x (2(n-1)/n for all_reduce,
(n-1)/n for all_gather and reduce_scatter, 1 for broadcast).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
_ELEM_BYTES = 4  # float32
_TIME_BUDGET_BYTES = 256 << 20  # iterations per size: about this many bytes in total
_TIMEOUT_S = 600.0  # a 64 MiB gloo all_reduce across interleaved ranks takes ~6 s here


def bus_factor(op: str, world: int) -> float:
    return {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world,
            "reduce_scatter": (world - 1) / world, "broadcast": 1.0}[op]


def make_call(op: str, size_bytes: int, world: int):
    """(numel, call(group)) for one collective of about `size_bytes`, a multiple of world."""
    numel = max(world, size_bytes // _ELEM_BYTES // world * world)
    full = torch.ones(numel)
    shard = torch.ones(numel // world)
    calls = {
        "all_reduce": lambda g: dist.all_reduce(full, group=g),
        "broadcast": lambda g: dist.broadcast(full, src=0, group=g),
        "all_gather": lambda g: ALL_GATHER_SINGLE(full, shard, group=g),
        "reduce_scatter": lambda g: REDUCE_SCATTER_SINGLE(shard, full, group=g),
    }
    return numel, calls[op]


def time_op(call, group, iters: int) -> float:
    """Seconds per call on the slowest rank (which defines the collective's time)."""
    call(group)  # warm-up: connections, buffers
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        call(group)
    dist.barrier(group=group)
    t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def record(op: str, numel: int, world: int, times: dict[str, float]) -> dict:
    """One row in benchmarks/collective_perf.py's record format; topo fields are None when the
    backend is not available."""
    size = numel * _ELEM_BYTES
    row = {"collective": op, "size": size, "count": numel, "type": "float32",
           "redop": "sum" if op in ("all_reduce", "reduce_scatter") else "none", "ranks": world}
    for name in ("topo", "gloo"):
        t = times.get(name)
        row[f"{name}_time_us"] = t * 1e6 if t else None
        row[f"{name}_algbw_GBps"] = size / t / 1e9 if t else None
        row[f"{name}_busbw_GBps"] = size / t / 1e9 * bus_factor(op, world) if t else None
    row["speedup"] = times["gloo"] / times["topo"] if "topo" in times else None
    return row


def main(argv: list[str] | None = None) -> int:
    # The options of benchmarks/collective_perf.py that emulated_collectives.py passes.
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="rank 0 writes the records here")
    parser.add_argument("--collectives", nargs="+", default=OPS, choices=OPS)
    parser.add_argument("--min-bytes", type=int, default=64 << 10)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--factor", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5, help="timed calls per size, at most")
    args = parser.parse_args(argv)
    ops = args.collectives
    timeout = timedelta(seconds=_TIMEOUT_S)
    dist.init_process_group("gloo", timeout=timeout)
    world, rank = dist.get_world_size(), dist.get_rank()
    groups = {"gloo": dist.group.WORLD}
    try:
        import torch_topo  # noqa: F401  (registers the backend)
        if "topo" in dist.Backend.backend_list:
            groups = {"topo": dist.new_group(backend="topo", timeout=timeout), **groups}
    except ImportError as exc:
        print(f"emulated_perf: topo unavailable ({exc}); measuring gloo only", file=sys.stderr)
    records = []
    size = args.min_bytes
    while size <= args.max_bytes:
        iters = max(2, min(args.reps, _TIME_BUDGET_BYTES // size))
        for op in ops:
            numel, call = make_call(op, size, world)
            times = {name: time_op(call, group, iters) for name, group in groups.items()}
            records.append(record(op, numel, world, times))
            if rank == 0:
                print(f"emulated_perf: {op} {numel * _ELEM_BYTES} B: " + ", ".join(
                    f"{n} {t * 1e6:.0f} us" for n, t in times.items()), flush=True)
        size *= args.factor
    if rank == 0:
        with open(args.json, "w") as f:
            json.dump({"version": 1, "records": records}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
