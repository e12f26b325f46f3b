# SPDX-License-Identifier: Apache-2.0
"""What the one-GPU benchmark scripts share (layer: Python package, CUDA only): CUDA-event
timing, an NCCL world of one, and a driver that prints and saves each case's rows as the case
ends (a lease may cut a run short, and one failing case must not cost the others' figures)."""

from __future__ import annotations

import argparse
import json
import socket
import statistics
from collections.abc import Callable

import torch
import torch.distributed as dist

__all__ = ["cuda_ms", "init_nccl_world_of_one", "run_gpu_script"]


def cuda_ms(fn, reps: int, calls: int = 1, warmup: int = 2) -> float:
    """Milliseconds per call of `fn`: the median over `reps` of CUDA-event spans around `calls`
    calls in a row, after `warmup` calls. One call per span counts the host's work before the
    first kernel as well; several in a row let the host issue ahead, as in a training step."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def init_nccl_world_of_one() -> dist.ProcessGroup:
    """The default group as NCCL with this process as its only rank, on GPU 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, is_master=True)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    return dist.group.WORLD


def run_gpu_script(argv, description: str, name: str,
                   cases: Callable[[list, int], list[Callable[[], None]]],
                   print_rows: Callable[[list], None], reps: tuple[int, int] = (5, 20)) -> int:
    """The main of a one-GPU benchmark: `--quick` (reps[0] repetitions, else reps[1]) and
    `--json PATH`; without CUDA it says so and returns 0. `cases(rows, reps)` returns the
    cases, each appending its rows to `rows`; a failing case becomes an error row."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"{name}: no CUDA device here; nothing to measure")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": "no CUDA device"}, f)
        return 0
    count = reps[0] if args.quick else reps[1]
    print(f"# {name} on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, median of "
          f"{count} (CUDA events)")
    rows: list = []
    for case in cases(rows, count):
        done = len(rows)
        try:
            case()
        except Exception as err:  # noqa: BLE001 - reported as a row, the run goes on
            rows.append({"what": "error", "error": f"{type(err).__name__}: {err}"})
            torch.cuda.empty_cache()
        print_rows(rows[done:])
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                           "reps": count, "rows": rows}, f, indent=1)
    return 0
