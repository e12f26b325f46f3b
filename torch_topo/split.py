# SPDX-License-Identifier: Apache-2.0
"""Groups that torch creates by splitting a "topo" group get what the "topo" creator gives the
groups it builds itself: the NCCL hint planned for their ranks and hierarchical levels with
their thresholds.

torch splits in C++: `ProcessGroup::splitGroup` calls `TopoBackend::split` (which splits the
inner Gloo and NCCL backends and wraps the children) and runs no creator, so before issue 21
every DeviceMesh group of a world initialised with `device_id` (DeviceMesh then uses
`split_group`) was a flat wrapper. torch offers no hook there; every Python caller
(`dist.split_group`, DeviceMesh) goes through the method `ProcessGroup.split_group`, which
`register()` wraps (`guard_split_group`): around the call it puts the child's planned NCCL
hint in the environment (the inner NCCL child communicator is created inside the split), and
on the members it attaches the levels to the child's TopoBackend over the child's store, with
the config a `new_group` group without pg_options gets (the environment's). A C++ caller of
`splitGroup` still gets a flat child.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.distributed as dist

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.hierarchy import attach_hierarchy
from torch_topo.nccl_hints import hint_environment

__all__ = ["guard_split_group", "setup_split_child"]

def _topo_backends(group) -> list:
    """The distinct TopoBackends serving `group`'s device types."""
    found = []
    for device in group._device_types:
        backend = group._get_backend(device)
        if isinstance(backend, _C.TopoBackend) and all(backend is not b for b in found):
            found.append(backend)
    return found


def setup_split_child(child, global_ranks: list[int], config: TopoConfig) -> None:
    """Attaches levels and thresholds to the TopoBackend of a split child `child` (a member's
    ProcessGroup) whose group ranks are `global_ranks`."""
    store = child.get_group_store()
    # torch 2.11-2.15 give one backend object for every device type of a split child; were it
    # two, the second would rendezvous its levels on the first one's store keys.
    backends = _topo_backends(child)
    if len(backends) > 1:
        raise RuntimeError(f"split_group: child {child.group_name} has {len(backends)} "
                           "TopoBackends (one per device type); expected one")
    for backend in backends:
        attach_hierarchy(backend, store, child.rank(), child.size(), global_ranks, config)


def _split_group(original, self, ranks, *args, **kwargs):
    # Anything but a list of ints is torch's to refuse (int() of a list of lists was ours).
    if not _topo_backends(self) or not (
            isinstance(ranks, list | tuple) and all(isinstance(r, int) for r in ranks)):
        return original(self, ranks, *args, **kwargs)
    parent_globals = dist.get_process_group_ranks(self)
    member = self.rank() in ranks
    # The hint depends on the set of ranks only.
    hint = hint_environment(sorted(parent_globals[r] for r in ranks)) if member \
        else contextlib.nullcontext()
    with hint:
        child = original(self, ranks, *args, **kwargs)
    backends = _topo_backends(child) if child is not None else []
    if backends:
        # The child's rank order is the order its backend's split was given: torch sorted the
        # ranks before 2.14 and no longer does, so the child says it.
        order = backends[0].split_ranks()
        global_ranks = [parent_globals[r] for r in order]
        # As for a group new_group creates without pg_options (DeviceMesh passes none either
        # way): the environment's config, so a mesh behaves alike with and without device_id.
        setup_split_child(child, global_ranks, TopoConfig.from_env())
    return child


def guard_split_group() -> None:
    """Wraps `ProcessGroup.split_group` once (see the module docstring); a torch without the
    method keeps its own behaviour."""
    cls = torch._C._distributed_c10d.ProcessGroup
    original = getattr(cls, "split_group", None)
    if original is None or getattr(original, "_torch_topo_guard", False):
        return

    @functools.wraps(original)
    def guarded(self, ranks, *args, **kwargs):
        return _split_group(original, self, ranks, *args, **kwargs)

    guarded._torch_topo_guard = True
    cls.split_group = guarded
