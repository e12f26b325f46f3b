# SPDX-License-Identifier: Apache-2.0
"""Model-facing ops: sequence-parallel attention (Ulysses, ring, their 2-D combination) and
communication/compute overlap. Each algorithm lives in its own module."""

from torch_topo.ops.overlap import (
    OverlapRecorder,
    all_gather_matmul,
    hidden_fraction,
    matmul_reduce_scatter,
)
from torch_topo.ops.ring_attention import (
    ring_attention,
    zigzag_positions,
    zigzag_shard,
    zigzag_unshard,
)
from torch_topo.ops.sequence_parallel import (
    SequenceParallelAttention,
    UlyssesConfig,
    build_sequence_parallel_groups,
    resolve_sequence_parallel_degrees,
    sequence_parallel_candidates,
    shard_sequence,
    unshard_sequence,
)
from torch_topo.ops.sequence_split import AttentionShape
from torch_topo.ops.ulysses import ulysses_all_to_all, ulysses_attention

__all__ = [
    "AttentionShape",
    "OverlapRecorder",
    "SequenceParallelAttention",
    "UlyssesConfig",
    "all_gather_matmul",
    "build_sequence_parallel_groups",
    "resolve_sequence_parallel_degrees",
    "sequence_parallel_candidates",
    "hidden_fraction",
    "matmul_reduce_scatter",
    "ring_attention",
    "shard_sequence",
    "ulysses_all_to_all",
    "ulysses_attention",
    "unshard_sequence",
    "zigzag_positions",
    "zigzag_shard",
    "zigzag_unshard",
]
