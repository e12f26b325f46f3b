# SPDX-License-Identifier: Apache-2.0
"""New groups under a "topo" default group never split from it (issue 16): torch's split source
for a bound device is the default group's backend whatever backend the new group asks for, and
Gloo or NCCL children cannot split from a TopoBackend (2.11-2.13: TypeError in the NCCL options,
2.14: AssertionError in the NCCL creator). torch refuses a CPU `device_id`, so the decision is
tested here directly, on both code paths, and the NCCL group itself in tests/gpu."""

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


def test_topo_parent_is_never_the_split_source(backends):
    topo, gloo = backends
    guarded = c10d._get_split_source
    original = guarded.__wrapped__
    assert original(_BoundGroup(topo)) is topo  # what torch alone would hand to the child
    assert guarded(_BoundGroup(topo)) is None
    # Any other parent keeps torch's own answer.
    assert guarded(_BoundGroup(gloo)) is original(_BoundGroup(gloo))
    assert split_source_for_new_group(topo) is None
    assert split_source_for_new_group(gloo) is gloo
    assert split_source_for_new_group(None) is None


def test_guard_installs_once():
    torch_topo.backend.register()
    assert c10d._get_split_source._torch_topo_guard
    assert not hasattr(c10d._get_split_source.__wrapped__, "_torch_topo_guard")


@pytest.mark.skipif(not dist.is_nccl_available(), reason="torch built without NCCL")
def test_nccl_options_code_path(backends):
    # torch 2.11-2.13 build the NCCL child inline: `if split_from: options.split_from = ...`.
    topo, _ = backends
    with pytest.raises(TypeError, match="ProcessGroupNCCL"):
        dist.ProcessGroupNCCL.Options().split_from = c10d._get_split_source.__wrapped__(
            _BoundGroup(topo))
    assert not c10d._get_split_source(_BoundGroup(topo))  # the assignment is skipped


@pytest.mark.skipif(not hasattr(c10d, "_create_nccl_process_group"),
                    reason="torch < 2.14 builds NCCL groups inline (previous test)")
def test_nccl_creator_code_path(backends):
    # torch 2.14 hands the split source to the registered NCCL creator.
    topo, _ = backends
    opts = c10d._DistributedBackendOptions()
    opts.store = dist.PrefixStore("nccl/", dist.HashStore())
    opts.group_rank, opts.group_size = 0, 1
    opts.timeout = timedelta(seconds=30)
    opts.group_id = "split_source_test"
    opts.global_ranks_in_group = [0]
    opts.split_from = c10d._get_split_source.__wrapped__(_BoundGroup(topo))
    with pytest.raises(AssertionError, match="split_from"):
        c10d._create_nccl_process_group(opts, None)
    opts.split_from = c10d._get_split_source(_BoundGroup(topo))
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
