# SPDX-License-Identifier: Apache-2.0
"""torch-topo: a topology-aware torch.distributed backend ("topo"), topology model, planner and
sequence-parallel ops. Importing this package registers the "topo" backend."""

from torch_topo import _quiet_start  # noqa: F401  (first: before torch starts loading)

# isort: split

import torch  # noqa: F401  (loads libtorch before the extension)

from torch_topo import _extension  # noqa: F401  (checks the build record, then loads _C)
from torch_topo._C import (
    TopoArgumentError,
    TopoError,
    TopoMismatchError,
    TopoParseError,
    TopoUnavailableError,
)
from torch_topo.backend import BACKEND_NAME, register
from torch_topo.cluster import Cluster, exchange_cluster
from torch_topo.config import TopoConfig
from torch_topo.mesh import init_device_mesh
from torch_topo.ops import (
    AttentionShape,
    SequenceParallelAttention,
    UlyssesConfig,
    build_sequence_parallel_groups,
    resolve_sequence_parallel_degrees,
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
from torch_topo.probe import PinnedTopologyWarning, cpus_near_gpu, probe
from torch_topo.topology import Topology, load_topology

register()
_quiet_start.done()

__all__ = [
    "AttentionShape",
    "BACKEND_NAME",
    "Cluster",
    "PinnedTopologyWarning",
    "Plan",
    "SequenceParallelAttention",
    "TopoArgumentError",
    "TopoConfig",
    "TopoError",
    "TopoMismatchError",
    "TopoParseError",
    "TopoUnavailableError",
    "Topology",
    "UlyssesConfig",
    "build_sequence_parallel_groups",
    "resolve_sequence_parallel_degrees",
    "cpus_near_gpu",
    "exchange_cluster",
    "init_device_mesh",
    "load_topology",
    "plan",
    "probe",
    "ring_attention",
    "shard_sequence",
    "ulysses_all_to_all",
    "ulysses_attention",
    "unshard_sequence",
    "zigzag_positions",
    "zigzag_shard",
    "zigzag_unshard",
]
