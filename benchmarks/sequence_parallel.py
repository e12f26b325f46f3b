# SPDX-License-Identifier: Apache-2.0
"""Sequence-parallel attention on CPU processes (Gloo): time per attention layer forward +
backward for our fused Ulysses vs the unfused DeepSpeed pattern, ring vs Ulysses vs full
attention on one rank, and activation memory per rank vs sequence length.

Usage: python benchmarks/sequence_parallel.py [--world 2] [--seq 512 1024] [--iters 5]
       python benchmarks/sequence_parallel.py --preset comm-heavy --iters 15

DeepSpeed is not installed here, so its pattern is reimplemented: DeepSpeed's
DistributedAttention (deepspeed/sequence/layer.py) sends Q, K and V through three separate
_SeqAllToAll calls, each with its own reshape/permute/contiguous copy before and after the
all_to_all_single, and its backward repeats the three exchanges. Ours writes all three into one
buffer (one copy) for one exchange and, at batch 1, attends on views of what arrives; the
output exchange sends the attention output as it lies; the backward is one exchange each way.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _ds_all_to_all(x, scatter_idx, gather_idx, group):
    """One DeepSpeed-style layout exchange of one [b, s, h, d] tensor (heads <-> sequence)."""
    world = dist.get_world_size(group)
    b = x.shape[0]
    if scatter_idx == 2:  # [b, s, h, d] -> [b, P*s, h/P, d]
        s, h, d = x.shape[1], x.shape[2], x.shape[3]
        send = x.reshape(b, s, world, h // world, d).permute(2, 0, 1, 3, 4).contiguous()
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=group)
        return recv.permute(1, 0, 2, 3, 4).reshape(b, world * s, h // world, d).contiguous()
    seq, hl, d = x.shape[1], x.shape[2], x.shape[3]  # [b, P*s, h/P, d] -> [b, s, h, d]
    send = x.reshape(b, world, seq // world, hl, d).permute(1, 0, 2, 3, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.permute(1, 2, 0, 3, 4).reshape(b, seq // world, world * hl, d).contiguous()


class _DSSeqAllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, x, scatter_idx, gather_idx):
        ctx.group, ctx.scatter_idx, ctx.gather_idx = group, scatter_idx, gather_idx
        return _ds_all_to_all(x, scatter_idx, gather_idx, group)

    @staticmethod
    def backward(ctx, g):
        return None, _ds_all_to_all(g.contiguous(), ctx.gather_idx, ctx.scatter_idx,
                                    ctx.group), None, None


def ds_distributed_attention(q, k, v, group, causal):
    qg, kg, vg = (_DSSeqAllToAll.apply(group, t, 2, 1) for t in (q, k, v))
    out = F.scaled_dot_product_attention(qg.transpose(1, 2), kg.transpose(1, 2),
                                         vg.transpose(1, 2), is_causal=causal).transpose(1, 2)
    return _DSSeqAllToAll.apply(group, out, 1, 2)


def full_attention(q, k, v, causal):
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                          v.transpose(1, 2), is_causal=causal).transpose(1, 2)


def saved_activation_bytes(fn, *inputs) -> int:
    """Bytes of distinct storages autograd saves for backward while `fn` runs forward, not
    counting the layer's own inputs: the activation memory an attention layer adds per rank.
    (Ulysses saves its gathered Q/K/V, each as large as the local shard, so it adds more than
    full attention, whose saved Q/K/V are its inputs.)"""
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*inputs)
    for t in inputs:  # the inputs exist anyway; count only what the layer adds
        seen.pop(t.untyped_storage().data_ptr(), None)
    del out
    return sum(seen.values())


def _time_fwd_bwd(cases, iters, sync) -> dict[str, float]:
    """Median seconds of forward + backward per case, {name: (fn, inputs)}. The cases take
    turns within each iteration, so a load change on a shared host hits all of them alike;
    ranks are aligned by `sync` before each run, and the first iteration warms up."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for i in range(iters + 1):
        for name, (fn, inputs) in cases.items():
            for t in inputs:
                t.grad = None
            sync()
            t0 = time.perf_counter()
            fn(*inputs).sum().backward()
            sync()
            if i > 0:
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def _worker(rank, world, store, args, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=600))
    import torch_topo

    group = dist.group.WORLD
    b, h, hk, d = args.batch, args.heads, args.kv_heads, args.head_dim
    rows = []
    for seq in args.seq:
        s = seq // world
        gen = torch.Generator().manual_seed(seq)
        q = torch.randn(b, s, h, d, generator=gen).requires_grad_()
        k, v = (torch.randn(b, s, hk, d, generator=gen).requires_grad_() for _ in range(2))
        zq, zk, zv = (torch_topo.zigzag_shard(torch.randn(b, seq, t.shape[2], d, generator=gen),
                                              1).requires_grad_() for t in (q, k, v))
        cases = {
            "ulysses (ours, fused)": (lambda q, k, v: torch_topo.ulysses_attention(
                q, k, v, check_inputs=False), (q, k, v)),
            "ulysses (ours, + shape check)": (lambda q, k, v: torch_topo.ulysses_attention(
                q, k, v), (q, k, v)),
            "ulysses (DeepSpeed pattern)": (lambda q, k, v: ds_distributed_attention(
                q, k, v, group, False), (q, k, v)),
            "exchange only (ours)": (lambda q, k, v: _exchange_only_ours(q, k, v, torch_topo),
                                     (q, k, v)),
            "exchange only (DeepSpeed pattern)": (lambda q, k, v: sum(
                _DSSeqAllToAll.apply(group, t, 2, 1).sum() for t in (q, k, v)), (q, k, v)),
            "ring": (lambda q, k, v: torch_topo.ring_attention(q, k, v, check_inputs=False),
                     (q, k, v)),
            "ring causal zigzag": (lambda q, k, v: torch_topo.ring_attention(
                q, k, v, causal=True, balance="zigzag", check_inputs=False), (zq, zk, zv)),
            "ring causal contiguous": (lambda q, k, v: torch_topo.ring_attention(
                q, k, v, causal=True, check_inputs=False), (q, k, v)),
        }
        local = _time_fwd_bwd(cases, args.iters, dist.barrier)
        worst = torch.tensor(list(local.values()), dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # a layer is as slow as its slowest rank
        timings = dict(zip(local, worst.tolist(), strict=True))
        # Full attention runs on rank 0 alone with the same one thread; the others wait.
        fq = torch.randn(b, seq, h, d, generator=gen).requires_grad_()
        fk, fv = (torch.randn(b, seq, hk, d, generator=gen).requires_grad_() for _ in range(2))
        if rank == 0:
            timings.update(_time_fwd_bwd({
                "full attention, one rank": (
                    lambda q, k, v: full_attention(q, k, v, False), (fq, fk, fv)),
                "full attention causal, one rank": (
                    lambda q, k, v: full_attention(q, k, v, True), (fq, fk, fv)),
            }, args.iters, lambda: None))
        dist.barrier()
        memory = {
            "full attention, one rank": saved_activation_bytes(
                lambda q, k, v: full_attention(q, k, v, False), fq, fk, fv),
            "ring": saved_activation_bytes(
                lambda q, k, v: torch_topo.ring_attention(q, k, v, check_inputs=False), q, k, v),
            "ulysses (ours, fused)": saved_activation_bytes(
                lambda q, k, v: torch_topo.ulysses_attention(q, k, v, check_inputs=False),
                q, k, v),
        }
        rows.append((seq, timings, memory))
    if rank == 0:
        results.put(rows)
    dist.destroy_process_group()


def _exchange_only_ours(q, k, v, torch_topo):
    from torch_topo.ops.ulysses import UlyssesExchangeFunction

    return sum(t.sum() for t in UlyssesExchangeFunction.apply(dist.group.WORLD, 2, 1,
                                                              (False, False, False), q, k, v))


def _print(rows, args):
    print(f"# sequence-parallel attention, {args.world} Gloo CPU ranks x 1 thread, batch "
          f"{args.batch}, heads {args.heads}, kv_heads {args.kv_heads}, head_dim "
          f"{args.head_dim}, float32, median of {args.iters} (slowest rank)")
    print("\n## time per attention layer, forward + backward (ms)\n")
    names = list(rows[0][1])
    print("| case | " + " | ".join(f"S={seq}" for seq, _, _ in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{t[name] * 1e3:.1f}" for _, t, _ in rows) + " |")
    print("\n## ratios (> 1: the first is faster)\n")
    pairs = [("ulysses (DeepSpeed pattern)", "ulysses (ours, fused)"),
             ("exchange only (DeepSpeed pattern)", "exchange only (ours)"),
             ("ring", "ulysses (ours, fused)"),
             ("full attention, one rank", "ulysses (ours, fused)"),
             ("full attention, one rank", "ring"),
             ("ring causal contiguous", "ring causal zigzag"),
             ("full attention causal, one rank", "ring causal zigzag")]
    print("| slower / faster | " + " | ".join(f"S={seq}" for seq, _, _ in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for a, b in pairs:
        print(f"| {a} / {b} | " + " | ".join(f"{t[a] / t[b]:.2f}" for _, t, _ in rows) + " |")
    print("\n## activation memory saved for backward, per rank (MiB)\n")
    print("| S | full attention, one rank | ring | ring / full | ulysses | ulysses / full | "
          f"1/P = {1 / args.world:.3f} |")
    print("|---|---|---|---|---|---|---|")
    for seq, _, m in rows:
        full, ring, uly = (m[n] / 2**20 for n in ("full attention, one rank", "ring",
                                                    "ulysses (ours, fused)"))
        print(f"| {seq} | {full:.2f} | {ring:.2f} | {ring / full:.3f} | {uly:.2f} | "
              f"{uly / full:.3f} | |")


# comm-heavy: short sequence, wide heads (64 x 128 per position), batch 1, 4 ranks: each
# exchange moves 2 MiB per tensor per rank while attention over 64 local rows stays cheap,
# so layout copies and exchanges weigh as much as the attention itself.
PRESETS = {"comm-heavy": {"world": 4, "seq": [256], "batch": 1, "heads": 64, "kv_heads": 64,
                          "head_dim": 128}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--seq", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a named shape (overrides --world/--seq/--batch/--heads/--kv-heads/"
                        "--head-dim)")
    args = p.parse_args(argv)
    for key, value in PRESETS.get(args.preset, {}).items():
        setattr(args, key, value)
    for seq in args.seq:
        if seq % (2 * args.world) != 0:
            p.error(f"--seq {seq} must be a multiple of 2 x --world = {2 * args.world}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_worker, args=(r, args.world, os.path.join(tmp, "store"),
                                                   args, results)) for r in range(args.world)]
        for proc in procs:
            proc.start()
        rows = results.get()
        for proc in procs:
            proc.join()
    _print(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
