# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of "topo" against its own inner backend, side by side in one run.

Each size runs a loop of many identical calls on the "topo" world group and on a plain group of
the inner backend over the same ranks, loops interleaved (which goes first alternates) so
machine noise hits both alike, and reports the time per call, the difference (topo minus
plain) and the ratio:

- CPU: `--procs` local processes (default 2; `--procs 1` leaves out the network and the
  peers' scheduling, so the delta is the wrapper's own host cost), Gloo as the plain group,
  wall clock around the loop of blocking calls; the slowest rank's median over `--reps` loops,
  and the best loop's (on a loaded machine the best loop is the closest to the code's own
  cost). A second plain Gloo group over the same ranks is timed in the same rotation as the
  noise floor: "gloo/gloo" is the ratio two identical groups show, so a topo ratio inside its
  spread is no measured difference. Sizes 4 B up to `--cpu-max-bytes` (default 1 MiB: larger
  messages measure Gloo's copies, not the wrapper).
- CUDA (when a GPU is present): one process on cuda:0 (world size 1, the issue 16 setup), NCCL
  as the plain group, `init_process_group(device_id=...)`; device time per call from CUDA events
  around the loop and host time per call from the wall clock of the issuing loop. Sizes 4 B up
  to `--gpu-max-bytes` (default 256 MiB).

Without CUDA the CPU part runs alone and says so. Targets (issue 16): CUDA within +2 us per
call of plain NCCL, CPU within +20 us of plain Gloo for small messages.

    python benchmarks/wrapper_overhead.py                     # both parts where possible
    python benchmarks/wrapper_overhead.py --cpu-max-bytes 64K --reps 9 --json out.json
    python benchmarks/wrapper_overhead.py --no-cpu --ops all_reduce all_gather --json gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_topo.bench.sweep import alternating, parse_bytes, rotated, size_series

OPS = ["all_reduce", "broadcast", "all_gather"]
CPU_TARGET_US = 20.0
GPU_TARGET_US = 2.0


def _call(op: str, nbytes: int, n: int, device: torch.device):
    """A closure issuing one blocking `op` of `nbytes` per rank (float32) on a given group."""
    count = max(1, nbytes // 4)
    if op == "all_reduce":
        t = torch.ones(count, device=device)
        return lambda g: dist.all_reduce(t, group=g)
    if op == "broadcast":
        t = torch.ones(count, device=device)
        return lambda g: dist.broadcast(t, 0, group=g)
    if op == "all_gather":
        out, inp = torch.empty(count * n, device=device), torch.ones(count, device=device)
        return lambda g: dist.all_gather_into_tensor(out, inp, group=g)
    raise ValueError(f"wrapper_overhead: unknown op {op!r}, expected one of {OPS}")


def _iters(nbytes: int, most: int) -> int:
    # Many calls for small messages (the overhead is per call), fewer where the copy dominates.
    return max(5, min(most, (32 << 20) // max(nbytes, 1)))


# ---- CPU: local Gloo ranks ----------------------------------------------------------------

def _cpu_loop(fn, group, iters: int) -> float:
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        fn(group)
    return (time.perf_counter() - start) / iters


def _cpu_rank(rank: int, size: int, store_path: str, args, results) -> None:
    import torch_topo  # noqa: F401  (registers "topo" in this spawned process)

    torch.set_num_threads(1)
    dist.init_process_group("topo", store=dist.FileStore(store_path, size), rank=rank,
                            world_size=size, timeout=timedelta(seconds=300))
    topo, gloo, control = (dist.group.WORLD, dist.new_group(backend="gloo"),
                           dist.new_group(backend="gloo"))
    groups = (topo, gloo, control)
    cpu = torch.device("cpu")
    rows = []
    for op in args.ops:
        for nbytes in size_series(4, args.cpu_max_bytes, args.factor):
            fn = _call(op, nbytes, size, cpu)
            iters = _iters(nbytes, args.cpu_iters)
            for g in groups:
                _cpu_loop(fn, g, max(3, iters // 10))
            times = [[], [], []]
            for rep in range(args.reps):
                for k in rotated(rep, range(3)):
                    times[k].append(_cpu_loop(fn, groups[k], iters))
            local = torch.tensor([statistics.median(t) for t in times] + [min(t) for t in times],
                                 dtype=torch.float64) * 1e6
            dist.all_reduce(local, op=dist.ReduceOp.MAX, group=gloo)
            topo_us, plain_us, control_us, topo_best_us, plain_best_us, control_best_us = (
                local.tolist())
            rows.append({"part": "cpu", "op": op, "bytes": nbytes, "ranks": size,
                         "calls": iters, "plain": "gloo", "topo_us": topo_us,
                         "plain_us": plain_us, "control_us": control_us,
                         "topo_best_us": topo_best_us, "plain_best_us": plain_best_us,
                         "control_best_us": control_best_us})
    if rank == 0:
        results.put(rows)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def run_cpu(args) -> list[dict]:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_cpu_rank,
                             args=(r, args.procs, os.path.join(tmp, "store"), args, results))
                 for r in range(args.procs)]
        for p in procs:
            p.start()
        rows = results.get(timeout=3600)
        for p in procs:
            p.join(timeout=60)
    return rows


# ---- CUDA: one rank, CUDA events --------------------------------------------------------

def _gpu_loop(fn, group, iters: int) -> tuple[float, float]:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(group)
    host = (time.perf_counter() - t0) / iters
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3 / iters, host


def _gpu_rank(store_path: str, args, results) -> None:
    import torch_topo  # noqa: F401

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("topo", store=dist.FileStore(store_path, 1), rank=0, world_size=1,
                            device_id=dev, timeout=timedelta(seconds=300))
    topo, nccl = dist.group.WORLD, dist.new_group([0], backend="nccl")
    rows = []
    for op in args.ops:
        for nbytes in size_series(4, args.gpu_max_bytes, args.factor):
            fn = _call(op, nbytes, 1, dev)
            iters = _iters(nbytes, args.gpu_iters)
            for g in (topo, nccl):
                _gpu_loop(fn, g, max(3, iters // 5))
            meas = {"topo": [], "nccl": []}
            for rep in range(args.reps):
                for first in alternating(rep, True, False):  # True: topo
                    meas["topo" if first else "nccl"].append(
                        _gpu_loop(fn, topo if first else nccl, iters))
            rows.append({
                "part": "cuda", "op": op, "bytes": nbytes, "ranks": 1, "calls": iters,
                "plain": "nccl",
                "topo_us": statistics.median(d for d, _ in meas["topo"]) * 1e6,
                "plain_us": statistics.median(d for d, _ in meas["nccl"]) * 1e6,
                "topo_host_us": statistics.median(h for _, h in meas["topo"]) * 1e6,
                "plain_host_us": statistics.median(h for _, h in meas["nccl"]) * 1e6,
            })
    results.put(rows)
    dist.destroy_process_group()


def run_gpu(args) -> list[dict]:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        p = ctx.Process(target=_gpu_rank, args=(os.path.join(tmp, "store"), args, results))
        p.start()
        rows = results.get(timeout=3600)
        p.join(timeout=60)
    return rows


# ---- report ------------------------------------------------------------------------------

def _fmt_bytes(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def print_table(rows: list[dict]) -> None:
    for part in dict.fromkeys(r["part"] for r in rows):
        sub = [r for r in rows if r["part"] == part]
        plain = sub[0]["plain"]
        extra = ("host", "topo_host_us", "plain_host_us") if part == "cuda" else (
            "best", "topo_best_us", "plain_best_us")
        clock = "CUDA events" if part == "cuda" else "wall clock, slowest rank"
        print(f"\n# {part}: topo vs plain {plain}, {sub[0]['ranks']} ranks, us per call "
              f"(median of loops, {clock})")
        head = (f"{'op':>10} {'size':>9} {'calls':>6} | {'topo':>9} {plain:>9} {'delta':>8} "
                f"{'ratio':>6}")
        head += f" | {extra[0] + ' topo':>9} {extra[0] + ' ' + plain:>9} {'delta':>8}"
        control = "control_us" in sub[0]
        if control:
            head += f" | {plain + '/' + plain:>9} {extra[0]:>6}"
        print(head)
        for r in sub:
            line = (f"{r['op']:>10} {_fmt_bytes(r['bytes']):>9} {r['calls']:>6} | "
                    f"{r['topo_us']:>9.1f} {r['plain_us']:>9.1f} "
                    f"{r['topo_us'] - r['plain_us']:>+8.1f} {r['topo_us'] / r['plain_us']:>6.2f}")
            line += (f" | {r[extra[1]]:>9.1f} {r[extra[2]]:>9.1f} "
                     f"{r[extra[1]] - r[extra[2]]:>+8.1f}")
            if control:
                line += (f" | {r['control_us'] / r['plain_us']:>9.2f} "
                         f"{r['control_best_us'] / r['plain_best_us']:>6.2f}")
            print(line)
        target = GPU_TARGET_US if part == "cuda" else CPU_TARGET_US
        for op in dict.fromkeys(r["op"] for r in sub):
            small = [r for r in sub if r["op"] == op and r["bytes"] <= 4096]
            if small:
                deltas = [statistics.median(r[a] - r[b] for r in small)
                          for a, b in (("topo_us", "plain_us"), (extra[1], extra[2]))]
                print(f"{op}: median delta at <= 4 KiB {deltas[0]:+.1f} us per call "
                      f"({extra[0]}: {deltas[1]:+.1f} us; target <= +{target:g} us)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="+", default=["all_reduce"], choices=OPS)
    p.add_argument("--procs", type=int, default=2, help="CPU ranks (local processes), >= 1")
    p.add_argument("--cpu-max-bytes", type=parse_bytes, default=1 << 20)
    p.add_argument("--gpu-max-bytes", type=parse_bytes, default=256 << 20)
    p.add_argument("--factor", type=int, default=4, help="size step (multiplier)")
    p.add_argument("--cpu-iters", type=int, default=500, help="calls per loop, small sizes")
    p.add_argument("--gpu-iters", type=int, default=200, help="calls per loop, small sizes")
    p.add_argument("--reps", type=int, default=7, help="loops per size and backend")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU part")
    p.add_argument("--json", help="write every row to this file")
    args = p.parse_args(argv)
    if args.procs < 1 or args.factor < 2 or args.reps < 1:
        p.error("--procs and --reps must be >= 1, --factor >= 2")
    rows = [] if args.no_cpu else run_cpu(args)
    if torch.cuda.is_available() and dist.is_nccl_available():
        rows += run_gpu(args)
    else:
        print("wrapper_overhead: no CUDA device (or no NCCL): " +
              ("nothing measured (--no-cpu)" if args.no_cpu else "CPU part only"))
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"version": 1, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
