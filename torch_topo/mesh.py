# SPDX-License-Identifier: Apache-2.0
"""`init_device_mesh`: torch's DeviceMesh, laid out by the planner on the current world.

The cluster comes from, in order: the `topology=` argument; the pinned topology file
(`TopoConfig.topology_file`, `TORCH_TOPO_FILE` or `NCCL_TOPO_FILE`) with each rank's
host and GPU from play mode (`TopoConfig.play` / `TORCH_TOPO_PLAY`) or host-major placement;
else the live cluster every rank published through the store (`torch_topo.cluster.world_cluster`:
the exchange the "topo" backend made at init_process_group, or one made now). Ranks without a
GPU leave nothing to plan on: the contiguous layout is used.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from torch_topo.backend_choice import BackendChoices
from torch_topo.cluster import PLAY_SETTING, play_entries, world_cluster
from torch_topo.config import TopoConfig
from torch_topo.hierarchy import cluster_planner, gloo_latency_us
from torch_topo.nccl_hints import nccl_version_code, register_plan_hints
from torch_topo.numa import apply_numa_binding, init_report
from torch_topo.plan import MAX_RANKS, Plan, cluster_text, resolve_cluster
from torch_topo.probe import resolve_pinned_file
from torch_topo.validation import is_int_in

__all__ = ["cpu_cluster_doc", "cpu_ranks_doc", "init_device_mesh", "plan_for_world",
           "played_placements", "world_planner_cluster"]


def played_placements(text: str, world_size: int) -> list[tuple[str, int]] | None:
    """TopoConfig.play -> [(host, gpu)] by rank; None for a single entry in a larger world
    (this rank's own: the caller gathers them from every rank)."""
    entries = play_entries(text, world_size)
    return None if len(entries) == 1 and world_size > 1 else entries


def _played_cluster(source, placements: list[tuple[str, int]], config: TopoConfig):
    """Cluster of copies of the one-host `source` (a path, `Topology` or torch-topo JSON), one
    per played host name, ranks where they play."""
    names = list(dict.fromkeys(h for h, _ in placements))
    where = os.fspath(source) if isinstance(source, str | os.PathLike) and \
        not str(source).lstrip().startswith("{") else "the topology given"
    doc = json.loads(cluster_text(source, 1))
    if len(doc["hosts"]) != 1:  # copying was refused as "hosts: got 2 for"
        raise ValueError(f"{PLAY_SETTING}: plays copies of one host, but {where} describes "
                         f"{len(doc['hosts'])} hosts; expected one host's topology, or no play "
                         "to plan on the cluster as it is")
    host = doc["hosts"][0]
    doc["hosts"] = [{**host, "hostname": name} for name in names]
    gpus = len(host["gpus"])
    ranks = []
    for rank, (host, gpu) in enumerate(placements):
        if not 0 <= gpu < max(gpus, 1):
            raise ValueError(f"{PLAY_SETTING}: rank {rank}: GPU {gpu}, expected 0..{gpus - 1} "
                             f"(GPUs of {where})")
        ranks.append({"host": names.index(host), "local_gpu": gpu if gpus else -1,
                      "local_rank": sum(1 for h, _ in placements[:rank] if h == host)})
    doc["ranks"] = ranks
    # Ranks of a host without GPUs are Gloo's: its steps between hosts at the latency the
    # backend gives them (GPU ranks keep NCCL's, as NCCL picks its algorithms by it).
    latency = {} if gpus else {"inter_host_latency_us": config.inter_host_latency_us}
    return resolve_cluster(doc, 1, config.pipeline_chunk_bytes,
                           inter_host_gbps=config.inter_host_gbps, nccl_version=nccl_version_code(),
                           gloo_latency=True, **latency)


def _world_cluster(config: TopoConfig, world_size: int, topology=None):
    """The PlannerCluster of the current world, or None when no rank has a known GPU."""
    chunk = config.pipeline_chunk_bytes
    source = topology
    if source is None:
        source = resolve_pinned_file(config)
    if source is None:
        live = world_cluster(config)
        if live is None or any(p.local_gpu < 0 for p in live.placements):
            return None
        if live.world_size > MAX_RANKS:
            raise ValueError(f"the world has {live.world_size} ranks, expected at most "
                             f"{MAX_RANKS} (the most ranks the planner takes)")
        return cluster_planner(live, chunk, nccl_version=nccl_version_code())
    if config.play:
        placements = played_placements(config.play, world_size)
        if placements is None:  # each rank knows only its own: gather them
            gathered = [None] * world_size
            dist.all_gather_object(gathered, play_entries(config.play, 1)[0])
            placements = [tuple(p) for p in gathered]
        return _played_cluster(source, placements, config)
    # The pinned file gets the NVLink a cloud's NCCL XML leaves out (NCCL adds it at run time).
    nvlink = "complete" if topology is None else "file"
    one_host = resolve_cluster(source, 1, chunk, nvlink=nvlink)
    if one_host.rank_gpu(0) < 0:
        # A host without GPUs (each emulated node pins one: its NIC alone) places no rank, and
        # copies of it made every rank a host of its own: 8 ranks on 2 nodes planned as 8 hosts.
        return None
    per_host = one_host.world_size
    if one_host.host_count > 1 and world_size != per_host:
        # A cluster document fixes every rank's place; neither copies nor play apply to it.
        raise ValueError(f"world size {world_size}: the cluster given holds {per_host} ranks on "
                         f"{one_host.host_count} hosts, expected a world of exactly that size "
                         "(a cluster document is planned on as it is)")
    if world_size % per_host == 0:
        return resolve_cluster(source, world_size // per_host, chunk, nvlink=nvlink,
                               inter_host_gbps=config.inter_host_gbps,
                               nccl_version=nccl_version_code())
    if world_size < per_host and one_host.host_count == 1:
        return _played_cluster(source, [("host0", r) for r in range(world_size)], config)
    raise ValueError(f"world size {world_size} does not fill whole hosts of {per_host} GPUs; "
                     "set TopoConfig.play (TORCH_TOPO_PLAY) to say where ranks run")


def world_planner_cluster(config: TopoConfig | None = None, world_size: int | None = None):
    """The `_C.PlannerCluster` init_device_mesh plans on (pinned file, else the live cluster),
    or None when no rank has a known GPU. Collective when a one-entry play string must be
    gathered; call it on every rank. `world_size` (default: torch.distributed's) lets a pinned
    file be planned on before any process group exists."""
    cfg = (config or TopoConfig()).merged_with_env()
    return _world_cluster(cfg, dist.get_world_size() if world_size is None else world_size)


def cpu_cluster_doc(world_size: int) -> dict:
    """A cluster of `world_size` CPU ranks on one host: what plans stand on without a topology."""
    return {"schema": "torch-topo/1", "kind": "cluster",
            "hosts": [{"hostname": "local", "gpus": []}],
            "ranks": [{"host": 0, "local_gpu": -1, "local_rank": r} for r in range(world_size)]}


def cpu_ranks_doc(world_size: int, config: TopoConfig | None = None) -> dict:
    """Where no rank has a GPU to plan on: the live cluster's hosts with their ranks, else (no
    exchange, or host names alone) one host of `world_size` CPU ranks. Plans on it stay
    contiguous; they price what a contiguous layout costs on those hosts, with Gloo's steps
    between hosts at the latency the backend gives them (`hierarchy.gloo_latency_us`; the
    exchange's own is NCCL's network hop)."""
    cfg = TopoConfig.from_env() if config is None else config
    live = world_cluster(cfg)
    if live is None:
        return cpu_cluster_doc(world_size)
    return {**live.planner_doc(), "inter_host_latency_us": gloo_latency_us(live, cfg)}


def plan_for_world(mesh_shape, mesh_dim_names, *, topology=None, traffic=None,
                   config: TopoConfig | None = None) -> Plan:
    """The plan init_device_mesh would use, computed on every rank (deterministic)."""
    mesh = _check_mesh(mesh_shape, mesh_dim_names)
    cfg = _resolve_config(config)
    world = dist.get_world_size()
    cluster = _world_cluster(cfg, world, topology)
    if cluster is None:
        doc = cpu_ranks_doc(world, cfg)
        # Its groups across hosts report the side the backend's size rule takes for them.
        return Plan.build(doc, mesh, traffic, contiguous=True, backend=BackendChoices(doc, cfg))
    return Plan.build(cluster, mesh, traffic, nccl_hints=cfg.nccl_hints,
                      backend=BackendChoices.of(cluster, 1, cfg, cluster))


def _check_mesh(mesh_shape, mesh_dim_names) -> dict[str, int]:
    """{name: size} in mesh order. Sizes went through int() (1.5 planned as 1), a repeated
    name collapsed two dimensions into one, and a string of names was split into letters."""
    if isinstance(mesh_shape, str) or not isinstance(mesh_shape, Sequence):
        raise ValueError(f"mesh_shape: got {mesh_shape!r}, expected a tuple of sizes, e.g. "
                         "(2, 4)")
    for size in mesh_shape:
        if not is_int_in(size, 1):
            raise ValueError(f"mesh_shape: got {tuple(mesh_shape)!r}, expected int sizes >= 1")
    if mesh_dim_names is None:
        raise ValueError("mesh_dim_names: required, expected one name per mesh dimension "
                         "(names tell the planner what traffic each dimension carries)")
    if isinstance(mesh_dim_names, str) or not isinstance(mesh_dim_names, Sequence):
        raise ValueError(f"mesh_dim_names: got {mesh_dim_names!r}, expected a tuple of names, "
                         "e.g. ('dp', 'tp')")
    names = tuple(mesh_dim_names)
    if len(names) != len(mesh_shape):
        raise ValueError(f"mesh_dim_names: got {len(names)} names for mesh_shape "
                         f"{tuple(mesh_shape)}, expected one per dimension")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"mesh_dim_names: got {names!r}, expected non-empty strings")
        if names.count(name) > 1:
            raise ValueError(f"mesh_dim_names: {name!r} appears twice in {names!r}, expected "
                             "distinct names")
    return dict(zip(names, mesh_shape, strict=True))


def _resolve_config(config) -> TopoConfig:
    if config is not None and not isinstance(config, TopoConfig):
        raise ValueError(f"config: got {type(config).__name__}, expected a torch_topo.TopoConfig "
                         "or None")
    return (config or TopoConfig()).merged_with_env()


def _slices(mesh: torch.Tensor, dim: int) -> list[list[int]]:
    """The rank lists along `dim` (one group each), in the same order on every rank."""
    return mesh.movedim(dim, -1).reshape(-1, mesh.shape[dim]).tolist()


def _ordered_groups(rank_lists: list[list[int]]):
    """new_group for every list, ranks in the list's order (every rank creates every group, in
    one order); returns this rank's group."""
    me, mine = dist.get_rank(), None
    for ranks in rank_lists:
        group = dist.new_group(ranks=ranks, sort_ranks=False)
        if me in ranks:
            mine = group
    return mine


def _flattened_layout(layout):
    """`layout` as one dimension, as torch's own _create_flatten_mesh builds it: a list of flat
    axes collapsed into one from torch 2.13, a coalesced (and nested) pycute layout in 2.12."""
    from torch.distributed._mesh_layout import _MeshLayout

    if hasattr(layout, "collapse"):
        return _MeshLayout([layout.collapse()])
    flat = layout.coalesce()
    return flat.nest() if len(flat) > 1 else flat


class _RankOrderedMesh(DeviceMesh):
    """torch 2.12-2.14: a DeviceMesh whose flattened dimensions keep the mesh's rank order.

    torch creates a flattened dimension's groups itself, with new_group's sorted ranks, or, when
    the dimension spans the world, by reusing the default group, whose ranks are sorted
    (pytorch PR 193224; torch 2.15 keeps the order with preserve_rank_order=True). A planned
    mesh [[0, 2], [1, 3]] flattened is [0, 2, 1, 3]: rank 2 would be group rank 2 but mesh
    coordinate 1, and FSDP or DTensor over that dimension would place shards wrongly. Here such
    groups are built in mesh order; submeshes sliced from this mesh are of this class too."""

    def _create_sub_mesh(self, layout, submesh_dim_names):
        sub = super()._create_sub_mesh(layout, submesh_dim_names)
        sub.__class__ = _RankOrderedMesh
        return sub

    def _create_flatten_mesh(self, mesh_dim_name, backend_override=(None, None)):
        root = self._get_root_mesh()
        layout = _flattened_layout(self._layout)
        rank_lists = layout.remap_to_tensor(root._rank_map).tolist()
        if (all(g == sorted(g) for g in rank_lists) or backend_override != (None, None)
                or mesh_dim_name in root._flatten_mapping
                or mesh_dim_name in (root.mesh_dim_names or ())):
            # torch's own path: its groups keep the order, or it raises / reuses as it does.
            return super()._create_flatten_mesh(mesh_dim_name, backend_override)
        group = _ordered_groups(rank_lists)
        flat = DeviceMesh(root.device_type, _layout=layout, _rank_map=root._rank_map,
                          mesh_dim_names=(mesh_dim_name,), _root_mesh=root, _init_backend=False)
        flat._dim_group_names = [group.group_name]
        root._pg_registry[group.group_name] = group
        flat.__class__ = _RankOrderedMesh
        root._flatten_mapping[mesh_dim_name] = flat
        return None


def _device_mesh(device_type: str, mesh: torch.Tensor, names: tuple[str, ...]) -> DeviceMesh:
    """DeviceMesh(device_type, mesh), with each dimension's groups in the mesh's own rank order,
    and the groups of dimensions flattened later too.

    torch's DeviceMesh creates its groups with new_group's default sort_ranks=True, and reuses
    the default group (ranks sorted) for a dimension as large as the world, so a mesh whose
    ranks are not in order (a planned [[0, 3], [1, 2]] has the dp slice [3, 2], and flattened
    [0, 3, 1, 2]) would get group ranks that disagree with the mesh coordinates, and DTensor
    would place shards wrongly. torch >= 2.15 keeps the order when asked
    (preserve_rank_order); on 2.12-2.14 the groups are built here, in mesh order, handed over
    with from_group, and flattening goes through _RankOrderedMesh. Older torch (no sort_ranks)
    takes meshes whose every slice is ascending, whose flattened dimensions do lose the order.
    """
    if mesh.flatten().tolist() == list(range(mesh.numel())):
        return DeviceMesh(device_type, mesh, mesh_dim_names=names)
    if "preserve_rank_order" in inspect.signature(DeviceMesh.__init__).parameters:
        return DeviceMesh(device_type, mesh, mesh_dim_names=names, preserve_rank_order=True)
    if "sort_ranks" not in inspect.signature(dist.new_group).parameters:
        if all(s == sorted(s) for d in range(mesh.dim()) for s in _slices(mesh, d)):
            return DeviceMesh(device_type, mesh, mesh_dim_names=names)  # see docs/planner.md
        raise RuntimeError(
            f"init_device_mesh: the planned mesh {mesh.tolist()} has groups whose rank order is "
            f"not ascending, which this torch ({torch.__version__}) cannot keep "
            "(new_group has no sort_ranks); use torch >= 2.12")
    groups = [_ordered_groups(_slices(mesh, d)) for d in range(mesh.dim())]
    device_mesh = DeviceMesh.from_group(groups, device_type, mesh=mesh, mesh_dim_names=names)
    device_mesh.__class__ = _RankOrderedMesh
    return device_mesh


def init_device_mesh(device_type: str, mesh_shape, *, mesh_dim_names=None, topology=None,
                     traffic=None, config: TopoConfig | None = None) -> DeviceMesh:
    """A DeviceMesh whose groups follow the topology-aware plan of the current world.

    Args:
        device_type: "cpu" or "cuda", as for torch's init_device_mesh.
        mesh_shape: sizes, outermost first; their product must be the world size.
        mesh_dim_names: one name per dimension (tp, sp, cp, ep, dp, pp, ... or any with traffic).
        topology: optional topology file / Topology / cluster; default: the pinned file.
        traffic: optional {dim: bytes per step} (see torch_topo.plan).
        config: TopoConfig; `bind_numa` binds this rank to its GPU's CPUs (unless the "topo"
            backend did at init_process_group) and
            `nccl_hints` creates each group's NCCL communicator under its dimension's planned
            NCCL_ALGO (on a "topo" world; see torch_topo.nccl_hints).

    The plan is on the returned mesh as `mesh.topo_plan`; the NUMA report as
    `mesh.topo_numa_report`.
    """
    if device_type not in ("cpu", "cuda"):  # "gpu" built a mesh no collective could use
        raise ValueError(f"init_device_mesh: device_type: got {device_type!r}, expected 'cpu' "
                         "or 'cuda'")
    _check_mesh(mesh_shape, mesh_dim_names)
    cfg = _resolve_config(config)
    if not dist.is_initialized():
        raise ValueError("init_device_mesh: torch.distributed is not initialised; call "
                         "init_process_group first")
    plan = plan_for_world(mesh_shape, mesh_dim_names, topology=topology, traffic=traffic,
                          config=cfg)
    # Every rank must build the same mesh; a rank with a different topology file would not.
    mine = plan.mesh
    seen = [None] * dist.get_world_size()
    dist.all_gather_object(seen, mine)
    if any(s != mine for s in seen):
        bad = next(i for i, s in enumerate(seen) if s != mine)
        raise RuntimeError(f"init_device_mesh: rank {bad} planned a different mesh than rank "
                           f"{dist.get_rank()}; expected the same topology on every rank")
    # The "topo" backend binds at init_process_group; only another backend's world binds here.
    report = init_report() or apply_numa_binding(plan.cluster, dist.get_rank(),
                                                 enabled=cfg.bind_numa)
    if cfg.nccl_hints and device_type == "cuda" and dist.get_backend() == "topo":
        # Each group's NCCL communicator is created by the "topo" creator under its hint.
        plan.applied_nccl_env = register_plan_hints(plan)
    device_mesh = _device_mesh(device_type, torch.tensor(plan.mesh, dtype=torch.int),
                               tuple(mesh_dim_names))
    device_mesh.topo_plan = plan
    device_mesh.topo_numa_report = report
    return device_mesh
