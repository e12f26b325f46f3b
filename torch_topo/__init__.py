# SPDX-License-Identifier: Apache-2.0
"""

import torch  # noqa: F401  (loads libtorch before the extension)

from torch_topo import _C
from torch_topo._C import TopoError, TopoMismatchError, TopoParseError, TopoUnavailableError
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
    "build_sequence_parallel_groups",
    "init_device_mesh",
    "load_topology",
    "Plan",
    "plan",
    "ring_attention",
    "SequenceParallelAttention",
    "shard_sequence",
    "TopoConfig",
    "TopoError",
    "Topology",
    "TopoMismatchError",
    "TopoParseError",
    "TopoUnavailableError",
    "ulysses_all_to_all",
    "ulysses_attention",
    "UlyssesConfig",
    "unshard_sequence",
    "zigzag_positions",
    "zigzag_shard",
    "zigzag_unshard",
]
