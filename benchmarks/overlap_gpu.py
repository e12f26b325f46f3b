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

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_topo.bench.cuda_runs import (  # noqa: E402  (after the path insert)
    cuda_ms,
    init_nccl_world_of_one,
    run_gpu_script,
)

_CALLS = 10  # calls in a row per timed span: the host issues ahead, as in a training step


def _ms(fn, reps: int) -> float:
    # Three warm-up calls: the first one calibrates chunks=None.
    return cuda_ms(fn, reps, calls=_CALLS, warmup=3)


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


def cases(rows: list, reps: int) -> list:
    group = init_nccl_world_of_one()
    return [lambda t=tokens, h=hidden: bench(rows, t, h, torch.bfloat16, reps, group)
            for tokens, hidden in ((8192, 4096), (2048, 8192))]


def main(argv=None) -> int:
    try:
        return run_gpu_script(argv, __doc__.splitlines()[0],
                              "overlap ops vs torch, NCCL world of 1", cases, _print, (10, 30))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
