# SPDX-License-Identifier: Apache-2.0
"""Groups torch splits from a "topo" group (issue 21): the child gets hierarchical levels as a
`new_group` group does (config from the environment: neither gets pg_options of ours), and its planned NCCL hint is in the
environment while torch splits. Four local processes play 2 hosts x 2 GPUs; the split is
torch's own `ProcessGroup.split_group` (what `dist.split_group` and DeviceMesh call: torch
refuses a CPU device_id, so those wrappers are not reachable on CPU)."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from rank_processes import start_processes

HOSTS = ["hostA", "hostA", "hostB", "hostB"]
PLAY = ",".join(f"{h}:{i % 2}" for i, h in enumerate(HOSTS))


def _value(rank: int) -> torch.Tensor:
    return torch.arange(64, dtype=torch.float32) * (rank + 1)


def _last_choice(group) -> str:
    backend = group._get_backend(torch.device("cpu"))
    return backend.last_decisions()[-1][2]


def _worker(rank: int, tmp: str) -> None:
    import torch_topo  # noqa: F401  (registers "topo", wraps split_group)
    from torch_topo import split

    told = []  # the global ranks each child's hierarchy was given, in child rank order
    attach = split.attach_hierarchy

    def recording_attach(backend, store, group_rank, group_size, global_ranks, config):
        told.append(list(global_ranks))
        return attach(backend, store, group_rank, group_size, global_ranks, config)

    split.attach_hierarchy = recording_attach
    size = len(HOSTS)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=timedelta(seconds=60))
    world = dist.group.WORLD
    out: dict[str, object] = {}
    cases = {
        "all": [0, 1, 2, 3],  # 2 hosts x 2
        "across": [0, 2] if rank in (0, 2) else [1, 3],  # 2 hosts x 1
        "within": [0, 1] if rank in (0, 1) else [2, 3],  # one host: flat
        # Child rank i is parent rank ranks[i] from torch 2.14 (sorted before): the hierarchy
        # was told the sorted order, so its hosts were other ranks'.
        "unsorted": [1, 0, 3, 2],
    }
    for name, ranks in cases.items():
        child = world.split_group(ranks, timeout=timedelta(seconds=60),
                                  group_name=f"split_{name}_{ranks[0]}")
        sibling = dist.new_group(ranks) if name == "all" else None
        x = _value(rank)
        dist.all_reduce(x, group=child)
        out[name] = {
            "type": type(child._get_backend(torch.device("cpu"))).__name__,
            "correct": torch.equal(x, sum(_value(r) for r in ranks)),
            "choice": _last_choice(child),
            "told_me_at_my_rank": told[-1][child.rank()] == rank,
        }
        if sibling is not None:
            y = _value(rank)
            dist.all_reduce(y, group=sibling)
            out[name]["new_group_choice"] = _last_choice(sibling)
    dist.barrier()
    dist.destroy_process_group()
    Path(tmp, f"{rank}.json").write_text(json.dumps(out))


@pytest.mark.timeout(240)
def test_split_children_get_levels_like_new_group(tmp_path, monkeypatch):
    # "always": a child left flat (no levels) would run these 256-byte calls flat.
    monkeypatch.setenv("TORCH_TOPO_HIERARCHICAL", "always")
    monkeypatch.setenv("TORCH_TOPO_PLAY", PLAY)
    start_processes(_worker, args=(str(tmp_path),), nprocs=len(HOSTS))
    for rank in range(len(HOSTS)):
        got = json.loads((tmp_path / f"{rank}.json").read_text())
        for name in ("all", "across", "within", "unsorted"):
            assert got[name]["type"] == "TopoBackend", (rank, name, got)
            assert got[name]["correct"], (rank, name, got)
            assert got[name]["told_me_at_my_rank"], (rank, name, got)
        assert got["all"]["choice"] == got["all"]["new_group_choice"] == "hierarchical", got
        assert got["across"]["choice"] == "hierarchical", got
        assert got["within"]["choice"] == "flat", got
        assert got["unsorted"]["choice"] == "hierarchical", got


class _Group:
    """What the split wrapper reads of a parent group."""

    group_name = "parent"

    def __init__(self, backend, rank):
        self._backend = backend
        self._rank = rank
        self._device_types = [torch.device("cpu")]

    def _get_backend(self, device):
        return self._backend

    def rank(self):
        return self._rank


def test_hint_is_in_the_environment_during_the_split_only(monkeypatch):
    from torch_topo import _C, nccl_hints, split

    store = dist.HashStore()
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), 0, 1, timedelta(seconds=30))
    topo = _C.TopoBackend(store, 0, 1, _C.TopoBackend.Options(), {"cpu": gloo})
    monkeypatch.setattr(nccl_hints, "nccl_supports_per_function", lambda: True)
    monkeypatch.setattr(nccl_hints, "_applied", [])
    monkeypatch.setitem(nccl_hints._planned, (0, 2), {"NCCL_ALGO": "allreduce:tree"})
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    monkeypatch.setattr(dist, "get_process_group_ranks", lambda group: [0, 5, 2])
    seen = []

    def original(parent, ranks, **kwargs):
        seen.append((list(ranks), os.environ.get("NCCL_ALGO")))
        return None  # as for a non-member: nothing to set up afterwards

    # Parent ranks [2, 0] are global [2, 0]: the child's ranks sort to (0, 2), the hinted group.
    assert split._split_group(original, _Group(topo, 0), [2, 0]) is None
    assert seen == [([2, 0], "allreduce:tree")]
    assert "NCCL_ALGO" not in os.environ
    assert nccl_hints.applied() == [((0, 2), {"NCCL_ALGO": "allreduce:tree"})]
    # A rank outside the child splits with no hint; a group without one gets none either.
    split._split_group(original, _Group(topo, 1), [2, 0])
    split._split_group(original, _Group(topo, 0), [1, 0])
    assert seen[1:] == [([2, 0], None), ([1, 0], None)]
    # A user's own setting wins over the plan.
    monkeypatch.setenv("NCCL_ALGO", "ring")
    split._split_group(original, _Group(topo, 0), [0, 2])
    assert seen[-1] == ([0, 2], "ring")


def test_guard_installs_once():
    import torch_topo

    cls = torch._C._distributed_c10d.ProcessGroup
    torch_topo.backend.register()
    assert cls.split_group._torch_topo_guard
    assert not hasattr(cls.split_group.__wrapped__, "_torch_topo_guard")
