# SPDX-License-Identifier: Apache-2.0
"""Training throughput of the same program over plain Gloo and over "topo", side by side, on
the 2 x 4 emulated cluster (1 Gbit/s, 1 ms between nodes): DDP, FSDP2 with tensor parallelism
(tp x dp, through the overlap ops), FSDP2 with Ulysses and with ring-attention sequence
parallelism (sp x dp); plus the overlap ops' hidden fraction with their calibrated chunks.

    python benchmarks/train_compare.py [--quick] [--only tp4] [--profile] [--[no-]overlap]
        [--json out.json]

Each configuration is two launches of examples/train_llama.py with identical options except
`--backend` (median step time over the steps after the first). Both use the planned mesh of
torch_topo.init_device_mesh and the overlap ops with their calibrated chunk counts, so the only
difference is the process group: what "topo" adds on a row is named in its note. `--profile`
runs every launch under benchmarks/step_profile.py and prints where each step's time goes.
Without root or without torch_topo.emulate the ranks run as local processes (no slow link), and
the table says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from torch_topo.cli._options import output_file_problem
from torch_topo.emulation.shaping import LinkSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "train_llama.py")
PROFILED = os.path.join(ROOT, "benchmarks", "step_profile.py")
NO_ALL_REDUCE = os.path.join(ROOT, "benchmarks", "ddp_floor.py")
BACKENDS = ("gloo", "topo")

# name, data-parallel degree, example options (the same over both backends), what "topo"
# changes in that program. All use the same model, global batch (GLOBAL_BATCH sequences per
# step, split over dp) and optimizer.
# Every configuration below is laid out for this many ranks (dp8, tp4 x dp2, sp4 x dp2).
WORLD = 8
CONFIGS = [
    ("DDP dp8", 8, ["--ddp"],
     "hierarchical all-reduce of the gradient bucket (inside the size rule's ranges)"),
    ("FSDP2 tp4 x dp2", 2, ["--fsdp", "--tp", "4"],
     "reduce-scatter as one exchange of half the bytes (Gloo: an all-reduce), all-gather in one "
     "step (Gloo: P-1), on the tp groups and the dp pairs"),
    ("FSDP2 Ulysses sp4 x dp2", 2, ["--fsdp", "--sp", "4"],
     "FSDP2's all-gather and reduce-scatter on the dp pairs as one exchange; all-to-all as "
     "Gloo's"),
    ("FSDP2 ring sp4 x dp2", 2, ["--fsdp", "--sp", "4", "--ring"],
     "FSDP2's all-gather and reduce-scatter on the dp pairs as one exchange; send/recv as "
     "Gloo's"),
]


def launcher(nodes: int, procs: int, bw: str, delay: str) -> tuple[list[str], str]:
    """The command prefix that runs nodes x procs ranks, and a note on what it emulates."""
    if importlib.util.find_spec("torch_topo.emulate") is not None and os.geteuid() == 0:
        return ([sys.executable, "-m", "torch_topo.emulate", "--nodes", str(nodes),
                 "--procs-per-node", str(procs), "--inter-bw", bw, "--inter-delay", delay, "--"],
                f"emulated cluster {nodes} x {procs}, {bw} / {delay} between nodes")
    why = "not root" if os.geteuid() != 0 else "torch_topo.emulate not available"
    return ([sys.executable, "-m", "torch.distributed.run", "--standalone",
             "--nproc-per-node", str(nodes * procs)],
            f"local processes ({nodes * procs} ranks, one host: {why}; no slow link)")


def backend_available(name: str) -> bool:
    import torch.distributed as dist

    import torch_topo  # noqa: F401

    return name in dist.Backend.backend_list


def run_one(prefix: list[str], name: str, options: list[str], common: list[str], steps: int,
            index: int, total: int, timeout: float, profile: bool, floor: bool = False) -> dict:
    """Runs one configuration with a live progress line; returns the example's JSON result
    (with the step profile under "profile" when profiled). `floor`: DDP's gradient all-reduce
    removed (benchmarks/ddp_floor.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        prof = os.path.join(tmp, "profile.json")
        program = [PROFILED, "--profile-json", prof] if profile else [EXAMPLE]
        if floor:
            program = [NO_ALL_REDUCE, EXAMPLE]
        cmd = [*prefix, sys.executable, *program, *options, *common, "--json", out]
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env)
        log = []
        for line in proc.stdout:
            log.append(line)
            m = re.match(r"step (\d+):", line)
            done = int(m.group(1)) + 1 if m else None
            if done is not None:
                bar = "#" * (20 * done // steps)
                print(f"\r[{index}/{total}] {name:<36} [{bar:<20}] step {done}/{steps} "
                      f"{time.monotonic() - start:5.0f} s", end="", flush=True)
            if time.monotonic() - start > timeout:
                proc.kill()
        proc.wait()
        print()
        if proc.returncode != 0 or not os.path.exists(out):
            tail = "".join(log[-25:])
            return {"error": f"exit {proc.returncode}", "log": tail}
        with open(out) as f:
            result = json.load(f)
        if profile and os.path.exists(prof):
            with open(prof) as f:
                result["profile"] = json.load(f)
        return result


def overlap_measurement(prefix: list[str], quick: bool, timeout: float) -> dict:
    """Runs benchmarks/overlap_worker.py on the same ranks; returns rank 0's figures."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "overlap.json")
        worker = os.path.join(ROOT, "benchmarks", "overlap_worker.py")
        cmd = [*prefix, sys.executable, worker, "--json", out] + (["--quick"] if quick else [])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        print("[overlap] matmul_reduce_scatter with comm ~ compute ...", flush=True)
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if res.returncode != 0 or not os.path.exists(out):
            return {"error": f"exit {res.returncode}", "log": (res.stdout + res.stderr)[-2000:]}
        with open(out) as f:
            return json.load(f)


def ratio_text(r: dict, base: dict) -> str:
    if "error" in r or "error" in base or not base.get("tokens_per_s"):
        return "n/a"
    return f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x"


def print_table(rows: list[tuple[str, str, str, dict]], note: str, profiled: bool) -> list:
    """One row per configuration and backend; returns topo's ratios to the same program over
    gloo."""
    print(f"\n== training throughput ({note}"
          + ("; under torch.profiler" if profiled else "") + ") ==")
    print(f"{'configuration':<24} {'backend':<7} {'median step ms':>14} {'tokens/s':>9} "
          f"{'vs same over gloo':>17} {'vs DDP/gloo':>11} {'loss':>4} {'ckpt':>4}  note")
    ddp = rows[0][3]
    gloo_of = {name: r for name, backend, _, r in rows if backend == "gloo"}
    ratios = []
    for name, backend, what, r in rows:
        if "error" in r:
            print(f"{name:<24} {backend:<7} failed: {r['error']}")
            continue
        same = gloo_of.get(name, {})
        vs_same = ratio_text(r, same)
        if backend == "topo" and vs_same != "n/a":
            ratios.append(r["tokens_per_s"] / same["tokens_per_s"])
        loss_ok = r["max_loss_diff"] <= r["loss_tolerance"]
        row_note = f"topo adds: {what}" if backend == "topo" else "plain inner backend"
        print(f"{name:<24} {backend:<7} {r['median_step_s'] * 1e3:>14.1f} "
              f"{r['tokens_per_s']:>9.0f} {vs_same:>17} {ratio_text(r, ddp):>11} "
              f"{'ok' if loss_ok else 'NO':>4} {'ok' if r['checkpoint_ok'] else 'NO':>4}  "
              f"{row_note}")
    return ratios


def print_floor(floor: dict, gloo_ddp: dict, topo_ddp: dict) -> None:
    """The DDP row's floor: the same launch with no gradient all-reduce at all."""
    if "error" in floor:
        print(f"DDP floor launch failed: {floor['error']}\n{floor['log']}")
        return
    t = floor["median_step_s"]
    line = f"DDP with no gradient all-reduce at all (the floor): {t * 1e3:.1f} ms per step"
    if "error" not in gloo_ddp:
        line += (f"; DDP over gloo over it, the most any backend can gain on that row: "
                 f"{gloo_ddp['median_step_s'] / t:.2f}x")
    if "error" not in topo_ddp and topo_ddp["median_step_s"] < t:
        # Separate launches: the machine's load moves every row between them, the floor too.
        line += (f" (topo's DDP row, {topo_ddp['median_step_s'] * 1e3:.1f} ms, came in below "
                 "it: launches of this machine vary by more than that gap; docs/example.md)")
    print(line)


def print_overlap(o: dict) -> None:
    tried = ", ".join(f"{c}: {t * 1e3:.1f} ms" for c, t in o["calibration"].items())
    print(f"\n== overlap ops (matmul_reduce_scatter, {o['shape']}, over {o['backend']}) ==\n"
          f"calibrated chunks {o['chunks']} (slowest rank's median per chunk count: {tried}; "
          f"{o['reason']})\nat {o['chunks']} chunk(s): compute alone "
          f"{o['t_compute'] * 1e3:.1f} ms, comm alone {o['t_comm'] * 1e3:.1f} ms, op "
          f"{o['t_overlapped'] * 1e3:.1f} ms -> "
          + (f"hidden fraction {o['hidden_fraction']:.2f}; " if o["hidden_fraction"] is not None
             else "one chunk: the unchunked op, nothing overlapped; ") +
          f"unchunked op {o['t_unchunked'] * 1e3:.1f} ms (chosen op at "
          f"{o['t_unchunked'] / o['t_overlapped']:.2f}x its speed)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small model, 12 steps per launch (about 4 min)")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--procs-per-node", type=int, default=4)
    p.add_argument("--inter-bw", default="1gbit")
    p.add_argument("--inter-delay", default="1ms")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    p.add_argument("--only", default=None,
                   help="run only configurations whose name contains this text (e.g. tp4)")
    p.add_argument("--profile", action="store_true",
                   help="run under torch.profiler and print where each step's time goes")
    p.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None,
                   help="measure the overlap ops' hidden fraction at their calibrated chunk "
                        "count in a separate launch (default: on, off with --quick)")
    p.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                   help="also run DDP with its gradient all-reduce removed: the step no "
                        "backend can beat, and gloo's step over it, the most any can gain")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    # The first two or three steps of a launch run up to twice as long (connections and
    # allocators warming up): twelve steps keep them from moving the median.
    steps = args.steps or (12 if args.quick else 16)
    if steps < 2:
        p.error(f"--steps: got {steps}, expected >= 2 (the first step is left out)")
    # Each of these failed every launch in turn (nine on --quick), then printed a table of
    # failures with exit 1.
    if args.nodes < 1 or args.procs_per_node < 1 or args.nodes * args.procs_per_node != WORLD:
        p.error(f"--nodes x --procs-per-node: got {args.nodes} x {args.procs_per_node}, "
                f"expected {WORLD} ranks in all (dp8, tp4 x dp2, sp4 x dp2)")
    try:
        LinkSpec.parse(args.inter_bw, args.inter_delay)
    except ValueError as exc:
        p.error(str(exc))
    if not args.timeout > 0:
        p.error(f"--timeout: got {args.timeout}, expected seconds > 0")
    if args.json and (problem := output_file_problem("--json", args.json)):
        p.error(problem)  # else a traceback at the end
    # 8 query / 4 K/V heads: tp4 and sp4 both divide the K/V heads.
    model = (["--dim", "64", "--layers", "2", "--seq-len", "64"] if args.quick
             else ["--dim", "128", "--layers", "4", "--ffn-dim", "384", "--seq-len", "128"]) \
        + ["--heads", "8", "--kv-heads", "4"]
    global_batch = 16 if args.quick else 32
    common = [*model, "--steps", str(steps), "--check-steps", "2"]
    prefix, note = launcher(args.nodes, args.procs_per_node, args.inter_bw, args.inter_delay)
    print(f"train_compare: {note}; {steps} steps per launch (median of the last "
          f"{steps - 1})", flush=True)

    configs = [c for c in CONFIGS if args.only is None or args.only in c[0]]
    if not configs:
        p.error(f"--only: got {args.only!r}, expected part of one of "
                f"{[c[0] for c in CONFIGS]}")
    backends = [b for b in BACKENDS if b != "topo" or backend_available("topo")]
    if "topo" not in backends:
        print("note: backend 'topo' is not registered in this build; its rows are skipped")
    launches = [(name, backend, what, dp, options) for name, dp, options, what in configs
                for backend in backends]
    rows = [(name, backend, what,
             run_one(prefix, f"{name} / {backend}",
                     [*options, "--backend", backend, "--dp", str(dp),
                      "--batch", str(global_batch // dp)],
                     common, steps, i + 1, len(launches), args.timeout, args.profile))
            for i, (name, backend, what, dp, options) in enumerate(launches)]
    ddp_config = next((c for c in configs if "--ddp" in c[2]), None)
    floor = {}
    if args.floor and ddp_config is not None:
        name, dp, options, _ = ddp_config
        # Without the all-reduce the ranks' models drift apart: nothing to check.
        unchecked = [*model, "--steps", str(steps), "--check-steps", "0", "--no-checkpoint"]
        floor = run_one(prefix, f"{name} / no all-reduce (floor)",
                        [*options, "--backend", "gloo", "--dp", str(dp), "--batch",
                         str(global_batch // dp)], unchecked, steps, len(launches) + 1,
                        len(launches) + 1, args.timeout, False, floor=True)
    with_overlap = args.overlap if args.overlap is not None else not args.quick
    overlap = overlap_measurement(prefix, args.quick, args.timeout) if with_overlap else {}

    ratios = print_table(rows, note, args.profile)
    if floor:
        ddp = {b: r for n, b, _, r in rows if n == ddp_config[0]}
        print_floor(floor, ddp["gloo"], ddp["topo"])
    for name, backend, _, r in rows:
        if "error" in r:
            print(f"\n{name} over {backend} failed:\n{r['log']}")
    for name, backend, _, r in rows:
        o = r.get("overlap", {})
        if o.get("t_wall", 0) > 0:
            chunks = sorted({c for _, _, c in r.get("overlap_chunks", [])})
            # At one chunk compute and collective run back to back by design: no fraction.
            hidden = o.get("hidden_fraction") if chunks != [1] else None
            print(f"{name} over {backend}: overlap ops at calibrated chunks "
                  f"{'/'.join(map(str, chunks)) or '?'}: {o['t_wall'] * 1e3:.1f} ms per step "
                  f"(compute {o['t_compute'] * 1e3:.1f} ms, comm {o['t_comm'] * 1e3:.1f} ms"
                  + (f", hidden fraction {hidden:.2f}" if hidden is not None else
                     "; one chunk everywhere: the unchunked op, nothing to hide") + ")")
    if "error" in overlap:
        print(f"\noverlap measurement failed:\n{overlap['log']}")
    elif overlap:
        print_overlap(overlap)
    if args.profile:
        from step_profile import print_summary

        for name, backend, _, r in rows:
            if "profile" in r:
                print(f"\n-- {name} over {backend} --", end="")
                print_summary(r["profile"])
    if ratios:
        print(f"\ntopo vs the same program over gloo: worst {min(ratios):.2f}x, "
              f"best {max(ratios):.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"note": note, "steps": steps,
                       "rows": [{"configuration": n, "backend": b, "topo_adds": w, **r}
                                for n, b, w, r in rows],
                       "topo_vs_gloo": ratios, "overlap": overlap,
                       "ddp_floor": floor}, f, indent=1)
    failed = any("error" in r for *_, r in rows) or "error" in overlap
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
