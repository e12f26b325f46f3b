# SPDX-License-Identifier: Apache-2.0
"""torch-topo: a topology-aware torch.distributed backend ("topo"), topology model, planner and
sequence-parallel ops. Importing this package registers the "topo" backend."""

import torch  # noqa: F401  (loads libtorch before the extension)

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.mesh import init_device_mesh
from torch_topo.ops import (
    SequenceParallelAttention,
    UlyssesConfig,
    build_sequence_parallel_groups,
    ring_attention,
    shard_sequence,
    ulysses_all_to_all,
    ulysses_attention,
    unshard_sequence,
    zigzag_positions,
    zigzag_shard,
    zigzag_unshard,
)
from torch_topo.plan import Plan, plan

__all__ = [
    "Plan",
    "SequenceParallelAttention",
    "TopoConfig",
    "UlyssesConfig",
    "build_sequence_parallel_groups",
    "init_device_mesh",
    "plan",
    "ring_attention",
    "shard_sequence",
    "ulysses_all_to_all",
    "ulysses_attention",
    "unshard_sequence",
    "zigzag_positions",
    "zigzag_shard",
    "zigzag_unshard",
]
