# SPDX-License-Identifier: Apache-2.0
"""The Ulysses x ring split of sequence parallelism, priced by the cost model: which splits an
attention shape allows, what each costs per layer on a cluster's planned groups, which wins.

Per layer (forward and backward) the split moves, for tokens n = batch x seq_len / (U x R)
per rank and element size e (docs/ops.md, "Choosing the split"):
- Ulysses (U > 1): four all-to-alls on the "sp" groups, two of Q/K/V (n x (heads + 2 x kv_sent)
  x head_dim x e per rank: forward Q/K/V, backward their gradients) and two of the output
  (n x heads x head_dim x e: forward output, backward its gradient), where kv_sent is kv_heads,
  or U when U is a multiple of kv_heads (one replicated K/V head per destination rank);
- ring (R > 1): on the "cp" groups, 2 (R - 1) steps that pass a K/V block (2 x batch x
  seq_len / R x kv_sent / U x head_dim x e) to the next rank, forward and backward, and R steps
  that pass its fp32 dK/dV accumulator (same block, 4 bytes per element).
Each is priced with the cost model's public estimate (`PlannerCluster.estimate`): the
all-to-alls as such, a ring step as 1 / (R - 1) of a ring all-gather of R blocks (the same
transfers: every rank sends one block to its successor at once). Attention compute is the
same on every rank for every split (each computes 1 / (U x R) of the causal work, zigzag
balances it), so it does not enter the comparison; the ring's transfers are counted whole,
as if no compute hid them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from torch_topo.validation import is_int_in

__all__ = [
    "AttentionShape",
    "SplitCandidate",
    "choose_sequence_split",
    "describe_candidates",
    "sequence_split_candidates",
    "split_mesh",
    "split_problem",
]

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
           "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
           "float64": torch.float64}
# dK/dV travel the ring in the accumulation type (torch_topo.ops.ring_attention.acc_dtype).
_FP32_BYTES, _FP64_BYTES = 4, 8
# Bytes per element of the largest message _price sends the cost model: Q, K and V together (at
# most 3 x heads) in fp64, or K/V's gradients in fp64 accumulation. Its counts are int64.
_MAX_BYTES_PER_ELEMENT = 3 * _FP64_BYTES


@dataclass(kw_only=True, frozen=True, slots=True)
class AttentionShape:
    """One attention layer's shape: what the split of its sequence parallelism is priced on."""

    heads: int
    """Query heads."""
    kv_heads: int
    """Key/value heads (divides heads; fewer than heads: GQA/MQA)."""
    head_dim: int
    seq_len: int
    """Global sequence length (all sequence-parallel ranks together)."""
    batch: int = 1
    """Sequences per sequence-parallel group."""
    dtype: torch.dtype = torch.bfloat16
    """Element type of Q, K, V and the output."""

    def __post_init__(self) -> None:
        for name in ("heads", "kv_heads", "head_dim", "seq_len", "batch"):
            value = getattr(self, name)
            if not is_int_in(value, 1):
                raise ValueError(f"AttentionShape.{name}: got {value!r}, expected an int >= 1")
        if self.heads % self.kv_heads:
            raise ValueError(f"AttentionShape.kv_heads: got {self.kv_heads}, expected a divisor "
                             f"of heads {self.heads}")
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise ValueError(f"AttentionShape.dtype: got {self.dtype!r}, expected a floating "
                             "torch.dtype")
        elements = self.batch * self.seq_len * self.heads * self.head_dim
        if elements * _MAX_BYTES_PER_ELEMENT >= 1 << 63:
            raise ValueError(
                f"AttentionShape: batch x seq_len x heads x head_dim = {elements}, expected <= "
                f"{((1 << 63) - 1) // _MAX_BYTES_PER_ELEMENT} (messages of "
                f"{_MAX_BYTES_PER_ELEMENT} bytes per element must fit in int64)")

    @classmethod
    def parse(cls, text: str, option: str = "--attention") -> AttentionShape:
        """ "heads=32,kv_heads=8,head_dim=128,seq_len=8192[,batch=1][,dtype=bf16]" -> shape;
        ValueError names `option`."""
        from torch_topo.plan import assignments

        if not isinstance(text, str):
            raise ValueError(f"{option}: got {type(text).__name__}, expected a string such as "
                             "'heads=32,kv_heads=8,head_dim=128,seq_len=8192'")
        names = ("heads", "kv_heads", "head_dim", "seq_len", "batch", "dtype")
        form = f"NAME=VALUE with NAME one of {', '.join(names)}"
        fields: dict = {}
        for name, value in assignments(text, option, form):
            if name not in names:
                raise ValueError(f"{option}: got {f'{name}={value}'!r}, expected {form}")
            if name == "dtype":
                if value not in _DTYPES:
                    raise ValueError(f"{option}: dtype: got {value!r}, expected one of "
                                     f"{', '.join(_DTYPES)}")
                fields[name] = _DTYPES[value]
            elif not (value.isascii() and value.isdigit()):  # "²" is a digit to isdigit
                raise ValueError(f"{option}: {name}: got {value!r}, expected an integer >= 1")
            else:
                fields[name] = int(value)
        missing = [n for n in ("heads", "kv_heads", "head_dim", "seq_len") if n not in fields]
        if missing:
            raise ValueError(f"{option}: got {text!r}, missing {', '.join(missing)}")
        try:
            return cls(**fields)
        except ValueError as e:
            raise ValueError(f"{option}: {e}") from None


@dataclass(frozen=True, slots=True)
class SplitCandidate:
    """One Ulysses x ring split and its predicted seconds per layer (forward and backward)."""

    ulysses: int
    ring: int
    problem: str | None = None
    """Why the shape does not allow this split (then nothing is priced); None when it does."""
    all_to_all_s: float = 0.0
    ring_s: float = 0.0
    messages: dict = field(default_factory=dict)
    """Bytes priced per message: "qkv" and "out" (one rank's all-to-all send buffer), "kv" and
    "dkv" (one ring step's block)."""

    @property
    def valid(self) -> bool:
        return self.problem is None

    @property
    def seconds(self) -> float:
        return self.all_to_all_s + self.ring_s if self.valid else math.inf


def split_mesh(mesh: Mapping[str, int], ulysses: int) -> dict[str, int]:
    """`mesh` (outermost first) with its "sp" dimension, the ranks sharing one sequence, cut
    into "cp" (ring, outside) and "sp" (Ulysses, inside)."""
    out: dict[str, int] = {}
    for name, size in mesh.items():
        if name == "sp":
            out["cp"] = size // ulysses
            out["sp"] = ulysses
        else:
            out[name] = size
    return out


def split_problem(shape: AttentionShape, ulysses: int, ring: int,
                  balance: str = "zigzag") -> str | None:
    """Why the shape cannot run on this split (the rules of ulysses_attention, ring_attention
    and shard_sequence), or None."""
    if shape.heads % ulysses:
        return f"heads {shape.heads} not a multiple of the Ulysses degree {ulysses}"
    if shape.kv_heads % ulysses and ulysses % shape.kv_heads:
        return (f"kv heads {shape.kv_heads} neither a multiple nor a divisor of the Ulysses "
                f"degree {ulysses}")
    # The ring shards first (zigzag: 2R chunks, two per rank, so the ring block is even), then
    # each ring block is cut contiguously over the Ulysses group.
    if ring == 1:
        multiple = ulysses
    elif balance == "zigzag":
        multiple = ring * math.lcm(2, ulysses)
    else:
        multiple = ring * ulysses
    if shape.seq_len % multiple:
        return f"seq_len {shape.seq_len} not a multiple of {multiple}"
    return None


def _kv_sent(shape: AttentionShape, ulysses: int) -> int:
    """K/V heads in one rank's all-to-all send buffer: each destination gets its own share,
    or, with fewer K/V heads than ranks, a copy of the one its query heads use."""
    return shape.kv_heads if shape.kv_heads % ulysses == 0 else ulysses


def _price(cluster, plan, shape: AttentionShape, ulysses: int, ring: int) -> SplitCandidate:
    e = torch.empty((), dtype=shape.dtype).element_size()
    acc = _FP64_BYTES if shape.dtype == torch.float64 else _FP32_BYTES
    d, kv_sent = shape.head_dim, _kv_sent(shape, ulysses)
    tokens = shape.batch * shape.seq_len // (ulysses * ring)
    messages, a2a, ring_s = {}, 0.0, 0.0
    if ulysses > 1:
        groups = plan.groups("sp")
        messages["qkv"] = tokens * (shape.heads + 2 * kv_sent) * d * e
        messages["out"] = tokens * shape.heads * d * e
        a2a = 2 * sum(cluster.estimate("all_to_all", messages[m], groups)["seconds"]
                      for m in ("qkv", "out"))
    if ring > 1:
        groups = plan.groups("cp")
        block = 2 * shape.batch * (shape.seq_len // ring) * (kv_sent // ulysses) * d
        messages["kv"], messages["dkv"] = block * e, block * acc

        def step(nbytes: int) -> float:
            gather = cluster.estimate("all_gather", ring * nbytes, groups, "ring")
            return gather["seconds"] / (ring - 1)

        ring_s = 2 * (ring - 1) * step(messages["kv"]) + ring * step(messages["dkv"])
    return SplitCandidate(ulysses, ring, None, a2a, ring_s, messages)


def sequence_split_candidates(cluster, mesh: Mapping[str, int], shape: AttentionShape, *,
                              balance: str = "zigzag",
                              contiguous: bool = False) -> list[SplitCandidate]:
    """Every Ulysses degree dividing mesh["sp"], smallest first, priced on the groups the
    planner lays out for `split_mesh(mesh, ulysses)` (the contiguous layout with
    `contiguous=True`, as init_device_mesh uses without a GPU topology).

    Args:
        cluster: a `_C.PlannerCluster` of the mesh's ranks.
        mesh: {name: size}, outermost first, with "sp" the ranks that share one sequence.
        shape: the attention layer.
        balance: the ring layout, "zigzag" or "none".
    """
    from torch_topo.plan import Plan

    sp = mesh.get("sp")
    if not isinstance(sp, int) or sp < 1 or "cp" in mesh or "ring" in mesh:
        # Starts with "mesh: " so that the plan verb names its --mesh.
        raise ValueError(f"mesh: got {dict(mesh)}, expected an 'sp' dimension for the sequence "
                         "split (the ranks sharing one sequence, Ulysses x ring) and no 'cp' or "
                         "'ring' (the split makes it)")
    out = []
    for ulysses in (u for u in range(1, sp + 1) if sp % u == 0):
        ring = sp // ulysses
        problem = split_problem(shape, ulysses, ring, balance)
        if problem is not None:
            out.append(SplitCandidate(ulysses, ring, problem))
            continue
        plan = Plan.build(cluster, split_mesh(mesh, ulysses), contiguous=contiguous)
        out.append(_price(cluster, plan, shape, ulysses, ring))
    return out


def choose_sequence_split(candidates: list[SplitCandidate]) -> SplitCandidate:
    """The fastest valid candidate (ties: the larger Ulysses degree, fewer ring steps);
    ValueError listing every candidate's problem when none is valid."""
    valid = [c for c in candidates if c.valid]
    if not valid:
        why = "; ".join(f"Ulysses {c.ulysses} x ring {c.ring}: {c.problem}" for c in candidates)
        raise ValueError(f"sequence split: no Ulysses x ring split fits the attention shape: "
                         f"{why}")
    return min(valid, key=lambda c: (c.seconds, -c.ulysses))


def describe_candidates(shape: AttentionShape, candidates: list[SplitCandidate]) -> str:
    """Lines for `plan` and explain(): each candidate's predicted time or problem."""
    best = choose_sequence_split(candidates) if any(c.valid for c in candidates) else None
    dtype = str(shape.dtype).removeprefix("torch.")
    lines = [f"sequence split for heads {shape.heads}, kv heads {shape.kv_heads}, head_dim "
             f"{shape.head_dim}, seq_len {shape.seq_len}, batch {shape.batch}, {dtype} "
             "(predicted per layer, forward + backward):"]
    for c in candidates:
        head = f"  Ulysses {c.ulysses} x ring {c.ring}: "
        if not c.valid:
            lines.append(head + f"not possible: {c.problem}")
            continue
        lines.append(head + f"{c.seconds * 1e3:.3f} ms (all-to-all {c.all_to_all_s * 1e3:.3f} "
                     f"ms, ring {c.ring_s * 1e3:.3f} ms)" + ("  <- chosen" if c is best else ""))
    return "\n".join(lines)
