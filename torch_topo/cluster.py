# SPDX-License-Identifier: Apache-2.0
"""The cluster every rank of a group agrees on, exchanged through the group's c10d store.

The exchange costs each rank a handful of store operations and a few KB whatever the group's
size (docs/design.md, "Cluster exchange"). Under the store it is given (the backend creator's
prefixed store, so groups never collide):

- `torch_topo/cluster/host/<digest>`: a host topology as torch-topo JSON without its host name,
  zlib-compressed, written once per distinct digest (the first rank to count itself under
  `torch_topo/cluster/writer/<digest>`); a uniform cluster publishes one;
- `torch_topo/cluster/rank/<group_rank>`: each rank's placement, `[rank, hostname, local_rank,
  local_device, digest]` (about 50 bytes);
- `torch_topo/cluster/table`: written by group rank 0 once it has read every placement and
  distinct host record and assembled the cluster in C++ (which refuses ranks of one host that
  publish different host graphs, naming both): the placements as compressed columns, or the
  error every rank then raises.

Every other rank waits for the table and reads it and the distinct host records it names, and
assembles the same `Cluster` (store wait/get with the configured timeout; no collective, so
this is safe inside a backend creator).

Play mode (`TopoConfig.play` / `TORCH_TOPO_PLAY`) makes a rank claim a host name and a GPU of the
pinned topology file, so multi-host layouts run on one CPU machine.

A process exchanges once: the records of every exchange are kept with the global ranks they
cover, and a later group whose ranks all took part in one earlier exchange (every group created
after the world, DeviceMesh's among them) reuses them, after group rank 0 has compared every
member's digest of what it reuses. `world_cluster()` hands the world's cluster to the planner
(`init_device_mesh`), exchanging only when no "topo" group did it at init.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
import zlib
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.local_device import local_cuda_index
from torch_topo.probe import probe, resolve_pinned_file
from torch_topo.store_rounds import (
    decided_by_root,
    get_many,
    publish_failure,
    raise_if_reported,
    wait_all,
)
from torch_topo.topology import Topology, load_topology
from torch_topo.validation import is_int_in

__all__ = ["Cluster", "Placement", "exchange_cluster", "exchange_records", "world_cluster",
           "own_record", "parse_play", "play_entries", "PLAY_SETTING",
           "KEY_PREFIX", "HOST_PREFIX", "TABLE_KEY",
           "ASSUMED_INTER_HOST_GBPS", "ASSUMED_INTER_HOST_LATENCY_US"]

KEY_PREFIX = "torch_topo/cluster/rank/"
HOST_PREFIX = "torch_topo/cluster/host/"
_WRITER_PREFIX = "torch_topo/cluster/writer/"
TABLE_KEY = "torch_topo/cluster/table"
_DIGEST_PREFIX = "torch_topo/cluster/digest/"
_VERDICT_KEY = "torch_topo/cluster/reuse"
_DEFAULT_TIMEOUT = timedelta(minutes=5)

# Where no host reports a NIC speed and none is pinned, the cost model assumes 10 GbE.
ASSUMED_INTER_HOST_GBPS = 1.25  # 10 Gbit/s Ethernet, per direction
ASSUMED_INTER_HOST_LATENCY_US = 50.0


class _Pins(NamedTuple):
    """What TopoConfig pins about the network between hosts; 0 leaves it to the hosts' NICs."""

    gbps: float = 0.0
    latency_us: float = 0.0

    @classmethod
    def of(cls, config: TopoConfig, reused: _Pins | None = None) -> _Pins:
        """The config's figures, else those pinned by the exchange whose records are reused:
        a later group's own TopoConfig must take effect there too."""
        reused = reused or cls()
        return cls(config.inter_host_gbps or reused.gbps,
                   config.inter_host_latency_us or reused.latency_us)


# The records of this process's exchanges: (the world's token, global ranks, records by group
# rank, pinned network, host documents). A record is {"hostname", "local_rank", "local_device",
# "doc"}, "doc" indexing the host documents. The token tells worlds apart: after
# destroy_process_group a new world (of another backend too, whose creation clears nothing
# here) has a new store, so a new token, and its global ranks are other processes. Holding the
# store itself kept rank 0's TCPStore server, and its port, alive after the world was gone.
_exchanges: list[tuple[bytes, tuple[int, ...], list[dict], _Pins, list[str]]] = []
_WORLD_KEY = "torch_topo/world"
# This process's own records by (pinned file, play spec, group size, play index).
_own_records: dict[tuple, dict] = {}


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one rank runs."""

    host: int
    """Index into `Cluster.hosts`."""
    local_gpu: int
    """GPU index on that host; -1 for a CPU-only rank."""
    local_rank: int
    """Rank among the ranks of its host (launcher's LOCAL_RANK, else order of global rank)."""


def _checked_index(what: str, index: object, count: int) -> int:
    if not is_int_in(index, 0, count - 1):
        raise ValueError(f"{what}: got {index!r}, expected an int in 0..{count - 1}")
    return index


class Cluster:
    """Hosts joined by a network, with each rank's placement. Identical on every rank."""

    def __init__(self, native: _C.ClusterTopology, rank: int,
                 configured_inter_host_gbps: float = 0.0) -> None:
        self.native = native
        """The assembled `_C.ClusterTopology` (`hierarchy.cluster_planner` prices it as is)."""
        self.rank = rank
        """The group rank this process holds."""
        self.hosts: list[Topology] = [Topology(h) for h in native.hosts]
        """Host topologies, in order of each host's lowest rank."""
        self.placements: list[Placement] = [
            Placement(p.host, p.local_gpu, p.local_rank) for p in native.ranks
        ]
        """One per rank."""
        self.inter_host_bandwidth_gbps: float = native.inter_host_bandwidth_gbps
        """GB/s per direction between hosts (pinned, else the slowest host's best NIC; 0 when
        unknown or single-host)."""
        self.inter_host_latency_us: float = native.inter_host_latency_us
        """One-way us between hosts (pinned, else NCCL's network hop)."""
        self.configured_inter_host_gbps = configured_inter_host_gbps
        """`TopoConfig.inter_host_gbps` of the exchange (0 when not set): the one inter-host
        figure the planner may take over the hosts' NICs."""

    @property
    def world_size(self) -> int:
        return len(self.placements)

    @property
    def planner_latency_us(self) -> float:
        """The inter-host latency the planner prices: the cluster's, else
        ASSUMED_INTER_HOST_LATENCY_US where it knows none (0)."""
        return self.inter_host_latency_us or ASSUMED_INTER_HOST_LATENCY_US

    @property
    def hostnames(self) -> list[str]:
        return [h.hostname for h in self.hosts]

    def host_of(self, rank: int) -> int:
        """Host index of `rank`."""
        # A list index: -1 answered for the last rank and 99 was a bare IndexError.
        return self.placements[_checked_index("Cluster.host_of: rank", rank,
                                              self.world_size)].host

    def ranks_on_host(self, host: int) -> list[int]:
        """Ranks of host `host`, ascending."""
        _checked_index("Cluster.ranks_on_host: host", host, len(self.hosts))  # not [] for 99
        return [r for r, p in enumerate(self.placements) if p.host == host]

    @property
    def local(self) -> Topology:
        """The host topology of this rank."""
        return self.hosts[self.host_of(self.rank)]

    def planner_doc(self) -> dict:
        """The cluster as the planner's torch-topo JSON (`_C.PlannerCluster` input). Its
        network is each host's NICs at their speeds (the cost model's own assumption where a
        NIC has none) unless `TopoConfig.inter_host_gbps` was set: `inter_host_bandwidth_gbps`
        (one NIC's rate, for the size rule) would cap every host at one NIC."""
        hosts = []
        for topology in self.hosts:
            host = json.loads(topology.to_json())
            host.pop("schema", None)
            host.pop("kind", None)
            hosts.append(host)
        return {
            "schema": "torch-topo/1", "kind": "cluster", "hosts": hosts,
            "ranks": [{"host": p.host, "local_gpu": p.local_gpu, "local_rank": p.local_rank}
                      for p in self.placements],
            "inter_host_bandwidth_gbps": self.configured_inter_host_gbps,
            "inter_host_latency_us": self.planner_latency_us,
        }

    def __repr__(self) -> str:
        return (
            f"Cluster(hosts={self.hostnames}, world_size={self.world_size}, "
            f"inter_host_bandwidth_gbps={self.inter_host_bandwidth_gbps:g})"
        )


PLAY_SETTING = "TopoConfig.play (TORCH_TOPO_PLAY)"
"""How errors name the play setting: either form may have set it."""


def play_entries(spec: str, world_size: int) -> list[tuple[str, int]]:
    """TopoConfig.play, "HOST:GPU" for this rank alone or "HOST:GPU,HOST:GPU,..." indexed by
    global rank, as [(host, gpu)]: one entry, or `world_size` of them. The one parser of play
    for the exchange, the hierarchy and init_device_mesh, so each refuses the same strings."""
    entries = []
    for entry in (e.strip() for e in spec.split(",")):
        host, sep, gpu = entry.rpartition(":")
        if not sep or not host.strip() or not gpu.strip().isdigit():
            raise ValueError(f"{PLAY_SETTING}: entry {entry!r}: expected HOST:GPU with GPU an "
                             "integer >= 0, e.g. 'node0:3'")
        entries.append((host.strip(), int(gpu)))
    if len(entries) not in (1, world_size):
        expected = ("1 (a world of one rank)" if world_size == 1
                    else f"1 (this rank) or {world_size} (one per rank)")
        raise ValueError(f"{PLAY_SETTING}: got {len(entries)} entries, expected {expected}")
    return entries


def parse_play(spec: str, group_size: int, global_rank: int) -> tuple[str, int]:
    """The (hostname, GPU) global rank `global_rank` plays. The entries count the world's
    ranks: the initialised world's size, else `group_size` (the world group forming)."""
    import torch.distributed as dist

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else group_size
    entries = play_entries(spec, world)
    return entries[0] if len(entries) == 1 else entries[global_rank]


def _local_gpu(topology: Topology) -> int:
    """This process's GPU (`local_cuda_index`: device_id, else LOCAL_RANK, else the current
    device) as an index of `topology`; -1 without one. CUDA_VISIBLE_DEVICES renumbers devices,
    so the match is by PCI bus id where torch reports it."""
    import torch

    dev = local_cuda_index()
    if dev < 0:
        return -1
    props = torch.cuda.get_device_properties(dev)
    fields = [getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device")]
    if None not in fields:
        bus_id = "{:04x}:{:02x}:{:02x}.0".format(*fields)
        for gpu in topology.gpus:
            if gpu.bus_id and gpu.bus_id.lower() == bus_id:
                return gpu.index
    # A GPU the topology does not have (the probe's NVML failed: see its warnings) is placed as
    # no GPU, so the group still forms instead of failing the cluster's range check.
    return dev if dev < topology.gpu_count else -1


def own_record(cfg: TopoConfig, group_size: int, play_rank: int) -> dict:
    """This process's place: {"hostname", "local_rank", "local_device", "topology"} from the
    live probe, or from the pinned file under play mode. Probed once per process and setting
    (NUMA binding at init and the exchange both need it)."""
    play = cfg.effective("play")
    key = (resolve_pinned_file(cfg), play, group_size if play else 0, play_rank if play else 0)
    if key not in _own_records:
        _own_records[key] = _probe_own_record(cfg, group_size, play_rank)
    return _own_records[key]


def _probe_own_record(cfg: TopoConfig, group_size: int, play_rank: int) -> dict:
    play = cfg.effective("play")
    if play:
        pinned = resolve_pinned_file(cfg)
        if pinned is None:
            raise ValueError(
                f"{PLAY_SETTING}: needs a pinned topology file to play (TopoConfig.topology_file, "
                "TORCH_TOPO_FILE or NCCL_TOPO_FILE)"
            )
        hostname, device = parse_play(play, group_size, play_rank)
        topology = load_topology(pinned)
        if device >= topology.gpu_count:
            raise ValueError(
                f"{PLAY_SETTING}: GPU {device} on {hostname!r}: {pinned} has "
                f"{topology.gpu_count} GPUs, expected 0..{topology.gpu_count - 1}"
            )
        # The launcher's LOCAL_RANK describes the real machine, not the played host.
        local_rank = -1
    else:
        topology = probe(cfg)
        hostname = socket.gethostname()
        device = _local_gpu(topology)
        local_rank = int(os.environ.get("LOCAL_RANK", "-1"))
    return {
        "hostname": hostname,
        "local_rank": local_rank,
        "local_device": device,
        "topology": topology,
    }


def _host_document(own: dict) -> tuple[str, str]:
    """(digest, document) of a rank's host: its topology JSON without the host name (the
    placement carries it), so that identical hosts publish one document. Kept in `own`."""
    if "document" not in own:
        doc = json.loads(own["topology"].to_json())
        doc["hostname"] = ""
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        # 80 bits: a collision between the few host shapes of one cluster is out of reach.
        own["document"] = (hashlib.sha256(text.encode()).hexdigest()[:20], text)
    return own["document"]


def _publish(store, group_rank: int, own: dict) -> None:
    digest, text = _host_document(own)
    # The first rank to count itself for a digest writes its document; the others only refer
    # to it (its readers wait for the key, so writing it after the count is safe).
    if store.add(f"{_WRITER_PREFIX}{digest}", 1) == 1:
        store.set(f"{HOST_PREFIX}{digest}", zlib.compress(text.encode()))
    placement = [group_rank, own["hostname"], own["local_rank"], own["local_device"], digest]
    store.set(f"{KEY_PREFIX}{group_rank}", json.dumps(placement, separators=(",", ":")))


def _read_placements(store, group_size: int, timeout: timedelta) -> tuple[list[dict], list[str]]:
    """Every rank's placement (group rank 0 only) as records, and the distinct digests in order
    of their lowest rank."""
    keys = [f"{KEY_PREFIX}{r}" for r in range(group_size)]
    wait_all(store, keys, timeout, 0)
    records: list[dict] = []
    digests: dict[str, int] = {}
    for r, (key, raw) in enumerate(zip(keys, get_many(store, keys), strict=True)):
        raise_if_reported(raw, f"raised on group rank {r}")
        try:
            rank, hostname, local_rank, local_device, digest = json.loads(raw)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"exchange_cluster: record of rank {r} is not a placement "
                             f"[rank, hostname, local_rank, local_device, digest]: {exc}") from exc
        if rank != r:
            raise ValueError(
                f"exchange_cluster: key {key} holds the record of rank {rank}, expected {r} "
                "(a stale record from an earlier exchange on this store?)"
            )
        records.append({"hostname": hostname, "local_rank": local_rank,
                        "local_device": local_device,
                        "doc": digests.setdefault(digest, len(digests))})
    return records, list(digests)


def _read_documents(store, digests: list[str], timeout: timedelta, group_rank: int) -> list[str]:
    keys = [f"{HOST_PREFIX}{d}" for d in digests]
    try:
        store.wait(keys, timeout)
    except RuntimeError as exc:
        raise TimeoutError(
            f"exchange_cluster: rank {group_rank} waited {timeout.total_seconds():g} s for the "
            f"host records {digests}, counted but never written (their writer crashed)"
        ) from exc
    return [zlib.decompress(raw).decode() for raw in get_many(store, keys)]


def _encode_table(records: list[dict], digests: list[str]) -> bytes:
    # Columns compress far better than one object per rank (a uniform cluster's columns repeat).
    names: dict[str, int] = {}
    host = [names.setdefault(rec["hostname"], len(names)) for rec in records]
    table = {"digests": digests, "hostnames": list(names), "host": host,
             "local_rank": [rec["local_rank"] for rec in records],
             "local_device": [rec["local_device"] for rec in records],
             "doc": [rec["doc"] for rec in records]}
    return zlib.compress(json.dumps(table, separators=(",", ":")).encode(), 9)


def _decode_table(payload: bytes) -> tuple[list[dict], list[str]]:
    table = json.loads(zlib.decompress(payload))
    names = table["hostnames"]
    records = [{"hostname": names[h], "local_rank": lr, "local_device": dev, "doc": doc}
               for h, lr, dev, doc in zip(table["host"], table["local_rank"],
                                          table["local_device"], table["doc"], strict=True)]
    return records, table["digests"]


def _assemble(records: list[dict], pins: _Pins, group_rank: int, docs: list[str]) -> Cluster:
    # Ranks without a launcher LOCAL_RANK take their order among the ranks of their host, the
    # order torchrun itself assigns.
    seen: dict[str, int] = {}
    native = []
    for r, rec in enumerate(records):
        order = seen.get(rec["hostname"], 0)
        seen[rec["hostname"]] = order + 1
        local_rank = rec["local_rank"] if rec["local_rank"] >= 0 else order
        native.append(_C.RankRecord(r, rec["hostname"], local_rank, rec["local_device"],
                                    host_doc=rec["doc"]))
    return Cluster(_C.assemble_cluster(native, pins.gbps, pins.latency_us, docs), group_rank,
                   pins.gbps)


def exchange_records(store, group_rank: int, group_size: int, own: dict, *,
                     timeout: timedelta = _DEFAULT_TIMEOUT,
                     inter_host_gbps: float = 0.0, inter_host_latency_us: float = 0.0
                     ) -> tuple[Cluster, list[dict], list[str]]:
    """The store protocol of `exchange_cluster` for a given own record (`own_record`'s form):
    publish, let group rank 0 assemble and publish the table, read it. Returns the cluster, the
    records by group rank and the host documents they index. benchmarks/init_scale.py drives
    it for simulated ranks. `inter_host_gbps` and `inter_host_latency_us` pin the network
    (TopoConfig's fields; 0 leaves it to the hosts' NICs)."""
    pins = _Pins(inter_host_gbps, inter_host_latency_us)
    _publish(store, group_rank, own)
    at_root: dict = {}

    def assemble_all() -> bytes:
        records, digests = _read_placements(store, group_size, timeout)
        docs = _read_documents(store, digests, timeout, 0)
        # Assembling runs the consistency checks; their error goes to every rank.
        at_root["result"] = (_assemble(records, pins, 0, docs), records, docs)
        return _encode_table(records, digests)

    table = decided_by_root(store, TABLE_KEY, group_rank, timeout, "the cluster table",
                             assemble_all)
    if group_rank == 0:
        return at_root["result"]
    records, digests = _decode_table(table)
    docs = _read_documents(store, digests, timeout, group_rank)
    return _assemble(records, pins, group_rank, docs), records, docs


def _world_token(store) -> bytes:
    """The token of the world whose store is under `store`'s prefixes (every group's creator
    store wraps it): the first process to ask sets it, every later one reads it."""
    import torch.distributed as dist

    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    return store.compare_set(_WORLD_KEY, "", uuid.uuid4().hex)


def _earlier_records(world: bytes, global_ranks: tuple[int, ...]
                     ) -> tuple[list[dict], _Pins, list[str]] | None:
    """The records of `global_ranks` from one earlier exchange of this world that covered them
    all, with its pinned network and host documents. Every member of this group took part in
    that exchange too, so all members find the same one."""
    for token, ranks, records, pins, docs in _exchanges:
        if token != world:
            continue
        where = {g: i for i, g in enumerate(ranks)}
        if all(g in where for g in global_ranks):
            return [records[where[g]] for g in global_ranks], pins, docs
    return None


def _check_same_reuse(store, group_rank: int, group_size: int, records: list[dict],
                      docs: list[str], timeout: timedelta) -> None:
    """Every member reuses identical records: group rank 0 compares every member's digest."""
    used = [docs[i] for i in sorted({rec["doc"] for rec in records})]
    digest = hashlib.sha256(json.dumps([records, used], sort_keys=True).encode()).hexdigest()
    store.set(f"{_DIGEST_PREFIX}{group_rank}", digest)

    def compare() -> bytes:
        keys = [f"{_DIGEST_PREFIX}{r}" for r in range(group_size)]
        wait_all(store, keys, timeout, 0)
        for r, theirs in enumerate(get_many(store, keys)):
            if theirs.decode() != digest:
                raise _C.TopoMismatchError(
                    f"exchange_cluster: group rank {r} reuses other topology records than "
                    f"group rank 0 (digest {theirs.decode()[:12]} vs {digest[:12]}); expected "
                    "the records of the same earlier exchange on every member"
                )
        return b"same"

    decided_by_root(store, _VERDICT_KEY, group_rank, timeout, "the reuse check", compare)


def exchange_cluster(
    store,
    group_rank: int,
    group_size: int,
    config: TopoConfig | None = None,
    *,
    global_rank: int | None = None,
    global_ranks=None,
) -> Cluster:
    """Publishes this rank's records, lets group rank 0 assemble them, and builds the cluster.

    Args:
        store: the group's c10d store (e.g. the creator's PrefixStore); one exchange per store.
        group_rank: this rank in the group, 0..group_size-1.
        group_size: ranks in the group.
        config: pinned file, play spec, timeout, inter-host bandwidth and latency; None reads
            the env.
        global_rank: index into a per-rank play spec (default `group_rank`).
        global_ranks: global rank of every group rank. With it, the records are kept for later
            groups, and a group covered by an earlier exchange reuses its records (checked by
            digest) instead of probing again. Without torch.distributed initialised (the world
            group being created) earlier exchanges are forgotten first.
    """
    import torch.distributed as dist

    # group_rank 1.0 published key "1.0", which rank 0 waited for as "1" until the timeout.
    if not isinstance(store, dist.Store):
        raise ValueError(f"exchange_cluster: store: got {type(store).__name__}, expected a "
                         "torch.distributed.Store")
    if not is_int_in(group_size, 1):
        raise ValueError(f"exchange_cluster: group_size: got {group_size!r}, expected an int >= 1")
    if not is_int_in(group_rank, 0, group_size - 1):
        raise ValueError(f"exchange_cluster: group_rank: got {group_rank!r}, expected an int in "
                         f"0..{group_size - 1}")
    if global_rank is not None and not is_int_in(global_rank, 0):
        raise ValueError(f"exchange_cluster: global_rank: got {global_rank!r}, expected None or "
                         "an int >= 0")
    if config is not None and not isinstance(config, TopoConfig):
        raise ValueError(f"exchange_cluster: config: got {type(config).__name__}, expected a "
                         "torch_topo.TopoConfig or None")
    cfg = TopoConfig.from_env() if config is None else config
    timeout = cfg.timeout or _DEFAULT_TIMEOUT
    ranks = None if global_ranks is None else tuple(global_ranks)
    if ranks is not None:
        if not all(is_int_in(g, 0) for g in ranks):  # int() read 1.5 as rank 1
            raise ValueError(f"exchange_cluster: global_ranks: got {ranks}, expected ints >= 0")
        if len(ranks) != group_size:
            raise ValueError(f"exchange_cluster: global_ranks: got {len(ranks)}, expected one "
                             f"per group rank ({group_size})")
        if not dist.is_initialized():
            _exchanges.clear()  # a new world: earlier exchanges describe an old one
        world = _world_token(store)
        earlier = _earlier_records(world, ranks)
        if earlier is not None:
            records, pins, docs = earlier
            _check_same_reuse(store, group_rank, group_size, records, docs, timeout)
            return _assemble(records, _Pins.of(cfg, pins), group_rank, docs)
    play_index = group_rank if global_rank is None else global_rank
    try:
        own = own_record(cfg, group_size, play_index)
    except Exception as exc:
        publish_failure(store, group_rank, f"{KEY_PREFIX}{group_rank}", TABLE_KEY, exc)
        raise
    pins = _Pins.of(cfg)
    cluster, records, docs = exchange_records(store, group_rank, group_size, own,
                                              timeout=timeout, inter_host_gbps=pins.gbps,
                                              inter_host_latency_us=pins.latency_us)
    if ranks is not None:
        # Only one world lives at a time: an older one's records can go.
        _exchanges[:] = [e for e in _exchanges if e[0] == world]
        _exchanges.append((world, ranks, records, pins, docs))
    return cluster


def world_cluster(config: TopoConfig | None = None) -> Cluster | None:
    """The cluster of the current world (torch.distributed initialised): the records the world's
    "topo" group exchanged at init_process_group, else one exchange now over the default store.
    None when ranks play hosts without a topology file (only host names are known then)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    cfg = TopoConfig.from_env() if config is None else config
    world = tuple(range(dist.get_world_size()))
    default_store = distributed_c10d._get_default_store()
    earlier = _earlier_records(_world_token(default_store), world)
    if earlier is not None:
        records, pins, docs = earlier
        return _assemble(records, _Pins.of(cfg, pins), dist.get_rank(), docs)
    if cfg.effective("play") and resolve_pinned_file(cfg) is None:
        return None
    store = dist.PrefixStore("torch_topo/world/", default_store)
    return exchange_cluster(store, dist.get_rank(), len(world), cfg, global_ranks=world)
