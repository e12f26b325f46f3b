# SPDX-License-Identifier: Apache-2.0
"""torch-topo: a topology-aware torch.distributed backend ("topo"), topology model, planner and
sequence-parallel ops. Importing this package registers the "topo" backend."""

import torch  # noqa: F401  (loads libtorch before the extension)

from torch_topo import _C
from torch_topo._C import TopoError, TopoMismatchError, TopoParseError, TopoUnavailableError
from torch_topo.config import TopoConfig
from torch_topo.topology import Topology, load_topology

__all__ = [
    "TopoConfig",
    "TopoError",
    "TopoMismatchError",
    "TopoParseError",
    "TopoUnavailableError",
    "Topology",
    "load_topology",
]
