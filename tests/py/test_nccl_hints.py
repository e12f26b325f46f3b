# SPDX-License-Identifier: Apache-2.0
"""NCCL algorithm hints per communicator (torch_topo.nccl_hints), on CPU: the inner NCCL
backend of each "topo" group is replaced by Gloo and its communicator creation
(eager connect) by a probe that records the NCCL variables in force at that moment. Each
group's creation must see its own dimension's planned NCCL_ALGO, and nothing afterwards."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch.distributed as dist
from planner_support import DGX1
from rank_processes import start_processes

import torch_topo
from torch_topo import nccl_hints
from torch_topo.config import TopoConfig
from torch_topo.mesh import _played_cluster

# Small dp all-reduces and large tp all-gathers: the model picks an algorithm per dimension.
TRAFFIC = {"dp": (4096.0, "all_reduce"), "tp": (1e9, "all_gather")}
MESH = {"dp": 2, "tp": 2}


def _plan():
    # Four ranks on GPUs 0-3 of one DGX-1.
    cluster = _played_cluster(str(DGX1), [("h", gpu) for gpu in range(4)], TopoConfig())
    return torch_topo.plan(cluster, MESH, TRAFFIC, nccl_hints=True)


def test_plan_hints_name_the_costed_collective():
    plan = _plan()
    assert set(plan.nccl_hints) == {"dp", "tp"}
    for dim, (_, op) in TRAFFIC.items():
        function, algorithm = plan.nccl_hints[dim]["NCCL_ALGO"].split(":")
        assert function == op.replace("_", "")
        assert algorithm == plan.algorithms[dim]["step"]
    assert "NCCL_PROTO" not in json.dumps(plan.nccl_hints)  # the model has no protocols


def test_environment_is_restored_and_user_settings_win(monkeypatch):
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    seen = []
    monkeypatch.setattr(nccl_hints, "_eager_connect",
                        lambda b: seen.append((os.environ.get("NCCL_ALGO"),
                                               os.environ.get("NCCL_PROTO"))))
    monkeypatch.setattr(nccl_hints, "nccl_supports_per_function", lambda: True)
    monkeypatch.setattr(nccl_hints, "_planned",
                        {(0, 1): {"NCCL_ALGO": "allreduce:tree", "NCCL_PROTO": "LL"}})
    assert nccl_hints.connect_with_hints(object(), [1, 0]) == {"NCCL_ALGO": "allreduce:tree"}
    assert seen == [("allreduce:tree", "Simple")]
    assert "NCCL_ALGO" not in os.environ and os.environ["NCCL_PROTO"] == "Simple"
    assert nccl_hints.connect_with_hints(object(), [2, 3]) == {}  # no plan for that group
    assert len(seen) == 1


def test_old_nccl_gets_no_hint(monkeypatch):
    monkeypatch.setattr(nccl_hints, "_planned", {(0, 1): {"NCCL_ALGO": "allreduce:tree"}})
    monkeypatch.setattr(nccl_hints.torch.cuda.nccl, "version", lambda: (2, 21, 5))
    monkeypatch.setattr(nccl_hints, "_eager_connect", lambda b: pytest.fail("connected"))
    assert nccl_hints.connect_with_hints(object(), [0, 1]) == {}


def _groups_main(rank, world, store_path, out_dir):
    import torch_topo.backend as backend

    os.environ.pop("NCCL_ALGO", None)
    seen = []
    backend._cuda_usable = lambda: True
    # The "cuda" inner backend is a Gloo group (a real c10d Backend for TopoBackend to hold).
    backend._build_nccl = backend._build_gloo
    nccl_hints.nccl_supports_per_function = lambda: True
    nccl_hints._eager_connect = lambda b: seen.append(os.environ.get("NCCL_ALGO"))
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    plan = _plan()
    nccl_hints.register_plan_hints(plan)
    created = []
    for dim in plan.mesh_dim_names:  # every rank creates every group, in one order
        for group in plan.groups(dim):
            dist.new_group(group, backend="topo")
            if rank in group:
                created.append([dim, sorted(group), seen[-1] if seen else None])
    leftover = os.environ.get("NCCL_ALGO")
    Path(out_dir, f"{rank}.json").write_text(json.dumps(
        {"created": created, "connects": len(seen), "leftover": leftover}))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.timeout(240)
def test_each_group_is_created_under_its_planned_setting(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    start_processes(_groups_main, args=(4, str(tmp_path / "store"), str(tmp_path)),
                    nprocs=4)
    plan = _plan()
    for rank in range(4):
        r = json.loads((tmp_path / f"{rank}.json").read_text())
        assert r["leftover"] is None  # restored after every creation
        assert r["connects"] == 2  # one communicator per group this rank is in
        for dim, group, algo in r["created"]:
            assert group in [sorted(g) for g in plan.groups(dim)]
            assert algo == plan.nccl_hints[dim]["NCCL_ALGO"], (rank, dim, group)


def test_hints_ask_for_the_fastest_priced_algorithm(tmp_path):
    # 4 x 8 H100 with a 400G NIC per GPU, dp=32 all-reducing 16 MiB: NCCL's own estimates pick
    # its NVLS tree (what `algorithms` reports runs), while the model prices its tree faster; the
    # hint asks NCCL for the tree.
    from torch_topo import _C
    from torch_topo.bench.nccl_tests import cluster_doc

    doc = cluster_doc("nvidia_smi_topo/h100_8xSXM_NV18_2socket_mlengineering.txt", hosts=4, sm=90,
                      nic_gbit=400, nics=8)
    plan = torch_topo.plan(json.dumps(doc), {"dp": 32}, {"dp": (16 << 20, "all_reduce")},
                           nccl_hints=True)
    assert plan.algorithms["dp"]["step"] == "nvls_tree"
    assert plan.nccl_hints["dp"] == {"NCCL_ALGO": "allreduce:tree"}
    assert "NCCL's own estimates would pick nvls_tree; the model prices tree faster" in \
        plan.explain()
    cluster = _C.PlannerCluster(json.dumps(doc))
    group = [list(range(32))]
    assert cluster.fastest_flat("all_reduce", 16 << 20, group)["seconds"] < \
        cluster.estimate("all_reduce", 16 << 20, group)["seconds"]


def test_the_fastest_is_one_nccl_would_run():
    # Ranks 0, 8 and 16 of three H100-class hosts where hosts 0 and 1 share an NVLink domain:
    # one node holds one rank, so NCCL's NVLS tree (two heads per node at least) is out; the
    # model's own figures price it fastest, yet a hint must not name it.
    from torch_topo import _C
    from torch_topo.bench.nccl_tests import cluster_doc

    doc = cluster_doc("nvidia_smi_topo/h100_8xSXM_NV18_2socket_mlengineering.txt", hosts=3,
                      sm=100, nic_gbit=400, nics=4, domain_hosts=2)
    cluster = _C.PlannerCluster(json.dumps(doc))
    group = [[0, 8, 16]]
    nvls_tree = cluster.estimate("all_reduce", 64 << 20, group, "nvls_tree")
    assert nvls_tree["choice_seconds"] == float("inf")
    fastest = cluster.fastest_flat("all_reduce", 64 << 20, group)
    assert fastest["algorithm"] != "nvls_tree" and fastest["choice_seconds"] < float("inf")
    assert fastest["seconds"] <= cluster.estimate("all_reduce", 64 << 20, group)["seconds"]
