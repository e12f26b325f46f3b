# SPDX-License-Identifier: Apache-2.0
"""The model-facing ops with real communication at world 2 and 4 on one GPU (issue 21 item 4),
each beside the torch feature it competes with, under `python -m torch_topo.emulate --one-gpu`
(2 played hosts, a distinct NCCL_HOSTID per rank):

- overlap: matmul_reduce_scatter's hidden fraction, its inner dimension sized so the matmuls
  take about as long as the reduce-scatters (benchmarks/overlap_worker.py), at the op's
  calibrated chunk count and at 4 chunks, beside torch's symmetric-memory
  `fused_matmul_reduce_scatter` on the same shape (TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1;
  where it cannot run, the row says "not available: <reason>");
- attention: topo's Ulysses and zigzag ring against torch's `context_parallel` on the same ranks
  and inputs, causal, forward + backward time and the largest difference from single-process
  SDPA in float32 (benchmarks/attention_cp_worker.py).

    python benchmarks/rehearsal_ops_gpu.py [--worlds 2 4] [--quick] [--json F]

What the figures mean there: the ranks share one GPU's compute and every byte crosses a loopback
socket (docs/emulator.md), so a hidden fraction says whether the op's streams let NCCL's socket
traffic run under the matmuls, not what a cluster's links would give; the attention times
compare the methods on equal terms, not against a real cluster. Without CUDA it says so, writes
{"skipped": ...} and exits 0 unless --allow-cpu runs the same launches on CPU ranks over Gloo
(a check of the script: torch's symmetric memory and context_parallel then report why they
cannot run). Exits 1 when a launch failed; the figures it got are still printed and saved.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

from rehearsal_gpu import emulate_command, parse_launch_args, rank_env  # noqa: E402

CP = "torch context_parallel"
ATTENTION = ("topo ulysses", "topo ring zigzag", CP)


def _launch(world: int, program: list[str], timeout_s: float, **env: str) -> str | None:
    """Runs `program` on `world` ranks; None when it succeeded, else why not (the end of the
    ranks' output is printed, as the one run on a lent GPU may be all there is)."""
    cmd = emulate_command(world, timeout_s) + [sys.executable, *program]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=rank_env(**env), capture_output=True, text=True)
    print(f"rehearsal_ops_gpu: {os.path.basename(program[0])} at world {world}: exit "
          f"{proc.returncode} after {time.monotonic() - start:.0f} s", flush=True)
    if proc.returncode == 0:
        return None
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    print("\n".join(f"  | {line}" for line in lines[-15:]), flush=True)
    return f"world {world} {os.path.basename(program[0])}: exit {proc.returncode}: " + \
        " / ".join(lines[-3:])


def overlap_rows(world: int, result: dict) -> list[dict]:
    """One row per measurement: topo at the calibrated and at the fixed chunk count, then
    torch's fused op against the same compute-alone and communication-alone times."""
    rows = []
    for run, how in ((result, "calibrated"), (result.get("fixed"), "fixed")):
        if run:
            rows.append({"world": world, "what": f"topo matmul_reduce_scatter, {run['chunks']} "
                         f"chunk(s), {how}", "reason": run["reason"], "shape": run["shape"],
                         "compute_ms": run["t_compute"] * 1e3, "comm_ms": run["t_comm"] * 1e3,
                         "ms": run["t_overlapped"] * 1e3,
                         "hidden_fraction": run["hidden_fraction"]})
    symm = result.get("symm_mem", {"not_available": "did not finish"})
    row = {"world": world, "what": "torch symm_mem fused_matmul_reduce_scatter",
           "shape": result["shape"]}
    if "not_available" in symm:
        row["not_available"] = symm["not_available"]
    else:
        row.update(compute_ms=result["t_compute"] * 1e3, comm_ms=result["t_comm"] * 1e3,
                   ms=symm["t_fused"] * 1e3, hidden_fraction=symm["hidden_fraction"],
                   max_abs_diff_vs_topo=symm["max_abs_diff"])
    rows.append(row)
    return rows


def print_overlap(world: int, device: str, rows: list[dict]) -> None:
    print(f"\n# overlap, world {world} on one {device}: {rows[0]['shape'] if rows else ''}")
    print(f"# {'what':<52} | {'compute ms':>10} | {'comm ms':>8} | {'op ms':>8} | hidden")
    for r in rows:
        if "not_available" in r:
            print(f"  {r['what']:<52} | not available: {r['not_available']}")
            continue
        hidden = "n/a" if r["hidden_fraction"] is None else f"{r['hidden_fraction']:.2f}"
        print(f"  {r['what']:<52} | {r['compute_ms']:>10.2f} | {r['comm_ms']:>8.2f} | "
              f"{r['ms']:>8.2f} | {hidden}")
    calibrated = next((r for r in rows if r["what"].endswith("calibrated")), None)
    if calibrated:
        print(f"  (the calibration's choice: {calibrated['reason']})")


def attention_rows(world: int, records: list[dict]) -> list[dict]:
    """Per method: the time (already the slowest rank's), the largest difference over ranks,
    and context_parallel's time over the method's."""
    rows = []
    cp = records[0].get(CP, {}).get("ms")
    for method in ATTENTION:
        per_rank = [rec.get(method, {"not_available": "did not finish"}) for rec in records]
        missing = next((r["not_available"] for r in per_rank if "not_available" in r), None)
        row = {"world": world, "method": method, "shape": records[0]["shape"]}
        if missing:
            row["not_available"] = missing
        else:
            row.update(ms=per_rank[0]["ms"], cp_over_this=cp / per_rank[0]["ms"] if cp else None,
                       max_abs_diff={n: max(r["max_abs_diff"][n] for r in per_rank)
                                     for n in per_rank[0]["max_abs_diff"]})
        rows.append(row)
    return rows


def print_attention(world: int, device: str, rows: list[dict]) -> None:
    print(f"\n# sequence-parallel attention, world {world} on one {device}: "
          f"{rows[0]['shape'] if rows else ''}, forward + backward")
    print(f"# {'method':<24} | {'ms':>9} | {'cp/this':>7} | max |diff| from SDPA: out, grads")
    for r in rows:
        if "not_available" in r:
            print(f"  {r['method']:<24} | not available: {r['not_available']}")
            continue
        d = r["max_abs_diff"]
        ratio = f"{r['cp_over_this']:>7.2f}" if r["cp_over_this"] else f"{'n/a':>7}"
        print(f"  {r['method']:<24} | {r['ms']:>9.2f} | {ratio} | {d['out']:.2e}, "
              f"{max(d['dq'], d['dk'], d['dv']):.2e}")


def overlap_part(args, world: int, device: str, tmp: str) -> tuple[list[dict], str | None]:
    """matmul_reduce_scatter and torch's fused op at `world`; the symmetric-memory row is left
    out (with the reason) after a world where it did not finish, since a rank stuck in its
    rendezvous holds the launch until the timeout."""
    out = os.path.join(tmp, f"overlap{world}.json")
    symm = [] if args.symm_mem_stuck else ["--symm-mem"]
    print(f"rehearsal_ops_gpu: world {world}, overlap", flush=True)
    failure = _launch(world, [os.path.join(BENCH, "overlap_worker.py"), "--device", device,
                              *symm, "--fixed-chunks", "4", "--json", out,
                              *(["--quick"] if args.quick else [])],
                      args.timeout_s, TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES="1")
    if not os.path.exists(out):
        return [], failure
    with open(out) as f:
        result = json.load(f)
    if args.symm_mem_stuck:
        result["symm_mem"] = {"not_available": args.symm_mem_stuck}
    elif "symm_mem" not in result:
        args.symm_mem_stuck = f"left out: did not finish at world {world}"
    rows = overlap_rows(world, result)
    print_overlap(world, device, rows)
    return rows, failure


def attention_part(args, world: int, device: str, tmp: str) -> tuple[list[dict], str | None]:
    """Ulysses, ring and context_parallel at `world`."""
    out = os.path.join(tmp, f"attention{world}")
    os.makedirs(out)
    print(f"rehearsal_ops_gpu: world {world}, attention", flush=True)
    failure = _launch(world, [os.path.join(BENCH, "attention_cp_worker.py"), "--device",
                              device, "--out", out, *(["--quick"] if args.quick else [])],
                      args.timeout_s)
    records = []
    for r in range(world):
        path = os.path.join(out, f"rank{r}.json")
        if not os.path.exists(path):
            return [], failure
        with open(path) as f:
            records.append(json.load(f))
    rows = attention_rows(world, records)
    print_attention(world, device, rows)
    return rows, failure


PARTS = {"overlap": overlap_part, "attention": attention_part}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--parts", nargs="+", choices=("overlap", "attention"),
                        default=["overlap", "attention"])
    parser.add_argument("--timeout-s", type=float, default=150, help="per launch")
    parser.add_argument("--quick", action="store_true", help="shorter sequence, 3 repetitions")
    args = parse_launch_args(parser, argv)
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.allow_cpu:
        print("rehearsal_ops_gpu: no CUDA device here; nothing measured")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": "no CUDA device"}, f)
        return 0
    report = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch":
              torch.__version__, "overlap": [], "attention": [], "failures": []}
    args.symm_mem_stuck = None
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.worlds:
            for part in args.parts:
                rows, failure = PARTS[part](args, world, "cuda" if cuda else "cpu", tmp)
                report[part] += rows
                if failure:
                    print(f"rehearsal_ops_gpu: {failure}", flush=True)
                    report["failures"].append(failure)
                if args.json:  # after each part: a run cut short keeps what it measured
                    with open(args.json, "w") as f:
                        json.dump(report, f, indent=1)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
