# SPDX-License-Identifier: Apache-2.0
"""Rank program of benchmarks/emulated_collectives.py: times all_reduce, all_gather,
reduce_scatter and broadcast over a size sweep on a "topo" group and a plain "gloo" group in the
same processes (one after the other, never overlapping) and has rank 0 write the rows as JSON.

Sizes follow nccl-tests: the size of all_reduce and broadcast is the buffer, of all_gather the
gathered output and of reduce_scatter the input; busbw = algbw x (2(n-1)/n for all_reduce,
(n-1)/n for all_gather and reduce_scatter, 1 for broadcast).
"""

from __future__ import annotations

import argparse
import json
import os
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


def bus_factor(op: str, world: int) -> float:
    return {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world,
            "reduce_scatter": (world - 1) / world, "broadcast": 1.0}[op]


def _make_call(op: str, size_bytes: int, world: int, group):
    numel = max(world, size_bytes // _ELEM_BYTES // world * world)
    if op == "all_reduce":
        buf = torch.ones(numel)
        return lambda: dist.all_reduce(buf, group=group), numel
    if op == "broadcast":
        buf = torch.ones(numel)
        return lambda: dist.broadcast(buf, src=0, group=group), numel
    shard = torch.ones(numel // world)
    full = torch.ones(numel)
    if op == "all_gather":
        return lambda: ALL_GATHER_SINGLE(full, shard, group=group), numel
    return lambda: REDUCE_SCATTER_SINGLE(shard, full, group=group), numel


def time_op(op: str, size_bytes: int, group, world: int, iters: int) -> dict:
    call, numel = _make_call(op, size_bytes, world, group)
    call()  # warm-up: connections, buffers
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    dist.barrier(group=group)
    seconds = (time.perf_counter() - t0) / iters
    # The slowest rank defines the collective's time.
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    nbytes = numel * _ELEM_BYTES
    algbw = nbytes / t.item() / 1e9
    return {"op": op, "bytes": nbytes, "count": numel, "type": "float", "redop":
            "sum" if op in ("all_reduce", "reduce_scatter") else "none",
            "iters": iters, "time_us": t.item() * 1e6, "algbw_GBps": algbw,
            "busbw_GBps": algbw * bus_factor(op, world)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="rank 0 writes the rows here")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--min-bytes", type=int, default=64 << 10)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--step-factor", type=int, default=4)
    parser.add_argument("--max-iters", type=int, default=10)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    ops = args.ops.split(",")
    if any(op not in OPS for op in ops):
        raise SystemExit(f"--ops: got {args.ops!r}, expected a subset of {','.join(OPS)}")
    timeout = timedelta(seconds=args.timeout_s)
    dist.init_process_group("gloo", timeout=timeout)
    world, rank = dist.get_world_size(), dist.get_rank()
    groups = {"gloo": dist.group.WORLD}
    try:
        import torch_topo  # noqa: F401  (registers the backend)
        if "topo" in dist.Backend.backend_list:
            groups = {"topo": dist.new_group(backend="topo", timeout=timeout), **groups}
    except ImportError as exc:
        print(f"emulated_perf: topo unavailable ({exc}); measuring gloo only", file=sys.stderr)
    rows = []
    size = args.min_bytes
    while size <= args.max_bytes:
        iters = max(2, min(args.max_iters, _TIME_BUDGET_BYTES // size))
        for op in ops:
            for name, group in groups.items():
                row = time_op(op, size, group, world, iters)
                rows.append({"backend": name, "world_size": world, **row})
                if rank == 0:
                    print(f"{name:5} {op:15} {row['bytes']:>10} B {row['time_us']:>12.0f} us "
                          f"busbw {row['busbw_GBps']:.4f} GB/s", flush=True)
        size *= args.step_factor
    if rank == 0:
        with open(args.json, "w") as f:
            json.dump({"world_size": world, "env_topology_file": os.environ.get(
                "TORCH_TOPO_FILE"), "rows": rows}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
