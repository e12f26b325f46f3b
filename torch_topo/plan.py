# SPDX-License-Identifier: Apache-2.0
"""Topology-aware device-mesh plans: `plan(topology_or_cluster, mesh, traffic=None)`.

A `Plan` says which global ranks share each group of a mesh (heaviest dimensions inside the
fastest GPU cliques, cross-host groups on one NIC rail), what each dimension is predicted to
cost per step and which collective algorithm the cost model picks per size. The search and the
cost model are C++ (csrc/topo/placement, cost_model); this module shapes inputs and outputs.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.hierarchical_choice import predicted_choices
from torch_topo.probe import live_probe
from torch_topo.topology import file_named, load_topology
from torch_topo.validation import is_int_in

__all__ = ["MAX_RANKS", "Plan", "plan", "assignments", "parse_mesh", "resolve_cluster",
           "check_hosts", "check_hosts_per_domain", "check_traffic_bytes", "completed_source",
           "network_pins", "SIZE_CLASSES", "with_nvlink_domains"]

MAX_RANKS: int = _C.MAX_RANKS
"""Most ranks (hosts x ranks per host) the planner takes: its time and memory grow with the
ranks and their host graphs (16384 ranks on 8-GPU hosts: about 0.5 s and 0.03-0.12 GB on top
of what importing torch takes; csrc/bindings/planner_bindings.cpp)."""

SIZE_CLASSES: dict[str, int] = {"small": 64 << 10, "medium": 4 << 20, "large": 256 << 20}
"""Message sizes `Plan.algorithms` reports a choice for, besides each dimension's step bytes."""

# NCCL_ALGO entries ("function:algorithm", NCCL >= 2.24.3) for the model's choices that NCCL
# implements for that collective (NCCL has Tree, NVLS, NVLS tree and CollNet for all-reduce
# only, PAT for all-gather and reduce-scatter); others get no hint. The model's protocol is a
# prediction, not a setting: NCCL_PROTO is left to NCCL. See torch_topo.nccl_hints.
_NCCL_ALGO = {
    ("all_reduce", "ring"): "allreduce:ring",
    ("all_reduce", "tree"): "allreduce:tree",
    ("all_reduce", "nvls"): "allreduce:nvls",
    ("all_reduce", "nvls_tree"): "allreduce:nvlstree",
    ("all_reduce", "collnet"): "allreduce:collnetdirect",
    ("all_gather", "pat"): "allgather:pat",
    ("reduce_scatter", "pat"): "reducescatter:pat",
    ("all_gather", "ring"): "allgather:ring",
    ("reduce_scatter", "ring"): "reducescatter:ring",
    ("broadcast", "ring"): "broadcast:ring",
}



def assignments(text: str, option: str, form: str) -> list[tuple[str, str]]:
    """ "a=1, b=2" -> [("a", "1"), ("b", "2")], names and values stripped: the comma lists of
    --mesh, --traffic and --attention. An empty item (",,", a trailing comma), an item without
    NAME= and a name given twice are refused with a ValueError naming `option`; `form` is the
    item's shape for the message, e.g. "NAME=SIZE (e.g. dp=4,tp=2)"."""
    if not isinstance(text, str):  # None failed as "'NoneType' object has no attribute 'split'"
        raise ValueError(f"{option}: got {text!r}, expected a string of {form} items")
    out: list[tuple[str, str]] = []
    for item in text.split(","):
        name, sep, value = (s.strip() for s in item.partition("="))
        if not item.strip():
            raise ValueError(f"{option}: an empty item in {text!r}, expected {form} separated "
                             "by single commas")
        if not sep or not name:
            raise ValueError(f"{option}: got {item.strip()!r}, expected {form}")
        if any(name == seen for seen, _ in out):
            raise ValueError(f"{option}: {name!r} appears twice")
        out.append((name, value))
    return out


def parse_mesh(text: str, option: str = "--mesh") -> dict[str, int]:
    """ "dp=4,tp=2" -> {"dp": 4, "tp": 2} (outermost first); ValueError names `option`."""
    out: dict[str, int] = {}
    for name, size in assignments(text, option, "NAME=SIZE (e.g. dp=4,tp=2)"):
        digits = size.strip()
        # ASCII digits only: int() also read "4_2" as 42 and other scripts' digits.
        if not (digits.isascii() and digits.isdigit()):
            raise ValueError(f"{option}: {name}: got {size!r}, expected an integer")
        out[name] = _check_dim_size(option, name, int(digits))
    return out


def mesh_items(mesh: Mapping[str, int] | Sequence[tuple[str, int]] | str) -> list[tuple[str, int]]:
    """Each form `plan` takes for a mesh as [(name, size)], checked; ValueError names `mesh`."""
    if isinstance(mesh, str):
        return list(parse_mesh(mesh, "mesh").items())
    if not isinstance(mesh, Mapping | Sequence):  # None or 8 failed as "not iterable"
        raise ValueError(f"mesh: got {mesh!r}, expected {{name: size}}, [(name, size)] or a "
                         "string such as 'dp=2,tp=4'")
    items = list(mesh.items()) if isinstance(mesh, Mapping) else [
        tuple(i) if isinstance(i, Sequence) else (i,) for i in mesh]
    for item in items:
        if len(item) != 2:
            raise ValueError(f"mesh: got {item!r}, expected (name, size)")
        if not isinstance(item[0], str) or not item[0]:
            raise ValueError(f"mesh: got the name {item[0]!r} in {item!r}, expected a non-empty "
                             "string such as 'tp'")
    return [(n, _check_dim_size("mesh", n, s)) for n, s in items]


def _check_dim_size(option: str, name: str, size: object) -> int:
    # The native planner takes C ints; a size past MAX_RANKS can match no cluster anyway.
    if not is_int_in(size, 1, MAX_RANKS):
        raise ValueError(f"{option}: dimension '{name}': size got {size!r}, expected an int >= 1 "
                         f"and <= {MAX_RANKS} (the most ranks the planner takes)")
    return size


def check_hosts(hosts: int, option: str = "hosts") -> int:
    """`hosts` copies of a one-host topology, refused (ValueError naming `option`) outside
    1..MAX_RANKS; the native side also bounds hosts x ranks per host by MAX_RANKS."""
    if not is_int_in(hosts, 1, MAX_RANKS):
        raise ValueError(f"{option}: got {hosts!r}, expected >= 1 and <= {MAX_RANKS} (an int; "
                         "the most ranks the planner takes)")
    return hosts


def _traffic_map(traffic: Mapping[str, Any] | None) -> dict[str, tuple[float, str]] | None:
    if traffic is None:
        return None
    if not isinstance(traffic, Mapping):  # a list failed with "has no attribute 'items'"
        raise ValueError(f"traffic: got {traffic!r}, expected {{dim: bytes or (bytes, op)}}")
    out: dict[str, tuple[float, str]] = {}
    for name, value in traffic.items():
        op = ""
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise ValueError(f"traffic: {name}: got {value!r}, expected bytes or (bytes, op)")
            value, op = value
        if isinstance(value, bool):  # float(True) priced a misplaced flag as 1 byte
            raise ValueError(f"traffic: {name}: got {value!r}, expected a number of bytes")
        try:
            nbytes = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"traffic: {name}: got {value!r}, expected a number of bytes") from None
        if op:
            try:  # the core's spelling check, named after the dimension (it named neither)
                _C.bus_bandwidth_factor(str(op), 2)
            except ValueError as e:
                raise ValueError(f"traffic: {name}: {e}") from None
        out[str(name)] = (check_traffic_bytes("traffic", str(name), nbytes), str(op))
    return out


def check_traffic_bytes(option: str, name: str, nbytes: float) -> float:
    """`nbytes` of dimension `name`, refused (ValueError naming `option`) unless finite and in
    [0, 2**63): the cost model counts bytes in int64, and inf or 1e19 would wrap there."""
    if not (math.isfinite(nbytes) and 0 <= nbytes < 2**63):
        raise ValueError(f"{option}: dimension '{name}': got {nbytes!r} bytes, expected >= 0 and "
                         "< 2**63 (finite)")
    return nbytes


def network_pins(config: TopoConfig) -> dict[str, float | None]:
    """The network between hosts that `config` pins, as keyword arguments of `resolve_cluster`,
    `Plan.build` and `doctor.diagnose`: what the backend's cluster exchange applies."""
    return {"inter_host_gbps": config.inter_host_gbps,
            "inter_host_latency_us": config.inter_host_latency_us}


def resolve_cluster(topology_or_cluster: Any, hosts: int = 1, chunk_bytes: int = 4 << 20,
                    model: str = "auto", *, nvlink: str = "file", live=None,
                    inter_host_gbps: float | None = None,
                    inter_host_latency_us: float | None = None, nccl_version: int = 0,
                    gloo_latency: bool = False):
    """A `_C.PlannerCluster` from a file path, a `Topology` (or anything with `to_json()`), a
    `torch_topo.Cluster`, a torch-topo JSON dict or text, or an existing PlannerCluster.
    `model`: the cost model's kind for GPU groups ("auto", "alpha_beta", "nccl"; see
    PlannerCluster).
    `nvlink`: for an NCCL XML path, "file" plans on it as written, "complete" on the NVLink it
    leaves out filled from `live` (a live probe `Topology`; None probes this host) or the GPU
    model (`load_topology`). `inter_host_gbps` (GB/s between hosts per direction) and
    `inter_host_latency_us` (one way): the network as the live cluster exchange pins it; None
    keeps the source's own value (for the bandwidth, else its NIC speeds). The environment is
    the caller's to read (the CLI passes `network_pins(TopoConfig.from_env())`): a live cluster
    already carries the values its group was configured with. `nccl_version`: the NCCL
    release (version code, 2.26.2 -> 22602) whose tuning the model follows; 0 the newest.
    `gloo_latency` (the `plan` and `doctor` verbs): where a rank has no GPU, so that Gloo
    carries its groups (priced by the alpha-beta model, which the latency enters), the network
    takes the latency the backend gives Gloo's steps between hosts (`hierarchy.gloo_latency_us`:
    `inter_host_latency_us` where given, else the source's but at least 50 us); the source's
    own otherwise, and for a PlannerCluster."""
    obj = topology_or_cluster
    check_hosts(hosts)
    if not is_int_in(chunk_bytes, 1):  # 1.5 was pybind11's "incompatible constructor arguments"
        raise ValueError(f"chunk_bytes: got {chunk_bytes!r}, expected an int >= 1")
    # "2.26.2" and None were pybind11's errors; 1 or 990000 name no release the model follows.
    if not (is_int_in(nccl_version, 0, 0) or is_int_in(nccl_version, 20000, 29999)):
        raise ValueError(f"resolve_cluster: nccl_version: got {nccl_version!r}, expected 0 (the "
                         "newest the model knows) or an NCCL 2.x version code such as 22602 "
                         "(2.26.2)")
    # Refuses non-finite, non-positive and out-of-range values, as the backend's config does.
    pinned = TopoConfig(inter_host_gbps=inter_host_gbps,
                        inter_host_latency_us=inter_host_latency_us)
    pins = {key: value for key, value in (("inter_host_bandwidth_gbps", inter_host_gbps),
                                          ("inter_host_latency_us", inter_host_latency_us))
            if value is not None}
    if nvlink not in ("file", "complete"):
        raise ValueError(f"resolve_cluster: nvlink: got {nvlink!r}, expected 'file' or 'complete'")
    if nvlink == "complete" and _is_path(obj) and os.path.exists(obj):
        obj = completed_source(os.fspath(obj), live)
    if isinstance(obj, _C.PlannerCluster):
        if hosts != 1:
            raise ValueError("hosts: a PlannerCluster already fixes its hosts; expected hosts=1")
        return obj
    # Built from the completed cluster itself: its JSON took about 3.5 s to write and read back
    # at 16384 ranks, on every rank that plans a mesh on a pinned file.
    cluster = _completed(_C.complete_cluster, obj, hosts)
    if gloo_latency:
        pins.update(_gloo_latency(cluster, pinned))
    return _C.PlannerCluster.of_cluster(
        cluster, pins.get("inter_host_bandwidth_gbps", cluster.inter_host_bandwidth_gbps),
        pins.get("inter_host_latency_us", cluster.inter_host_latency_us), chunk_bytes, model,
        nccl_version)


def _gloo_latency(cluster, pinned: TopoConfig) -> dict[str, float]:
    """The latency pin of `resolve_cluster(gloo_latency=True)` for a `_C.ClusterTopology`."""
    # hierarchy imports this module.
    from torch_topo.hierarchy import gloo_latency_us

    if all(rank.local_gpu >= 0 for rank in cluster.ranks):
        return {}
    return {"inter_host_latency_us": gloo_latency_us(cluster, pinned)}


def cluster_text(obj: Any, hosts: int) -> str:
    """Cluster JSON of a file path, `Topology`, `Cluster` or torch-topo JSON, a one-host
    topology repeated `hosts` times."""
    return _completed(_C.planner_cluster_json, obj, hosts)


def _completed(complete, obj: Any, hosts: int):
    """`complete` (`_C.planner_cluster_json` or `_C.complete_cluster`) of a file path,
    `Topology`, `Cluster` or torch-topo JSON, a one-host topology repeated `hosts` times."""
    if _is_path(obj):
        path = os.fspath(obj)
        if not os.path.exists(path):
            raise ValueError(f"topology: {path}: no such file")
        with file_named("topology"):  # a directory or an unreadable file, as a missing one
            return complete(path=path, hosts=hosts)
    if hasattr(obj, "planner_doc"):  # a `Cluster` (exchange_cluster, world_cluster)
        obj = obj.planner_doc()
    elif hasattr(obj, "to_json"):
        obj = obj.to_json()
    if isinstance(obj, Mapping):
        obj = json.dumps(obj)
    if not isinstance(obj, str):
        raise ValueError(f"topology: got {type(obj).__name__}, expected a file path, a Topology, "
                         "a Cluster or torch-topo JSON")
    return complete(text=_drop_empty_nic_paths(obj), hosts=hosts)


def check_hosts_per_domain(hosts_per_domain: int, option: str = "hosts_per_domain") -> int:
    """Hosts per multi-node NVLink domain, refused (ValueError naming `option`) outside
    1..MAX_RANKS. Any size is taken, whatever the host count: the last domain may be smaller,
    and a cluster document brings its own hosts."""
    if not is_int_in(hosts_per_domain, 1, MAX_RANKS):
        raise ValueError(f"{option}: got {hosts_per_domain!r}, expected an int >= 1 and <= "
                         f"{MAX_RANKS} (hosts per NVLink domain)")
    return hosts_per_domain


def with_nvlink_domains(topology_or_cluster: Any, hosts: int, hosts_per_domain: int,
                        option: str = "hosts_per_domain") -> dict:
    """Cluster JSON (a dict) of a topology as `resolve_cluster` takes it, a one-host topology
    repeated `hosts` times, with every `hosts_per_domain` consecutive hosts in one multi-node
    NVLink domain (GB200 NVL72: 18 trays of 4 GPUs; the last domain may be smaller). The live
    probe reads the domains from NVML; a file of one tray cannot say them. A bad size raises a
    ValueError naming `option`."""
    check_hosts(hosts)
    check_hosts_per_domain(hosts_per_domain, option)
    doc = json.loads(cluster_text(topology_or_cluster, hosts))
    for h, host in enumerate(doc["hosts"]):
        for gpu in host["gpus"]:
            gpu["nvlink_domain"] = f"hosts-per-domain-{hosts_per_domain}/{h // hosts_per_domain}"
    return doc


def _is_path(obj: Any) -> bool:
    return isinstance(obj, os.PathLike) or (isinstance(obj, str) and not obj.lstrip().startswith("{"))


def completed_source(path: str, live=None):
    """The `Topology` of the NCCL XML at `path` with the NVLink it leaves out filled in from
    `live` (default: probe this host) or the GPU model; any other file, or none at `path`,
    stays its path (the loaders report on it)."""
    if not os.path.isfile(path):
        return path
    with open(path, "rb") as f:
        head = f.read(1 << 16).decode("utf-8", "replace")
    if _C.sniff_topology_format(head) != "nccl-xml":
        return path
    if live is None:
        live = live_probe()
    return load_topology(path, nvlink="complete", live=live)


def _drop_empty_nic_paths(text: str) -> str:
    # The JSON writer emits `gpu_nic_paths: []` for hosts whose source has NICs but no GPU-NIC
    # paths, and the reader then wants one row per GPU; a missing field is accepted.
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return text  # the C++ reader reports it with line and column, as for a file
    changed = False
    for host in doc.get("hosts", [doc]) if isinstance(doc, dict) else []:
        if host.get("gpu_nic_paths") == [] and host.get("gpus"):
            del host["gpu_nic_paths"]
            changed = True
    return json.dumps(doc) if changed else text


def _nest(flat: list[int], shape: Sequence[int]) -> list:
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


class Plan:
    """A device mesh laid out on the ranks of a cluster, with its predicted cost.

    Attributes:
        mesh_dim_names: dimension names, outermost first.
        mesh_shape: sizes in the same order.
        mesh: nested list of global ranks in mesh shape.
        layout: "planned" or "contiguous" (the launcher's order).
        exact: the intra-host search was exhaustive.
        nccl_hints: {dim: {"NCCL_ALGO": "function:algorithm"}} when requested, for the
            dimensions whose chosen algorithm NCCL implements; else {}.
        applied_nccl_env: {dim: hints} that init_device_mesh handed to the creation of that
            dimension's NCCL communicators (see torch_topo.nccl_hints).
    """

    def __init__(self, cluster, raw: dict, layout: str, nccl_hints: bool = False,
                 backend=None):
        self._cluster = cluster
        self._dims = raw["dims"]
        self._flat = list(raw["mesh"])
        self.mesh_dim_names = tuple(d["name"] for d in self._dims)
        self.mesh_shape = tuple(d["size"] for d in self._dims)
        self.mesh = _nest(self._flat, self.mesh_shape)
        self.layout = layout
        self.exact = bool(raw["exact"])
        self.contiguous = bool(raw["contiguous"])
        self._priority = [self._dims[i]["name"] for i in raw["priority"]]
        spec = [(d["name"], d["size"], d["bytes"], d["op"]) for d in self._dims]
        self._costs = dict(zip(self.mesh_dim_names, cluster.mesh_cost(spec, self._flat), strict=False))
        self.algorithms: dict[str, dict[str, str]] = {}
        # Groups of ranks without a GPU take the side the backend's own rule picks.
        self._backend = backend
        for d in self._dims:
            groups = self.groups(d["name"])
            estimate = cluster.estimate
            if backend is not None and backend.decides(groups):
                estimate = functools.partial(backend.estimate, cluster)
                self._costs[d["name"]] = estimate(d["op"], int(d["bytes"]), groups)
            choice = {"step": self._costs[d["name"]]["algorithm"]}
            for label, nbytes in SIZE_CLASSES.items():
                choice[label] = estimate(d["op"], nbytes, groups)["algorithm"]
            self.algorithms[d["name"]] = choice
        self.nccl_hints: dict[str, dict[str, str]] = {}
        self._hinted: dict[str, str] = {}  # dimension -> the algorithm its hint asks for
        if nccl_hints:
            for d in self._dims:
                # A flat step gets the algorithm the model prices fastest at its size, which
                # across hosts may differ from the pick NCCL's own estimates make (`algorithms`).
                if self.algorithms[d["name"]]["step"] == "hierarchical":
                    continue
                fastest = cluster.fastest_flat(d["op"], int(max(d["bytes"], 1)),
                                               self.groups(d["name"]))["algorithm"]
                algo = _NCCL_ALGO.get((d["op"], fastest))
                if algo is not None:
                    self.nccl_hints[d["name"]] = {"NCCL_ALGO": algo}
                    self._hinted[d["name"]] = fastest
        self.applied_nccl_env: dict[str, dict[str, str]] = {}

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def build(cls, topology_or_cluster, mesh, traffic=None, *, hosts: int = 1,
              contiguous: bool = False, nccl_hints: bool = False,
              chunk_bytes: int = 4 << 20, inter_host_gbps: float | None = None,
              inter_host_latency_us: float | None = None, backend=None) -> Plan:
        """`backend`: a `torch_topo.backend_choice.BackendChoices` of the same cluster, whose
        groups of ranks without a GPU then take the side the backend picks for them."""
        for name, flag in (("contiguous", contiguous), ("nccl_hints", nccl_hints)):
            if not isinstance(flag, bool):  # "no" would count as True
                raise ValueError(f"plan: {name}: got {flag!r}, expected True or False")
        cluster = resolve_cluster(topology_or_cluster, hosts, chunk_bytes,
                                  inter_host_gbps=inter_host_gbps,
                                  inter_host_latency_us=inter_host_latency_us)
        raw = cluster.plan_mesh(mesh_items(mesh), _traffic_map(traffic), contiguous)
        return cls(cluster, raw, "contiguous" if contiguous else "planned", nccl_hints, backend)

    @classmethod
    def naive(cls, topology_or_cluster, mesh, traffic=None, *, hosts: int = 1,
              inter_host_gbps: float | None = None,
              inter_host_latency_us: float | None = None, backend=None) -> Plan:
        """The contiguous layout (mesh position i holds rank i), costed by the same model."""
        return cls.build(topology_or_cluster, mesh, traffic, hosts=hosts, contiguous=True,
                         inter_host_gbps=inter_host_gbps,
                         inter_host_latency_us=inter_host_latency_us, backend=backend)

    @classmethod
    def from_config(cls, config, world_size: int, mesh, traffic=None) -> Plan:
        """A plan for `world_size` ranks on copies of the pinned topology of `config`
        (`TopoConfig.topology_file`, else `NCCL_TOPO_FILE`), as many hosts as the ranks fill."""
        if not isinstance(config, TopoConfig):
            raise ValueError(f"Plan.from_config: config: got {type(config).__name__}, expected "
                             "a torch_topo.TopoConfig")
        path = config.topology_file or os.environ.get("NCCL_TOPO_FILE")
        if not path:
            raise ValueError(
                "TopoConfig.topology_file: not set (nor NCCL_TOPO_FILE), expected a topology "
                "file to plan from"
            )
        per_host = resolve_cluster(path).world_size
        # 8.0 was refused as "hosts: got 1.0", "8" with a TypeError of `<`.
        if not is_int_in(world_size, 1) or world_size % per_host:
            raise ValueError(
                f"world_size: got {world_size!r}, expected a multiple of the {per_host} ranks of "
                f"one host of {path}"
            )
        return cls.build(path, mesh, traffic, hosts=world_size // per_host,
                         nccl_hints=config.nccl_hints, chunk_bytes=config.pipeline_chunk_bytes,
                         **network_pins(config))

    # -- queries ------------------------------------------------------------------------------
    @property
    def cluster(self):
        """The `_C.PlannerCluster` the plan was made for."""
        return self._cluster

    @property
    def priority(self) -> list[str]:
        """Dimension names, heaviest traffic first (the order placement served them)."""
        return list(self._priority)

    @property
    def world_size(self) -> int:
        return len(self._flat)

    def _dim_index(self, dim: str) -> int:
        if dim not in self.mesh_dim_names:
            raise ValueError(f"dim: got {dim!r}, expected one of {', '.join(self.mesh_dim_names)}")
        return self.mesh_dim_names.index(dim)

    def groups(self, dim: str) -> list[list[int]]:
        """Rank lists of `dim`: ranks differing only in that coordinate."""
        d = self._dim_index(dim)
        shape = self.mesh_shape
        stride = 1
        for s in shape[d + 1:]:
            stride *= s
        out = []
        for start in range(len(self._flat)):
            if (start // stride) % shape[d] == 0:
                out.append([self._flat[start + k * stride] for k in range(shape[d])])
        return out

    def cost(self, dim: str | None = None) -> float:
        """Predicted seconds per step of one dimension (all its groups at once), or of all."""
        if dim is None:
            return sum(c["seconds"] for c in self._costs.values())
        return self._costs[self.mesh_dim_names[self._dim_index(dim)]]["seconds"]

    def dim_info(self, dim: str) -> dict:
        """Traffic, split over hosts and the chosen estimate of one dimension."""
        d = self._dims[self._dim_index(dim)]
        return {**d, "estimate": dict(self._costs[dim])}

    def rails(self, dim: str) -> bool:
        """Every cross-host group of `dim` keeps its members on one NIC rail per host slot."""
        for group in self.groups(dim):
            per_host: dict[int, list[int]] = {}
            for r in group:
                per_host.setdefault(self._cluster.rank_host(r), []).append(self._cluster.rail(r))
            rails = [sorted(v) for v in per_host.values()]
            if any(r != rails[0] for r in rails):
                return False
        return True

    def to_dict(self) -> dict:
        """The `plan --json` object (schema torch-topo-plan/1)."""
        return {
            "schema": "torch-topo-plan/1",
            "layout": self.layout,
            "mesh_dim_names": list(self.mesh_dim_names),
            "mesh_shape": list(self.mesh_shape),
            "mesh": self.mesh,
            "groups": {n: self.groups(n) for n in self.mesh_dim_names},
            "cost": {n: self.cost(n) for n in self.mesh_dim_names},
            "total_cost": self.cost(),
            "algorithms": self.algorithms,
            "traffic": {d["name"]: {"bytes": d["bytes"], "op": d["op"]} for d in self._dims},
            "split": {d["name"]: {"intra_host": d["intra_size"], "inter_host": d["inter_size"]}
                      for d in self._dims},
            "exact": self.exact,
            "nccl_hints": self.nccl_hints,
        }

    def _spread(self, dim: str) -> str:
        """Where `dim`'s groups lie, read from the groups themselves: the contiguous layout
        need not follow the split the planner would choose."""
        groups = self.groups(dim)
        # Ranks per host of each group, most first: every group, since a contiguous layout on
        # hosts its dimension does not divide mixes groups inside and across hosts.
        shapes = [sorted(Counter(self._cluster.rank_host(r) for r in g).values(), reverse=True)
                  for g in groups]
        if all(len(s) == 1 for s in shapes):
            return "inside hosts"
        if any(len(set(s)) > 1 or s != shapes[0] for s in shapes):
            kinds = sorted({"+".join(map(str, s)) for s in shapes}, key=lambda k: (len(k), k))
            return f"unevenly over hosts (ranks per host: {', '.join(kinds)})"
        group, hosts = groups[0], len(shapes[0])
        # A domain is shared by all its GPUs: the first rank's pairs tell (linear in the group).
        nvlink = all(self._cluster.pair_path(group[0], b)[0] == "NV" for b in group[1:])
        where = "across hosts" if hosts == len(group) else \
            f"{len(group) // hosts} per host x {hosts} hosts"
        return where + (" of one NVLink domain" if nvlink else "")

    def explain(self) -> str:
        """Human-readable account of the layout, its cost and the choices behind it."""
        hosts = len({self._cluster.rank_host(r) for r in self._flat})
        lines = [
            f"{self.layout} layout of mesh "
            + " x ".join(f"{n}={s}" for n, s in zip(self.mesh_dim_names, self.mesh_shape, strict=False))
            + f" on {self.world_size} ranks ({hosts} host(s))"
            # The launcher's layout is laid out, not searched.
            + (("; " + ("exhaustive" if self.exact else "greedy + local") + " intra-host search")
               if self.layout == "planned" else "")
            + ("; it is the launcher's contiguous order" if self.layout == "planned"
               and self.contiguous else ""),
            "heaviest first: " + ", ".join(self._priority),
        ]
        for d in self._dims:
            name = d["name"]
            est = self._costs[name]
            where = self._spread(name)
            lines.append(
                f"  {name}: {d['op']} {d['bytes'] / 2**20:.0f} MiB/step, {where}, "
                f"{est['algorithm']} {est['seconds'] * 1e3:.3f} ms "
                f"(busbw {est['bus_bandwidth_gbps']:.1f} GB/s); groups {self.groups(name)[:4]}"
                + (" ..." if len(self.groups(name)) > 4 else "")
            )
            lines.append("     algorithm by size: " + ", ".join(
                f"{k}={v}" for k, v in self.algorithms[name].items()))
            if where != "inside hosts":
                groups = self.groups(name)
                lines.extend("     predicted " + line for line in (
                    self._backend.predicted(d["op"], groups)
                    if self._backend is not None and self._backend.decides(groups)
                    else predicted_choices(self._cluster, groups, ops=(d["op"],))))
            if name in self.nccl_hints:
                step = self.algorithms[name]["step"]
                lines.append(f"     nccl hints: {self.nccl_hints[name]}" + (
                    f" (NCCL's own estimates would pick {step}; the model prices "
                    f"{self._hinted[name]} faster)" if self._hinted[name] != step else ""))
        if self.applied_nccl_env:
            lines.append("  NCCL settings in force at each group's communicator creation: "
                         f"{self.applied_nccl_env}")
        if hosts > 1:
            lines.append(f"  network: {self._cluster.network_source}")
        lines.append(f"  predicted communication per step: {self.cost() * 1e3:.3f} ms")
        return "\n".join(lines)

    def __repr__(self) -> str:
        dims = ", ".join(f"{n}={s}" for n, s in zip(self.mesh_dim_names, self.mesh_shape, strict=False))
        return f"Plan({self.layout}, {dims}, cost={self.cost() * 1e3:.3f} ms/step)"


def plan(topology_or_cluster, mesh, traffic=None, *, hosts: int = 1,
         nccl_hints: bool = False) -> Plan:
    """Lays `mesh` ({name: size}, outermost first) out on the ranks of a topology or cluster.

    Args:
        topology_or_cluster: topology file path, `Topology`, `Cluster` or torch-topo JSON.
        mesh: ordered mapping (or "dp=4,tp=2") of dimension name to size.
        traffic: optional {dim: bytes per step or (bytes, op)}; must name every dimension.
            Defaults: tp heaviest, then sp/cp, ep, dp, pp.
        hosts: copies of a one-host topology (ranks host-major).
        nccl_hints: compute an NCCL_ALGO hint per dimension.

    As the `plan` verb: each group is priced on the side the "topo" backend takes for it
    (`BackendChoices`), over the network and switches the environment's `TopoConfig` gives
    (TORCH_TOPO_INTER_HOST_GBPS, TORCH_TOPO_HIERARCHICAL, ...), with Gloo's latency between
    hosts where a rank has no GPU.
    """
    resolved, backend = priced_as_the_backend(topology_or_cluster, hosts, TopoConfig.from_env())
    return Plan.build(resolved, mesh, traffic, nccl_hints=nccl_hints, backend=backend)


def priced_as_the_backend(topology_or_cluster, hosts: int, config: TopoConfig, *,
                          network: dict[str, float | None] | None = None, nccl_version: int = 0):
    """(`_C.PlannerCluster`, `BackendChoices`) of a topology as the "topo" backend would price
    it: over `network` (`resolve_cluster`'s pins; default `network_pins(config)`) with Gloo's
    latency between hosts where a rank has no GPU, each group on the side the backend takes
    for it under `config`. `plan()`, the `plan` verb and `doctor` plan on these."""
    from torch_topo.backend_choice import BackendChoices  # it imports this module

    network = network_pins(config) if network is None else network
    resolved = resolve_cluster(topology_or_cluster, hosts, nccl_version=nccl_version,
                               gloo_latency=True, **network)
    return resolved, BackendChoices.of(topology_or_cluster, hosts, config, resolved)
