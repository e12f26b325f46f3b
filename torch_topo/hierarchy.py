# SPDX-License-Identifier: Apache-2.0
"""Topology-derived inner groups of the "topo" backend (intra-host, NIC rails, host leaders).

`attach_hierarchy` is called by the backend creator on member ranks only, after the flat inner
backends exist. It learns which host every group rank runs on, builds one inner backend per
level among the members of that level only (over prefixed stores: never a world collective or
`new_group`), hands them to the C++ backend (`set_levels`) and sets, per collective, the message
sizes at which the hierarchical schedule is used (`set_hierarchical_thresholds`). With one
host, `use_topo_aware_collectives=False` or `hierarchical="never"` the backend stays flat.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import zlib
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from torch_topo import _C, size_ranges
from torch_topo.cluster import (
    ASSUMED_INTER_HOST_GBPS,
    ASSUMED_INTER_HOST_LATENCY_US,
    exchange_cluster,
    parse_play,
)
from torch_topo.config import TopoConfig
from torch_topo.hierarchical_choice import predicted_choices, prefers_hierarchical
from torch_topo.nccl_hints import nccl_version_code
from torch_topo.size_ranges import SizeRanges
from torch_topo.store_rounds import (
    decided_by_root,
    get_many,
    publish_failure,
    raise_if_reported,
    wait_all,
)

__all__ = [
    "HIERARCHICAL_OPS",
    "HostLayout",
    "Levels",
    "attach_hierarchy",
    "backend_thresholds",
    "build_levels",
    "choice_model",
    "cluster_planner",
    "discover_layout",
    "exchange_hostnames",
    "hierarchical_thresholds",
]

HIERARCHICAL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
"""Collectives that have a hierarchical schedule (names as set_hierarchical_thresholds takes)."""

_KEY_PREFIX = "topo_hier"
_DEFAULT_TIMEOUT = timedelta(minutes=30)


@dataclass(frozen=True, kw_only=True, slots=True)
class HostLayout:
    """Which host every group rank runs on. Hosts are numbered in order of their lowest group
    rank and local ranks in group-rank order, so every rank derives the same layout."""

    host_names: tuple[str, ...]
    """Name of each host, by host index."""

    host_of_rank: tuple[int, ...]
    """Host index of every group rank."""

    local_of_rank: tuple[int, ...]
    """Rank within its host of every group rank."""

    @classmethod
    def from_hostnames(cls, names: list[str] | tuple[str, ...]) -> HostLayout:
        """Layout of a group whose rank r runs on host `names[r]`."""
        if not names:
            raise ValueError("HostLayout.from_hostnames: got no ranks, expected at least one")
        index: dict[str, int] = {}
        counts: list[int] = []
        host_of_rank, local_of_rank = [], []
        for name in names:
            if not name:
                raise ValueError("HostLayout.from_hostnames: got an empty host name")
            h = index.setdefault(name, len(index))
            if h == len(counts):
                counts.append(0)
            host_of_rank.append(h)
            local_of_rank.append(counts[h])
            counts[h] += 1
        return cls(host_names=tuple(index), host_of_rank=tuple(host_of_rank),
                   local_of_rank=tuple(local_of_rank))

    @classmethod
    def from_cluster(cls, cluster) -> HostLayout:
        """Layout of a group whose rank r is rank r of `cluster` (a torch_topo.cluster.Cluster)."""
        # The host names once: Cluster.hostnames builds its list on every access.
        names = cluster.hostnames
        return cls.from_hostnames([names[p.host] for p in cluster.placements])

    @property
    def host_count(self) -> int:
        return len(self.host_names)

    @property
    def group_size(self) -> int:
        return len(self.host_of_rank)

    def host_size(self, host: int) -> int:
        return self.host_of_rank.count(host)

    @property
    def uniform(self) -> bool:
        """Every host holds the same number of ranks (rails can be used)."""
        return len({self.host_size(h) for h in range(self.host_count)}) == 1

    def ranks_of_host(self, host: int) -> list[int]:
        return [r for r, h in enumerate(self.host_of_rank) if h == host]

    def rail(self, local: int) -> list[int]:
        """Group ranks with local rank `local`, by host index (hosts lacking one are skipped)."""
        return [r for r, lr in enumerate(self.local_of_rank) if lr == local]

    def ring_crossings(self) -> int:
        """Most edges of the flat ring (rank r -> r+1) that leave any one host: how many ring
        edges share a host's uplink (1 for host-major ranks, local size when interleaved)."""
        leaving = [0] * self.host_count
        n = self.group_size
        for r in range(n):
            a, b = self.host_of_rank[r], self.host_of_rank[(r + 1) % n]
            if a != b:
                leaving[a] += 1
        return max(leaving)


def exchange_hostnames(store, group_rank: int, group_size: int, my_host, *,
                       timeout: timedelta = _DEFAULT_TIMEOUT) -> list[str]:
    """Every member's host name, by group rank. Each publishes its own; group rank 0 reads them
    all and publishes the list once, which every other rank reads: one read per rank whatever
    the group size. `my_host` is the name or a function that returns it; what that raises
    reaches every rank at once."""
    table_key = f"{_KEY_PREFIX}/hosts"
    own_key = f"{_KEY_PREFIX}/host/{group_rank}"
    try:
        name = my_host() if callable(my_host) else my_host
    except Exception as exc:
        publish_failure(store, group_rank, own_key, table_key, exc)
        raise
    store.set(own_key, name.encode())

    def gather() -> bytes:
        keys = [f"{_KEY_PREFIX}/host/{r}" for r in range(group_size)]
        wait_all(store, keys, timeout, 0, "host names")
        names = [raise_if_reported(v, f"raised on group rank {r}").decode()
                 for r, v in enumerate(get_many(store, keys))]
        return zlib.compress(json.dumps(names).encode())

    table = decided_by_root(store, table_key, group_rank, timeout, "the host names", gather)
    return json.loads(zlib.decompress(table))


@dataclass(kw_only=True, slots=True)
class Levels:
    """Inner backends of one device type and this rank's place: the arguments of the C++
    backend's `set_levels` (and of `_C._ScheduleLevels`)."""

    intra: object
    """Backend of this host's ranks (rank = local rank)."""
    rail: object | None
    """Backend of this local index across hosts (rank = host index); None when uneven."""
    leaders: object | None
    """Backend of local rank 0 of every host (rank = host index); None elsewhere, or when
    hosts are uniform (the rails carry everything)."""
    local_rank: int
    local_size: int
    host_index: int
    host_count: int
    uniform: bool
    host_of_rank: list[int]
    local_of_rank: list[int]
    chunk_bytes: int

    def as_args(self) -> tuple:
        """Positional arguments in set_levels order (after the device type)."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))


def _make_inner(device_type: str, store, rank: int, size: int, timeout: timedelta):
    if device_type == "cpu":
        return dist.ProcessGroupGloo(store, rank, size, timeout)
    if device_type == "cuda":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, size, opts)
    raise ValueError(f"build_levels: device_type: got {device_type!r}, expected 'cpu' or 'cuda'")


def build_levels(store, group_rank: int, layout: HostLayout, *, device_type: str = "cpu",
                 chunk_bytes: int = 4 << 20, timeout: timedelta = _DEFAULT_TIMEOUT) -> Levels:
    """Builds this rank's inner backends of `layout` over prefixed stores, among the members of
    each level only (each level's rendezvous waits for its own members, nobody else)."""
    h = layout.host_of_rank[group_rank]
    local = layout.local_of_rank[group_rank]
    uniform = layout.uniform
    tag = f"{_KEY_PREFIX}/{device_type}"

    def inner(name: str, what: str, rank: int, size: int):
        try:
            return _make_inner(device_type, dist.PrefixStore(f"{tag}/{name}", store), rank, size,
                               timeout)
        except RuntimeError as e:
            # Gloo reports the socket, not the level, and a peer that failed first shows here as
            # a connection it closed or never made: say which level and where to look.
            raise type(e)(
                f"torch_topo: building the {device_type} level '{name}' of the group's hierarchy "
                f"({what}, {size} ranks; this rank is {rank} there) failed: {e}. A peer that "
                "closed its connection, refused it or never arrived has usually failed first: "
                "see the other ranks' errors") from e

    intra = inner(f"intra{h}", f"the ranks of host {layout.host_names[h]}", local,
                  layout.host_size(h))
    rail = leaders = None
    if uniform:
        rail = inner(f"rail{local}", f"local rank {local} of every host", h, layout.host_count)
    elif local == 0:
        leaders = inner("leaders", "local rank 0 of every host", h, layout.host_count)
    return Levels(intra=intra, rail=rail, leaders=leaders, local_rank=local,
                  local_size=layout.host_size(h), host_index=h, host_count=layout.host_count,
                  uniform=uniform, host_of_rank=list(layout.host_of_rank),
                  local_of_rank=list(layout.local_of_rank), chunk_bytes=chunk_bytes)


# Size rule used until the planner's cost model is available (see docs/schedules.md). Links are
# described per direction: the host uplink (cluster inter_host_bandwidth / latency) and the
# intra-host path. Where the cluster knows no inter-host speed, a 10 GbE link is assumed.
_INTRA_CPU_GBPS = 5.0  # Gloo over loopback between processes of one host (order of magnitude)
_INTRA_CPU_LATENCY_US = 10.0
_STEP_OVERHEAD_US = 30.0  # cost of issuing and waiting one more inner collective
# Ring steps per (n - 1) ranks: all-reduce is a reduce-scatter plus an all-gather.
_RING_FACTOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "broadcast": 1,
                "reduce": 1}
_LEVEL_STEPS = {"all_reduce": 3, "all_gather": 2, "reduce_scatter": 2, "broadcast": 3,
                "reduce": 3}


def _rule_seconds(op: str, nbytes: int, layout: HostLayout, inter_gbps: float,
                  inter_latency_us: float) -> tuple[float, float]:
    """(flat, hierarchical) predicted seconds of `op` on `nbytes` under the alpha-beta rule."""
    f = _RING_FACTOR[op]
    g, hosts = layout.group_size, layout.host_count
    local = max(layout.host_size(h) for h in range(hosts))
    inter_bps, intra_bps = inter_gbps * 1e9, _INTRA_CPU_GBPS * 1e9
    a_inter, a_intra = inter_latency_us * 1e-6, _INTRA_CPU_LATENCY_US * 1e-6
    # Flat ring: every step waits on its slowest edge (an inter-host one); the edges leaving a
    # host share its uplink.
    flat = (f * (g - 1) * (a_inter + _STEP_OVERHEAD_US * 1e-6)
            + f * (g - 1) / g * nbytes * layout.ring_crossings() / inter_bps)
    # Two levels: the host link carries each remote byte once ((hosts-1)/hosts of the buffer
    # in total, spread over the rails); the intra levels move the buffer over the fast path.
    hier = (f * (hosts - 1) * a_inter + f * (local - 1) * a_intra
            + _LEVEL_STEPS[op] * _STEP_OVERHEAD_US * 1e-6
            + f * (hosts - 1) / hosts * nbytes / inter_bps
            + f * (local - 1) / local * nbytes / intra_bps)
    return flat, hier


@dataclass(frozen=True, slots=True)
class _RuleModel:
    """The size rule with the `compare_hierarchical` of `_C.PlannerCluster`, so that
    TORCH_TOPO_DEBUG prints a group's predictions alike whichever of the two decides."""

    layout: HostLayout
    inter_gbps: float
    inter_latency_us: float

    def compare_hierarchical(self, op: str, nbytes: int, _groups) -> dict:
        flat, hier = _rule_seconds(op, nbytes, self.layout, self.inter_gbps,
                                   self.inter_latency_us)
        return {"flat": {"seconds": flat, "algorithm": "ring", "protocol": ""},
                "hierarchical": {"seconds": hier, "applicable": True}, "margin": 1.0}


def gloo_latency_us(cluster=None, config: TopoConfig | None = None) -> float:
    """One-way latency a Gloo step between hosts pays: `config.inter_host_latency_us` where set,
    else the cluster's but no less than ASSUMED_INTER_HOST_LATENCY_US (a cluster's own figure is
    NCCL's RDMA hop, and Gloo runs over TCP)."""
    if config is not None and config.inter_host_latency_us:
        return config.inter_host_latency_us
    return max(cluster.inter_host_latency_us if cluster is not None else 0.0,
               ASSUMED_INTER_HOST_LATENCY_US)


def _rule_model(layout: HostLayout, config: TopoConfig, cluster, inter_gbps: float = 0.0,
                inter_latency_us: float = 0.0) -> _RuleModel:
    """The rule over the inter-host bandwidth given, else `config.inter_host_gbps`, else that
    of `cluster`; 0 = unknown: 10 GbE assumed. The config comes before the cluster: a group
    whose members an earlier exchange covered reuses that exchange's cluster, with the
    bandwidth pinned then. The latency is Gloo's (gloo_latency_us) unless given."""
    inter_gbps = (inter_gbps or config.inter_host_gbps
                  or (cluster.inter_host_bandwidth_gbps if cluster is not None else 0.0))
    return _RuleModel(layout, inter_gbps or ASSUMED_INTER_HOST_GBPS,
                      inter_latency_us or gloo_latency_us(cluster, config))


_SCAN_MIN, _SCAN_MAX = _C.HIERARCHICAL_SCAN_BYTES  # the planner's scan: 1 KiB .. 16 GiB
_SCANNED_SIZES = tuple(1 << p for p in range(_SCAN_MIN.bit_length() - 1, _SCAN_MAX.bit_length()))


def _rule_thresholds(rule: _RuleModel) -> dict[str, SizeRanges]:
    out = {}
    for op in HIERARCHICAL_OPS:
        found = size_ranges.from_scan(
            _SCANNED_SIZES, lambda s, op=op: prefers_hierarchical(
                rule.compare_hierarchical(op, s, None)))
        if found:
            out[op] = found
    return out


def _model_of(device_type: str) -> str:
    """The planner's model for a device type's inner backend: NCCL's algorithms for CUDA
    tensors (NCCL is the flat side they compete with), the alpha-beta schedules for CPU
    tensors (Gloo's side keeps its own model)."""
    return "auto" if device_type == "cuda" else "alpha_beta"


def cluster_planner(cluster, chunk_bytes: int, model: str = "auto", nccl_version: int = 0,
                    inter_host_latency_us: float = 0.0):
    """The `_C.PlannerCluster` that `plan.resolve_cluster(cluster.planner_doc(), ...)` builds
    for an exchanged `Cluster`, built from its assembled native cluster: the JSON round trip
    cost each rank about 1.4 s of every group's creation at 4096 ranks. `inter_host_latency_us`
    replaces the cluster's latency where given."""
    return _C.PlannerCluster.of_cluster(
        cluster.native, cluster.configured_inter_host_gbps,
        inter_host_latency_us or cluster.planner_latency_us,
        chunk_bytes, model, nccl_version)


def _planner(cluster, config: TopoConfig, device_type: str):
    # Gloo's steps cross hosts over TCP, not NCCL's network hop.
    latency = gloo_latency_us(cluster, config) if device_type != "cuda" else 0.0
    return cluster_planner(cluster, config.pipeline_chunk_bytes, _model_of(device_type),
                           nccl_version_code() if device_type == "cuda" else 0, latency)


def _on_gpus(cluster) -> bool:
    """Whether the planner's cost model prices the group: every rank placed on a GPU."""
    return cluster is not None and all(p.local_gpu >= 0 for p in cluster.placements)


def _cost_model_thresholds(cluster, group_size: int, config: TopoConfig,
                           device_type: str) -> dict[str, SizeRanges]:
    """Size ranges from the planner's cost model over the exchanged cluster (GPU ranks)."""
    return planner_ranges(_planner(cluster, config, device_type), list(range(group_size)))


def planner_ranges(planner, ranks: list[int]) -> dict[str, SizeRanges]:
    """`planner.hierarchical_thresholds(ranks)` (a `_C.PlannerCluster`) as ranges per op,
    the ops where hierarchical never wins left out."""
    found = planner.hierarchical_thresholds(ranks)
    return {op: tuple(found[op]) for op in HIERARCHICAL_OPS if found.get(op)}


def configured_ranges(config: TopoConfig, host_count: int) -> dict[str, SizeRanges] | None:
    """The ranges `config` fixes whatever a model says: none under "never", with
    `use_topo_aware_collectives=False` or on one host; every size under "always"; None (the
    model decides) under "auto"."""
    if (config.hierarchical == "never" or not config.use_topo_aware_collectives
            or host_count < 2):
        return {}
    if config.hierarchical == "always":
        return dict.fromkeys(HIERARCHICAL_OPS, ((0, None),))
    return None


def choice_model(layout: HostLayout, config: TopoConfig, cluster, device_type: str = "cpu"):
    """What prices a group's flat and hierarchical sides in "auto" mode (its
    `compare_hierarchical`, which TORCH_TOPO_DEBUG prints): the planner's cost model where
    `cluster` places every rank on a GPU, else the size rule over the cluster's network and
    `config`'s pins, as `hierarchical_thresholds` decides."""
    if _on_gpus(cluster):
        return _planner(cluster, config, device_type)
    return _rule_model(layout, config, cluster)


def hierarchical_thresholds(layout: HostLayout, config: TopoConfig, *, cluster=None,
                            inter_gbps: float = 0.0, inter_latency_us: float = 0.0,
                            device_type: str = "cpu") -> dict[str, SizeRanges]:
    """Per collective, the message sizes (bytes, whole buffer as nccl-tests counts it) that
    take the hierarchical schedule, as (from, below) ranges (`torch_topo.size_ranges`): the
    scanned powers of two from 1 KiB to 16 GiB where hierarchical is predicted faster, which
    may be a band between sizes where flat wins. An op left out stays flat.

    "always": every size for every op; "never", `use_topo_aware_collectives=False` or one host: none;
    "auto": the planner's cost model when `cluster` (a torch_topo.cluster.Cluster) places every
    rank on a GPU, else the size rule over the inter-host bandwidth (`inter_gbps`, else
    `config.inter_host_gbps`, else the cluster's; 0 = unknown: 10 GbE assumed) and latency
    (`inter_latency_us`, else gloo_latency_us). For `device_type` "cuda" the model's flat side
    is NCCL's best algorithm and hierarchical must beat it by 1.15x; for "cpu" it is the
    alpha-beta model's best schedule.
    """
    fixed = configured_ranges(config, layout.host_count)
    if fixed is not None:
        return fixed
    if _on_gpus(cluster):
        return _cost_model_thresholds(cluster, layout.group_size, config,
                                      device_type)
    return _rule_thresholds(_rule_model(layout, config, cluster, inter_gbps, inter_latency_us))


# Beyond about 1 MiB a two-rank exchange loses to Gloo's ring whatever the latency it saves: A/B
# in one process on the emulated 1 Gbit/s, 1 ms link (Gloo's ring / one exchange) read 1.08-1.10x
# at 512 KiB, 0.97-1.04x at 1 MiB and 0.86-0.95x at 4 MiB, the same with a 32 MiB TCP send
# buffer (so not the socket's limit): the ring's pipelined halves keep the link busier.
_ONE_STEP_ALL_REDUCE_MAX_BYTES = 1 << 20


def one_step_all_reduce_max_bytes(cluster=None, config: TopoConfig | None = None) -> int:
    """Largest all-reduce a two-rank Gloo group across hosts runs as one exchange (an all-gather
    and a local fold, TopoBackend.set_one_step_all_reduce_max_bytes): while the link latency it
    saves (gloo_latency_us) outweighs one more pass over the bytes at the host's rate, and to
    1 MiB at most."""
    return min(int(gloo_latency_us(cluster, config) * 1e-6 * _INTRA_CPU_GBPS * 1e9),
               _ONE_STEP_ALL_REDUCE_MAX_BYTES)


# TopoBackend keys its thresholds by c10d op name and measures a call by its input bytes: the
# whole buffer, except for all-gathers, whose input is one rank's share of it.
_BACKEND_OPS = {
    "all_reduce": ("allreduce",),
    "all_gather": ("allgather", "_allgather_base"),
    "reduce_scatter": ("reduce_scatter", "_reduce_scatter_base"),
    "broadcast": ("broadcast",),
    "reduce": ("reduce",),
}


def backend_thresholds(thresholds: dict[str, SizeRanges],
                       group_size: int) -> dict[str, SizeRanges]:
    """`hierarchical_thresholds` (whole-buffer bytes per collective) keyed and measured as
    TopoBackend.set_hierarchical_thresholds takes them (c10d op name, input bytes)."""
    def per_call(nbytes: int | None, op: str) -> int | None:
        return nbytes if nbytes is None or op != "all_gather" else -(-nbytes // group_size)

    out = {}
    for op, ranges in thresholds.items():
        for name in _BACKEND_OPS[op]:
            out[name] = tuple((per_call(lo, op), per_call(hi, op)) for lo, hi in ranges)
    return out


def _debug(config: TopoConfig, text: str) -> None:
    if config.debug:
        print(f"torch_topo.hierarchy: {text}", file=sys.stderr, flush=True)


def _served_device_types(backend) -> list[str]:
    """Device types the backend has a flat inner backend for (CUDA needs NCCL here too)."""
    inner = getattr(backend, "inner_backend", None)
    types = []
    for device_type in ("cpu", "cuda"):
        if device_type == "cuda" and not (torch.cuda.is_available() and dist.is_nccl_available()):
            continue
        if inner is None or inner(device_type) is not None:
            types.append(device_type)
    return types


def _flat_timeout(backend) -> timedelta | None:
    """The group's timeout as its flat CPU inner backend holds it (levels fail no later)."""
    inner = getattr(backend, "inner_backend", None)
    flat = inner("cpu") if inner is not None else None
    return getattr(getattr(flat, "options", None), "_timeout", None)


def discover_layout(store, group_rank: int, group_size: int, global_rank: int,
                    config: TopoConfig, global_ranks=None):
    """(HostLayout, Cluster or None) of the group, through its store.

    With a play string but no topology file to play, only host names are exchanged (a rank
    then plays a host, not a GPU); otherwise the full cluster exchange runs (host graphs, GPU
    placements, inter-host bandwidth), or reuses an earlier one that covered `global_ranks`,
    and the layout follows its hosts.
    """
    from torch_topo.probe import resolve_pinned_file

    play = config.effective("play")
    if play and resolve_pinned_file(config) is None:
        names = exchange_hostnames(store, group_rank, group_size,
                                   lambda: parse_play(play, group_size, global_rank)[0],
                                   timeout=config.timeout or _DEFAULT_TIMEOUT)
        return HostLayout.from_hostnames(names), None
    cluster = exchange_cluster(store, group_rank, group_size, config, global_rank=global_rank,
                               global_ranks=global_ranks)
    return HostLayout.from_cluster(cluster), cluster


def attach_hierarchy(backend, store, group_rank, group_size, global_ranks, config, *,
                     timeout: timedelta | None = None):
    """Adds hierarchical levels to `backend` (a `_C.TopoBackend`) for every device type it
    serves.

    Args:
        backend: the C++ backend; receives set_levels / set_hierarchical_thresholds.
        store: the creator's (group-prefixed) store.
        group_rank, group_size: this rank's place in the group.
        global_ranks: global rank of every group rank (TopoConfig.play is indexed by these).
        config: the group's TopoConfig.
        timeout: timeout of the inner backends (default: that of the backend's flat CPU
            inner backend, else config.timeout, else 30 minutes).

    Returns the HostLayout, or None when the group stays flat. The cluster is exchanged even
    with hierarchical="never": `init_device_mesh` plans on it later.
    """
    if not config.use_topo_aware_collectives:
        _debug(config, "flat (use_topo_aware_collectives is off)")
        return None
    global_ranks = list(global_ranks) if global_ranks else list(range(group_size))
    layout, cluster = discover_layout(store, group_rank, group_size, global_ranks[group_rank],
                                      config, global_ranks)
    if config.hierarchical == "never":
        _debug(config, "flat (hierarchical schedules disabled by the config)")
        return None
    if layout.host_count < 2:
        _debug(config, f"flat (all {group_size} ranks on host {layout.host_names[0]})")
        return None
    timeout = timeout or _flat_timeout(backend) or config.timeout or _DEFAULT_TIMEOUT
    sizes = "+".join(str(layout.host_size(h)) for h in range(layout.host_count))
    for device_type in _served_device_types(backend):
        thresholds = hierarchical_thresholds(layout, config, cluster=cluster,
                                             device_type=device_type)
        per_call = backend_thresholds(thresholds, group_size)
        levels = build_levels(store, group_rank, layout, device_type=device_type,
                              chunk_bytes=config.pipeline_chunk_bytes, timeout=timeout)
        backend.set_levels(device_type, *levels.as_args())
        backend.set_hierarchical_thresholds(device_type, per_call)
        one_step = ""
        if device_type == "cpu" and group_size == 2:
            max_bytes = one_step_all_reduce_max_bytes(cluster, config)
            backend.set_one_step_all_reduce_max_bytes(device_type, max_bytes)
            one_step = f", one-step all_reduce to {max_bytes} B"
        taken = ", ".join(f"{op} {size_ranges.describe(r)}" for op, r in per_call.items())
        _debug(config, f"{layout.host_count} hosts ({sizes} ranks), "
                       f"{'rails' if layout.uniform else 'leaders'}, {device_type} hierarchical "
                       f"at: {taken or 'no size'}{one_step}")
        if config.debug and config.hierarchical == "auto":
            model = choice_model(layout, config, cluster, device_type)
            # The side is the thresholds' (what the group then does), not the faster one: the
            # ranges are cut at scanned powers of two, and sizes between follow their octave.
            for line in predicted_choices(model, [list(range(group_size))],
                                          thresholds=thresholds):
                _debug(config, f"{device_type} predicted {line}")
    return layout
