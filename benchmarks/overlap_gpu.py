# SPDX-License-Identifier: Apache-2.0
"""The overlap ops on one CUDA GPU against the torch code they replace, side by side in one run:
`matmul_reduce_scatter` vs `x @ w.T` then `dist.reduce_scatter_tensor`, `all_gather_matmul` vs
`dist.all_gather_into_tensor` then `@ w.T`, forward at the calibrated chunk count and at fixed
ones, and forward+backward against torch's autograd-aware functional collectives
(`reduce_scatter_tensor_autograd`, `all_gather_tensor_autograd`).

Usage: python benchmarks/overlap_gpu.py [--quick] [--json PATH]

One GPU means an NCCL world of one: the collective is a device copy, so the table shows what
the ops' chunking, streams and autograd cost on top of the plain calls, which is what a
tensor-parallel user pays at any world size before any overlap can pay back. Times are CUDA-event
medians of ten calls in a row. Without CUDA it says so and exits 0. Run by scripts/gpu_check.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


_CALLS = 10


def _ms(fn, reps: int) -> float:
    """Milliseconds per call: the median over reps of CUDA-event spans around _CALLS calls in
    a row (3 warm-up calls first, the first of which calibrates chunks=None). Calls in a row, as
    in a training step, where the host issues ahead of the GPU: a lone call timed between two
    events would add the host's launch latency to both sides."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(_CALLS):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / _CALLS)
    return statistics.median(times)


def _torch_matmul_reduce_scatter(x, w, group, out):
    dist.reduce_scatter_tensor(out, x @ w.t(), group=group)
    return out


def _torch_all_gather_matmul(x, w, group, full):
    dist.all_gather_into_tensor(full, x, group=group)
    return full @ w.t()


def _forward_backward(fn, x, w, grad):
    def run():
        x.grad = w.grad = None
        fn(x, w).backward(grad)
    return run


def bench(rows: list, tokens: int, hidden: int, dtype, reps: int, group) -> None:
    import torch.distributed._functional_collectives as funcol

    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    x = torch.randn(tokens, hidden, device="cuda", dtype=dtype, requires_grad=True)
    w = torch.randn(hidden, hidden, device="cuda", dtype=dtype, requires_grad=True)
    grad = torch.randn(tokens, hidden, device="cuda", dtype=dtype)
    out = torch.empty(tokens, hidden, device="cuda", dtype=dtype)
    shape = f"{tokens} x {hidden} @ {hidden} x {hidden}, {str(dtype).split('.')[-1]}"
    with torch.no_grad():
        plain = {
            "matmul_reduce_scatter": lambda: _torch_matmul_reduce_scatter(x, w, group, out),
            "all_gather_matmul": lambda: _torch_all_gather_matmul(x, w, group, out),
        }
        ours = {"matmul_reduce_scatter": matmul_reduce_scatter,
                "all_gather_matmul": all_gather_matmul}
        for name, ref in plain.items():
            t_ref = _ms(ref, reps)
            for chunks in (None, 1, 4):
                t = _ms(lambda op=ours[name], c=chunks: op(x, w, group, c), reps)
                rows.append({"what": f"{name} forward, chunks {chunks or 'calibrated'}",
                             "shape": shape, "ours_ms": t, "torch_ms": t_ref,
                             "ratio": t / t_ref})
    # torch's autograd-aware collectives: what a user writes when the op must train (2.14
    # renamed them *_single_autograd; the same signatures).
    rs = getattr(funcol, "reduce_scatter_single_autograd", None) or \
        funcol.reduce_scatter_tensor_autograd
    ag = getattr(funcol, "all_gather_single_autograd", None) or funcol.all_gather_tensor_autograd
    user = {
        "matmul_reduce_scatter": lambda a, b: funcol.wait_tensor(rs(a @ b.t(), "sum", 0, group)),
        "all_gather_matmul": lambda a, b: funcol.wait_tensor(ag(a, 0, group)) @ b.t(),
    }
    for name, ref in user.items():
        t_ref = _ms(_forward_backward(ref, x, w, grad), reps)
        t = _ms(_forward_backward(lambda a, b, op=ours[name]: op(a, b, group), x, w, grad),
                reps)
        rows.append({"what": f"{name} forward+backward, chunks calibrated", "shape": shape,
                     "ours_ms": t, "torch_ms": t_ref, "ratio": t / t_ref})


def _print(rows) -> None:
    for r in rows:
        if "error" in r:
            print(f"| case failed | {r['error']} |")
        else:
            print(f"| {r['what']} | {r['shape']} | ours {r['ours_ms']:.3f} ms | torch "
                  f"{r['torch_ms']:.3f} ms | {r['ratio']:.2f}x |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--json", help="write every figure to this file")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("overlap_gpu: no CUDA device here; nothing to measure")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": "no CUDA device"}, f)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, is_master=True)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    reps = 10 if args.quick else 30
    print(f"# overlap ops vs torch on {torch.cuda.get_device_name(0)}, torch "
          f"{torch.__version__}, NCCL world of 1, median of {reps} (CUDA events)")
    rows: list = []
    for tokens, hidden in ((8192, 4096), (2048, 8192)):
        done = len(rows)
        try:
            bench(rows, tokens, hidden, torch.bfloat16, reps, dist.group.WORLD)
        except Exception as err:  # noqa: BLE001 - reported as a row, the run goes on
            rows.append({"what": "error", "error": f"{type(err).__name__}: {err}"})
        _print(rows[done:])
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                           "reps": reps, "rows": rows}, f, indent=1)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
