# SPDX-License-Identifier: Apache-2.0
"""Sequence-parallel attention on one CUDA GPU against torch, side by side in one run: ring
block forward/backward vs torch's flash attention, ring_attention at world size 1 vs
scaled_dot_product_attention, the Ulysses Q/K/V pack vs torch's reshape/permute/cat and a
device-to-device copy, and ring_attention's memory per rank vs full attention over 4k-64k.

Usage: python benchmarks/sequence_parallel_gpu.py [--quick] [--json PATH]

Times are CUDA-event medians; memory is the peak allocated beyond the inputs (torch's caching
allocator statistics). The per-rank ring memory runs rank 0's whole ring on this GPU with each
exchange replaced by a device copy (same buffers, same blocks, no NCCL). Without CUDA it says
so and exits 0. Run by scripts/gpu_check.sh. The ring runs as rank 0's loop without a process
group (at world size 1 nothing is exchanged).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_topo.bench.cuda_memory import peak_bytes  # noqa: E402  (after the path insert)
from torch_topo.bench.cuda_runs import cuda_ms, run_gpu_script  # noqa: E402

MiB = 2**20


def _peak_mib(fn) -> float:
    return peak_bytes(fn) / MiB


def _bhsd(b, h, s, d, dtype=torch.bfloat16, heads_kv=None):
    """q, k, v, dout as [b, h, s, d] views of [b, s, h, d] tensors (the ring's layout)."""
    g = torch.Generator(device="cuda").manual_seed(s)
    hk = heads_kv or h
    make = lambda n: torch.randn(b, s, n, d, device="cuda", dtype=dtype,  # noqa: E731
                                 generator=g).transpose(1, 2)
    return make(h), make(hk), make(hk), make(h)


def _row(rows, what, ours_ms, torch_ms, ours_mib=None, torch_mib=None, goal=None):
    rows.append({"what": what, "ours_ms": ours_ms, "torch_ms": torch_ms,
                 "ratio": ours_ms / torch_ms if torch_ms else None, "ours_peak_mib": ours_mib,
                 "torch_peak_mib": torch_mib,
                 "memory_ratio": ours_mib / torch_mib if ours_mib and torch_mib else None,
                 "goal": goal})


def _block_case(rows, s, reps):
    from torch_topo.ops.attention_blocks import (
        block_backward,
        block_forward,
        sdpa_choice,
        select_for,
    )

    q, k, v, dout = _bhsd(1, 32, s, 128)
    kernel = select_for(q)

    def ours_f():
        return block_forward(q, k, v, True, 0.088, kernel)

    def torch_f():
        return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True,
                                                                  scale=0.088)

    def sdpa_f():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                scale=0.088)

    _row(rows, f"ring block forward ({kernel}) vs flash, causal, b1 h32 s{s} d128 bf16",
         cuda_ms(ours_f, reps), cuda_ms(torch_f, reps), _peak_mib(ours_f), _peak_mib(torch_f),
         "<= 1.1x time, <= 1.5x memory")
    _row(rows, f"ring block forward ({kernel}) vs SDPA ({sdpa_choice(q)}), s{s}",
         cuda_ms(ours_f, reps), cuda_ms(sdpa_f, reps), _peak_mib(ours_f), _peak_mib(sdpa_f),
         "<= 1.1x time")
    res, tf = ours_f(), torch_f()

    def ours_b():
        return block_backward(dout, q, k, v, res.out, res.lse, True, 0.088, res.rng, kernel)

    def torch_b():
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, tf[0], tf[1], tf[2], tf[3], tf[4], tf[5], 0.0, True, tf[6], tf[7],
            scale=0.088)

    _row(rows, f"ring block backward ({kernel}) vs flash, causal, s{s}", cuda_ms(ours_b, reps),
         cuda_ms(torch_b, reps), _peak_mib(ours_b), _peak_mib(torch_b), "<= 1.2x time")


@contextlib.contextmanager
def _as_rank0(world: int):
    """The ring module playing rank 0 of `world` ranks on this GPU: the exchange becomes a
    device copy (same buffers and blocks, no process group, no NCCL)."""
    ring = importlib.import_module("torch_topo.ops.ring_attention")
    real = ring.RingExchange, ring.group_rank_size
    ring.RingExchange, ring.group_rank_size = _LocalRing, lambda group: (0, world)
    try:
        yield ring
    finally:
        ring.RingExchange, ring.group_rank_size = real


def bench_ring_world_one(rows, s, reps):
    import torch.nn.functional as F

    q, k, v, dout = (t.transpose(1, 2) for t in _bhsd(1, 32, s, 128))  # [b, s, h, d]
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with _as_rank0(1) as ring:
        def ours(a=q, b=k, c=v):
            return ring.RingAttentionFunction.apply(a, b, c, None, True, 0.088, "none")[0]

        def ref(a=q, b=k, c=v):
            return F.scaled_dot_product_attention(a.transpose(1, 2), b.transpose(1, 2),
                                                  c.transpose(1, 2), is_causal=True,
                                                  scale=0.088).transpose(1, 2)

        _row(rows, f"ring_attention world 1 forward, causal, b1 h32 s{s} d128 bf16",
             cuda_ms(ours, reps), cuda_ms(ref, reps), _peak_mib(ours), _peak_mib(ref), "<= 1.15x time")

        def fwd_bwd(fn):
            def run():
                out = fn(*leaves)
                out.backward(dout)
                return out
            return run

        _row(rows, f"ring_attention world 1 forward+backward, causal, s{s}",
             cuda_ms(fwd_bwd(ours), reps), cuda_ms(fwd_bwd(ref), reps), _peak_mib(fwd_bwd(ours)),
             _peak_mib(fwd_bwd(ref)), "<= 1.15x time")


def _copy_gbps(nbytes: int, reps: int) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / (cuda_ms(lambda: dst.copy_(src), reps) * 1e-3) / 1e9


def _pack_case(rows, reps, copy_rate, b, s, h, hk, world):
    from torch_topo import _C

    qkv = [torch.randn(b, s, n, 128, device="cuda", dtype=torch.bfloat16) for n in (h, hk, hk)]
    nbytes = sum(t.numel() * t.element_size() for t in qkv)

    def reference():  # what DeepSpeed-style code does: per-tensor permute copies, then cat
        return torch.cat([t.reshape(b, s, world, t.shape[2] // world, 128)
                          .permute(2, 0, 1, 3, 4).contiguous().view(world, -1) for t in qkv],
                         dim=1)

    def ours():  # ulysses_attention's pack: one launch, heads side by side
        return _C.ulysses_pack(qkv, 2, 2, world)

    t_ours, t_ref = cuda_ms(ours, reps), cuda_ms(reference, reps)
    label = f"b{b} s{s} h{h} kv{hk} d128 bf16, world {world}"
    _row(rows, f"Ulysses Q/K/V pack (_C.ulysses_pack, one launch), {label}", t_ours, t_ref,
         goal=">= 1.5x faster than reshape/permute/cat, >= 70% of copy rate")
    for name, t in (("_C.ulysses_pack", t_ours), ("reshape/permute/cat", t_ref)):
        gbps = 2 * nbytes / (t * 1e-3) / 1e9
        rows.append({"what": f"pack rate, {name}, {label}", "gb_per_s": gbps,
                     "of_copy_rate": gbps / copy_rate})


class _LocalRing:
    """Stands in for RingExchange on one GPU: 'receiving' copies the sent block."""

    def __init__(self, group, where: str = "") -> None:
        pass

    def post(self, send, recv, tag=0) -> None:
        recv.copy_(send)

    def wait(self) -> None:
        pass


def _memory_case(rows, ring, s, world):
    import torch.nn.functional as F

    leaves = [t.transpose(1, 2).detach().requires_grad_()
              for t in _bhsd(1, 32, s // world, 128)[:3]]
    full = [t.detach().requires_grad_() for t in _bhsd(1, 32, s, 128)[:3]]

    def ring_fb():
        out = ring.RingAttentionFunction.apply(*leaves, None, True, 0.088, "zigzag")[0]
        out.backward(torch.ones_like(out))
        return out

    def full_fb():
        out = F.scaled_dot_product_attention(*full, is_causal=True)
        out.backward(torch.ones_like(out))
        return out

    inputs = [sum(t.numel() * t.element_size() for t in ts) / MiB for ts in (leaves, full)]
    ring_mib, full_mib = _peak_mib(ring_fb) + inputs[0], _peak_mib(full_fb) + inputs[1]
    rows.append({"what": f"memory per rank, fwd+bwd incl. inputs, s{s}, ring of {world} vs "
                 "full attention", "ring_rank_mib": ring_mib, "full_mib": full_mib,
                 "ring_over_full": ring_mib / full_mib, "one_over_p": 1 / world})


def bench_memory_sweep(rows, seqs, world):
    """Peak memory of rank 0 of a `world`-rank ring (its whole forward and backward) against
    full attention on one GPU, b1 h32 d128 bf16 causal zigzag."""
    with _as_rank0(world) as ring:
        for s in seqs:
            _memory_case(rows, ring, s, world)


def _print(rows):
    for r in rows:
        if "ours_ms" in r:
            mem = ""
            if r["ours_peak_mib"] is not None:
                mem = (f" | peak {r['ours_peak_mib']:.0f} vs {r['torch_peak_mib']:.0f} MiB "
                       f"({r['memory_ratio']:.2f}x)")
            print(f"| {r['what']} | ours {r['ours_ms']:.3f} ms | torch {r['torch_ms']:.3f} ms | "
                  f"{r['ratio']:.2f}x{mem} | goal {r['goal'] or '-'} |")
        elif "gb_per_s" in r:
            print(f"| {r['what']} | {r['gb_per_s']:.0f} GB/s | {100 * r['of_copy_rate']:.0f}% "
                  "of copy |")
        elif "error" in r:
            print(f"| case failed | {r['error']} |")
        else:
            print(f"| {r['what']} | ring rank {r['ring_rank_mib']:.0f} MiB | full "
                  f"{r['full_mib']:.0f} MiB | {r['ring_over_full']:.3f} (1/P = "
                  f"{r['one_over_p']:.3f}) |")


def cases(rows: list, reps: int) -> list:
    copy_rate = _copy_gbps(1 << 30, reps)
    out = [lambda: rows.append({"what": "device-to-device copy rate, 1 GiB",
                                "gb_per_s": copy_rate, "of_copy_rate": 1.0})]
    out += [lambda s=s: _block_case(rows, s, reps) for s in (4096, 8192)]
    out.append(lambda: bench_ring_world_one(rows, 8192, reps))
    out += [lambda shape=shape: _pack_case(rows, reps, copy_rate, *shape)
            for shape in ((1, 32768, 32, 8, 8), (2, 8192, 32, 32, 4))]
    out.append(lambda: bench_memory_sweep(rows, (4096, 8192, 16384, 32768, 65536), 8))
    return out


def main(argv=None) -> int:
    return run_gpu_script(argv, __doc__.splitlines()[0], "sequence-parallel attention", cases,
                          _print)


if __name__ == "__main__":
    sys.exit(main())
