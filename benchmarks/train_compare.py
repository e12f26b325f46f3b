# SPDX-License-Identifier: Apache-2.0
"""Training throughput side by side: plain DDP over Gloo, the same DDP over "topo", FSDP2 tp x dp
over Gloo, and "topo" with its plan, tensor parallelism through the overlap ops and Ulysses
sequence parallelism, on the 2 x 4 emulated cluster (1 Gbit/s, 1 ms between nodes); plus the
overlap ops' hidden fraction where their communication and compute take about the same time.

    python benchmarks/train_compare.py [--quick] [--json out.json]

Each configuration is one launch of examples/train_llama.py (median step time over the steps
after the first). Without root or without torch_topo.emulate the ranks run as local processes
(no slow link), and the table says so.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "train_llama.py")

# name, data-parallel degree, example options. All use the same model, global batch
# (GLOBAL_BATCH sequences per step, split over dp) and optimizer.
CONFIGS = [
    ("DDP over gloo", 8, ["--backend", "gloo", "--ddp"]),
    # The same DDP program with backend="topo": its gradient all-reduce takes the two-level
    # schedule the cost model picks for the 1 ms host link.
    ("topo: DDP, hierarchical all-reduce", 8, ["--backend", "topo", "--ddp"]),
    ("FSDP2 tp4 x dp2 over gloo", 2, ["--backend", "gloo", "--fsdp", "--tp", "4",
                                      "--chunks", "1"]),
    ("topo: plan + tp4 overlap x dp2", 2, ["--backend", "topo", "--fsdp", "--tp", "4"]),
    ("topo: plan + Ulysses sp4 x dp2", 2, ["--backend", "topo", "--fsdp", "--sp", "4"]),
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
            index: int, total: int, timeout: float) -> dict:
    """Runs one configuration with a live progress line; returns the example's JSON result."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [*prefix, sys.executable, EXAMPLE, *options, *common, "--json", out]
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
            return json.load(f)


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


def print_table(rows: list[tuple[str, dict]], note: str) -> None:
    print(f"\n== training throughput ({note}) ==")
    print(f"{'configuration':<36} {'median step ms':>15} {'tokens/s':>10} {'vs DDP':>7} "
          f"{'loss ok':>8} {'ckpt':>5}")
    base = rows[0][1].get("tokens_per_s")
    for name, r in rows:
        if "error" in r:
            print(f"{name:<36} {'failed: ' + r['error']:>15}")
            continue
        ratio = r["tokens_per_s"] / base if base else float("nan")
        loss_ok = r["max_loss_diff"] <= r["loss_tolerance"]
        print(f"{name:<36} {r['median_step_s'] * 1e3:>15.1f} {r['tokens_per_s']:>10.0f} "
              f"{ratio:>6.2f}x {'yes' if loss_ok else 'NO':>8} "
              f"{'ok' if r['checkpoint_ok'] else 'NO':>5}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small model, few steps (~2-3 min)")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--procs-per-node", type=int, default=4)
    p.add_argument("--inter-bw", default="1gbit")
    p.add_argument("--inter-delay", default="1ms")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    steps = args.steps or (8 if args.quick else 12)
    # 8 query / 4 K/V heads: tp4 and sp4 both divide the K/V heads.
    model = (["--dim", "64", "--layers", "2", "--seq-len", "64"] if args.quick
             else ["--dim", "128", "--layers", "4", "--ffn-dim", "384", "--seq-len", "128"]) \
        + ["--heads", "8", "--kv-heads", "4"]
    global_batch = 16 if args.quick else 32
    common = [*model, "--steps", str(steps), "--check-steps", "2"]
    prefix, note = launcher(args.nodes, args.procs_per_node, args.inter_bw, args.inter_delay)
    print(f"train_compare: {note}; {steps} steps per configuration", flush=True)

    configs = [c for c in CONFIGS if "topo" not in c[2] or backend_available("topo")]
    if len(configs) < len(CONFIGS):
        print("note: backend 'topo' is not registered in this build; its rows are skipped")
    rows = [(name, run_one(prefix, name,
                           [*options, "--dp", str(dp), "--batch", str(global_batch // dp)],
                           common, steps, i + 1, len(configs), args.timeout))
            for i, (name, dp, options) in enumerate(configs)]
    overlap = overlap_measurement(prefix, args.quick, args.timeout)

    print_table(rows, note)
    for name, r in rows:
        if "error" in r:
            print(f"\n{name} failed:\n{r['log']}")
    if "error" in overlap:
        print(f"\noverlap measurement failed:\n{overlap['log']}")
    else:
        print(f"\n== overlap ops (matmul_reduce_scatter, {overlap['shape']}, chunks "
              f"{overlap['chunks']}) ==\ncompute alone {overlap['t_compute'] * 1e3:.1f} ms, "
              f"comm alone {overlap['t_comm'] * 1e3:.1f} ms, overlapped "
              f"{overlap['t_overlapped'] * 1e3:.1f} ms -> hidden fraction "
              f"{overlap['hidden_fraction']:.2f} (goal 0.60); unchunked op "
              f"{overlap['t_unchunked'] * 1e3:.1f} ms")
    ddp = rows[0][1].get("tokens_per_s")
    best = max((r.get("tokens_per_s", 0) for n, r in rows if "topo" in n), default=0)
    if ddp and best:
        print(f"best topo configuration: {best / ddp:.2f}x plain DDP over gloo tokens/s "
              "(goal 1.5x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"note": note, "rows": dict(rows), "overlap": overlap}, f, indent=1)
    return 0 if all("error" not in r for _, r in rows) and "error" not in overlap else 1


if __name__ == "__main__":
    sys.exit(main())
