# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the planner tests: topology files of tests/data, an exhaustive grouping
search written independently of csrc/topo/placement, and GPU relabelling of cluster JSON."""

from __future__ import annotations

import json
import pathlib
import random

from torch_topo import _C

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
CLASSES = ["X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"]
DGX1 = DATA / "nvidia_smi_topo" / "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt"


def topology_files(max_gpus: int = 8) -> list[pathlib.Path]:
    """Host topology files the readers load, with 2..max_gpus GPUs."""
    out = []
    for path in sorted(DATA.rglob("*")):
        if not path.is_file() or path.suffix not in (".txt", ".xml", ".json") or path.parent.name == "nccl_tests":
            continue
        try:
            doc = json.loads(_C.planner_cluster_json(path=str(path)))
        except (ValueError, RuntimeError):
            continue  # graph files, console dumps: not host topologies
        gpus = len(doc["hosts"][0]["gpus"])
        if 2 <= gpus <= max_gpus:
            out.append(path)
    return out


def pair_key(cluster, a: int, b: int) -> tuple[int, int]:
    """(NVLink lanes, -class rank): larger is better, as the issue ranks links."""
    cls, lanes = cluster.pair_path(a, b)
    return (lanes, -CLASSES.index(cls))


def worst_key(cluster, groups) -> tuple[int, int]:
    return min(pair_key(cluster, a, b) for g in groups for i, a in enumerate(g) for b in g[i + 1:])


def best_partition_key(cluster, ranks: list[int], size: int) -> tuple[int, int]:
    """Best worst-pair key over every partition of `ranks` into groups of `size` (brute force:
    each group is built around its smallest free member, so each partition is seen once)."""
    best = None

    def recurse(free: list[int], worst):
        nonlocal best
        if not free:
            best = worst if best is None or worst > best else best
            return
        if best is not None and worst is not None and worst <= best:
            return  # cannot beat the best any more
        first, rest = free[0], free[1:]

        def pick(group, start, worst_g):
            if len(group) == size:
                remaining = [r for r in rest if r not in group]
                recurse(remaining, worst_g if worst is None else min(worst, worst_g))
                return
            for i in range(start, len(rest)):
                cand = rest[i]
                w = min([pair_key(cluster, cand, m) for m in group] + ([worst_g] if worst_g else []))
                pick(group + [cand], i + 1, w)

        pick([first], 0, None)

    recurse(list(ranks), None)
    return best


def relabelled_cluster_json(path, seed: int, hosts: int = 1) -> dict:
    """Cluster JSON of `path` with GPU ids permuted (fixed seed); the physical graph is dropped
    so only the permuted path matrices describe the host."""
    doc = json.loads(_C.planner_cluster_json(path=str(path), hosts=1))
    host = doc["hosts"][0]
    n = len(host["gpus"])
    perm = list(range(n))
    random.Random(seed).shuffle(perm)
    gpus = [None] * n
    paths = [[None] * n for _ in range(n)]
    nic_paths = [None] * n
    for i in range(n):
        gpus[perm[i]] = dict(host["gpus"][i], index=perm[i], bus_id="")
        for j in range(n):
            paths[perm[i]][perm[j]] = host["gpu_paths"][i][j]
        if host["gpu_nic_paths"]:
            nic_paths[perm[i]] = host["gpu_nic_paths"][i]
    host.update(gpus=gpus, gpu_paths=paths, gpu_nic_paths=nic_paths if host["gpu_nic_paths"] else [])
    host["graph"] = {"nodes": [], "links": []}
    doc["hosts"] = [host] * hosts
    doc["ranks"] = [{"host": h, "local_gpu": g, "local_rank": g} for h in range(hosts) for g in range(n)]
    return doc


def played_cpu_ranks(tmp_path, latency_us: float):
    """A cluster file of two DGX-1 hosts each playing four CPU ranks (as the emulator places
    ranks beyond a host's GPUs), with its own inter-host latency. Groups without GPUs are priced
    by the alpha-beta model, which the latency enters (NCCL's model keeps NCCL's own)."""
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    for i, host in enumerate(doc["hosts"]):
        host["hostname"] = f"node{i}"
    doc["ranks"] = [{"host": h, "local_gpu": -1, "local_rank": r} for h in range(2) for r in range(4)]
    doc["inter_host_latency_us"] = latency_us
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    return doc, path


def in_ranges(ranges, nbytes: int) -> bool:
    """Whether `nbytes` lies in (from, below) byte ranges (below None: no upper end), written
    here apart from torch_topo.size_ranges so that tests check it rather than reuse it."""
    return any(lo <= nbytes and (hi is None or nbytes < hi) for lo, hi in ranges)
