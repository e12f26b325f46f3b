# SPDX-License-Identifier: Apache-2.0
"""Bad input given alike on every rank of a RankPool (ops_pool.py runs these as
`bad_input_cases.<case>`): every rank must raise the same clear error, so no rank is left inside
a collective. Bad input on one rank only is one_rank_cases.py."""

from __future__ import annotations

import re

import torch
import torch.distributed as dist
from ops_cases import qkv

import torch_topo


def raises(rank, world, *, call, match, error="ValueError"):
    """`call` names a bad-input scenario below; every rank must raise `error` (ValueError, or
    TypeError for an argument that is no tensor, as torch raises) matching `match` (so no rank
    is left inside a collective)."""
    try:
        _BAD[call](rank, world)
    except {"ValueError": ValueError, "TypeError": TypeError}[error] as e:
        if not re.search(match, str(e)):
            raise AssertionError(f"{call}: message {str(e)!r} does not match {match!r}") from e
        return str(e)
    raise AssertionError(f"{call}: no {error} raised")


def _seq_differs(op):
    def run(rank, world):
        q, k, v = qkv(s=4 + 2 * (rank == world - 1), h=2 * world, hk=2 * world)
        getattr(torch_topo, op)(q, k, v)
    return run


def _dtype_differs(op):
    def run(rank, world):
        dtype = torch.float64 if rank == world - 1 else torch.float32
        getattr(torch_topo, op)(*qkv(h=2 * world, hk=2 * world, dtype=dtype))
    return run


def _kv_meta(rank, world):
    q, k, v = qkv(h=2 * world, hk=2 * world)
    torch_topo.ulysses_attention(q, k.to("meta"), v.to("meta"))


# (batch, seq, heads, kv_heads): kv_heads neither a multiple nor a divisor of the group size.
_BAD_KV_HEADS = {2: (1, 4, 6, 3), 3: (1, 4, 6, 2), 4: (1, 4, 12, 3)}

_BAD = {
    "ulysses_heads": lambda r, w: torch_topo.ulysses_attention(*qkv(h=w + 1, hk=1)),
    "ulysses_kv_heads": lambda r, w: torch_topo.ulysses_attention(*qkv(*_BAD_KV_HEADS[w])),
    "ulysses_dtype": lambda r, w: torch_topo.ulysses_attention(
        qkv(h=w, hk=w)[0], *qkv(h=w, hk=w, dtype=torch.float64)[1:]),
    "ulysses_device": _kv_meta,
    "ulysses_kv_length": lambda r, w: torch_topo.ulysses_attention(
        qkv(s=4, h=w, hk=w)[0], *qkv(s=6, h=w, hk=w)[1:]),
    "ring_kv_length": lambda r, w: torch_topo.ring_attention(
        qkv(s=4)[0], *qkv(s=6)[1:]),
    "ulysses_seq_differs": _seq_differs("ulysses_attention"),
    "ring_seq_differs": _seq_differs("ring_attention"),
    "ulysses_dtype_differs": _dtype_differs("ulysses_attention"),
    # Settings that differ across ranks exchange the same sizes: the numbers came back wrong.
    "ring_causal_differs": lambda r, w: torch_topo.ring_attention(
        *qkv(s=4), causal=r == w - 1),
    "ring_balance_differs": lambda r, w: torch_topo.ring_attention(
        *qkv(s=4), balance="zigzag" if r == w - 1 else "none"),
    "ulysses_causal_differs": lambda r, w: torch_topo.ulysses_attention(
        *qkv(h=w, hk=w), causal=r == w - 1),
    "a2a_dims_differ": lambda r, w: torch_topo.ulysses_all_to_all(
        torch.zeros(w, w, 2), 1 if r == w - 1 else 0, 2),
    "ring_dtype_differs": _dtype_differs("ring_attention"),
    # Integer tensors reached the kernels only after the first exchange (the ring's transfers
    # were left posted); an empty sequence killed the ring's CPU flash kernel with SIGFPE.
    "ulysses_int_dtype": lambda r, w: torch_topo.ulysses_attention(
        *(t.long() for t in qkv(h=w, hk=w))),
    "ring_int_dtype": lambda r, w: torch_topo.ring_attention(*(t.long() for t in qkv())),
    "ring_empty_seq": lambda r, w: torch_topo.ring_attention(*qkv(s=0)),
    "ring_balance": lambda r, w: torch_topo.ring_attention(*qkv(), balance="diagonal"),
    "ring_zigzag_odd": lambda r, w: torch_topo.ring_attention(*qkv(s=3), balance="zigzag"),
    "zigzag_not_2p": lambda r, w: torch_topo.zigzag_shard(torch.zeros(1, 2 * w + 1, 1), 1),
    "zigzag_positions_not_2p": lambda r, w: torch_topo.zigzag_positions(2 * w + 2),
    "zigzag_unshard_odd": lambda r, w: torch_topo.zigzag_unshard(torch.zeros(1, 3, 1), 1),
    "shard_zigzag_not_2p": lambda r, w: torch_topo.shard_sequence(
        torch.zeros(1, 2 * w + 1), 1, ring_group=dist.group.WORLD),
    "a2a_not_divisible": lambda r, w: torch_topo.ulysses_all_to_all(torch.zeros(w + 1, 2), 0, 1),
    "sp_not_dividing_world": lambda r, w: torch_topo.build_sequence_parallel_groups(
        torch_topo.UlyssesConfig(sequence_parallel_size=w + 1)),
    # Accepted before: a NaN scale gave a finite output, inf NaNs, causal="no" a causal mask;
    # a float dim was a pybind11 TypeError, an out-of-range one an IndexError, a negative
    # length a torch.arange error, and an unknown balance sharded contiguously.
    "ulysses_scale_nan": lambda r, w: torch_topo.ulysses_attention(
        *qkv(h=w, hk=w), softmax_scale=float("nan")),
    "ring_scale_inf": lambda r, w: torch_topo.ring_attention(*qkv(), softmax_scale=float("inf")),
    "ring_causal_str": lambda r, w: torch_topo.ring_attention(*qkv(), causal="no"),
    "a2a_float_dim": lambda r, w: torch_topo.ulysses_all_to_all(torch.zeros(w, 2), 0.0, 1),
    "a2a_scalar": lambda r, w: torch_topo.ulysses_all_to_all(torch.zeros(()), 1, 0),
    # An attn_fn that drops the sequence: the exchange back refused it as packScatter's input.
    "ulysses_attn_fn_shape": lambda r, w: torch_topo.ulysses_attention(
        *qkv(h=w, hk=w), attn_fn=lambda q, k, v, **kw: q[:, :1]),
    "ulysses_attn_fn_tuple": lambda r, w: torch_topo.ulysses_attention(
        *qkv(h=w, hk=w), attn_fn=lambda q, k, v, **kw: (q, None)),
    "zigzag_positions_negative": lambda r, w: torch_topo.zigzag_positions(-2),
    "shard_dim_out_of_range": lambda r, w: torch_topo.shard_sequence(torch.zeros(1, 2 * w), 5),
    "shard_balance": lambda r, w: torch_topo.shard_sequence(torch.zeros(1, 2 * w), 1,
                                                            balance="stripe"),
    # No tensor: AttributeError "'NoneType' object has no attribute 'dim'" (a pybind11 message
    # at zigzag_shard); a float dim of the zigzag helpers was pybind11's too, and True was dim 1.
    "ring_q_none": lambda r, w: torch_topo.ring_attention(None, *qkv()[1:]),
    "ulysses_v_list": lambda r, w: torch_topo.ulysses_attention(*qkv(h=w, hk=w)[:2], [1.0]),
    "a2a_none": lambda r, w: torch_topo.ulysses_all_to_all(None, 0, 1),
    "zigzag_shard_none": lambda r, w: torch_topo.zigzag_shard(None),
    "unshard_none": lambda r, w: torch_topo.unshard_sequence(None),
    "zigzag_shard_float_dim": lambda r, w: torch_topo.zigzag_shard(torch.zeros(1, 2 * w), 1.0),
    "zigzag_shard_bool_dim": lambda r, w: torch_topo.zigzag_shard(torch.zeros(1, 2 * w), True),
    "zigzag_unshard_float_dim": lambda r, w: torch_topo.zigzag_unshard(torch.zeros(1, 2), 1.0),
    # A group that is no ProcessGroup reached c10d ("Group x is not registered") or, as the
    # ring group, an AttributeError.
    "shard_sp_group_str": lambda r, w: torch_topo.shard_sequence(torch.zeros(1, 2 * w), 1,
                                                                 sp_group="x"),
    "unshard_ring_group_int": lambda r, w: torch_topo.unshard_sequence(torch.zeros(1, 2), 1,
                                                                       ring_group=3),
    # Accepted before: "no" returned the (out, lse) tuple; attn_fn=3 failed after the exchange.
    "ring_return_lse_str": lambda r, w: torch_topo.ring_attention(*qkv(), return_lse="no"),
    "ulysses_attn_fn_int": lambda r, w: torch_topo.ulysses_attention(*qkv(h=w, hk=w),
                                                                      attn_fn=3),
}


def non_member(rank, world, *, op):
    """Ranks that new_group leaves out get an int, not a group: the ops must say so (they
    failed with "'int' object has no attribute 'group_name'")."""
    group = dist.new_group([0, 1])  # every rank creates every group
    if rank in (0, 1):
        return None
    q, k, v = qkv(h=4, hk=4)
    call = {"ulysses": lambda: torch_topo.ulysses_attention(q, k, v, group=group),
            "ring": lambda: torch_topo.ring_attention(q, k, v, group=group),
            "a2a": lambda: torch_topo.ulysses_all_to_all(q, 2, 1, group=group),
            "2d": lambda: torch_topo.SequenceParallelAttention(
                torch_topo.UlyssesConfig(sequence_parallel_size=2, ulysses_degree=2,
                                         enable_ring_exchange=False), sp_group=group)}[op]
    try:
        call()
    except ValueError as e:
        if "expected a ProcessGroup this rank belongs to" not in str(e):
            raise AssertionError(f"{op}: message {str(e)!r}") from e
        return str(e)
    raise AssertionError(f"{op}: no ValueError raised")
