# SPDX-License-Identifier: Apache-2.0
"""New groups under a "topo" default group never split from it (issue 16): torch's split source
for a bound device is the default group's backend whatever backend the new group asks for (2.15
refuses a parent of another backend itself, but still offers a TopoBackend to a "topo" child),
and Gloo or NCCL children cannot split from a TopoBackend (2.11-2.13: TypeError in the NCCL
options, 2.14: AssertionError in the NCCL creator). torch refuses a CPU `device_id`, so the
decision is tested here directly, on both code paths, and the NCCL group itself in tests/gpu."""

from __future__ import annotations

from datetime import timedelta

import pytest
import routing_cases
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import torch_topo  # noqa: F401  (installs the guard)
from torch_topo import _C
from torch_topo.backend import split_source_for_new_group


class _BoundGroup:
    """What torch's _get_split_source reads of a default group with a bound device."""

    bound_device_id = torch.device("cuda", 0)

    def __init__(self, backend):
        self._backend = backend

    def _get_backend(self, device):
        return self._backend


@pytest.fixture
def backends():
    store = dist.HashStore()
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), 0, 1, timedelta(seconds=30))
    topo = _C.TopoBackend(store, 0, 1, _C.TopoBackend.Options(), {"cpu": gloo})
    return topo, gloo


@pytest.fixture
def bound(monkeypatch):
    """A default group stand-in with a bound device, known to c10d as a group of `name` (torch
    2.15 reads the parent's backend name from its group map)."""

    def make(backend, name):
        group = _BoundGroup(backend)
        monkeypatch.setitem(c10d._world.pg_map, group, (name, None))
        return group

    return make


def test_topo_parent_is_never_the_split_source(backends, bound):
    topo, gloo = backends
    guarded = c10d._get_split_source
    original = guarded.__wrapped__
    topo_parent, gloo_parent = bound(topo, "topo"), bound(gloo, "gloo")
    # What torch alone would hand to the child (from 2.15 on: a "topo" child).
    assert routing_cases.split_source(original, topo_parent) is topo
    assert routing_cases.split_source(guarded, topo_parent) is None
    # Any other parent keeps torch's own answer.
    keeps = routing_cases.split_source(original, gloo_parent, "gloo")
    assert routing_cases.split_source(guarded, gloo_parent, "gloo") is keeps
    assert split_source_for_new_group(topo) is None
    assert split_source_for_new_group(gloo) is gloo
    assert split_source_for_new_group(None) is None


def test_guard_installs_once():
    torch_topo.backend.register()
    assert c10d._get_split_source._torch_topo_guard
    assert not hasattr(c10d._get_split_source.__wrapped__, "_torch_topo_guard")


@pytest.mark.skipif(not routing_cases.split_source_takes_request(),
                    reason="torch < 2.15 takes no requested backend")
def test_torch_itself_refuses_a_parent_of_another_backend(backends, bound):
    # 2.15's own rule: a "nccl" or "gloo" child of a "topo" parent gets no split source.
    topo, _ = backends
    parent = bound(topo, "topo")
    for requested in ("nccl", "gloo"):
        assert c10d._get_split_source.__wrapped__(parent, requested) is None
        assert c10d._get_split_source(parent, requested) is None


@pytest.mark.skipif(not dist.is_nccl_available(), reason="torch built without NCCL")
def test_nccl_options_code_path(backends, bound):
    # torch 2.11-2.13 build the NCCL child inline: `if split_from: options.split_from = ...`.
    topo, _ = backends
    parent = bound(topo, "topo")
    with pytest.raises(TypeError, match="ProcessGroupNCCL"):
        dist.ProcessGroupNCCL.Options().split_from = routing_cases.split_source(
            c10d._get_split_source.__wrapped__, parent)
    # The assignment is skipped.
    assert not routing_cases.split_source(c10d._get_split_source, parent)


@pytest.mark.skipif(not hasattr(c10d, "_create_nccl_process_group"),
                    reason="torch < 2.14 builds NCCL groups inline (previous test)")
def test_nccl_creator_code_path(backends, bound):
    # torch 2.14 hands the split source to the registered NCCL creator.
    topo, _ = backends
    parent = bound(topo, "topo")
    opts = c10d._DistributedBackendOptions()
    opts.store = dist.PrefixStore("nccl/", dist.HashStore())
    opts.group_rank, opts.group_size = 0, 1
    opts.timeout = timedelta(seconds=30)
    opts.group_id = "split_source_test"
    opts.global_ranks_in_group = [0]
    opts.split_from = routing_cases.split_source(c10d._get_split_source.__wrapped__, parent)
    with pytest.raises(AssertionError, match="split_from"):
        c10d._create_nccl_process_group(opts, None)
    opts.split_from = routing_cases.split_source(c10d._get_split_source, parent)
    try:
        c10d._create_nccl_process_group(opts, None).shutdown()
    except ValueError as e:  # past the split_from check; this machine has no GPU
        assert "no GPUs found" in str(e), e


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
def test_members_and_non_members_decide_alike(pool_factory, world):
    results = pool_factory(world).run(routing_cases.split_source_alike)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems)
