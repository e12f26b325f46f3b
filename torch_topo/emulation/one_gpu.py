# SPDX-License-Identifier: Apache-2.0
"""Rehearsal on one GPU (`python -m torch_topo.emulate --one-gpu`): N x P ranks as local
processes that all run on one GPU, while "topo" believes in N hosts of P GPUs each.

Two settings make this work, one per side:

- NCCL refuses two ranks of one communicator on the same GPU of the same host ("Duplicate GPU
  detected"); it tells hosts apart by a host hash that `NCCL_HOSTID` replaces. A distinct
  `NCCL_HOSTID` per rank makes every rank its own host to NCCL, which then carries all traffic
  over its Socket transport (here: loopback), never P2P or shared memory.
- torch-topo plays the target cluster: `TORCH_TOPO_FILE` pins the target's host topology and
  `TORCH_TOPO_PLAY` gives each rank the host name and GPU it plays (`node<n>:<local rank>`), so
  the cluster exchange, hierarchy, planner and ops take their multi-host paths.

Every rank sees only the chosen GPU (`CUDA_VISIBLE_DEVICES`) as `cuda:0`, and, as NCCL and
CUDA see it, is alone on its machine: `LOCAL_RANK=0`, `LOCAL_WORLD_SIZE=1`, so a program that
picks `cuda:$LOCAL_RANK` runs unchanged. docs/emulator.md says what is realistic here.
"""

from __future__ import annotations

import os
import socket

from torch_topo.emulation import cluster_file
from torch_topo.emulation.launcher import RankSpec

__all__ = ["HOSTID_PREFIX", "free_port", "rank_env", "visible_gpu", "write_files"]

HOSTID_PREFIX = "torch-topo-rehearsal"
# Variables set for every rank unless the user set them: rank traffic stays on loopback (NCCL
# otherwise skips `lo` and picks the machine's NIC; Gloo, topo's CPU side, would take the
# address the host name resolves to) and off InfiniBand (the played links are sockets; an RDMA
# loopback would be neither the target's network nor this machine's); NCCL says why it fails
# (its warnings, not its chatter: a hang without them shows nothing).
RANK_DEFAULTS = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1", "GLOO_SOCKET_IFNAME": "lo",
                 "NCCL_DEBUG": "WARN"}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the rendezvous of local ranks)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def visible_gpu(index: int, environ) -> str:
    """The CUDA_VISIBLE_DEVICES entry of GPU `index` as this process numbers it (an index into
    the caller's own CUDA_VISIBLE_DEVICES where that is set)."""
    if index < 0:
        raise ValueError(f"--one-gpu: got GPU {index}, expected >= 0")
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return str(index)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise ValueError(f"--one-gpu: got GPU {index}, but CUDA_VISIBLE_DEVICES={visible!r} "
                         f"shows {len(entries)}; expected 0..{len(entries) - 1}")
    return entries[index]


def write_files(workdir: str, topology: str, ranks: list[RankSpec], nodes: int) -> tuple[str, str]:
    """Writes the played host (`host.json`, the target host every node plays, its NICs kept:
    their speeds are the target's inter-host links) and `cluster.json`; returns both paths."""
    base = cluster_file.base_host(topology)
    gpus = len(base.get("gpus", []))
    per_node = ranks[0].local_world_size
    if per_node > gpus:
        raise ValueError(f"--procs-per-node: got {per_node}, but {topology} has {gpus} GPUs; "
                         "expected at most one rank per played GPU")
    hosts = [dict(base, hostname=f"node{i}") for i in range(nodes)]
    host_path = os.path.join(workdir, "host.json")
    cluster_path = os.path.join(workdir, "cluster.json")
    cluster_file.write_json(host_path, hosts[0])
    cluster_file.write_json(cluster_path, cluster_file.cluster_document(hosts, ranks))
    return host_path, cluster_path


def rank_env(base, spec: RankSpec, world: int, *, gpu: str, master_port: int, run_id: str,
             host_path: str, cluster_path: str, nccl_env: dict[str, str]) -> dict[str, str]:
    """The environment of one rank (see the module docstring)."""
    env = dict(base)
    for key, value in RANK_DEFAULTS.items():
        env.setdefault(key, value)
    env.update(nccl_env)
    env.update({
        "RANK": str(spec.rank),
        "WORLD_SIZE": str(world),
        # As NCCL and CUDA see it, each rank is alone on its machine with one GPU.
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(spec.rank),
        "NODE_RANK": str(spec.rank),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "CUDA_VISIBLE_DEVICES": gpu,
        # Must differ per rank whatever the user exported: equal ids on one GPU are refused.
        "NCCL_HOSTID": f"{HOSTID_PREFIX}-{run_id}-rank{spec.rank}",
        "TORCH_TOPO_FILE": host_path,
        "TORCH_TOPO_PLAY": f"node{spec.node}:{spec.local_rank}",
        "EMULATED_CLUSTER_FILE": cluster_path,
    })
    env.setdefault("OMP_NUM_THREADS", "1")
    return env
