# SPDX-License-Identifier: Apache-2.0
"""Sequence-parallel attention ops: Ulysses, ring attention and their 2-D combination."""

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
    shard_sequence,
    unshard_sequence,
)
from torch_topo.ops.ulysses import ulysses_all_to_all, ulysses_attention

__all__ = [
    "SequenceParallelAttention",
    "UlyssesConfig",
    "build_sequence_parallel_groups",
    "ring_attention",
    "shard_sequence",
    "ulysses_all_to_all",
    "ulysses_attention",
    "unshard_sequence",
    "zigzag_positions",
    "zigzag_shard",
    "zigzag_unshard",
]
