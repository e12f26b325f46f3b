# SPDX-License-Identifier: Apache-2.0
"""Tests of torch_topo.init_device_mesh on 4 CPU processes playing GPUs of topology files: the
DeviceMesh carries the planned groups and works with DTensor and FSDP2. The process-group
backend of the pinned-file test is a parameter (TORCH_TOPO_TEST_BACKEND, default gloo) so the
same test runs on "topo"; the live-cluster test needs "topo" (its exchange is what it plans on)."""

from __future__ import annotations

import inspect
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch.distributed as dist
from planner_support import DATA, DGX1

from torch_topo import TopoConfig
from torch_topo.cluster import ASSUMED_INTER_HOST_LATENCY_US
from torch_topo.plan import Plan
from torch_topo.topology import load_topology

BACKEND = os.environ.get("TORCH_TOPO_TEST_BACKEND", "gloo")
WORKER = pathlib.Path(__file__).with_name("mesh_worker.py")
P4D = DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml"


def _launch(tmp_path, specs: list[dict]) -> list[dict]:
    store = tmp_path / "store"
    world = len(specs)
    procs, outs = [], []
    for rank, spec in enumerate(specs):
        out = tmp_path / f"rank{rank}.json"
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world),
               "PYTHONPATH": os.pathsep.join(sys.path)}
        for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY"):
            env.pop(var, None)
        procs.append(subprocess.Popen(
            [sys.executable, str(WORKER), str(store), str(out), json.dumps(spec)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs.append(out)
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.timeout(300)
def test_four_ranks_playing_dgx1_get_nv2_pairs(tmp_path):
    # Ranks 0-3 play DGX-1 GPUs 0-3 of the pinned file. Among them only 0-3 and 1-2 are NV2
    # pairs that cover all four (read off the file): tp must be {0,3} and {1,2}; contiguous
    # would pair 0-1 (NV1).
    spec = {"backend": BACKEND, "pg_options": None, "mesh_config": {"topology_file": str(DGX1)}}
    if "sort_ranks" not in inspect.signature(dist.new_group).parameters:
        # torch < 2.12 sorts every group's ranks: the planned dp groups ([0, 1], [3, 2]) cannot
        # keep their order, and the mesh must say so instead of mislabelling coordinates.
        with pytest.raises(AssertionError, match="cannot keep .*use torch >= 2.12"):
            _launch(tmp_path, [spec] * 4)
        return
    results = _launch(tmp_path, [spec] * 4)
    expected_tp = {frozenset({0, 3}), frozenset({1, 2})}
    for r in results:
        assert r["backend"] == BACKEND
        assert frozenset(r["tp"]) in expected_tp and r["rank"] in r["tp"]
        assert r["mesh"] == r["plan_mesh"] == results[0]["mesh"]
        assert r["dtensor_ok"] and r["fsdp_ok"]
        assert r["numa"] == "disabled"
    # dp joins the ranks holding the same tp coordinate.
    assert {frozenset(r["dp"]) for r in results} == {frozenset(c) for c in zip(*results[0]["mesh"], strict=False)}


@pytest.mark.timeout(600)
def test_the_documented_variable_runs_the_pinned_file_test_over_topo():
    # TORCH_TOPO_TEST_BACKEND reaches the workers' environment, where TopoConfig.from_env reads
    # every TORCH_TOPO_* variable: it must be a known one (it once was refused as unknown).
    other = "gloo" if BACKEND == "topo" else "topo"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_four_ranks_playing_dgx1_get_nv2_pairs"],
        # Not the checkout as cwd: `-m` puts the cwd first on sys.path, and the checkout's module
        # may be built for another torch than this process runs (scripts/test_torch.sh).
        cwd=os.path.dirname(__file__),
        env={**os.environ, "TORCH_TOPO_TEST_BACKEND": other,
             "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:]


def _host_json(path) -> dict:
    host = json.loads(load_topology(str(path)).to_json())
    host.pop("schema", None)
    host.pop("kind", None)
    return host


@pytest.mark.timeout(300)
def test_live_cluster_plans_without_a_pinned_file(tmp_path):
    # Two hosts of different machines, ranks interleaved: 0 and 2 play GPUs 0 and 3 of a DGX-1
    # (an NV2 pair) on hostA, 1 and 3 play GPUs 0 and 1 of a p4d on hostB. Each rank's file
    # stands in for what its host's probe would find and goes only to init_process_group; the
    # mesh gets no config and no file, so it can only plan on the cluster exchanged there.
    files = [DGX1, P4D, DGX1, P4D]
    play = "hostA:0,hostB:0,hostA:3,hostB:1"
    specs = [{"backend": "topo", "use": False, "mesh_config": None,
              "pg_options": {"topology_file": str(f), "play": play, "inter_host_gbps": 25.0,
                             "hierarchical": "never"}} for f in files]
    results = _launch(tmp_path, specs)
    # The reference plan, from the files themselves.
    doc = {"schema": "torch-topo/1", "kind": "cluster",
           "hosts": [_host_json(DGX1), _host_json(P4D)],
           "ranks": [{"host": 0, "local_gpu": 0, "local_rank": 0},
                     {"host": 1, "local_gpu": 0, "local_rank": 0},
                     {"host": 0, "local_gpu": 3, "local_rank": 1},
                     {"host": 1, "local_gpu": 1, "local_rank": 1}],
           "inter_host_bandwidth_gbps": 25.0,
           "inter_host_latency_us": ASSUMED_INTER_HOST_LATENCY_US}
    want = Plan.build(doc, {"dp": 2, "tp": 2})
    assert want.mesh != [[0, 1], [2, 3]]  # the test can tell planned from contiguous
    for r in results:
        assert r["layout"] == "planned"
        assert r["mesh"] == r["plan_mesh"] == want.mesh
        # tp stays inside a host; one exchange per process (the world's, reused by every
        # later group and by the mesh).
        assert frozenset(r["tp"]) in ({0, 2}, {1, 3})
        assert r["exchanges"] == 1


def test_pinned_file_wins_over_the_live_cluster(monkeypatch):
    import torch_topo.mesh as mesh

    def no_live(_config):
        raise AssertionError("the live cluster was consulted although a file is pinned")

    monkeypatch.setattr(mesh, "world_cluster", no_live)
    cluster = mesh._world_cluster(TopoConfig(topology_file=str(DGX1)), 8)
    assert cluster.world_size == 8


@pytest.mark.parametrize("play", [None, "a:0,a:3,b:1,b:2"])
def test_a_topology_object_or_text_plans_as_its_file_does(monkeypatch, play):
    # Play and a world smaller than one host were honoured for a path only: a Topology or its
    # JSON failed with "does not fill whole hosts; set TopoConfig.play", play set or not.
    import torch_topo.mesh as mesh
    from torch_topo import load_topology

    monkeypatch.setattr(mesh, "world_cluster", lambda _config: pytest.fail("live consulted"))
    config = TopoConfig(play=play)

    def described(source):
        c = mesh._world_cluster(config, 4, topology=source)
        return ([(c.rank_host(r), c.rank_gpu(r)) for r in range(4)],
                [[c.bandwidth(a, b) for b in range(4)] for a in range(4)])

    want = described(str(DGX1))
    assert want[0] == ([(0, 0), (0, 3), (1, 1), (1, 2)] if play else [(0, r) for r in range(4)])
    topology = load_topology(str(DGX1))
    assert described(topology) == described(topology.to_json()) == want


def test_a_cluster_topology_is_neither_played_nor_cut(monkeypatch):
    # Play and a world smaller than one host copy one host: a cluster given instead was cut to
    # its first host (world 2 or 3 of 2 x 3 GPUs planned there) or refused in another option's
    # words ("hosts: got 2 for <topology>", "TORCH_TOPO_PLAY: rank 3: GPU 3").
    import torch_topo.mesh as mesh
    from torch_topo.plan import cluster_text

    monkeypatch.setattr(mesh, "world_cluster", lambda _config: pytest.fail("live consulted"))
    two_hosts = json.loads(cluster_text(str(DGX1), 2))
    with pytest.raises(ValueError, match=r"^world size 12: the cluster given holds 16 ranks on "
                                         r"2 hosts, expected a world of exactly that size"):
        mesh._world_cluster(TopoConfig(), 12, topology=two_hosts)
    with pytest.raises(ValueError, match=r"plays copies of one host, but the topology given "
                                         r"describes 2 hosts"):
        mesh._world_cluster(TopoConfig(play="a:0,b:0,c:0,d:0"), 4, topology=two_hosts)
    assert mesh._world_cluster(TopoConfig(), 16, topology=two_hosts).host_count == 2


def test_pinned_host_without_gpus_places_no_rank(tmp_path, monkeypatch):
    # What the emulator pins on every node: a host of CPUs and a NIC. Planned on, it was
    # copied once per rank, so 4 ranks on 2 nodes were 4 hosts (the mesh explained as spanning
    # hosts inside a node, the sequence split priced so); no GPU means no plan, as unpinned.
    import torch_topo.mesh as mesh

    host = tmp_path / "node0.json"
    host.write_text(json.dumps({"schema": "torch-topo/1", "kind": "host", "gpus": []}))
    monkeypatch.setattr(mesh, "world_cluster", lambda _config: pytest.fail("live consulted"))
    assert mesh._world_cluster(TopoConfig(topology_file=str(host)), 4) is None


def test_live_cpu_ranks_report_the_backends_side_at_gloo_latency(tmp_path, monkeypatch):
    # A live world of CPU ranks on two hosts is laid out contiguously whatever the network (no
    # decision there), but its plan (mesh.topo_plan) priced Gloo's steps between hosts at the
    # exchange's 2.7 us (NCCL's hop) and showed the cost model's flat/hierarchical side, which
    # is not the backend's: on these hosts its size rule goes hierarchical at every size.
    # Reference: the backend's hierarchical_thresholds for the group over the live cluster, each
    # side priced by its Gloo-side planner.
    from planner_support import in_ranges, played_cpu_ranks

    import torch_topo.mesh as mesh
    from torch_topo import _C
    from torch_topo.cluster import Cluster
    from torch_topo.hierarchy import HostLayout, _planner, hierarchical_thresholds
    from torch_topo.plan import SIZE_CLASSES

    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY", "TORCH_TOPO_HIERARCHICAL",
                "TORCH_TOPO_INTER_HOST_LATENCY_US", "TORCH_TOPO_INTER_HOST_GBPS"):
        monkeypatch.delenv(var, raising=False)
    _, path = played_cpu_ranks(tmp_path, 2.7)
    live = Cluster(_C.load_cluster_file(str(path)), 0)  # what the exchange assembles
    monkeypatch.setattr(mesh, "world_cluster", lambda _config: live)
    monkeypatch.setattr(dist, "get_world_size", lambda *_: 8)
    config = TopoConfig.from_env()
    everyone = list(range(8))
    thresholds = hierarchical_thresholds(HostLayout.from_cluster(live), config, cluster=live)
    model = _planner(live, config, "cpu")

    def side(nbytes: int) -> dict:
        both = model.compare_hierarchical("all_reduce", nbytes, [everyone])
        taken = in_ranges(thresholds.get("all_reduce", ()), nbytes)
        return both["hierarchical" if taken else "flat"]

    plan = mesh.plan_for_world((8,), ("dp",), traffic={"dp": 10**8})
    assert plan.layout == "contiguous" and plan.groups("dp") == [everyone]
    for label, nbytes in {"step": 10**8, **SIZE_CLASSES}.items():
        assert plan.algorithms["dp"][label] == side(nbytes)["algorithm"], label
    assert plan.cost("dp") == pytest.approx(side(10**8)["seconds"], rel=1e-12)


def test_played_hosts_without_gpus_are_priced_at_gloo_latency(tmp_path, monkeypatch):
    # Ranks playing a host without GPUs (the emulator's CPU-only node) are planned on copies of
    # it; Gloo carries their groups, which were priced at the file's latency (the model's 5 us)
    # where the backend prices Gloo's steps between hosts at no less than 50 us.
    # Reference: the backend's Gloo-side planner over the same hosts and placements.
    import torch_topo.mesh as mesh
    from torch_topo import _C
    from torch_topo.cluster import Cluster
    from torch_topo.hierarchy import _planner

    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_LATENCY_US", raising=False)
    host = tmp_path / "node.json"
    host.write_text(json.dumps({"schema": "torch-topo/1", "kind": "host", "gpus": []}))
    config = TopoConfig(topology_file=str(host), play="n0:0,n0:0,n1:0,n1:0")
    planned = mesh._world_cluster(config, 4)
    doc = json.loads(_C.planner_cluster_json(path=str(host), hosts=2))
    for i, h in enumerate(doc["hosts"]):
        h["hostname"] = f"n{i}"
    doc["ranks"] = [{"host": r // 2, "local_gpu": -1, "local_rank": r % 2} for r in range(4)]
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    backend = _planner(Cluster(_C.load_cluster_file(str(tmp_path / "cluster.json")), 0),
                       config, "cpu")
    for nbytes in (1 << 10, 1 << 20):
        want = backend.estimate("all_reduce", nbytes, [[0, 1, 2, 3]])
        got = planned.estimate("all_reduce", nbytes, [[0, 1, 2, 3]])
        assert (got["algorithm"], got["seconds"]) == (want["algorithm"],
                                                      pytest.approx(want["seconds"], rel=1e-12))


@pytest.mark.parametrize("world", [2, 8, 32])
def test_cluster_document_needs_its_own_world_size(tmp_path, world):
    # Two hosts of 8 GPUs: a world of 2 was told the hosts held 16 GPUs each and to set play,
    # which then refused the document.
    import torch_topo.mesh as mesh
    from torch_topo import _C

    path = tmp_path / "cluster.json"
    path.write_text(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    with pytest.raises(ValueError, match=rf"^world size {world}: the cluster given holds 16 ranks "
                                         r"on 2 hosts, expected a world of exactly that size"):
        mesh._world_cluster(TopoConfig(), world, str(path))
    assert mesh._world_cluster(TopoConfig(), 16, str(path)).world_size == 16


@pytest.mark.parametrize("args, kwargs, fragment", [
    # Checked before any collective, so no process group is needed. Before: 1.5 was planned as
    # 1 (int()), a repeated name folded two dimensions into one mesh dimension without a word,
    # "dp" was split into the names 'd' and 'p', "gpu" built a mesh, an int shape and a dict
    # config failed inside (TypeError, AttributeError).
    (("cpu", (1.5,)), {"mesh_dim_names": ("dp",)}, r"mesh_shape: got \(1.5,\), expected int"),
    (("cpu", (0, 4)), {"mesh_dim_names": ("dp", "tp")}, r"mesh_shape: got \(0, 4\), expected int"),
    (("cpu", 4), {"mesh_dim_names": ("dp",)}, r"mesh_shape: got 4, expected a tuple of sizes"),
    (("cpu", (2, 2)), {"mesh_dim_names": ("dp", "dp")},
     r"mesh_dim_names: 'dp' appears twice in \('dp', 'dp'\), expected distinct names"),
    (("cpu", (2, 2)), {"mesh_dim_names": "dp"}, r"mesh_dim_names: got 'dp', expected a tuple"),
    (("cpu", (4,)), {"mesh_dim_names": ("",)}, r"mesh_dim_names: got \('',\), expected non-empty"),
    (("gpu", (4,)), {"mesh_dim_names": ("dp",)}, r"device_type: got 'gpu', expected 'cpu' or"),
    (("cpu", (4,)), {"mesh_dim_names": ("dp",), "config": {"debug": True}},
     r"config: got dict, expected a torch_topo.TopoConfig or None"),
])
def test_mesh_arguments_name_the_problem(args, kwargs, fragment):
    import torch_topo

    assert not dist.is_initialized()
    with pytest.raises(ValueError, match=fragment):
        torch_topo.init_device_mesh(*args, **kwargs)
