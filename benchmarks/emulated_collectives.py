# SPDX-License-Identifier: Apache-2.0
"""Collective benchmark on an emulated cluster (issue 5 and 13 goals): runs benchmarks/collective_perf.py
under `python -m torch_topo.emulate` for each placement, then prints
nccl-tests tables for "topo" and "gloo", their ratio and the inter-node link lower bound, and
writes --json results and a --plot PNG of busbw against size.

    python benchmarks/emulated_collectives.py --nodes 2 --procs-per-node 4 \\
        --inter-bw 1gbit --inter-delay 1ms --json out.json --plot out.png

Link lower bound with H hosts of equal rank counts joined at rate B (bytes/s per direction):
every host must receive (H-1)/H of the data of an all_gather or reduce_scatter of S bytes and
2(H-1)/H of an all_reduce (its reduce-scatter plus all-gather), and all of a broadcast, so
t >= f x S / B with f = 2(H-1)/H, (H-1)/H, (H-1)/H, 1. For two hosts the all_reduce bound is
S / B: S bytes cross the link each way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from torch_topo.bench.sweep import parse_bytes  # noqa: E402
from torch_topo.cli._options import output_file_problem  # noqa: E402
from torch_topo.emulation.shaping import LinkSpec, parse_rate_bps  # noqa: E402

RANK_PROGRAM = os.path.join(ROOT, "benchmarks", "collective_perf.py")
OP_ORDER = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
PLACEMENTS = ["contiguous", "interleaved"]
GOAL_BYTES = 64 << 20
# 64 MiB float32 all_reduce, topo vs gloo and vs the link bound, per (placement, ranks per
# node): issue 13 for contiguous ranks on 2 x 4 and 2 x 2 emulated hosts, issue 5 interleaved.
GOALS = {("contiguous", 4): (1.4, 0.7), ("contiguous", 2): (1.5, 0.8),
         ("interleaved", 4): (4.0, 0.8)}


def link_factor(op: str, hosts: int) -> float:
    share = (hosts - 1) / hosts
    return {"all_reduce": 2 * share, "all_gather": share, "reduce_scatter": share,
            "broadcast": 1.0}[op]


def run_placement(args, placement: str, out_json: str) -> list[dict]:
    cmd = [sys.executable, "-m", "torch_topo.emulate", "--nodes", str(args.nodes),
           "--procs-per-node", str(args.procs_per_node), "--inter-bw", args.inter_bw,
           "--inter-delay", args.inter_delay, "--placement", placement,
           "--timeout-s", str(args.timeout_s), "--",
           sys.executable, RANK_PROGRAM, "--json", out_json, "--collectives", *args.ops.split(","),
           "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
           "--reps", str(args.reps)]
    print(f"emulated_collectives: {placement}: {os.path.basename(RANK_PROGRAM)} on "
          f"{args.nodes} x {args.procs_per_node} ranks, {args.inter_bw}, {args.inter_delay}",
          flush=True)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"emulated_collectives: {placement} run failed ({proc.returncode})")
    with open(out_json) as f:
        return json.load(f)["records"]


def _cells(rec: dict, name: str) -> str:
    if not rec.get(f"{name}_time_us"):
        return f"{'n/a':>27}"
    return (f"{rec[f'{name}_time_us']:>11.0f} {rec[f'{name}_algbw_GBps']:>7.3f} "
            f"{rec[f'{name}_busbw_GBps']:>7.3f}")


def print_tables(placement: str, records: list[dict], hosts: int, rate_Bps: float) -> list[dict]:
    """nccl-tests style table per collective; returns one summary row per collective and size."""
    summary = []
    ops = [op for op in OP_ORDER if any(r["collective"] == op for r in records)]
    for op in ops:
        rows = sorted((r for r in records if r["collective"] == op), key=lambda r: r["size"])
        print(f"\n# {op}, {placement} placement, {rows[0]['ranks']} ranks on {hosts} hosts")
        print(f"# {'size':>10} {'count':>10} {'type':>8} {'redop':>5} | "
              f"{'topo us':>11} {'algbw':>7} {'busbw':>7} | {'gloo us':>11} {'algbw':>7} "
              f"{'busbw':>7} | {'ratio':>6} {'bound us':>10} {'topo/bnd':>8}")
        for r in rows:
            bound_us = link_factor(op, hosts) * r["size"] / rate_Bps * 1e6
            topo_us = r.get("topo_time_us")
            ratio = r["inner_time_us"] / topo_us if topo_us else None
            bound_frac = bound_us / topo_us if topo_us else None
            print(f"  {r['size']:>10} {r['count']:>10} {r['type']:>8} {r['redop']:>5} | "
                  f"{_cells(r, 'topo')} | {_cells(r, 'inner')} | "
                  + (f"{ratio:>6.2f}" if ratio else f"{'n/a':>6}") + f" {bound_us:>10.0f} "
                  + (f"{bound_frac:>8.2f}" if bound_frac else f"{'n/a':>8}"))
            summary.append({"placement": placement, "op": op, "bytes": r["size"],
                            "topo_us": topo_us, "gloo_us": r["inner_time_us"], "ratio": ratio,
                            "bound_us": bound_us,
                            "gloo_bound_fraction": bound_us / r["inner_time_us"],
                            "topo_bound_fraction": bound_frac,
                            "topo_busbw_GBps": r.get("topo_busbw_GBps"),
                            "gloo_busbw_GBps": r["inner_busbw_GBps"]})
    return summary


def print_goals(summary: list[dict], procs_per_node: int) -> list[dict]:
    goals = []
    print("\n# goals: 64 MiB float32 (ratio = gloo time / topo time; bound = link bound / time)")
    for s in summary:
        if s["bytes"] != GOAL_BYTES:
            continue
        need, fraction = (GOALS.get((s["placement"], procs_per_node), (None, None))
                          if s["op"] == "all_reduce" else (None, None))
        ok = None
        if need is not None and s["ratio"] is not None:
            ok = s["ratio"] >= need and s["topo_bound_fraction"] >= fraction
        verdict = {True: "MET", False: "MISSED", None: "reported"}[ok]
        ratio = f"{s['ratio']:.2f}x" if s["ratio"] else "n/a (no topo)"
        bound = (f"{s['topo_bound_fraction']:.0%}" if s["topo_bound_fraction"] else "n/a")
        target = f" (goal >= {need}x and >= {fraction:.0%} of bound)" if need else ""
        print(f"  {s['op']:15} {s['placement']:12} ratio {ratio:>14}  topo at {bound:>4} of "
              f"bound, gloo at {s['gloo_bound_fraction']:.0%}{target}: {verdict}")
        goals.append({**s, "goal_ratio": need, "goal_bound_fraction": fraction,
                      "verdict": verdict})
    return goals


def plot(summary: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = [op for op in OP_ORDER if any(s["op"] == op for s in summary)]
    fig, axes = plt.subplots(1, len(ops), figsize=(4.5 * len(ops), 3.8), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=True):
        for placement in sorted({s["placement"] for s in summary}):
            pts = [s for s in summary if s["op"] == op and s["placement"] == placement]
            sizes = [p["bytes"] for p in pts]
            ax.plot(sizes, [p["gloo_busbw_GBps"] for p in pts], "--o", label=f"gloo {placement}")
            if all(p["topo_busbw_GBps"] for p in pts):
                ax.plot(sizes, [p["topo_busbw_GBps"] for p in pts], "-o",
                        label=f"topo {placement}")
        ax.set_xscale("log", base=2)
        ax.set_title(op)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--procs-per-node", type=int, default=4)
    parser.add_argument("--inter-bw", default="1gbit")
    parser.add_argument("--inter-delay", default="1ms")
    parser.add_argument("--placements", default=",".join(PLACEMENTS))
    parser.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter,broadcast")
    # Sizes as collective_perf.py and the bench verb take them (64M, 1G).
    parser.add_argument("--min-bytes", type=parse_bytes, default=256 << 10)
    parser.add_argument("--max-bytes", type=parse_bytes, default=64 << 20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=1800)
    parser.add_argument("--json", default=None, help="write all rows and the goals here")
    parser.add_argument("--plot", default=None, help="write a PNG of busbw against size here")
    return parser


def check_args(parser: argparse.ArgumentParser, args) -> None:
    """Usage errors before the first launch: each failed inside the emulator or its ranks, once
    per placement (exit 1), or as a traceback (--inter-bw)."""
    if args.nodes < 1 or args.procs_per_node < 1:
        parser.error(f"--nodes/--procs-per-node: got {args.nodes}/{args.procs_per_node}, "
                     "expected >= 1 each")
    for option, given, known in (("--placements", args.placements, PLACEMENTS),
                                 ("--ops", args.ops, OP_ORDER)):
        unknown = [n for n in given.split(",") if n not in known]
        if unknown:
            # An op outside OP_ORDER was measured and then left out of every table.
            parser.error(f"{option}: got {unknown[0]!r}, expected some of {','.join(known)}")
    if args.min_bytes > args.max_bytes:
        parser.error(f"--min-bytes/--max-bytes: got {args.min_bytes}/{args.max_bytes}, "
                     "expected --min-bytes <= --max-bytes")
    if args.reps < 1:
        parser.error(f"--reps: got {args.reps}, expected >= 1")
    if not args.timeout_s > 0:
        parser.error(f"--timeout-s: got {args.timeout_s}, expected seconds > 0")
    try:
        LinkSpec.parse(args.inter_bw, args.inter_delay)
    except ValueError as exc:
        parser.error(str(exc))
    for option, path in (("--json", args.json), ("--plot", args.plot)):
        if path and (problem := output_file_problem(option, path)):
            parser.error(problem)  # else a traceback once every placement had run


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    rate_Bps = parse_rate_bps(args.inter_bw) / 8
    summary, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for placement in args.placements.split(","):
            records = run_placement(args, placement, os.path.join(tmp, f"{placement}.json"))
            raw[placement] = records
            summary += print_tables(placement, records, args.nodes, rate_Bps)
    goals = print_goals(summary, args.procs_per_node)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args), "link_rate_Bps": rate_Bps, "records": raw,
                       "summary": summary, "goals": goals}, f, indent=1)
    if args.plot:
        plot(summary, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
