# SPDX-License-Identifier: Apache-2.0
"""torch-topo: a topology-aware torch.distributed backend ("topo"), topology model, planner and
sequence-parallel ops. Importing this package registers the "topo" backend."""

import torch  # noqa: F401  (loads libtorch before the extension)

from torch_topo import _C  # noqa: F401  (the native core; backend.py uses it)
from torch_topo.backend import BACKEND_NAME, register
from torch_topo.config import TopoConfig

register()

__all__ = ["BACKEND_NAME", "TopoConfig"]
