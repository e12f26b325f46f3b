# SPDX-License-Identifier: Apache-2.0
"""topo against plain NCCL at world 2 and 4 on one GPU (issue 21), flat and hierarchical, side
by side: benchmarks/collective_perf.py (topo and its inner NCCL measured interleaved in the same
ranks) under `python -m torch_topo.emulate --one-gpu`, 2 played hosts, once with
TORCH_TOPO_HIERARCHICAL=never, =always and =auto (last, as a deadline cuts the run short), then
one table per world and collective:

    size | NCCL us | topo flat us, NCCL/topo | topo hierarchical us, NCCL/topo | topo auto ...

"auto" is what a user gets: the played cluster's cost model gives the group size ranges, and a
group with ranges runs its flat calls too on topo's internal stream (docs/backend.md), so its
sizes outside the ranges measure that route against plain NCCL, which "never" (the
pass-through) does not.

    python benchmarks/rehearsal_gpu.py [--worlds 2 4] [--max-bytes 64M] [--json F]

What the ratios mean there: every rank shares the one GPU and every byte, "intra-host" ones
included, crosses a loopback socket (docs/emulator.md), so they measure topo's own cost on the
CUDA path (flat: the pass-through; hierarchical: the schedules' extra steps over NCCL), not the
gain a real cluster's faster intra-host links would give. Without CUDA it says so, writes
{"skipped": ...} and exits 0 unless --allow-cpu runs the same launches with Gloo ranks (a check
of the script, not a measurement of interest). GPU_CHECK_NCCL_ENV (NCCL_NAME=VALUE ...) is
passed to each launch as --nccl-env.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANK_PROGRAM = os.path.join(ROOT, "benchmarks", "collective_perf.py")
HOST = os.path.join(ROOT, "tests", "data", "nvidia_smi_topo",
                    "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt")
MODES = ("never", "always", "auto")


def emulate_command(world: int, timeout_s: float) -> list[str]:
    """The launcher's command for `world` ranks on the one GPU as 2 played hosts of HOST, with
    the NCCL settings GPU_CHECK_NCCL_ENV names; the rank program follows."""
    cmd = [sys.executable, "-m", "torch_topo.emulate", "--one-gpu", "--nodes", "2",
           "--procs-per-node", str(world // 2), "--topology", HOST, "--timeout-s",
           str(timeout_s)]
    for item in os.environ.get("GPU_CHECK_NCCL_ENV", "").split():
        cmd += ["--nccl-env", item]
    return [*cmd, "--"]


def rank_env(**extra: str) -> dict[str, str]:
    """This environment without the caller's TORCH_TOPO_* settings, this checkout first on
    PYTHONPATH, and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TOPO_")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
               **extra)
    return env


def run_world(args, world: int, mode: str, out_json: str) -> list[dict]:
    cmd = emulate_command(world, args.timeout_s) + [
        sys.executable, RANK_PROGRAM, "--json", out_json, "--collectives", *args.ops,
        "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes), "--reps",
        str(args.reps)]
    print(f"rehearsal_gpu: world {world}, hierarchical={mode}", flush=True)
    proc = subprocess.run(cmd, env=rank_env(TORCH_TOPO_HIERARCHICAL=mode),
                          stdout=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"world {world}, hierarchical={mode}: launch failed "
                           f"(exit {proc.returncode})")
    with open(out_json) as f:
        return json.load(f)["records"]


def side_by_side(world: int, runs: dict[str, list[dict]]) -> list[dict]:
    """One row per collective and size: the inner backend's time (from the flat run) and topo's
    in each mode, with inner/topo ratios. Prints the tables."""
    rows = []
    key = lambda r: (r["collective"], r["size"])  # noqa: E731
    by_mode = {mode: {key(r): r for r in recs} for mode, recs in runs.items()}
    flat = by_mode["never"]
    inner = next(iter(flat.values()))["inner"] if flat else "inner"
    for op in dict.fromkeys(r["collective"] for r in runs["never"]):
        print(f"\n# {op}, world {world} (2 played hosts), one GPU: {inner} vs topo")
        print(f"# {'size':>10} | {inner + ' us':>10} | {'topo flat us':>12} {'ratio':>6} | "
              f"{'topo hier us':>12} {'ratio':>6} | {'topo auto us':>12} {'ratio':>6}")
        for size in sorted(s for o, s in flat if o == op):
            base = flat[(op, size)]["inner_time_us"]
            row = {"world": world, "collective": op, "bytes": size, "inner": inner,
                   "inner_us": base}
            cells = []
            for mode in MODES:
                rec = by_mode[mode].get((op, size))
                t = rec.get("topo_time_us") if rec else None
                row[f"topo_{mode}_us"] = t
                row[f"ratio_{mode}"] = base / t if t else None
                cells.append(f"{t:>12.1f} {base / t:>6.2f}" if t else f"{'n/a':>12} {'':>6}")
            print(f"  {size:>10} | {base:>10.1f} | " + " | ".join(cells))
            rows.append(row)
    return rows


def parse_launch_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """The options every one-GPU rehearsal benchmark shares, parsed with the caller's own; the
    worlds are played as 2 hosts, so each must be even."""
    parser.add_argument("--allow-cpu", action="store_true",
                        help="without CUDA, run the launches with Gloo ranks (checks the script)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    bad = [w for w in args.worlds if w < 2 or w % 2]
    if bad:
        parser.error(f"--worlds: got {bad[0]}, expected even sizes >= 2 (2 played hosts)")
    return args

def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, ROOT)
    from torch_topo.bench import COLLECTIVES, parse_bytes

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--ops", nargs="+", default=["all_reduce", "all_gather",
                                                     "reduce_scatter"], choices=COLLECTIVES)
    parser.add_argument("--min-bytes", type=parse_bytes, default=4 << 10)
    parser.add_argument("--max-bytes", type=parse_bytes, default=64 << 20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--quick", action="store_true", help="up to 4 MiB, 2 repetitions")
    args = parse_launch_args(parser, argv)
    if args.quick:
        args.max_bytes, args.reps = min(args.max_bytes, 4 << 20), 2
    import torch

    if not torch.cuda.is_available() and not args.allow_cpu:
        print("rehearsal_gpu: no CUDA device here; nothing measured")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": "no CUDA device"}, f)
        return 0
    rows, failures = [], []
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"

    def save() -> None:  # after every world: a deadline may cut the run short
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "failures": failures, "device": device}, f, indent=1)

    with tempfile.TemporaryDirectory() as tmp:
        for world in args.worlds:
            runs = {}
            try:
                for mode in MODES:
                    runs[mode] = run_world(args, world, mode, os.path.join(tmp, f"{world}{mode}"))
            except RuntimeError as exc:  # keep what the other worlds measure
                print(f"rehearsal_gpu: {exc}", flush=True)
                failures.append(str(exc))
            else:
                rows += side_by_side(world, runs)
            save()
    save()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
