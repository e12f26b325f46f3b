# SPDX-License-Identifier: Apache-2.0
"""2-D sequence parallelism: Ulysses inside a fast group (heads exchanged over NVLink), ring
attention across groups (K/V blocks over the slower links). The planner's "sp" dimension gives
the Ulysses groups and its "cp" dimension the ring groups; explicit groups work as well."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist
from torch import nn

from torch_topo.ops.ring_attention import ring_attention, zigzag_shard, zigzag_unshard
from torch_topo.ops.ulysses import ulysses_attention
from torch_topo.ops.utils import group_rank_size

__all__ = [
    "SequenceParallelAttention",
    "UlyssesConfig",
    "build_sequence_parallel_groups",
    "shard_sequence",
    "unshard_sequence",
]


@dataclass(kw_only=True, slots=True, frozen=True)
class UlyssesConfig:
    """Configuration of SequenceParallelAttention."""

    sequence_parallel_size: int
    """Ulysses degree: ranks that exchange heads (place them inside one NVLink clique). Must
    divide the query heads and the world size."""
    enable_ring_exchange: bool = True
    """Run ring attention across the world_size / sequence_parallel_size Ulysses groups. False:
    those groups are independent (e.g. data-parallel replicas), the ring degree is 1."""
    ring_balance: Literal["none", "zigzag"] = "zigzag"
    """Ring layout: "zigzag" balances causal work (shard with shard_sequence), "none" keeps
    contiguous blocks."""
    causal: bool = False
    """Causal mask over the global sequence."""
    softmax_scale: float | None = None
    """Softmax scale; None means 1 / sqrt(head_dim)."""
    check_inputs: bool = True
    """Verify with one small all_gather per exchange that every rank's shapes agree."""

    def __post_init__(self) -> None:
        if not isinstance(self.sequence_parallel_size, int) or self.sequence_parallel_size < 1:
            raise ValueError(f"UlyssesConfig.sequence_parallel_size: got "
                             f"{self.sequence_parallel_size!r}, expected an int >= 1")
        if self.ring_balance not in ("none", "zigzag"):
            raise ValueError(f"UlyssesConfig.ring_balance: got {self.ring_balance!r}, expected "
                             "'none' or 'zigzag'")
        if self.softmax_scale is not None and not self.softmax_scale > 0:
            raise ValueError(f"UlyssesConfig.softmax_scale: got {self.softmax_scale!r}, "
                             "expected None or > 0")


def build_sequence_parallel_groups(config: UlyssesConfig, plan=None):
    """Creates the Ulysses and ring groups on every rank (collective: all ranks must call it)
    and returns (sp_group, ring_group) of this rank; ring_group is None without ring exchange.

    With `plan` (a torch_topo Plan, or anything with `groups(dim)`), its "sp" dimension gives
    the Ulysses groups and "cp" the ring groups, so Ulysses sits in the fastest clique. Without
    one, Ulysses groups are consecutive ranks (one host under torchrun) and rings stride them.
    """
    world, rank = dist.get_world_size(), dist.get_rank()
    sp = config.sequence_parallel_size
    if world % sp != 0:
        raise ValueError(f"UlyssesConfig.sequence_parallel_size={sp} does not divide the world "
                         f"size {world}")
    if plan is not None:
        sp_lists = [list(g) for g in plan.groups("sp")]
        ring_lists = [list(g) for g in plan.groups("cp")] if config.enable_ring_exchange else []
        if any(len(g) != sp for g in sp_lists):
            raise ValueError(f"build_sequence_parallel_groups: the plan's 'sp' groups have sizes "
                             f"{sorted({len(g) for g in sp_lists})}, expected {sp}")
    else:
        sp_lists = [list(range(i, i + sp)) for i in range(0, world, sp)]
        ring_lists = [list(range(i, world, sp)) for i in range(sp)] \
            if config.enable_ring_exchange else []
    mine = {}
    for kind, lists in (("sp", sp_lists), ("ring", ring_lists)):
        for ranks in lists:
            g = dist.new_group(ranks)  # every rank creates every group, in the same order
            if rank in ranks:
                mine[kind] = g
    if "sp" not in mine or (config.enable_ring_exchange and "ring" not in mine):
        raise ValueError(f"build_sequence_parallel_groups: rank {rank} is missing from the "
                         f"groups {sp_lists} / {ring_lists}")
    return mine["sp"], mine.get("ring")


def _ring_size(ring_group) -> int:
    return 1 if ring_group is None else dist.get_world_size(ring_group)


def shard_sequence(x: torch.Tensor, dim: int = 1, sp_group=None, ring_group=None,
                   balance: Literal["none", "zigzag"] = "zigzag") -> torch.Tensor:
    """This rank's shard of the full sequence `x` in SequenceParallelAttention's layout.

    The ring level comes first (zigzag or contiguous over ring_group), then the ring block is
    cut contiguously over sp_group, so that Ulysses' gather rebuilds exactly the ring block."""
    if _ring_size(ring_group) > 1:
        if balance == "zigzag":
            x = zigzag_shard(x, dim, ring_group)
        else:
            x = _contiguous_slice(x, dim, ring_group)
    return _contiguous_slice(x, dim, sp_group)


def unshard_sequence(x: torch.Tensor, dim: int = 1, sp_group=None, ring_group=None,
                     balance: Literal["none", "zigzag"] = "zigzag") -> torch.Tensor:
    """Inverse of shard_sequence (all_gathers; not differentiable)."""
    x = _gather_cat(x, dim, sp_group)
    if _ring_size(ring_group) > 1:
        x = zigzag_unshard(x, dim, ring_group) if balance == "zigzag" else \
            _gather_cat(x, dim, ring_group)
    return x


def _contiguous_slice(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    rank, world = group_rank_size(group)
    if x.shape[dim] % world != 0:
        raise ValueError(f"shard_sequence: length {x.shape[dim]} along dim {dim} is not "
                         f"divisible by the group size {world}")
    n = x.shape[dim] // world
    return x.narrow(dim, rank * n, n)


def _gather_cat(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    _, world = group_rank_size(group)
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim)


class SequenceParallelAttention(nn.Module):
    """Attention over a sequence sharded with shard_sequence: Ulysses over `sp_group`, and,
    when the config enables it, ring attention over `ring_group` as Ulysses' local attention.

    Args:
        config: UlyssesConfig.
        sp_group, ring_group: the groups from build_sequence_parallel_groups (or your own);
            both None means: build them now from `plan` (a collective on every rank).
        plan: optional planner result with "sp" and "cp" dimensions.
    """

    def __init__(self, config: UlyssesConfig, sp_group=None, ring_group=None, plan=None):
        super().__init__()
        if sp_group is None and ring_group is None:
            sp_group, ring_group = build_sequence_parallel_groups(config, plan)
        if sp_group is None:
            raise ValueError("SequenceParallelAttention: ring_group given without sp_group")
        if dist.get_world_size(sp_group) != config.sequence_parallel_size:
            raise ValueError(f"SequenceParallelAttention: sp_group has "
                             f"{dist.get_world_size(sp_group)} ranks, config."
                             f"sequence_parallel_size is {config.sequence_parallel_size}")
        self.config, self.sp_group = config, sp_group
        self.ring_group = ring_group if config.enable_ring_exchange else None

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q [b, s_local, heads, d], k/v [b, s_local, kv_heads, d] -> [b, s_local, heads, d]."""
        cfg = self.config
        attn_fn = None
        if _ring_size(self.ring_group) > 1:
            attn_fn = functools.partial(_ring_local, group=self.ring_group,
                                        balance=cfg.ring_balance, check_inputs=cfg.check_inputs)
        return ulysses_attention(q, k, v, group=self.sp_group, causal=cfg.causal,
                                 softmax_scale=cfg.softmax_scale, attn_fn=attn_fn,
                                 check_inputs=cfg.check_inputs)


def _ring_local(q, k, v, *, causal, softmax_scale, group, balance, check_inputs):
    return ring_attention(q, k, v, group=group, causal=causal, softmax_scale=softmax_scale,
                          balance=balance, check_inputs=check_inputs)
