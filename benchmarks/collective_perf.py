# SPDX-License-Identifier: Apache-2.0
"""nccl-tests-style tables for "topo" and plain Gloo measured side by side in the same processes.

Runs under torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: one rank per
process, e.g. under `python -m torch_topo.emulate`) or, without them, spawns `--procs` local
processes itself. Sizes follow nccl-tests: all_reduce and broadcast move `size` bytes, all_gather
`size` is the gathered output, reduce_scatter `size` is the input, all_to_all `size` is the whole
buffer. busbw factors as nccl-tests defines them: all_reduce 2(n-1)/n, all_gather, reduce_scatter
and all_to_all (n-1)/n, broadcast 1. Times are the slowest rank's median over repetitions, with
topo and Gloo repetitions interleaved so machine noise hits both alike.

    python benchmarks/collective_perf.py --procs 4 --max-bytes 16M --json out.json --plot out.png
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]


def _busbw_factor(name: str, n: int) -> float:
    if name == "all_reduce":
        return 2 * (n - 1) / n
    if name == "broadcast":
        return 1.0
    return (n - 1) / n


def _parse_bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected bytes like 8, 64K, 16M") from None


def _make_op(name: str, nbytes: int, n: int, rank: int, dtype: torch.dtype):
    """A closure issuing one collective of `nbytes` (nccl-tests meaning) on a given group."""
    elem = torch.empty((), dtype=dtype).element_size()
    count = max(n, nbytes // elem // n * n)  # divisible by n for the sharded forms
    if name == "all_reduce":
        t = torch.ones(count, dtype=dtype)
        return count, lambda g: dist.all_reduce(t, group=g)
    if name == "all_gather":
        out, inp = torch.empty(count, dtype=dtype), torch.ones(count // n, dtype=dtype)
        return count, lambda g: dist.all_gather_into_tensor(out, inp, group=g)
    if name == "reduce_scatter":
        out, inp = torch.empty(count // n, dtype=dtype), torch.ones(count, dtype=dtype)
        return count, lambda g: dist.reduce_scatter_tensor(out, inp, group=g)
    if name == "all_to_all":
        out, inp = torch.empty(count, dtype=dtype), torch.ones(count, dtype=dtype)
        return count, lambda g: dist.all_to_all_single(out, inp, group=g)
    if name == "broadcast":
        t = torch.ones(count, dtype=dtype)
        return count, lambda g: dist.broadcast(t, 0, group=g)
    raise ValueError(f"collective_perf: unknown collective {name!r}, expected {COLLECTIVES}")


def _time_block(fn, group, iters: int) -> float:
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        fn(group)
    return (time.perf_counter() - start) / iters


def _measure(fn, topo, gloo, iters: int, reps: int, warmup: int):
    for g in (topo, gloo):
        for _ in range(warmup):
            fn(g)
    t_topo, t_gloo = [], []
    for _ in range(reps):
        t_topo.append(_time_block(fn, topo, iters))
        t_gloo.append(_time_block(fn, gloo, iters))
    local = torch.tensor([statistics.median(t_topo), statistics.median(t_gloo)],
                         dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=gloo)
    return local[0].item(), local[1].item()


def _iters_for(nbytes: int) -> int:
    # About the same wall time per size: many calls for small messages, few for large.
    return max(2, min(200, (8 << 20) // max(nbytes, 1)))


def run_rank(rank: int, size: int, args) -> list[dict]:
    import torch_topo  # noqa: F401  (registers "topo")

    torch.set_num_threads(1)
    gloo = dist.new_group(backend="gloo")
    topo = dist.group.WORLD
    dtype = getattr(torch, args.dtype)
    records = []
    sizes = []
    s = args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= args.factor
    for name in args.collectives:
        for nbytes in sizes:
            count, fn = _make_op(name, nbytes, size, rank, dtype)
            iters = _iters_for(nbytes)
            t_topo, t_gloo = _measure(fn, topo, gloo, iters, args.reps, warmup=2)
            real = count * torch.empty((), dtype=dtype).element_size()
            factor = _busbw_factor(name, size)
            records.append({
                "collective": name, "size": real, "count": count, "type": args.dtype,
                "redop": "sum" if name in ("all_reduce", "reduce_scatter") else "none",
                "ranks": size,
                "topo_time_us": t_topo * 1e6, "gloo_time_us": t_gloo * 1e6,
                "topo_algbw_GBps": real / t_topo / 1e9, "gloo_algbw_GBps": real / t_gloo / 1e9,
                "topo_busbw_GBps": real / t_topo / 1e9 * factor,
                "gloo_busbw_GBps": real / t_gloo / 1e9 * factor,
                "speedup": t_gloo / t_topo,
                "overhead_us": (t_topo - t_gloo) * 1e6,
            })
    return records


def print_tables(records: list[dict]) -> None:
    head = (f"{'size':>10} {'count':>10} {'type':>8} {'redop':>5} | {'topo us':>9} "
            f"{'algbw':>7} {'busbw':>7} | {'gloo us':>9} {'algbw':>7} {'busbw':>7} | "
            f"{'gloo/topo':>9} {'ovh us':>7}")
    for name in dict.fromkeys(r["collective"] for r in records):
        rows = [r for r in records if r["collective"] == name]
        print(f"\n# {name}, {rows[0]['ranks']} ranks (times: slowest rank, median; bw in GB/s)")
        print(head)
        for r in rows:
            print(f"{r['size']:>10} {r['count']:>10} {r['type']:>8} {r['redop']:>5} | "
                  f"{r['topo_time_us']:>9.1f} {r['topo_algbw_GBps']:>7.3f} "
                  f"{r['topo_busbw_GBps']:>7.3f} | {r['gloo_time_us']:>9.1f} "
                  f"{r['gloo_algbw_GBps']:>7.3f} {r['gloo_busbw_GBps']:>7.3f} | "
                  f"{r['speedup']:>9.3f} {r['overhead_us']:>7.1f}")
    big = [r for r in records if r["size"] >= 1 << 20]
    small = [r for r in records if r["size"] <= 4096]
    if big:
        worst = max(1 / r["speedup"] - 1 for r in big)
        med = statistics.median(1 / r["speedup"] - 1 for r in big)
        print(f"\nwrapper overhead at >= 1 MiB: median {100 * med:+.1f}%, worst {100 * worst:+.1f}% "
              "(target < 5%)")
    if small:
        med = statistics.median(r["overhead_us"] for r in small)
        print(f"wrapper overhead per call at <= 4 KiB: median {med:+.1f} us (target < 20 us)")


def plot(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["collective"] for r in records))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.5), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        rows = [r for r in records if r["collective"] == name]
        sizes = [r["size"] for r in rows]
        ax.plot(sizes, [r["topo_busbw_GBps"] for r in rows], "o-", label="topo")
        ax.plot(sizes, [r["gloo_busbw_GBps"] for r in rows], "s--", label="gloo")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{name} ({rows[0]['ranks']} ranks)")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def _report(records: list[dict], args) -> None:
    print_tables(records)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"version": 1, "records": records}, f, indent=1)
    if args.plot:
        plot(records, args.plot)


def _spawned(rank: int, size: int, store_path: str, args, results) -> None:
    import torch_topo  # noqa: F401  (registers "topo" in this spawned process)

    dist.init_process_group("topo", store=dist.FileStore(store_path, size), rank=rank,
                            world_size=size, timeout=timedelta(seconds=300))
    records = run_rank(rank, size, args)
    if rank == 0:
        results.put(records)
    dist.destroy_process_group()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=4, help="local ranks when not under torchrun")
    p.add_argument("--min-bytes", type=_parse_bytes, default=8, help="smallest size (8)")
    p.add_argument("--max-bytes", type=_parse_bytes, default=16 << 20, help="largest size (16M)")
    p.add_argument("--factor", type=int, default=4, help="size step factor (4)")
    p.add_argument("--reps", type=int, default=5, help="interleaved repetitions per size (5)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16"])
    p.add_argument("--collectives", nargs="+", default=COLLECTIVES, choices=COLLECTIVES)
    p.add_argument("--json", help="write the records here")
    p.add_argument("--plot", help="write a busbw-vs-size PNG here")
    args = p.parse_args(argv)
    if args.factor < 2 or args.min_bytes < 1 or args.max_bytes < args.min_bytes:
        p.error("need --factor >= 2 and 1 <= --min-bytes <= --max-bytes")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        import torch_topo  # noqa: F401

        dist.init_process_group("topo", timeout=timedelta(seconds=300))
        records = run_rank(dist.get_rank(), dist.get_world_size(), args)
        if dist.get_rank() == 0:
            _report(records, args)
        dist.destroy_process_group()
        return 0
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_spawned,
                             args=(r, args.procs, os.path.join(tmp, "store"), args, results))
                 for r in range(args.procs)]
        for proc in procs:
            proc.start()
        records = None
        while records is None:  # a rank that dies must not leave us waiting
            try:
                records = results.get(timeout=5)
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    for p in procs:
                        p.kill()
                    raise SystemExit("collective_perf: a rank failed (its traceback is above)") from None
        for proc in procs:
            proc.join(timeout=60)
    _report(records, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
