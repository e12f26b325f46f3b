# SPDX-License-Identifier: Apache-2.0
"""examples/train_llama.py under torch.profiler: where one training step's time goes.

    python -m torch_topo.emulate --nodes 2 --procs-per-node 4 -- \\
        python benchmarks/step_profile.py --fsdp --dp 2 --tp 4 [--profile-json F] [train_llama args]

Runs the example unchanged, with the profiler on from the second step to the last (the first
pays for warm-up and calibration). Rank 0 prints, for its own process:

- per collective, as the process group's backend reports it ("gloo:*" events of Gloo's worker
  threads; "topo:*" works, issue to completion, for "topo", with the inner Gloo steps they ran
  below, and as "inner" rows the flat ops topo passes straight to Gloo, which record no
  "topo:*" event of their own): count, bytes and time per step (bytes of the first tensor the event records: for
  Gloo's all_gather its input, for "topo"'s gathers their output, so compare counts and times
  across backends, bytes within one);
- per step: wall time, compute (union of the training thread's aten ops outside collective
  calls), the training thread's time issuing collectives, the rest (waiting for
  communication, Python, the optimizer's non-aten work), and the time at least one collective
  (or, for "topo", one of its inner Gloo steps) was in flight.

The profiler adds its own cost to every op (the step is a few percent slower than unprofiled);
compare configurations profiled alike.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict

import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import train_llama  # noqa: E402

from torch_topo.ops.overlap import covered_time  # noqa: E402

STEP = "train_llama.step"
# Element sizes of the dtype names the profiler records (C++ spellings).
_ELEM_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8,
               "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1}


def _clip(span: tuple[float, float], windows: list[tuple[float, float]]) -> list[tuple]:
    return [(max(span[0], a), min(span[1], b)) for a, b in windows
            if span[0] < b and span[1] > a]


def _bytes(event) -> int | None:
    shapes, dtypes = event.input_shapes or [], getattr(event, "input_dtypes", None) or []
    if not shapes or not shapes[0] or not dtypes:
        return None
    numel = 1
    for d in shapes[0]:
        numel *= d
    size = _ELEM_BYTES.get(dtypes[0])
    return numel * size if size else None


def summarize(events, backend: str) -> dict:
    """Per-collective and per-step figures from one process's profiler events (microseconds
    in, seconds out)."""
    steps = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == STEP)
    if not steps:
        return {"steps": 0}
    main_thread = next(e.thread for e in events if e.name == STEP)
    outer = "topo:" if backend == "topo" else "gloo:"
    rows: dict[str, dict] = defaultdict(lambda: {"count": 0, "bytes": 0, "seconds": 0.0,
                                                 "unknown_bytes": 0})
    in_flight, issuing, compute = [], [], []
    for e in events:
        span = (e.time_range.start, e.time_range.end)
        inside = _clip(span, steps)
        if not inside:
            continue
        level = ("collective" if e.name.startswith(outer)
                 else "inner" if backend == "topo" and e.name.startswith("gloo:") else None)
        if level:
            row = rows[(level, e.name)]
            row["count"] += 1
            row["seconds"] += sum(b - a for a, b in inside) / 1e6
            nbytes = _bytes(e)
            if nbytes is None:
                row["unknown_bytes"] += 1
            else:
                row["bytes"] += nbytes
            in_flight += inside  # inner steps too: not every topo op records its own event
        elif e.thread == main_thread and e.name.startswith("c10d::"):
            issuing += inside
        elif e.thread == main_thread and e.name.startswith("aten::"):
            compute.append(span)
    # aten ops nested in a collective call are part of issuing it, not compute.
    compute = [c for c in compute
               if not any(a <= c[0] and c[1] <= b for a, b in issuing)]
    n = len(steps)
    wall = sum(b - a for a, b in steps) / 1e6 / n
    t_compute = covered_time(compute) / 1e6 / n
    t_issue = covered_time(issuing) / 1e6 / n
    per_step = {"wall": wall, "compute": t_compute, "issuing": t_issue,
                "other": max(wall - t_compute - t_issue, 0.0),
                "comm_in_flight": covered_time(in_flight) / 1e6 / n}
    table = [{"level": level, "name": name, "count_per_step": r["count"] / n,
              "bytes_per_step": r["bytes"] / n, "seconds_per_step": r["seconds"] / n,
              "calls_without_bytes": r["unknown_bytes"]}
             for (level, name), r in sorted(rows.items(),
                                            key=lambda kv: (kv[0][0], -kv[1]["seconds"]))]
    return {"steps": n, "backend": backend, "per_step": per_step, "collectives": table}


def print_summary(s: dict) -> None:
    if not s.get("steps"):
        print("profile: no profiled steps")
        return
    p = s["per_step"]
    print(f"\n== where a step goes (rank 0, {s['backend']}, mean of {s['steps']} profiled "
          "steps) ==")
    print(f"wall {p['wall'] * 1e3:.1f} ms = compute {p['compute'] * 1e3:.1f} ms "
          f"+ issuing collectives {p['issuing'] * 1e3:.1f} ms + waiting/other "
          f"{p['other'] * 1e3:.1f} ms; a collective in flight {p['comm_in_flight'] * 1e3:.1f} ms")
    print(f"{'level':<11} {'collective':<34} {'calls':>6} {'KiB':>9} {'ms':>8}  (per step; "
          "times of concurrent calls add up)")
    for r in s["collectives"]:
        kib = f"{r['bytes_per_step'] / 1024:9.0f}" if not r["calls_without_bytes"] else \
            f"{'?':>9}"
        print(f"{r['level']:<11} {r['name']:<34} {r['count_per_step']:>6.1f} {kib} "
              f"{r['seconds_per_step'] * 1e3:>8.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--profile-json", default=None)
    own, rest = p.parse_known_args(argv)
    example_args = train_llama.parse_args(rest)
    state = {"prof": None, "done": 0, "summary": None}

    original_step = train_llama.Trainer.step
    original_mean = train_llama.global_mean

    def step(self, i):
        if i == 1 and self.args.steps > 1:
            state["prof"] = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
            state["prof"].start()
        if state["prof"] is None:
            return original_step(self, i)
        with record_function(STEP):
            out = original_step(self, i)
        state["done"] = i + 1
        return out

    def global_mean(value):
        # Called after the step's time was taken: stopping here keeps the profiler's own
        # processing out of every measured step.
        out = original_mean(value)
        prof = state["prof"]
        if prof is not None and state["done"] == example_args.steps:
            prof.stop()
            state["prof"] = None
            state["summary"] = summarize(prof.events(), dist.get_backend())
            if dist.get_rank() == 0:
                print_summary(state["summary"])
                if own.profile_json:
                    with open(own.profile_json, "w") as f:
                        json.dump(state["summary"], f, indent=1)
        return out

    train_llama.Trainer.step = step
    train_llama.global_mean = global_mean
    return train_llama.main(rest)


if __name__ == "__main__":
    sys.exit(main())
