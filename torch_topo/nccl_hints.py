# SPDX-License-Identifier: Apache-2.0
"""NCCL algorithm hints per communicator, from the plan (`TopoConfig(nccl_hints=True)`).

What NCCL allows (read in NCCL's sources, 2.19 to 2.29): `NCCL_ALGO` and `NCCL_PROTO` are read
with `ncclGetEnv`, not through the per-process `NCCL_PARAM` cache, in `ncclTopoTuneModel`
(src/graph/tuning.cc), which runs while each communicator is initialised (src/init.cc). So each
communicator keeps the value the environment held when it was created: a per-group setting is
possible if the variable is set just for that creation. The "function:algorithm" form
("allreduce:tree") that limits a hint to the collective the plan costed exists from NCCL 2.24.3;
older NCCL gets no hint (a plain "Tree" would leave all-gather on that communicator without an
algorithm).

How it is applied: `init_device_mesh` (on a "topo" world, CUDA mesh) registers each dimension's
hint under the ranks of each of its groups; when the "topo" creator builds the inner NCCL
backend of a group with a registered hint, it creates that communicator at once
(`eager_connect_single_device`) with the hint set in the environment, and restores the
environment afterwards. Groups that torch creates by splitting (`split_group`, used by
DeviceMesh when `init_process_group` got a `device_id`) get their hint in the environment while
torch splits the inner NCCL communicator (torch_topo.split). A variable the user set is never
overridden. Not covered: the hierarchical levels' inner communicators, and other threads
creating communicators at the same moment (they would see the hint too).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

from torch_topo.local_device import local_cuda_index

__all__ = ["register_plan_hints", "hints_for", "connect_with_hints", "hint_environment",
           "applied", "nccl_supports_per_function"]

_MIN_NCCL = (2, 24, 3)
_planned: dict[tuple[int, ...], dict[str, str]] = {}
_applied: list[tuple[tuple[int, ...], dict[str, str]]] = []


def version_code(major: int, minor: int, patch: int) -> int:
    """NCCL's version code of a release, as NCCL_VERSION_CODE encodes it (2.28.9 -> 22809)."""
    return major * 10000 + minor * 100 + patch


def nccl_version_code() -> int:
    """The version code of the NCCL torch runs with, whose tuning the cost model follows where
    releases differ (PlannerCluster's nccl_version); 0, the newest the model knows, without
    NCCL."""
    try:
        major, minor, patch = tuple(torch.cuda.nccl.version())[:3]
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return 0
    return version_code(major, minor, patch)


def nccl_supports_per_function() -> bool:
    """The NCCL torch runs with takes "function:algorithm" entries in NCCL_ALGO."""
    return tuple(torch.cuda.nccl.version()) >= _MIN_NCCL


def register_plan_hints(plan) -> dict[str, dict[str, str]]:
    """Registers each dimension's hint for the groups of that dimension; returns {dim: hint}.
    Called before the groups exist, on every rank."""
    registered = {}
    for dim, hint in plan.nccl_hints.items():
        for group in plan.groups(dim):
            if len(group) > 1:
                _planned[tuple(sorted(group))] = dict(hint)
                registered[dim] = dict(hint)
    return registered


def hints_for(global_ranks) -> dict[str, str]:
    """The hint registered for the group of these global ranks ({} when none)."""
    return dict(_planned.get(tuple(sorted(global_ranks)), {}))


@contextlib.contextmanager
def _environment(hint: dict[str, str]) -> Iterator[dict[str, str]]:
    """Sets the hint's variables the user has not set; yields those; restores on exit."""
    mine = {k: v for k, v in hint.items() if k not in os.environ}
    os.environ.update(mine)
    try:
        yield mine
    finally:
        for key in mine:
            os.environ.pop(key, None)


def _eager_connect(nccl_backend) -> None:
    index = local_cuda_index()
    nccl_backend.eager_connect_single_device(
        torch.device("cuda", index if index >= 0 else torch.cuda.current_device()))


@contextlib.contextmanager
def hint_environment(global_ranks) -> Iterator[dict[str, str] | None]:
    """Holds the hint registered for the group of these global ranks in the environment (the
    variables the user has not set) while the group's NCCL communicator is created inside;
    yields the variables set, or None when there is nothing to apply. Recorded in `applied()`.
    """
    hint = hints_for(global_ranks)
    if not hint or not nccl_supports_per_function():
        yield None
        return
    with _environment(hint) as mine:
        yield mine
    _applied.append((tuple(sorted(global_ranks)), mine))


def connect_with_hints(nccl_backend, global_ranks) -> dict[str, str]:
    """Creates the NCCL communicator of `nccl_backend` now, under the hint registered for its
    group; returns the variables that were set for it ({} when there is nothing to apply)."""
    with hint_environment(global_ranks) as mine:
        if mine is None:
            return {}
        _eager_connect(nccl_backend)
    return mine


def applied() -> list[tuple[tuple[int, ...], dict[str, str]]]:
    """(group ranks, variables set) of every communicator created under a hint, in order."""
    return list(_applied)
