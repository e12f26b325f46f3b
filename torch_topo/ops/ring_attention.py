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
from torch_topo.ops.attention_blocks import block_backward, block_forward, select_for
from torch_topo.ops.utils import (
    CheckInputs,
    RingExchange,
    check_attention_options,
    check_dim,
    check_floating,
    check_qkv,
    check_same_shape,
    check_tensors,
    group_rank_size,
    merge_block,
    resolve_group,
    settled_on_error,
)
from torch_topo.validation import is_int_in

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
SAME_SHARD = "a shard of the same shape and dtype"


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation type: fp32, or fp64 for fp64 inputs (gradcheck)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


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
    """Forward and backward of ring attention on [b, s_local, h, d] inputs.

    Buffers keep the [b, s, h, d] layout (K/V stacked as [2, b, s, kv_heads, d]) and the block
    kernels see [b, h, s, d] views of them, so nothing is transposed into a copy; the output
    and gradients come back in the caller's layout. At world size 1 the block's own output and
    gradients are returned as they are (no fp32 round trip)."""

    @staticmethod
    def forward(ctx, q, k, v, group, causal: bool, scale: float, balance: Balance):
        rank, world = group_rank_size(group)
        qh = q.transpose(1, 2)
        kernel = select_for(qh, k.shape[2])
        # K and V travel as one buffer: one send and one receive per step.
        kv = torch.stack([k, v]) if world > 1 else (k, v)
        ring = RingExchange(group, "ring_attention forward")
        bufs = [kv, torch.empty_like(kv) if world > 1 else None]
        out = lse = rng = None
        with settled_on_error(ring):
            for step in range(world):
                cur = bufs[step % 2]
                if step + 1 < world:
                    ring.post(cur, bufs[(step + 1) % 2], _KV_TAG)
                blk = block_slices(step, rank, world, causal, balance, q.shape[1])
                if blk is not None:
                    qs, ks, blk_causal = blk
                    b_out, b_lse, b_rng = block_forward(
                        qh[:, :, qs], cur[0][:, ks].transpose(1, 2),
                        cur[1][:, ks].transpose(1, 2), blk_causal, scale, kernel)
                    if out is None:  # step 0 always covers every query row
                        rng = b_rng
                        out, lse = (b_out, b_lse) if world == 1 else \
                            (b_out.to(acc_dtype(q.dtype)), b_lse.to(acc_dtype(q.dtype)))
                    else:
                        merge_block(out[:, :, qs], lse[:, :, qs], b_out, b_lse)
                ring.wait()
        out_q = out.to(q.dtype).transpose(1, 2).contiguous()  # a no-op for flash at world 1
        ctx.save_for_backward(q, k, v, out_q, lse)
        ctx.group, ctx.causal, ctx.scale, ctx.balance = group, causal, scale, balance
        ctx.kernel, ctx.rng = kernel, rng
        ctx.mark_non_differentiable(lse)
        # The backward needs the output as computed (rowsum(dO * O)), so a caller's in-place
        # write to it must not pass unseen: autograd refuses the write at once (out_q is a view
        # made in here) or at backward (its version counter), as for torch's SDPA. A copy would
        # let the write through at the price of one more output-sized tensor per layer until
        # the backward, on the op whose point is long sequences.
        return out_q, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        rank, world = group_rank_size(ctx.group)
        qh, outh = q.transpose(1, 2), out.transpose(1, 2)
        douth = dout.contiguous().transpose(1, 2)

        def grads(step, cur):
            blk = block_slices(step, rank, world, ctx.causal, ctx.balance, q.shape[1])
            if blk is None:
                return None
            qs, ks, blk_causal = blk
            return qs, ks, block_backward(
                douth[:, :, qs], qh[:, :, qs], cur[0][:, ks].transpose(1, 2),
                cur[1][:, ks].transpose(1, 2), outh[:, :, qs], lse[:, :, qs], blk_causal,
                ctx.scale, ctx.rng, ctx.kernel)

        if world == 1:
            dq, dk, dv = grads(0, (k, v))[2]
            return (dq.transpose(1, 2).to(q.dtype), dk.transpose(1, 2).to(k.dtype),
                    dv.transpose(1, 2).to(v.dtype), None, None, None, None)
        acc = acc_dtype(q.dtype)
        dq = torch.zeros(q.shape, dtype=acc, device=q.device)
        kv = torch.stack([k, v])
        ring, bufs = RingExchange(ctx.group, "ring_attention backward"), [kv, torch.empty_like(kv)]
        # dK/dV accumulators (fp32) follow the K/V block: the one at hand at step i is the
        # block's running sum from the ranks it visited; after the last step it goes home.
        dring = RingExchange(ctx.group, "ring_attention backward (dK/dV)")
        dkv = [torch.zeros(kv.shape, dtype=acc, device=q.device),
               torch.empty(kv.shape, dtype=acc, device=q.device)]
        with settled_on_error(ring, dring):
            for step in range(world):
                cur = bufs[step % 2]
                if step + 1 < world:
                    ring.post(cur, bufs[(step + 1) % 2], _KV_TAG)
                got = grads(step, cur)  # computes while the previous step's dK/dV travel
                if step > 0:
                    dring.wait()
                carried = dkv[step % 2]
                if got is not None:
                    qs, ks, (dq_b, dk_b, dv_b) = got
                    dq[:, qs] += dq_b.transpose(1, 2)
                    carried[0][:, ks] += dk_b.transpose(1, 2)
                    carried[1][:, ks] += dv_b.transpose(1, 2)
                dring.post(carried, dkv[(step + 1) % 2], _DKV_TAG)
                ring.wait()
            dring.wait()
        home = dkv[world % 2]
        return (dq.to(q.dtype), home[0].to(k.dtype), home[1].to(v.dtype), None, None, None,
                None)


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None,
                   causal: bool = False, softmax_scale: float | None = None,
                   balance: Balance = "none", return_lse: bool = False,
                   check_inputs: CheckInputs = "once"):
    """Attention over a sequence sharded across `group`, rotating K/V blocks around the ring.

    Args:
        q: [b, s_local, heads, d].
        k, v: [b, s_local, kv_heads, d] (kv_heads divides heads: GQA/MQA).
        group: process group (default: the world).
        causal: causal mask over the global sequence.
        softmax_scale: default 1 / sqrt(d).
        balance: "none" (rank r holds positions [r * s_local, (r + 1) * s_local)) or "zigzag"
            (inputs sharded by zigzag_shard; equal causal work on every rank and step).
        return_lse: also return the log-sum-exp [b, heads, s_local] in fp32 (fp64 for fp64
            inputs; not differentiable).
        check_inputs: verify with one small all_gather (and a host sync) that all ranks'
            shapes agree: "once" per group and shape, True on every call, False never.
    Returns:
        out [b, s_local, heads, d] in q's dtype, and the LSE when return_lse.
    """
    group = resolve_group("ring_attention", group)
    check_tensors("ring_attention", q=q, k=k, v=v)
    if balance not in _BALANCES:
        raise ValueError(f"ring_attention: balance={balance!r}, expected one of {_BALANCES}")
    check_attention_options("ring_attention: ", causal, softmax_scale)
    if not isinstance(return_lse, bool):  # "no" returned a tuple where a tensor was expected
        raise ValueError(f"ring_attention: return_lse: got {return_lse!r}, expected True or "
                         "False")

    def validate():
        check_qkv("ring_attention", q, k, v)
        if balance == "zigzag" and q.shape[1] % 2 != 0:
            raise ValueError(f"ring_attention: balance='zigzag' needs an even local length "
                             f"(two chunks): got {q.shape[1]}; shard with zigzag_shard")
        check_floating("ring_attention", q)
        if q.shape[1] == 0 or q.shape[3] == 0:
            # torch's CPU flash kernel dies of SIGFPE on an empty sequence (integer division).
            raise ValueError(f"ring_attention: q has shape {tuple(q.shape)}: expected a local "
                             "sequence length and head_dim >= 1")

    # Ranks masking or balancing differently exchange the same sizes and return wrong numbers.
    check_same_shape("ring_attention", group, {"q": q, "k": k, "v": v}, check_inputs,
                     validate=validate,
                     settings={"causal": int(causal), "zigzag": int(balance == "zigzag")})
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    out, lse = RingAttentionFunction.apply(q, k, v, group, causal, scale, balance)
    return (out, lse) if return_lse else out


def check_zigzag_length(where: str, length: int, world: int) -> None:
    # The native zigzag math refuses it too, naming its C++ function rather than the caller's.
    if length % (2 * world) != 0:
        raise ValueError(f"{where}: got {length}, expected a multiple of 2 x group size = "
                         f"{2 * world}; pad the sequence to one")


def zigzag_shard(x: torch.Tensor, dim: int = 1, group=None) -> torch.Tensor:
    """This rank's zigzag shard of the full sequence `x` along `dim` (differentiable)."""
    rank, world = group_rank_size(resolve_group("zigzag_shard", group))
    check_tensors("zigzag_shard", x=x)
    dim = check_dim("zigzag_shard", "dim", x, dim)
    check_zigzag_length(f"zigzag_shard: x: length along dim {dim}", x.shape[dim], world)
    return _C.zigzag_shard(x, dim, world, rank)


def zigzag_unshard(x: torch.Tensor, dim: int = 1, group=None) -> torch.Tensor:
    """The full sequence from every rank's zigzag shard (an all_gather; not differentiable).
    Shards of different shapes or dtypes raise ValueError on every rank (checked as the ops'
    check_inputs="once")."""
    group = resolve_group("zigzag_unshard", group)
    check_tensors("zigzag_unshard", x=x)

    def validate():
        # A dim refused on one rank alone left the others in the shape check's all_gather.
        d = check_dim("zigzag_unshard", "dim", x, dim)
        # Found by the native unshard after the all_gather, naming its C++ function.
        if x.shape[d] % 2 != 0:
            raise ValueError(f"zigzag_unshard: x: length {x.shape[d]} along dim {d} is odd, "
                             "expected the two equal chunks zigzag_shard cuts")

    # Shards of different shapes aborted Gloo in the all_gather (or came back mis-cut).
    check_same_shape("zigzag_unshard", group, {"x": x}, rule=SAME_SHARD, validate=validate)
    dim = check_dim("zigzag_unshard", "dim", x, dim)
    _, world = group_rank_size(group)
    shards = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(shards, x.contiguous(), group=group)
    return _C.zigzag_unshard(shards, dim)


def zigzag_positions(seq_len: int, group=None) -> torch.Tensor:
    """Global position ids (int64, CPU) of this rank's zigzag shard, e.g. for RoPE."""
    if not is_int_in(seq_len, 0):
        # -2 reached torch.arange ("upper bound and lower bound inconsistent"), 4.0 pybind11.
        raise ValueError(f"zigzag_positions: seq_len: got {seq_len!r}, expected an int >= 0")
    rank, world = group_rank_size(resolve_group("zigzag_positions", group))
    check_zigzag_length("zigzag_positions: seq_len", seq_len, world)
    return _C.zigzag_index(seq_len, world, rank)
