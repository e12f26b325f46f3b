# SPDX-License-Identifier: Apache-2.0
"""`hierarchy.cluster_planner` builds the cost model of an exchanged Cluster from its native
ClusterTopology. Reference: the PlannerCluster of the same Cluster's planner document through
JSON, the route group creation took before (`Cluster.planner_doc`, latency replaced as the
backend replaces it). Every pair's bandwidth, the scanned size ranges and both sides of the
choice at several sizes must be equal, over real host files of every format, hosts of two
kinds, a host without GPUs, and pinned network figures."""

from __future__ import annotations

import json
import math

import pytest
from planner_support import DATA, DGX1, topology_files

import torch_topo
from torch_topo import _C
from torch_topo.cluster import Cluster
from torch_topo.hierarchy import HIERARCHICAL_OPS, cluster_planner

H100 = DATA / "nccl_topo_xml" / "azure_ndv5_8xH100_topo.xml"
A100 = DATA / "nccl_topo_xml" / "azure_ndv4_8xA100_topo.xml"
DGX2 = DATA / "hwloc" / "hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml"
RTX4090 = DATA / "nvidia_smi_topo" / "chlcBlog_8xRTX4090_2xEPYC7542-NPS4_allSYS_4xNIC.txt"
P5 = DATA / "nccl_topo_xml" / "aws_p5.48xlarge_8xH100_topo_2026pr.xml"
_CPU_HOST = json.dumps({"schema": "torch-topo/1", "kind": "host", "hostname": "cpu", "gpus": []})
CPU_ONLY = DATA / "hwloc" / "hwloc_nvidia_DGX-GB10.xml"  # its hwloc lists no GPU


def _cluster(hosts: list, ranks_per_host: int, gbps: float = 0.0, latency_us: float = 0.0,
             rank: int = 0) -> Cluster:
    """The Cluster the exchange assembles for ranks on `hosts` (file paths, or None for a host
    without GPUs, whose ranks have no device), `ranks_per_host` each, host-major."""
    docs = [_CPU_HOST if h is None else torch_topo.load_topology(h).to_json() for h in hosts]
    records = []
    for h, doc in enumerate(docs):
        for local in range(ranks_per_host):
            records.append(_C.RankRecord(len(records), f"node{h}", local,
                                         -1 if hosts[h] is None else local, host_json=doc))
    return Cluster(_C.assemble_cluster(records, gbps, latency_us), rank, gbps)


def _through_json(cluster: Cluster, model: str, latency_us: float) -> _C.PlannerCluster:
    doc = cluster.planner_doc()
    if latency_us:
        doc["inter_host_latency_us"] = latency_us
    return _C.PlannerCluster(json.dumps(doc), 1 << 20, model, 0)


def _same(a, b) -> bool:
    """Equal, NaN and inf alike included; dicts and lists compared element by element."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


CASES = {
    "h100-ib": ([H100] * 3, 8, 0.0, 0.0),
    "dgx1-assumed-nic": ([DGX1] * 2, 8, 0.0, 0.0),
    "dgx2-hwloc-16": ([DGX2] * 2, 16, 0.0, 0.0),
    "pcie-smi-pinned": ([RTX4090] * 2, 4, 3.0, 20.0),
    "mixed-a100-h100": ([A100, H100, A100, H100], 8, 0.0, 0.0),
    "efa-latency": ([P5] * 2, 8, 0.0, 0.0),
    "cpu-and-gpu": ([H100, None], 2, 12.5, 0.0),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("model,gloo_latency", [("auto", 0.0), ("alpha_beta", 65.0)])
def test_native_route_prices_as_the_json_route(case, model, gloo_latency):
    hosts, per_host, gbps, latency = CASES[case]
    cluster = _cluster(hosts, per_host, gbps, latency)
    native = cluster_planner(cluster, 1 << 20, model, 0, gloo_latency)
    reference = _through_json(cluster, model, gloo_latency)
    n = cluster.world_size
    assert native.world_size == reference.world_size == n
    for a in range(n):
        for b in range(n):
            assert native.bandwidth(a, b) == reference.bandwidth(a, b), (a, b)
    world = list(range(n))
    assert _same(native.hierarchical_thresholds(world), reference.hierarchical_thresholds(world))
    rails = [list(range(k, n, per_host)) for k in range(per_host)]
    for op in HIERARCHICAL_OPS:
        for nbytes in (4 << 10, 1 << 20, 256 << 20):
            for groups in ([world], rails):
                assert _same(native.compare_hierarchical(op, nbytes, groups),
                             reference.compare_hierarchical(op, nbytes, groups)), (op, nbytes)


def test_native_route_keeps_the_assembled_cluster_whole():
    # The planner holds its own copy: the Cluster's native object stays as assembled.
    pinned = _cluster([H100] * 2, 8, gbps=7.0, latency_us=9.0)
    cluster = Cluster(pinned.native, 0)  # the pins unconfigured: the planner's copy drops them
    planner = cluster_planner(cluster, 1 << 20, inter_host_latency_us=40.0)
    assert (cluster.native.inter_host_bandwidth_gbps, cluster.native.inter_host_latency_us) == (
        7.0, 9.0)
    assert planner.bandwidth(0, 8) > 7.0  # the NICs' rate, not the pin


def test_bad_nccl_version_is_refused_by_name():
    cluster = _cluster([H100] * 2, 8)
    with pytest.raises(ValueError, match="nccl_version: got -1"):
        cluster_planner(cluster, 1 << 20, nccl_version=-1)


def test_device_mesh_plans_on_the_live_cluster_natively(monkeypatch):
    # init_device_mesh's planner over the live cluster: the same model as through the JSON
    # route, and a world past the planner's bound refused by name, not planned on.
    from torch_topo import mesh
    from torch_topo.config import TopoConfig

    live = _cluster([H100] * 2, 8)
    monkeypatch.setattr(mesh, "world_cluster", lambda config: live)
    monkeypatch.setattr(mesh, "resolve_pinned_file", lambda config: None)
    planner = mesh._world_cluster(TopoConfig(), 16)
    reference = mesh.resolve_cluster(live.planner_doc(), 1, TopoConfig().pipeline_chunk_bytes,
                                     nccl_version=mesh.nccl_version_code())
    world = list(range(16))
    assert _same(planner.hierarchical_thresholds(world), reference.hierarchical_thresholds(world))
    assert _same(planner.plan_mesh([("dp", 2), ("tp", 8)]), reference.plan_mesh([("dp", 2), ("tp", 8)]))
    monkeypatch.setattr(mesh, "MAX_RANKS", 8)
    with pytest.raises(ValueError, match=r"^the world has 16 ranks, expected at most 8 \(the most "
                                         r"ranks the planner takes\)$"):
        mesh._world_cluster(TopoConfig(), 16)


def _json_route(path, hosts: int, pins: dict) -> _C.PlannerCluster:
    """resolve_cluster's construction until 2026-12-07: the completed cluster's JSON with the
    pins written into it, read back."""
    from torch_topo.plan import _drop_empty_nic_paths

    doc = {**json.loads(_C.planner_cluster_json(path=str(path), hosts=hosts)), **pins}
    return _C.PlannerCluster(_drop_empty_nic_paths(json.dumps(doc)), 4 << 20, "auto", 0)


@pytest.mark.parametrize("path", topology_files(16) + [CPU_ONLY], ids=lambda p: p.name)
def test_resolve_cluster_builds_what_its_json_described(path):
    # Every host file the readers load (2 to 16 GPUs, and one without GPUs), on one and on
    # three hosts, with and without network pins.
    from torch_topo.plan import resolve_cluster

    for hosts, pins in ((1, {}), (3, {}), (3, {"inter_host_bandwidth_gbps": 5.0,
                                               "inter_host_latency_us": 30.0})):
        got = resolve_cluster(path, hosts, inter_host_gbps=pins.get("inter_host_bandwidth_gbps"),
                              inter_host_latency_us=pins.get("inter_host_latency_us"))
        want = _json_route(path, hosts, pins)
        n = want.world_size
        assert got.world_size == n
        for a in range(n):
            for b in range(0, n, 3):
                assert got.bandwidth(a, b) == want.bandwidth(a, b), (hosts, a, b)
        world = list(range(n))
        assert _same(got.hierarchical_thresholds(world), want.hierarchical_thresholds(world))
        for op in ("all_reduce", "all_gather", "all_to_all"):
            assert _same(got.compare_hierarchical(op, 1 << 20, [world]),
                         want.compare_hierarchical(op, 1 << 20, [world])), (hosts, op)
        if n % 2 == 0 and n > 2:
            mesh = [("dp", n // 2), ("tp", 2)]
            assert _same(got.plan_mesh(mesh), want.plan_mesh(mesh)), hosts


@pytest.mark.parametrize("field, value", [("inter_host_bandwidth_gbps", -3.0),
                                          ("inter_host_bandwidth_gbps", math.inf),
                                          ("inter_host_latency_us", math.nan),
                                          ("inter_host_latency_us", 1e9)])
def test_bad_network_figures_are_refused_by_name(field, value):
    # The JSON route's reader refused them; of_cluster priced inf as given and fell back to the
    # NICs for negative and NaN figures.
    figures = {"inter_host_bandwidth_gbps": 0.0, "inter_host_latency_us": 0.0, field: value}
    with pytest.raises(ValueError, match=rf"^PlannerCluster.of_cluster: {field}: got "):
        _C.PlannerCluster.of_cluster(_cluster([H100] * 2, 8).native, **figures)
