# SPDX-License-Identifier: Apache-2.0
"""Ulysses sequence parallelism (DeepSpeed-Ulysses, arXiv:2309.14509): an all-to-all turns a
sequence shard with all heads into the full sequence with a slice of the heads, attention runs
locally, and the inverse all-to-all restores the layout. Q, K and V travel in ONE exchange."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

from torch_topo import _C
from torch_topo.ops.utils import (
    CheckInputs,
    check_attention_options,
    check_dim,
    check_floating,
    check_qkv,
    check_same_shape,
    check_tensors,
    group_rank_size,
    resolve_group,
)

__all__ = ["UlyssesExchangeFunction", "ulysses_all_to_all", "ulysses_attention"]

AttnFn = Callable[..., torch.Tensor]


def _exchange(tensors: Sequence[torch.Tensor], scatter_dim: int, gather_dim: int, cat_dim: int,
              group, replicate: Sequence[bool], reduce_replicas: Sequence[int]
              ) -> list[torch.Tensor]:
    """One all_to_all_single for all `tensors`: rank j's slices travel side by side along
    `cat_dim` (Q/K/V: the heads), so per position a rank receives [q | k | v] heads.

    Packing is one pass (one CUDA launch for Q/K/V), none when a single tensor is already in
    rank order (the attention output at batch 1); what arrives comes back as views of the
    receive buffer wherever the gathered layout is one (sequence gather at batch 1: Q, K and V
    views with a common row stride), so attention runs on it without an unpack copy."""
    world = dist.get_world_size(group)
    send = _C.ulysses_pack(list(tensors), scatter_dim, cat_dim, world, list(replicate))
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv.view(-1), send.view(-1), group=group)
    sizes = [_C.ulysses_slice_shape(list(t.shape), scatter_dim, world, r)[cat_dim]
             for t, r in zip(tensors, replicate, strict=True)]
    return [_detach_view(t) for t in
            _C.ulysses_unpack(recv, sizes, cat_dim, gather_dim, list(reduce_replicas))]


def _detach_view(t: torch.Tensor) -> torch.Tensor:
    """The same memory as a tensor autograd does not know as a view. A custom Function's view
    outputs refuse in-place ops ("is a view and is being modified inplace"), and the unpack
    returns views only at batch 1: an attn_fn or caller that writes its tensor in place (RoPE,
    a residual) worked at batch 2 and failed at batch 1. The outputs never overlap."""
    if t._base is None:
        return t
    return t.new_empty(0).set_(t.untyped_storage(), t.storage_offset(), t.shape, t.stride())


class UlyssesExchangeFunction(torch.autograd.Function):
    """Scatter `scatter_dim`, gather `gather_dim` for several tensors in one exchange; the
    backward is the inverse exchange, again one collective, summing the gradients of replicated
    slices (GQA heads shared by several ranks). Slices travel side by side along
    `scatter_dim` (they may differ in size only there)."""

    @staticmethod
    def forward(ctx, group, scatter_dim: int, gather_dim: int, replicate: tuple[bool, ...],
                *tensors: torch.Tensor):
        world = dist.get_world_size(group)
        ctx.group, ctx.scatter_dim, ctx.gather_dim = group, scatter_dim, gather_dim
        # A replicated slice of a size-n dim reaches world / n ranks; backward sums them.
        ctx.reduce = [world // t.shape[scatter_dim] if r and t.shape[scatter_dim] < world else 1
                      for t, r in zip(tensors, replicate, strict=True)]
        out = _exchange(tensors, scatter_dim, gather_dim, scatter_dim, group, replicate,
                        [1] * len(tensors))
        ctx.out_shapes = [o.shape for o in out]
        ctx.dtype, ctx.device = tensors[0].dtype, tensors[0].device
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):
        # An output the loss does not use has no gradient: it contributes zeros.
        grads = [torch.zeros(shape, dtype=ctx.dtype, device=ctx.device) if g is None else g
                 for g, shape in zip(grads, ctx.out_shapes, strict=True)]
        out = _exchange(grads, ctx.gather_dim, ctx.scatter_dim, ctx.scatter_dim, ctx.group,
                        [False] * len(grads), ctx.reduce)
        return (None, None, None, None, *out)


def ulysses_all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group=None,
                       check_inputs: CheckInputs = "once") -> torch.Tensor:
    """Splits `x` along `scatter_dim` over the ranks of `group` and concatenates what arrives
    along `gather_dim` (rank order). Differentiable: the gradient takes the inverse exchange.

    Args:
        x: any tensor whose `scatter_dim` size is a multiple of the group size.
        scatter_dim: dimension split over the ranks (e.g. heads).
        gather_dim: dimension the ranks' pieces are concatenated along (e.g. sequence).
        group: process group (default: the world).
        check_inputs: verify with one small all_gather (and a host sync) that every rank holds
            the same shape (a mismatch would otherwise abort Gloo or corrupt NCCL): "once" per
            group and shape, True on every call, False never (see check_same_shape).
    """
    group = resolve_group("ulysses_all_to_all", group)
    check_tensors("ulysses_all_to_all", x=x)
    s = check_dim("ulysses_all_to_all", "scatter_dim", x, scatter_dim)
    g = check_dim("ulysses_all_to_all", "gather_dim", x, gather_dim)
    if s == g:
        raise ValueError(f"ulysses_all_to_all: scatter_dim and gather_dim are both {s}, "
                         "expected two different dims")
    _, world = group_rank_size(group)

    def validate():
        # Found by the native pack, the error named its C++ function and a bare dim number.
        if x.shape[s] % world != 0:
            raise ValueError(f"ulysses_all_to_all: x: size {x.shape[s]} of scatter_dim {s} "
                             f"cannot be split over a group of {world}, expected a multiple "
                             f"of {world}")

    # Other dims on one rank exchange the same sizes and scramble the blocks.
    check_same_shape("ulysses_all_to_all", group, {"x": x}, check_inputs, validate=validate,
                     settings={"scatter_dim": s, "gather_dim": g})
    return UlyssesExchangeFunction.apply(group, s, g, (False,), x)[0]


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
                   softmax_scale: float | None) -> torch.Tensor:
    """Default local attention: torch's scaled_dot_product_attention on [b, s, h, d] tensors,
    with GQA when K/V carry fewer heads."""
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
        scale=softmax_scale, enable_gqa=k.shape[2] != q.shape[2])
    return out.transpose(1, 2)


def check_ulysses_heads(where: str, q_heads: int, kv_heads: int, world: int) -> None:
    """Query heads split evenly; K/V heads split evenly or, when fewer than the ranks, each
    rank's query heads must all use one K/V head (world a multiple of kv_heads)."""
    if q_heads % world != 0:
        raise ValueError(f"{where}: {q_heads} query heads cannot be split over a group of "
                         f"{world}: expected a multiple of {world}")
    if kv_heads % world != 0 and world % kv_heads != 0:
        raise ValueError(f"{where}: {kv_heads} key/value heads cannot be split over a group of "
                         f"{world}: expected a multiple or a divisor of {world}")


def ulysses_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None,
                      causal: bool = False, softmax_scale: float | None = None,
                      attn_fn: AttnFn | None = None, check_inputs: CheckInputs = "once"
                      ) -> torch.Tensor:
    """Attention over a sequence sharded across `group` ([batch, seq_local, heads, head_dim]).

    Q, K and V are exchanged in one all_to_all_single to [batch, seq, heads / P, head_dim],
    `attn_fn` runs locally, and one more exchange brings the output back to the input layout.
    With kv_heads < P each rank receives the K/V head its query heads use (replicated) and the
    replicas' gradients are summed in backward.

    Args:
        q: [b, s_local, heads, d]; heads a multiple of the group size.
        k, v: [b, s_local, kv_heads, d]; kv_heads divides heads and is a multiple or a divisor
            of the group size.
        group: process group (default: the world). Shards are contiguous: rank r holds
            positions [r * s_local, (r + 1) * s_local).
        causal: causal mask over the gathered sequence.
        softmax_scale: default 1 / sqrt(d).
        attn_fn: `attn_fn(q, k, v, causal=..., softmax_scale=...)` on [b, s, h, d] tensors
            (K/V may have fewer heads); default torch's scaled_dot_product_attention.
        check_inputs: verify that all ranks' shapes agree, as in ulysses_all_to_all.
    """
    group = resolve_group("ulysses_attention", group)
    check_tensors("ulysses_attention", q=q, k=k, v=v)
    check_attention_options("ulysses_attention: ", causal, softmax_scale)
    if attn_fn is not None and not callable(attn_fn):  # else found after the first exchange
        raise ValueError(f"ulysses_attention: attn_fn: got {attn_fn!r}, expected None or a "
                         "callable attn_fn(q, k, v, causal=..., softmax_scale=...)")
    _, world = group_rank_size(group)

    def validate():
        check_qkv("ulysses_attention", q, k, v)
        check_ulysses_heads("ulysses_attention", q.shape[2], k.shape[2], world)
        check_floating("ulysses_attention", q)

    check_same_shape("ulysses_attention", group, {"q": q, "k": k, "v": v}, check_inputs,
                     validate=validate, settings={"causal": int(causal)})
    replicate = (False, k.shape[2] < world, k.shape[2] < world)
    qg, kg, vg = UlyssesExchangeFunction.apply(group, 2, 1, replicate, q, k, v)
    out = (attn_fn or sdpa_attention)(qg, kg, vg, causal=causal, softmax_scale=softmax_scale)
    want = (*qg.shape[:-1], vg.shape[-1])
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != want:
        # Else the exchange back refused it in its own words ("packScatter: size 1 of dim 1").
        got = f"shape {list(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"ulysses_attention: attn_fn returned {got}, expected a tensor of "
                         f"shape {list(want)} ([b, s, h, d]: its q's shape with v's head_dim)")
    return UlyssesExchangeFunction.apply(group, 1, 2, (False,), out)[0]
