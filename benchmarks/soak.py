# SPDX-License-Identifier: Apache-2.0
"""Soak test: thousands of mixed collectives (random op, size, dtype, reduce op, root), every
result checked against a value each rank computes locally from the seeded inputs of all ranks.

Under `python -m torch_topo.emulate` (or torchrun) it runs as the launched ranks:

    python -m torch_topo.emulate --nodes 2 --procs-per-node 4 -- python benchmarks/soak.py

Without RANK in the environment it starts `--local-procs` local processes itself. Rank 0 prints
the number of collectives checked and failed (and `--json FILE` writes them); exit status 1 when
any failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torch_topo  # noqa: F401  (registers the "topo" backend)
from torch_topo.cli import OneLineErrorParser
from torch_topo.cli._options import int_at_least, output_file_problem, positive_number
from torch_topo.validation import MAX_LOCAL_PROCESSES

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64]
OPS = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
       "reduce_scatter_tensor", "reduce", "all_to_all_single", "gather", "scatter"]
# torch 2.14 renamed the tensor forms (the old names warn); 2.11 has only the old ones.
ALL_GATHER_SINGLE = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER_SINGLE = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
MAX_NUMEL = 1 << 17  # 512 KiB of float32 per rank: keeps 2,000 calls to minutes on 1 Gbit/s


def _reduce_ops(dtype: torch.dtype) -> list:
    # Values stay small integers so every reduction is exact in every dtype and order: |x| <= 4
    # summed over 8 ranks fits bfloat16's 8-bit mantissa, products use {-1, 1, 2} (<= 2^8).
    ops = [R.SUM, R.MIN, R.MAX, R.PRODUCT]
    if not dtype.is_floating_point:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def _value_range(op) -> tuple[int, int]:
    return (-1, 2) if op == R.PRODUCT else (-4, 4)


def make_input(seed: int, step: int, rank: int, numel: int, dtype: torch.dtype, op) -> torch.Tensor:
    low, high = _value_range(op)
    gen = torch.Generator().manual_seed((seed * 1_000_003 + step) * 4099 + rank)
    t = torch.randint(low, high + 1, (numel,), generator=gen)
    if op == R.PRODUCT:
        t[t == 0] = 1
    return t.to(dtype)


def reduce_local(tensors: list[torch.Tensor], op) -> torch.Tensor:
    """The reduction computed here, in int64 (exact), cast back to the tensors' dtype."""
    stack = torch.stack([t.to(torch.int64) for t in tensors])
    if op == R.SUM:
        out = stack.sum(0)
    elif op == R.PRODUCT:
        out = stack.prod(0)
    elif op == R.MIN:
        out = stack.amin(0)
    elif op == R.MAX:
        out = stack.amax(0)
    else:
        out = stack[0]
        for t in stack[1:]:
            out = {R.BAND: out & t, R.BOR: out | t, R.BXOR: out ^ t}[op]
    return out.to(tensors[0].dtype)


def _pick(rng: random.Random, world: int) -> dict:
    op = rng.choice(OPS)
    dtype = rng.choice(DTYPES)
    numel = int(2 ** rng.uniform(0, 17))  # log-uniform 1 .. MAX_NUMEL elements
    redop = rng.choice(_reduce_ops(dtype))
    return {"op": op, "dtype": dtype, "numel": min(numel, MAX_NUMEL), "redop": redop,
            "root": rng.randrange(world)}


def run_step(seed: int, step: int, case: dict, rank: int, world: int) -> bool:
    """Runs one collective and checks it; True when the result is right."""
    op, dtype, numel, redop, root = (case[k] for k in ("op", "dtype", "numel", "redop", "root"))

    def inp(r: int, salt: int = 0) -> torch.Tensor:
        return make_input(seed, step * 64 + salt, r, numel, dtype, redop)

    everyone = range(world)
    if op == "all_reduce":
        t = inp(rank)
        dist.all_reduce(t, op=redop)
        return torch.equal(t, reduce_local([inp(r) for r in everyone], redop))
    if op == "reduce":
        t = inp(rank)
        dist.reduce(t, dst=root, op=redop)
        return rank != root or torch.equal(t, reduce_local([inp(r) for r in everyone], redop))
    if op == "broadcast":
        t = inp(rank)
        dist.broadcast(t, src=root)
        return torch.equal(t, inp(root))
    if op == "all_gather":
        out = [torch.empty(numel, dtype=dtype) for _ in everyone]
        dist.all_gather(out, inp(rank))
        return all(torch.equal(o, inp(r)) for r, o in zip(everyone, out, strict=True))
    if op == "all_gather_into_tensor":
        out = torch.empty(world * numel, dtype=dtype)
        ALL_GATHER_SINGLE(out, inp(rank))
        return torch.equal(out, torch.cat([inp(r) for r in everyone]))
    if op == "reduce_scatter":
        out = torch.empty(numel, dtype=dtype)
        dist.reduce_scatter(out, [inp(rank, 1 + d) for d in everyone], op=redop)
        return torch.equal(out, reduce_local([inp(r, 1 + rank) for r in everyone], redop))
    if op == "reduce_scatter_tensor":
        out = torch.empty(numel, dtype=dtype)
        full = torch.cat([inp(rank, 1 + d) for d in everyone])
        REDUCE_SCATTER_SINGLE(out, full, op=redop)
        return torch.equal(out, reduce_local([inp(r, 1 + rank) for r in everyone], redop))
    if op == "all_to_all_single":
        out = torch.empty(world * numel, dtype=dtype)
        dist.all_to_all_single(out, torch.cat([inp(rank, 1 + d) for d in everyone]))
        return torch.equal(out, torch.cat([inp(r, 1 + rank) for r in everyone]))
    if op == "gather":
        out = [torch.empty(numel, dtype=dtype) for _ in everyone] if rank == root else None
        dist.gather(inp(rank), out, dst=root)
        return rank != root or all(
            torch.equal(o, inp(r)) for r, o in zip(everyone, out, strict=True))
    if op == "scatter":
        out = torch.empty(numel, dtype=dtype)
        parts = [inp(root, 1 + d) for d in everyone] if rank == root else None
        dist.scatter(out, parts, src=root)
        return torch.equal(out, inp(root, 1 + rank))
    raise ValueError(f"soak: unknown op {op!r}")


def soak(rank: int, world: int, count: int, seed: int, backend: str, timeout_s: float,
         store: dist.Store | None = None) -> dict:
    # Launched ranks use env:// (MASTER_ADDR...); local processes share a FileStore.
    where = {} if store is None else {"store": store, "rank": rank, "world_size": world}
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s), **where)
    rng = random.Random(seed)  # the same sequence on every rank
    failures = []
    t0 = time.monotonic()
    for step in range(count):
        case = _pick(rng, world)
        if not run_step(seed, step, case, rank, world):
            failures.append({"step": step, **{k: str(v) for k, v in case.items()}})
    # Every rank's verdicts, so rank 0 reports failures seen anywhere.
    verdicts = [None] * world
    dist.all_gather_object(verdicts, failures)
    dist.destroy_process_group()
    failed = [f for per_rank in verdicts for f in per_rank]
    return {"backend": backend, "world_size": world, "checked": count * world,
            "collectives": count, "failed": len(failed), "first_failures": failed[:10],
            "seconds": time.monotonic() - t0}


def _report(result: dict, json_path: str | None) -> int:
    print(f"soak ({result['backend']}, {result['world_size']} ranks): "
          f"{result['collectives']} collectives, {result['checked']} rank results checked, "
          f"{result['failed']} failed, {result['seconds']:.1f} s")
    for f in result["first_failures"]:
        print(f"  FAILED {f}")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(result, fh, indent=1)
    return 1 if result["failed"] else 0


def _local_rank_main(rank: int, world: int, args: argparse.Namespace, store_path: str) -> None:
    store = dist.FileStore(store_path, world)
    result = soak(rank, world, args.count, args.seed, args.backend, args.timeout_s, store)
    if rank == 0 and _report(result, args.json):
        sys.exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(description="mixed-collective soak test")
    parser.add_argument("--count", type=int_at_least(1), default=2000,
                        help="collectives (default 2000)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--backend", default="topo", choices=["topo", "gloo"])
    parser.add_argument("--local-procs", default=8,
                        type=int_at_least(1, MAX_LOCAL_PROCESSES, " (each a process, started at once)"),
                        help="processes to start when not launched as ranks (default 8)")
    parser.add_argument("--timeout-s", type=positive_number, default=120.0)
    parser.add_argument("--json", default=None, help="write the result object here (rank 0)")
    args = parser.parse_args(argv)
    if args.json and (problem := output_file_problem("--json", args.json)):
        parser.error(problem)  # else a traceback once the whole soak had run
    if "RANK" in os.environ:
        rank = int(os.environ["RANK"])
        result = soak(rank, int(os.environ["WORLD_SIZE"]), args.count, args.seed, args.backend,
                      args.timeout_s)
        return _report(result, args.json) if rank == 0 else 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            mp.spawn(_local_rank_main, args=(args.local_procs, args, f"{tmp}/store"),
                     nprocs=args.local_procs)
        except mp.ProcessExitedException as exc:
            return exc.exit_code or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
