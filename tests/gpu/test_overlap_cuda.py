# SPDX-License-Identifier: Apache-2.0
"""Overlap ops on CUDA (one GPU, NCCL world of one): results against the unchunked matmul,
the stream contract (the caller's stream, not the host, waits), the hidden fraction measured
with CUDA events, and the training example with world size 1 on NCCL. Run by
scripts/gpu_check.sh; skipped without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def nccl_world():
    from torch_topo.bench.cuda_runs import init_nccl_world_of_one

    yield init_nccl_world_of_one()
    dist.destroy_process_group()


@pytest.mark.parametrize("chunks", [1, 2, 3, 4, 8])
def test_results_match_unchunked(nccl_world, chunks):
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    gen = torch.Generator(device="cuda").manual_seed(chunks)
    x = torch.randn(256, 128, device="cuda", generator=gen)
    w = torch.randn(96, 128, device="cuda", generator=gen)
    ref = x @ w.t()
    # One rank: the collective is a copy, so any difference would come from the chunked GEMM
    # (cuBLAS may pick another kernel for fewer rows: tolerance of fp32 accumulation over K).
    torch.testing.assert_close(matmul_reduce_scatter(x, w, nccl_world, chunks), ref,
                               rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(all_gather_matmul(x, w, nccl_world, chunks), ref,
                               rtol=1e-5, atol=1e-4)


def test_backward_matches_autograd(nccl_world):
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    x = torch.randn(64, 32, device="cuda", dtype=torch.float64, requires_grad=True)
    w = torch.randn(48, 32, device="cuda", dtype=torch.float64, requires_grad=True)
    g = torch.randn(64, 48, device="cuda", dtype=torch.float64)
    for op in (matmul_reduce_scatter, all_gather_matmul):
        (op(x, w, nccl_world, 4) * g).sum().backward()
        dx, dw = x.grad.clone(), w.grad.clone()
        x.grad = w.grad = None
        ((x @ w.t()) * g).sum().backward()
        torch.testing.assert_close(dx, x.grad, rtol=0, atol=1e-10)
        torch.testing.assert_close(dw, w.grad, rtol=0, atol=1e-10)
        x.grad = w.grad = None


def test_caller_stream_waits_not_host(nccl_world):
    """On a side stream, the result is ordered on that stream: read after a wait on it."""
    from torch_topo.ops import matmul_reduce_scatter

    x = torch.randn(1024, 1024, device="cuda")
    w = torch.randn(1024, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = matmul_reduce_scatter(x, w, nccl_world, 4)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out, x @ w.t(), rtol=1e-4, atol=1e-2)


def _event_ms(fn, reps: int = 10) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def test_hidden_fraction_with_cuda_events(nccl_world):
    """Reports the hidden fraction on one GPU (a one-rank NCCL collective is a device copy, so
    the figure shows the stream machinery working, not a network). Asserts only that the
    overlapped op is no slower than compute and comm back to back, plus 10% for launches."""
    from torch_topo.ops import hidden_fraction, matmul_reduce_scatter

    x = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    chunks = 4
    parts = [c.contiguous() for c in x.chunk(chunks)]
    outs = [p @ w.t() for p in parts]
    out = torch.empty_like(outs[0])
    t_compute = _event_ms(lambda: [p @ w.t() for p in parts])
    t_comm = _event_ms(lambda: [dist.reduce_scatter_tensor(out, o) for o in outs])
    t_both = _event_ms(lambda: matmul_reduce_scatter(x, w, nccl_world, chunks))
    hf = hidden_fraction(t_comm, t_compute, t_both)
    print(f"\ncuda overlap: compute {t_compute:.3f} ms, comm {t_comm:.3f} ms, overlapped "
          f"{t_both:.3f} ms, hidden fraction {hf:.2f}")
    assert t_both <= 1.1 * (t_compute + t_comm)


def test_example_world_one_on_nccl(tmp_path):
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_llama.py"),
                          "--backend", "nccl", "--device", "cuda", "--steps", "3",
                          "--json", str(out)],
                         capture_output=True, text=True, env=env, timeout=100)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["device"] == "cuda" and r["checkpoint_ok"] is True
    assert r["max_loss_diff"] <= r["loss_tolerance"]
