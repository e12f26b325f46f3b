# SPDX-License-Identifier: Apache-2.0
"""nccl-tests-style tables for "topo" and its plain inner backend measured side by side in the
same processes, plus the wrapper's overhead against the inner backend.

The measuring is `torch_topo.bench` (the code behind `python -m torch_topo bench`, which adds the
link checks): sizes, busbw factors and timing rules are described in torch_topo/bench/sweep.py.
Runs under torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: one rank per
process, e.g. under `python -m torch_topo.emulate`) or, without them, spawns `--procs` local CPU
processes itself.

    python benchmarks/collective_perf.py --procs 4 --max-bytes 16M --json out.json --plot out.png
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from torch_topo.bench import (  # noqa: E402
    COLLECTIVES,
    DTYPES,
    BenchOptions,
    SweepConfig,
    format_tables,
    parse_bytes,
    plot,
    run_bench,
)


def print_overhead(records: list[dict]) -> None:
    big = [r for r in records if r["size"] >= 1 << 20]
    small = [r for r in records if r["size"] <= 4096]
    if big:
        slowdowns = [1 / r["ratio"] - 1 for r in big]
        print(f"wrapper overhead at >= 1 MiB: median {100 * statistics.median(slowdowns):+.1f}%, "
              f"worst {100 * max(slowdowns):+.1f}% (target < 5%)")
    if small:
        med = statistics.median(r["overhead_us"] for r in small)
        print(f"wrapper overhead per call at <= 4 KiB: median {med:+.1f} us (target < 20 us)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=4, help="local ranks when not under torchrun")
    p.add_argument("--min-bytes", type=parse_bytes, default=8, help="smallest size (8)")
    p.add_argument("--max-bytes", type=parse_bytes, default=16 << 20, help="largest size (16M)")
    p.add_argument("--factor", type=int, default=4, help="size step factor (4)")
    p.add_argument("--reps", type=int, default=5, help="interleaved repetitions per size (5)")
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--collectives", nargs="+", default=list(COLLECTIVES), choices=COLLECTIVES)
    p.add_argument("--json", help="write the records here")
    p.add_argument("--plot", help="write a busbw-vs-size PNG here")
    args = p.parse_args(argv)
    try:
        args.sweep = SweepConfig(collectives=tuple(args.collectives), min_bytes=args.min_bytes,
                                 max_bytes=args.max_bytes, factor=args.factor, reps=args.reps,
                                 dtype=args.dtype)
    except ValueError as exc:
        p.error(str(exc))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    launched = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    result = run_bench(BenchOptions(sweep=args.sweep, links=False),
                       None if launched else args.procs)
    if result is None:  # not rank 0
        return 0
    records = result["collectives"]
    print(format_tables(records, args.reps))
    print_overhead(records)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"version": 2, "records": records}, f, indent=1)
    if args.plot:
        plot(records, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
