# SPDX-License-Identifier: Apache-2.0
"""2-D sequence parallelism: Ulysses inside a fast group (heads exchanged over NVLink), ring
attention across groups (K/V blocks over the slower links). The cost model chooses the split
for the attention's shape (torch_topo.ops.sequence_split) and the planner lays it out: its "sp"
dimension gives the Ulysses groups and its "cp" (or "ring") dimension the ring groups; explicit
degrees and groups work as well."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist
from torch import nn

from torch_topo import _C
from torch_topo.ops.ring_attention import (
    SAME_SHARD,
    check_zigzag_length,
    ring_attention,
    zigzag_shard,
    zigzag_unshard,
)
from torch_topo.ops.sequence_split import (
    AttentionShape,
    SplitCandidate,
    choose_sequence_split,
    sequence_split_candidates,
    split_mesh,
)
from torch_topo.ops.ulysses import ulysses_attention
from torch_topo.ops.utils import (
    CheckInputs,
    check_attention_options,
    check_dim,
    check_same_shape,
    check_tensors,
    group_rank_size,
    resolve_group,
)
from torch_topo.validation import is_int_in

__all__ = [
    "SequenceParallelAttention",
    "UlyssesConfig",
    "build_sequence_parallel_groups",
    "resolve_sequence_parallel_degrees",
    "sequence_parallel_candidates",
    "shard_sequence",
    "unshard_sequence",
]


@dataclass(kw_only=True, slots=True, frozen=True)
class UlyssesConfig:
    """Configuration of SequenceParallelAttention."""

    sequence_parallel_size: int
    """Ranks that share one sequence: Ulysses degree x ring degree. Must divide the world size;
    the world / sequence_parallel_size groups are independent (e.g. data-parallel replicas)."""
    enable_ring_exchange: bool = True
    """Split the sequence-parallel ranks into Ulysses groups joined by ring attention. False:
    Ulysses over all of them (the ring degree is 1)."""
    ulysses_degree: int | None = None
    """Ranks that exchange heads (must divide the query heads). None: the split the cost model
    predicts fastest for `attention` on the world's topology
    (`resolve_sequence_parallel_degrees`), or the whole sequence_parallel_size without ring
    exchange."""
    attention: AttentionShape | None = None
    """The attention layer's shape; needed when the cost model chooses the Ulysses degree."""
    ring_balance: Literal["none", "zigzag"] = "zigzag"
    """Ring layout: "zigzag" balances causal work (shard with shard_sequence), "none" keeps
    contiguous blocks."""
    causal: bool = False
    """Causal mask over the global sequence."""
    softmax_scale: float | None = None
    """Softmax scale; None means 1 / sqrt(head_dim)."""
    check_inputs: CheckInputs = "once"
    """Verify with one small all_gather that every rank's shapes agree: "once" per group and
    shape (default), True on every call, False never (see torch_topo.ops.utils.check_same_shape)."""

    def __post_init__(self) -> None:
        sp = self.sequence_parallel_size
        if not is_int_in(sp, 1):
            raise ValueError(f"UlyssesConfig.sequence_parallel_size: got {sp!r}, expected an "
                             "int >= 1")
        if not isinstance(self.enable_ring_exchange, bool):  # "no" would enable the ring
            raise ValueError(f"UlyssesConfig.enable_ring_exchange: got "
                             f"{self.enable_ring_exchange!r}, expected True or False")
        u = self.ulysses_degree
        if u is not None:
            if not is_int_in(u, 1) or sp % u:
                raise ValueError(f"UlyssesConfig.ulysses_degree: got {u!r}, expected None or an "
                                 f"int >= 1 dividing sequence_parallel_size {sp}")
            if not self.enable_ring_exchange and u != sp:
                raise ValueError(f"UlyssesConfig.ulysses_degree: got {u} with "
                                 f"enable_ring_exchange=False, expected {sp} (no ring: Ulysses "
                                 "spans every sequence-parallel rank) or None")
        if self.attention is not None and not isinstance(self.attention, AttentionShape):
            raise ValueError(f"UlyssesConfig.attention: got {self.attention!r}, expected None "
                             "or an AttentionShape")
        if self.ring_balance not in ("none", "zigzag"):
            raise ValueError(f"UlyssesConfig.ring_balance: got {self.ring_balance!r}, expected "
                             "'none' or 'zigzag'")
        check_attention_options("UlyssesConfig.", self.causal, self.softmax_scale)
        if self.check_inputs is not True and self.check_inputs is not False \
                and self.check_inputs != "once":
            raise ValueError(f"UlyssesConfig.check_inputs: got {self.check_inputs!r}, expected "
                             "True, False or 'once'")

    @property
    def ring_degree(self) -> int | None:
        """sequence_parallel_size / ulysses_degree (None while the Ulysses degree is open)."""
        if not self.enable_ring_exchange:
            return 1
        return None if self.ulysses_degree is None else self.sequence_parallel_size // self.ulysses_degree


def _check_config(where: str, config: object) -> None:
    if not isinstance(config, UlyssesConfig):
        raise ValueError(f"{where}: config: got {type(config).__name__}, expected a "
                         "torch_topo.UlyssesConfig")


def _world_size(where: str, world_size: object, cluster=None) -> int:
    """For None the rank count of `cluster` where it is a PlannerCluster (no process group
    needed), else torch.distributed's; 0, -2 or 4.0 passed the divisibility check and came back
    as degrees of a world that cannot be."""
    if world_size is None:
        if isinstance(cluster, _C.PlannerCluster):
            return cluster.world_size
        return dist.get_world_size()
    if not is_int_in(world_size, 1):
        raise ValueError(f"{where}: world_size: got {world_size!r}, expected None or an int >= 1")
    return world_size


def _check_divides_world(sp: int, world: int) -> None:
    if world % sp:
        raise ValueError(f"UlyssesConfig.sequence_parallel_size={sp} does not divide the world "
                         f"size {world}")


def _pricing_cluster(world: int):
    """(cluster, contiguous): what init_device_mesh plans on, else the live cluster's hosts
    with CPU ranks (or one host), laid out contiguously as init_device_mesh then does."""
    from torch_topo.mesh import cpu_ranks_doc, world_planner_cluster
    from torch_topo.plan import resolve_cluster

    cluster = world_planner_cluster(world_size=world)
    if cluster is not None:
        return cluster, False
    return resolve_cluster(cpu_ranks_doc(world)), True


def sequence_parallel_candidates(config: UlyssesConfig, world_size: int | None = None,
                                 cluster=None, mesh: dict[str, int] | None = None
                                 ) -> list[SplitCandidate]:
    """Every Ulysses x ring split of config.sequence_parallel_size with its predicted time per
    layer for config.attention, or the problem that rules it out (see sequence_split).

    Args:
        config: needs `attention`; its sequence_parallel_size must divide the world size.
        world_size: default: torch.distributed's; with `cluster`, its rank count.
        cluster: a `_C.PlannerCluster` of the world; default: the one init_device_mesh plans on
            (pinned file, else the live cluster). Clusters with CPU ranks are priced on the
            contiguous layout, as init_device_mesh lays them out.
        mesh: the world's mesh, outermost first, with "sp" the sequence-parallel ranks
            (e.g. {"dp": 2, "sp": 4, "tp": 2}); default {"dp": world / sp, "sp": sp}.
    """
    _check_config("sequence_parallel_candidates", config)
    world = _world_size("sequence_parallel_candidates", world_size, cluster)
    sp = config.sequence_parallel_size
    _check_divides_world(sp, world)
    if config.attention is None:
        raise ValueError("UlyssesConfig.attention: not set, expected the attention's shape "
                         "(AttentionShape) to choose the Ulysses x ring split; or set "
                         "ulysses_degree")
    if mesh is not None and not isinstance(mesh, Mapping):
        raise ValueError(f"sequence_parallel_candidates: mesh: got {mesh!r}, expected None or "
                         "{name: size}, outermost first")
    if cluster is not None and not isinstance(cluster, _C.PlannerCluster):
        raise ValueError(f"sequence_parallel_candidates: cluster: got {type(cluster).__name__}, "
                         "expected None or a torch_topo._C.PlannerCluster")
    # Else the planner refused each split naming a mesh the caller never gave, and a shape that
    # rules out every split came back as that list, answered for a job of another size.
    if cluster is not None and cluster.world_size != world:
        raise ValueError(f"sequence_parallel_candidates: world_size: got {world}, expected the "
                         f"{cluster.world_size} ranks of the cluster given (it prices the whole "
                         "world it holds)")
    mesh = {"dp": world // sp, "sp": sp} if mesh is None else dict(mesh)
    if mesh.get("sp") != sp:
        raise ValueError(f"mesh: got {mesh}, expected an 'sp' dimension of "
                         f"sequence_parallel_size {sp}")
    # Else found by the planner, on the split mesh ("dp=3 x cp=2 x sp=1") the caller never gave.
    if all(is_int_in(n, 1) for n in mesh.values()) and math.prod(mesh.values()) != world:
        raise ValueError(f"mesh: got {mesh}, expected sizes whose product is the world size "
                         f"{world}")
    if cluster is None:
        cluster, contiguous = _pricing_cluster(world)
    else:
        contiguous = any(cluster.rank_gpu(r) < 0 for r in range(cluster.world_size))
    return sequence_split_candidates(cluster, mesh, config.attention,
                                     balance=config.ring_balance, contiguous=contiguous)


def resolve_sequence_parallel_degrees(config: UlyssesConfig, world_size: int | None = None,
                                      cluster=None, mesh: dict[str, int] | None = None
                                      ) -> tuple[int, int]:
    """(Ulysses degree, ring degree) of `config`: as given, else the split the cost model
    predicts fastest per layer for config.attention on the world's planned groups
    (`sequence_parallel_candidates`, same arguments); ValueError when no split fits the shape.
    """
    _check_config("resolve_sequence_parallel_degrees", config)
    world = _world_size("resolve_sequence_parallel_degrees", world_size, cluster)
    sp = config.sequence_parallel_size
    _check_divides_world(sp, world)
    if config.ring_degree is not None:
        return sp // config.ring_degree, config.ring_degree
    best = choose_sequence_split(sequence_parallel_candidates(config, world, cluster, mesh))
    return best.ulysses, best.ring


def build_sequence_parallel_groups(config: UlyssesConfig, plan=None):
    """Creates the Ulysses and ring groups on every rank (collective: all ranks must call it)
    and returns (sp_group, ring_group) of this rank; ring_group is None without ring exchange.

    With `plan` (a torch_topo Plan, or anything with `groups(dim)`), its "sp" dimension gives
    the Ulysses groups and its "cp" or "ring" dimension the ring groups. Without one, the
    degrees come from `resolve_sequence_parallel_degrees` and the planner lays them out on the
    world's topology (Ulysses groups on the fastest links); with no topology known, Ulysses
    groups are consecutive ranks and rings stride them.
    """
    _check_config("build_sequence_parallel_groups", config)
    if plan is not None and not callable(getattr(plan, "groups", None)):
        raise ValueError(f"build_sequence_parallel_groups: plan: got {type(plan).__name__}, "
                         "expected None or a torch_topo Plan (anything with groups(dim))")
    world, rank = dist.get_world_size(), dist.get_rank()
    sp = config.sequence_parallel_size
    _check_divides_world(sp, world)
    if plan is None:
        from torch_topo.mesh import world_planner_cluster

        cluster = world_planner_cluster()
        ulysses, _ = resolve_sequence_parallel_degrees(config, world, cluster)
        if cluster is not None:
            from torch_topo.plan import Plan

            plan = Plan.build(cluster, split_mesh({"dp": world // sp, "sp": sp}, ulysses))
    if plan is not None:
        ring_dim = next((d for d in ("cp", "ring") if d in getattr(plan, "mesh_dim_names", ())),
                        "cp")
        sp_lists = [list(g) for g in plan.groups("sp")]
        ring_lists = [list(g) for g in plan.groups(ring_dim)] if config.enable_ring_exchange \
            else []
        want = config.ulysses_degree or (sp if not config.enable_ring_exchange else None)
        sizes = sorted({len(g) for g in sp_lists})
        if len(sizes) != 1 or (want is not None and sizes[0] != want):
            raise ValueError(f"build_sequence_parallel_groups: the plan's 'sp' groups have sizes "
                             f"{sizes}, expected {want or 'one size'}")
        ring_sizes = {len(g) for g in ring_lists}
        if ring_lists and ring_sizes != {sp // sizes[0]}:
            raise ValueError(f"build_sequence_parallel_groups: the plan's {ring_dim!r} groups "
                             f"have sizes {sorted(ring_sizes)}, expected "
                             f"{sp // sizes[0]} (sequence_parallel_size / Ulysses degree)")
    else:
        block = [list(range(i, i + sp)) for i in range(0, world, sp)]
        sp_lists = [b[j:j + ulysses] for b in block for j in range(0, sp, ulysses)]
        ring_lists = [b[j::ulysses] for b in block for j in range(ulysses)] \
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
    dim = _check_layout("shard_sequence", x, dim, balance)
    sp_group, ring_group = _check_groups("shard_sequence", sp_group, ring_group)
    if _ring_size(ring_group) > 1:
        if balance == "zigzag":
            check_zigzag_length(f"shard_sequence: x: length along dim {dim}", x.shape[dim],
                                _ring_size(ring_group))
            x = zigzag_shard(x, dim, ring_group)
        else:
            x = _contiguous_slice(x, dim, ring_group)
    return _contiguous_slice(x, dim, sp_group)


def unshard_sequence(x: torch.Tensor, dim: int = 1, sp_group=None, ring_group=None,
                     balance: Literal["none", "zigzag"] = "zigzag") -> torch.Tensor:
    """Inverse of shard_sequence (all_gathers; not differentiable). Shards of different shapes
    or dtypes raise ValueError on every rank (checked as the ops' check_inputs="once")."""
    _check_balance("unshard_sequence", balance)
    check_tensors("unshard_sequence", x=x)
    sp_group, ring_group = _check_groups("unshard_sequence", sp_group, ring_group)
    # The dim is checked with the shapes (_gather_cat): one rank refusing it alone left the
    # others in the shape check's all_gather.
    x, dim = _gather_cat(x, dim, sp_group)
    if _ring_size(ring_group) > 1:
        x = zigzag_unshard(x, dim, ring_group) if balance == "zigzag" else \
            _gather_cat(x, dim, ring_group)[0]
    return x


def _check_balance(where: str, balance: object) -> None:
    # Any balance but "zigzag" used to shard contiguously without a word.
    if balance not in ("none", "zigzag"):
        raise ValueError(f"{where}: balance: got {balance!r}, expected 'none' or 'zigzag'")


def _check_layout(where: str, x: torch.Tensor, dim: object, balance: object) -> int:
    _check_balance(where, balance)
    check_tensors(where, x=x)
    return check_dim(where, "dim", x, dim)


def _check_groups(where: str, sp_group, ring_group):
    """(sp_group or the world, ring_group or None); a string or an int reached c10d's "Group x
    is not registered" or an AttributeError."""
    return (resolve_group(f"{where} (sp_group)", sp_group),
            None if ring_group is None else resolve_group(f"{where} (ring_group)", ring_group))


def _contiguous_slice(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    rank, world = group_rank_size(group)
    if x.shape[dim] % world != 0:
        raise ValueError(f"shard_sequence: length {x.shape[dim]} along dim {dim} is not "
                         f"divisible by the group size {world}")
    n = x.shape[dim] // world
    return x.narrow(dim, rank * n, n)


def _gather_cat(x: torch.Tensor, dim: object, group) -> tuple[torch.Tensor, int]:
    """(the shards of `group` joined along `dim`, that dim checked and made non-negative)."""
    # Shards of different shapes aborted Gloo in the all_gather.
    check_same_shape("unshard_sequence", group, {"x": x}, rule=SAME_SHARD,
                     validate=lambda: check_dim("unshard_sequence", "dim", x, dim))
    dim = check_dim("unshard_sequence", "dim", x, dim)
    _, world = group_rank_size(group)
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim), dim


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
        _check_config("SequenceParallelAttention", config)
        if sp_group is None and ring_group is None:
            sp_group, ring_group = build_sequence_parallel_groups(config, plan)
        if sp_group is None:
            raise ValueError("SequenceParallelAttention: ring_group given without sp_group")
        sp_group = resolve_group("SequenceParallelAttention (sp_group)", sp_group)
        if ring_group is not None:
            ring_group = resolve_group("SequenceParallelAttention (ring_group)", ring_group)
        ulysses = dist.get_world_size(sp_group)
        ring = _ring_size(ring_group) if config.enable_ring_exchange else 1
        if ulysses * ring != config.sequence_parallel_size or (
                config.ulysses_degree is not None and ulysses != config.ulysses_degree):
            raise ValueError(f"SequenceParallelAttention: sp_group has {ulysses} ranks and the "
                             f"ring {ring}, expected config.sequence_parallel_size "
                             f"{config.sequence_parallel_size} = Ulysses degree "
                             f"{config.ulysses_degree or 'any'} x ring degree")
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
