# SPDX-License-Identifier: Apache-2.0
"""Ring attention (Liu et al., arXiv:2310.01889): each rank keeps its query shard while K/V
blocks travel around the ring; partial results merge in fp32 through their log-sum-exp. The
backward reuses the final output and LSE; dK/dV travel with their block and arrive home.
Causal work is balanced by the zigzag layout (2P chunks, rank r holds r and 2P-1-r)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.distributed as dist

from torch_topo import _C
from torch_topo.ops.utils import (
    RingExchange,
    check_qkv,
    check_same_shape,
    group_rank_size,
    merge_block,
)

__all__ = [
    "RingAttentionFunction",
    "ring_attention",
    "zigzag_positions",
    "zigzag_shard",
    "zigzag_unshard",
]

Balance = Literal["none", "zigzag"]
_BALANCES = ("none", "zigzag")
_KV_TAG, _DKV_TAG = 0, 1


def _expand_kv(t: torch.Tensor, q_heads: int) -> torch.Tensor:
    """[b, kv_heads, s, d] -> [b, q_heads, s, d] (GQA: query head i uses K/V head i // g)."""
    groups = q_heads // t.shape[1]
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)


def _fold_kv(grad: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """Inverse of _expand_kv for gradients: sum each K/V head's query group, in fp32."""
    b, h, s, d = grad.shape
    grad = grad.float()
    return grad if h == kv_heads else grad.view(b, kv_heads, h // kv_heads, s, d).sum(2)


def _math_block_forward(q, k, v, causal, scale):
    """Explicit fp32 block attention with LSE: the kernel for devices without torch's CPU
    flash-attention op (its CUDA counterparts differ in signature across releases)."""
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = torch.matmul(torch.exp(s - lse.unsqueeze(-1)), v.float())
    return out.to(q.dtype), lse


def _math_block_backward(dout, q, k, v, out, lse, causal, scale):
    qf, kf, vf, df = q.float(), k.float(), v.float(), dout.float()
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = torch.matmul(p.transpose(-1, -2), df)
    dp = torch.matmul(df, vf.transpose(-1, -2))
    ds = p * (dp - (df * out.float()).sum(-1, keepdim=True))
    return torch.matmul(ds, kf) * scale, torch.matmul(ds.transpose(-1, -2), qf) * scale, dv


def block_forward(q, k, v, causal: bool, scale: float):
    """One block on [b, h, s, d]: (out in q.dtype, lse fp32 [b, h, s]). CPU uses torch's flash
    attention op, which returns the LSE and has a matching backward (checked on torch 2.14)."""
    k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
    if q.device.type == "cpu":
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, scale=scale)
    return _math_block_forward(q, k, v, causal, scale)


def block_backward(dout, q, k, v, out, lse, causal: bool, scale: float):
    """Gradients of one block given the FINAL out and lse (their softmax weights are then the
    global ones); dK/dV come back in fp32 with the K/V head count."""
    kv_heads = k.shape[1]
    k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
    if q.device.type == "cpu":
        dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout, q, k, v, out, lse, 0.0, causal, scale=scale)
    else:
        dq, dk, dv = _math_block_backward(dout, q, k, v, out, lse, causal, scale)
    return dq, _fold_kv(dk, kv_heads), _fold_kv(dv, kv_heads)


def block_slices(step: int, rank: int, world: int, causal: bool, balance: Balance,
                 seq_local: int):
    """Which (query rows, key rows, causal) of the local block meet the K/V block held at
    `step` (it came from rank - step), or None when the causal mask hides all of it.

    zigzag: rank r holds chunks (r, 2P-1-r), the source s holds (s, 2P-1-s). For s < r both
    query chunks see all of chunk s and none of 2P-1-s; for s > r only query chunk 2P-1-r sees
    the source, all of it. Either way half a block: equal work on every rank at every step."""
    every = slice(None)
    if not causal:
        return every, every, False
    if step == 0:
        return every, every, True
    src = (rank - step) % world
    if balance == "zigzag":
        half = seq_local // 2
        return (every, slice(0, half), False) if src < rank else (slice(half, None), every, False)
    return (every, every, False) if src < rank else None


class RingAttentionFunction(torch.autograd.Function):
    """Forward and backward of ring attention on [b, s_local, h, d] inputs."""

    @staticmethod
    def forward(ctx, q, k, v, group, causal: bool, scale: float, balance: Balance):
        rank, world = group_rank_size(group)
        qh = q.transpose(1, 2)
        # K and V travel as one buffer: one send and one receive per step.
        kv = torch.stack([k.transpose(1, 2), v.transpose(1, 2)])
        ring, bufs = RingExchange(group), [kv, torch.empty_like(kv)]
        out = lse = None
        for step in range(world):
            cur = bufs[step % 2]
            if step + 1 < world:
                ring.post(cur, bufs[(step + 1) % 2], _KV_TAG)
            blk = block_slices(step, rank, world, causal, balance, q.shape[1])
            if blk is not None:
                qs, ks, blk_causal = blk
                b_out, b_lse = block_forward(qh[:, :, qs], cur[0][:, :, ks], cur[1][:, :, ks],
                                             blk_causal, scale)
                if out is None:  # step 0 always covers every query row
                    out, lse = b_out.float(), b_lse.float()
                else:
                    merge_block(out[:, :, qs], lse[:, :, qs], b_out, b_lse)
            ring.wait()
        out_q = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, out_q, lse)
        ctx.group, ctx.causal, ctx.scale, ctx.balance = group, causal, scale, balance
        ctx.mark_non_differentiable(lse)
        return out_q.transpose(1, 2).contiguous(), lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        rank, world = group_rank_size(ctx.group)
        qh, douth = q.transpose(1, 2), dout.transpose(1, 2).contiguous()
        dq = torch.zeros(qh.shape, dtype=torch.float32, device=q.device)
        kv = torch.stack([k.transpose(1, 2), v.transpose(1, 2)])
        ring, bufs = RingExchange(ctx.group), [kv, torch.empty_like(kv)]
        # dK/dV accumulators (fp32) follow the K/V block: the one at hand at step i is the
        # block's running sum from the ranks it visited; after the last step it goes home.
        dring = RingExchange(ctx.group)
        dkv = [torch.zeros(kv.shape, dtype=torch.float32, device=q.device),
               torch.empty(kv.shape, dtype=torch.float32, device=q.device)]
        for step in range(world):
            cur = bufs[step % 2]
            if step + 1 < world:
                ring.post(cur, bufs[(step + 1) % 2], _KV_TAG)
            if step > 0:
                dring.wait()
            acc = dkv[step % 2]
            blk = block_slices(step, rank, world, ctx.causal, ctx.balance, q.shape[1])
            if blk is not None:
                qs, ks, blk_causal = blk
                dq_b, dk_b, dv_b = block_backward(
                    douth[:, :, qs], qh[:, :, qs], cur[0][:, :, ks], cur[1][:, :, ks],
                    out[:, :, qs], lse[:, :, qs], blk_causal, ctx.scale)
                dq[:, :, qs] += dq_b
                acc[0][:, :, ks] += dk_b
                acc[1][:, :, ks] += dv_b
            if world > 1:
                dring.post(acc, dkv[(step + 1) % 2], _DKV_TAG)
            ring.wait()
        dring.wait()
        home = dkv[world % 2] if world > 1 else dkv[0]
        return (dq.to(q.dtype).transpose(1, 2), home[0].to(k.dtype).transpose(1, 2),
                home[1].to(v.dtype).transpose(1, 2), None, None, None, None)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None,
                   causal: bool = False, softmax_scale: float | None = None,
                   balance: Balance = "none", return_lse: bool = False,
                   check_inputs: bool = True):
    """Attention over a sequence sharded across `group`, rotating K/V blocks around the ring.

    Args:
        q: [b, s_local, heads, d].
        k, v: [b, s_local, kv_heads, d] (kv_heads divides heads: GQA/MQA).
        group: process group (default: the world).
        causal: causal mask over the global sequence.
        softmax_scale: default 1 / sqrt(d).
        balance: "none" (rank r holds positions [r * s_local, (r + 1) * s_local)) or "zigzag"
            (inputs sharded by zigzag_shard; equal causal work on every rank and step).
        return_lse: also return the fp32 log-sum-exp [b, heads, s_local] (not differentiable).
        check_inputs: verify with one small all_gather that all ranks' shapes agree.
    Returns:
        out [b, s_local, heads, d] in q's dtype, and the LSE when return_lse.
    """
    group = group if group is not None else dist.group.WORLD
    if balance not in _BALANCES:
        raise ValueError(f"ring_attention: balance={balance!r}, expected one of {_BALANCES}")
    check_qkv("ring_attention", q, k, v)
    if k.shape[1] != q.shape[1]:
        raise ValueError(f"ring_attention: k has {k.shape[1]} local positions, q has "
                         f"{q.shape[1]}: expected the same sequence shard")
    if balance == "zigzag" and q.shape[1] % 2 != 0:
        raise ValueError(f"ring_attention: balance='zigzag' needs an even local length (two "
                         f"chunks): got {q.shape[1]}; shard with zigzag_shard")
    if check_inputs:
        check_same_shape("ring_attention", group, {"q": q, "k": k})
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    out, lse = RingAttentionFunction.apply(q, k, v, group, causal, scale, balance)
    return (out, lse) if return_lse else out


def zigzag_shard(x: torch.Tensor, dim: int = 1, group=None) -> torch.Tensor:
    """This rank's zigzag shard of the full sequence `x` along `dim` (differentiable)."""
    rank, world = group_rank_size(group if group is not None else dist.group.WORLD)
    return _C.zigzag_shard(x, dim, world, rank)


def zigzag_unshard(x: torch.Tensor, dim: int = 1, group=None) -> torch.Tensor:
    """The full sequence from every rank's zigzag shard (an all_gather; not differentiable)."""
    group = group if group is not None else dist.group.WORLD
    _, world = group_rank_size(group)
    shards = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(shards, x.contiguous(), group=group)
    return _C.zigzag_unshard(shards, dim)


def zigzag_positions(seq_len: int, group=None) -> torch.Tensor:
    """Global position ids (int64, CPU) of this rank's zigzag shard, e.g. for RoPE."""
    rank, world = group_rank_size(group if group is not None else dist.group.WORLD)
    return _C.zigzag_index(seq_len, world, rank)
