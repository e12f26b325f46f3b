# SPDX-License-Identifier: Apache-2.0
"""The lazy Gloo side of a "topo" group whose ranks all bound a CUDA device, on CPU: the "cuda"
inner backend is a Gloo group standing in for NCCL, and the device binding is faked."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from rank_processes import start_processes


def _topo_with_lazy_cpu(store, rank, world, timeout_s, factory):
    """A TopoBackend whose cuda side is a Gloo group standing in for NCCL and whose cpu side is
    built by `factory` at its first CPU op."""
    from torch_topo import _C

    timeout = timedelta(seconds=timeout_s)
    stand_in = dist.ProcessGroupGloo(dist.PrefixStore("cuda_stand_in/", store), rank, world,
                                     timeout)
    return _C.TopoBackend(store, rank, world, _C.TopoBackend.Options(timeout),
                          {"cuda": stand_in}, {"cpu": factory})


def _spawn(main, world, tmp_path, *extra):
    """Every rank's result of main(rank, world, store path, out dir, *extra), which writes
    {rank}.json."""
    start_processes(main, args=(world, str(tmp_path / "store"), str(tmp_path), *extra),
                    nprocs=world)
    return [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(world)]


def _direct_main(rank, world, store_path, out_dir):
    from torch_topo.backend import lazy_gloo

    store = dist.PrefixStore("group/", dist.FileStore(store_path, world))
    built = []

    def factory(s, r, n, options):
        built.append((r, n, options._timeout.total_seconds()))
        return lazy_gloo(s, r, n, options)

    topo = _topo_with_lazy_cpu(store, rank, world, 60, factory)
    result = {"at_creation": topo.inner_backend("cpu") is not None}
    topo.barrier(dist.BarrierOptions()).wait()  # a barrier without a device leaves it unbuilt
    result["after_barrier"] = topo.inner_backend("cpu") is not None
    # A send between ranks 0 and 1 builds it on those two only, without waiting for rank 2.
    t = torch.full((3,), float(rank))
    if rank == 0:
        topo.send([torch.arange(3.0)], 1, 7).wait()
    elif rank == 1:
        topo.recv([t], 0, 7).wait()
        result["received"] = t.tolist()
    result["after_send"] = topo.inner_backend("cpu") is not None
    x = torch.full((4,), float(rank + 1))
    topo.allreduce([x], dist.AllreduceOptions()).wait()
    result["sum"] = x.tolist()
    result["built"] = built
    topo.barrier(dist.BarrierOptions()).wait()
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


@pytest.mark.timeout(180)
def test_cpu_side_is_built_at_the_first_cpu_op_only(tmp_path):
    world = 3
    results = _spawn(_direct_main, world, tmp_path)
    assert [r["at_creation"] or r["after_barrier"] for r in results] == [False] * world
    assert [r["after_send"] for r in results] == [True, True, False]
    assert results[1]["received"] == [0.0, 1.0, 2.0]
    assert all(r["sum"] == [6.0] * 4 for r in results)  # 1 + 2 + 3
    assert all(r["built"] == [[r_, world, 60.0]] for r_, r in enumerate(results))


def _creator_main(rank, world, store_path, out_dir, bound, timeout_s):
    import torch_topo.backend as backend
    from torch_topo import nccl_hints

    backend._cuda_usable = lambda: True
    backend._build_nccl = backend._build_gloo  # a real c10d Backend in NCCL's place
    nccl_hints.connect_with_hints = lambda *_args: {}
    backend.connect_with_hints = nccl_hints.connect_with_hints
    backend._bound_device_type = lambda _opts: "cuda" if bound[rank] else None
    os.environ["TORCH_TOPO_AWARE"] = "0"
    try:
        dist.init_process_group("topo", store=dist.FileStore(store_path, world), rank=rank,
                                world_size=world, timeout=timedelta(seconds=timeout_s))
        topo = dist.group.WORLD._get_backend(torch.device("cpu"))
        result = {"lazy": topo.inner_backend("cpu") is None}
        x = torch.full((2,), float(rank + 1))
        dist.all_reduce(x)
        result.update(sum=x.tolist(), built=topo.inner_backend("cpu") is not None)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:  # reported to the parent, which asserts on it
        result = {"error": str(exc)}
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


@pytest.mark.timeout(180)
def test_creator_defers_gloo_when_every_rank_bound_cuda(tmp_path):
    for result in _spawn(_creator_main, 2, tmp_path, [True, True], 20):
        assert result == {"lazy": True, "sum": [3.0, 3.0], "built": True}, result


@pytest.mark.timeout(180)
def test_ranks_that_disagree_on_binding_get_an_error_naming_them(tmp_path):
    # Every rank raises at creation. Before the settings check, only the rank that differed
    # from rank 0 raised; rank 0 went on into Gloo's connection setup and failed when its
    # timeout ended, with Gloo's message.
    for result in _spawn(_creator_main, 2, tmp_path, [True, False], 60):
        assert "group rank 1 did not bind a CUDA device but group rank 0 did" in result["error"]


def _split_main(rank, world, store_path, out_dir):
    from torch_topo.backend import lazy_gloo

    file_store = dist.FileStore(store_path, world)
    file_store.set_timeout(timedelta(seconds=20))  # a child that cannot meet fails, not hangs
    store = dist.PrefixStore("group/", file_store)
    topo = _topo_with_lazy_cpu(store, rank, world, 20, lazy_gloo)
    # The CPU side gets built on ranks 0 and 2 only: of the child's members, on rank 0 alone.
    if rank == 0:
        topo.send([torch.arange(3.0)], 2, 7).wait()
    elif rank == 2:
        topo.recv([torch.empty(3)], 0, 7).wait()
    group = dist.ProcessGroup(store, rank, world)
    for device in ("cpu", "cuda"):
        group._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM, topo)
    split = type(group).split_group
    split = getattr(split, "__wrapped__", split)  # torch's own, not torch_topo's wrapper
    child = split(group, [0, 1], timeout=timedelta(seconds=20), group_name="child")
    result = {"member": child is not None}
    if child is not None:
        backend = child._get_backend(torch.device("cpu"))
        result["cpu_side_lazy"] = backend.inner_backend("cpu") is None
        x = torch.full((2,), float(rank + 1))
        backend.allreduce([x], dist.AllreduceOptions()).wait()
        result["sum"] = x.tolist()
    topo.barrier(dist.BarrierOptions()).wait()
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


@pytest.mark.timeout(180)
def test_split_child_keeps_the_cpu_side_lazy_where_some_members_built_it(tmp_path):
    # The parent's lazy side was split where it was built: rank 0's child held a split Gloo
    # group and rank 1's a lazy one, on other store keys, so the child's first CPU op waited
    # for a peer that never came.
    results = _spawn(_split_main, 3, tmp_path)
    assert results[2] == {"member": False}, results
    for r in (0, 1):
        assert results[r] == {"member": True, "cpu_side_lazy": True, "sum": [3.0, 3.0]}, results
