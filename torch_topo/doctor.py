# SPDX-License-Identifier: Apache-2.0
"""`doctor`: lint a topology (and optionally a mesh) for layouts and settings that waste the
interconnect (docs/design.md §3). Each finding says what is wrong and what to do about it."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, replace
from typing import Literal

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.plan import Plan, mesh_items, priced_as_the_backend, with_nvlink_domains
from torch_topo.probe import live_probe, pinned_differences, probe_failed
from torch_topo.topology import Topology, load_topology
from torch_topo.validation import is_int_in

__all__ = ["Finding", "diagnose", "live_probe_findings", "rank_counts", "reader_warnings"]

# Path classes from fast to slow, as nvidia-smi prints them.
_CLASS_ORDER = ["X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"]
# Dimensions whose groups must sit in the fastest clique (heaviest, latency-bound traffic).
_CLIQUE_DIMS = ("tp", "sp")
# Reader warnings on what a format never carries, so that every file of it gets them: link
# rates estimated from path classes (nvidia-smi text), NUMA nodes told apart by CPU affinity
# (nvidia-smi text without that column), no NVLink matrix (an hwloc export without NVML). They
# are notes; every other reader warning (rows or closing tags missing, cells that disagree, a
# rate or GPU order assumed) is a warning, since the checks rest on what the reader assumed.
_READER_NOTES = ("bandwidths estimated from path classes", "no NUMA Affinity column",
                 ": no NVLinkBandwidth matrix")


@dataclass(frozen=True)
class Finding:
    """One problem found by `diagnose`."""

    code: str
    """Stable identifier, e.g. "tp-crosses-numa"."""
    severity: Literal["error", "warning", "info"]
    """error/warning make `doctor` exit 1; info is reported only."""
    message: str
    fix: str
    """What to do about it."""

    def to_dict(self) -> dict:
        return asdict(self)


def _worst_pair(cluster, groups) -> tuple[int, int, str]:
    """(lanes, class rank, text) of the slowest pair over all groups; larger is worse."""
    keys = [(-lanes, _CLASS_ORDER.index(cls), f"{cls}{lanes or ''}")
            for g in groups for i, a in enumerate(g) for b in g[i + 1:]
            for cls, lanes in [cluster.pair_path(a, b)]]
    return max(keys, default=(0, 0, "X"))


def rank_counts(cluster) -> list[int]:
    """The distinct counts of ranks on the hosts of `cluster`, ascending, read off the cluster
    itself: a cluster file brings its own hosts, which `hosts` (copies of a one-host file) does
    not count. More than one: no device mesh fits the hosts."""
    return sorted(set(Counter(cluster.rank_host(r) for r in range(cluster.world_size)).values()))


def _unequal_hosts(counts: list[int], mesh: dict[str, int] | None) -> list[Finding]:
    """Hosts of different rank counts hold no device mesh (the planner lays a mesh out as equal
    blocks per host): a mesh asked for is bad input, and without one the layout checks are
    skipped with a note; the checks of links, NICs, files and environment still run."""
    unequal = f"hosts hold different rank counts ({counts[0]} and {counts[-1]})"
    if mesh:
        shape = ",".join(f"{name}={size}" for name, size in mesh.items())
        raise ValueError(f"mesh: got {shape}, but the {unequal}; a device mesh needs the same "
                         "count on every host (leave out mesh / --mesh to run the checks that "
                         "need none)")
    return [Finding(
        "layout-unchecked", "info",
        f"{unequal}: no device mesh fits them, so the layout checks of tp groups did not run",
        "give every host the same number of ranks to have the layout of a mesh checked")]


def _layout_findings(cluster, mesh: dict[str, int], per_host: int,
                     backend=None) -> list[Finding]:
    findings = []
    naive = Plan.naive(cluster, mesh, backend=backend)
    planned = Plan.build(cluster, mesh, backend=backend)
    for dim in (d for d in _CLIQUE_DIMS if d in mesh and mesh[d] > 1):
        bad, good = _worst_pair(cluster, naive.groups(dim)), _worst_pair(cluster, planned.groups(dim))
        if bad[:2] > good[:2]:
            if bad[2] in ("SYS", "NET"):
                code, what = ("numa", "span NUMA nodes") if bad[2] == "SYS" else ("hosts", "span hosts")
            elif not bad[2].startswith("NV") and good[2].startswith("NV"):
                code, what = "pcie", "use PCIe where NVLink is available"
            else:
                code, what = "weaker-links", "use slower links than needed"
            findings.append(Finding(
                f"{dim}-{'crosses-' if code != 'weaker-links' else ''}{code}", "warning",
                f"contiguous {dim} groups {naive.groups(dim)[:4]} {what} (slowest pair "
                f"{bad[2]}); a layout with slowest pair {good[2]} exists: "
                f"{planned.groups(dim)[:4]} (predicted {naive.cost(dim) * 1e3:.2f} -> "
                f"{planned.cost(dim) * 1e3:.2f} ms/step)",
                "build the mesh with torch_topo.init_device_mesh (or pass these groups to "
                "DeviceMesh); `python -m torch_topo plan FILE --mesh ... --compare naive` shows it"))
    tp = mesh.get("tp", 1)
    if per_host == 8 and tp > 1 and tp % 2 == 1:
        findings.append(Finding(
            "odd-tp", "warning",
            f"tp={tp} on an 8-GPU host: groups cannot tile the host, so some tp groups straddle "
            "NVLink cliques or hosts",
            "use tp in {2, 4, 8} on 8-GPU hosts"))
    return findings


def _numa_findings(cluster, mesh: dict[str, int], reported: set[str]) -> list[Finding]:
    """tp/sp groups spanning NUMA nodes where links cannot tell (NVSwitch boxes: every pair
    NV18) while the planner found a layout with each group on one node. Dimensions whose
    links `_layout_findings` already faulted (`reported`: its codes) are left to it."""
    findings = []
    naive = Plan.naive(cluster, mesh)
    planned = Plan.build(cluster, mesh)

    def nodes(groups) -> list[set[tuple[int, int]]]:
        # Node numbers restart on every host: a group over hosts is never on one node.
        return [{(cluster.rank_host(r), n) for r in g if (n := cluster.rank_cpus(r)["numa_node"]) >= 0}
                for g in groups]

    for dim in (d for d in _CLIQUE_DIMS if mesh.get(d, 1) > 1 and not any(c.startswith(f"{d}-") for c in reported)):
        spanning = [sorted(n) for n in nodes(naive.groups(dim)) if len(n) > 1]
        if spanning and all(len(n) <= 1 for n in nodes(planned.groups(dim))):
            # Groups over the trays of one NVLink domain: their links are as fast, their CPU
            # sides are hosts apart, which the example names.
            first = spanning[0]
            example = (", ".join(f"host {h} node {n}" for h, n in first)
                       if len({h for h, _ in first}) > 1 else str([n for _, n in first]))
            findings.append(Finding(
                f"{dim}-crosses-numa", "warning",
                f"contiguous {dim} groups {naive.groups(dim)[:4]} span NUMA nodes (e.g. "
                f"{example}); a layout with every {dim} group on one NUMA node and links as "
                f"fast exists: {planned.groups(dim)[:4]}",
                "build the mesh with torch_topo.init_device_mesh (or pass these groups to "
                "DeviceMesh) so each group's CPU side stays on one socket"))
    return findings


def _pcie_findings(cluster) -> list[Finding]:
    findings = []
    for host in range(cluster.host_count):
        per_lane = {}
        for gpu, lanes, gbps in cluster.gpu_pcie_links(host):
            if lanes > 0 and gbps > 0:
                per_lane.setdefault(round(gbps / lanes, 2), set()).add(gpu)
        if len(per_lane) > 1:
            detail = "; ".join(f"{rate} GB/s per lane: GPUs {sorted(g)}" for rate, g in sorted(per_lane.items()))
            findings.append(Finding(
                "mixed-pcie", "warning",
                f"host {host}: GPUs sit on PCIe links of different generations ({detail}); "
                "rings run at the slowest",
                "check BIOS link speed settings and riser cards; keep heavy groups on the "
                "faster GPUs (traffic= in torch_topo.plan)"))
    return findings


def _network_findings(cluster) -> list[Finding]:
    """Several hosts whose NIC speeds nobody gave: the cost model's network is a guess."""
    if cluster.host_count < 2 or not cluster.network_assumed:
        return []
    return [Finding(
        "nic-speed-assumed", "info",
        f"inter-host bandwidth unknown: {cluster.network_source}",
        "give it: TORCH_TOPO_INTER_HOST_GBPS=<GB/s per host and direction>, or a topology "
        "that carries NIC speeds (NCCL XML, the live probe)")]


def _environment_findings(environ) -> list[Finding]:
    findings = []
    value = environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    if value is not None:
        findings.append(Finding(
            "cuda-device-max-connections", "warning",
            f"CUDA_DEVICE_MAX_CONNECTIONS={value} is set: with few hardware queues, kernels of "
            "unrelated streams serialise and communication stops overlapping compute",
            "unset it, unless a framework needs it for its own ordering (Megatron-LM sets 1 "
            "for sequence-parallel overlap)"))
    return findings


def _nvlink_findings(topo, pinned: bool) -> list[Finding]:
    """A file whose NVLink came from elsewhere than the file (an NCCL XML completed as for the
    run), or from nowhere (an NCCL XML no GPU model completes, a `topo -mp` matrix); `pinned`:
    the file is pinned (TORCH_TOPO_FILE / NCCL_TOPO_FILE)."""
    origin = topo.nvlink_origin
    if origin not in ("live-probe", "inferred", "unknown"):
        return []
    severity = "info" if origin == "live-probe" else "warning"
    with_nvlink = ("NCCL's own dump (NCCL_TOPO_DUMP_FILE) or `python -m torch_topo probe -o "
                   "FILE` on the GPU host")
    if origin == "live-probe":
        fix = ("nothing to do here; on another host that file gets NVLink from the GPU model or "
               "not at all")
    elif pinned:
        fix = ("plan on this host's live probe (unset TORCH_TOPO_FILE / NCCL_TOPO_FILE, run on "
               f"the GPU host), or pin a file with NVLink: {with_nvlink}")
    else:
        fix = f"give a file with NVLink: `nvidia-smi topo -m` (not `-mp`), {with_nvlink}"
    return [Finding("pinned-no-nvlink" if pinned else "file-no-nvlink", severity,
                    topo.nvlink_warning, fix)]


def _file_hosts(topology) -> tuple[list[Topology], bool]:
    """The hosts of `topology` as read from a file, for `_file_findings`, and whether they are a
    cluster file's; none for a live probe (its warnings are `live_probe_findings`'), a cluster
    not read from a file, and a file the loaders refuse (`resolve_cluster` reports on it)."""
    if isinstance(topology, (str, os.PathLike)):
        try:
            return [load_topology(topology)], False
        except ValueError:
            pass
        try:  # a cluster file: its hosts keep their sources' warnings
            doc = json.loads(_C.planner_cluster_json(path=os.fspath(topology), hosts=1))
        except ValueError:
            return [], False
        return [Topology.from_json(json.dumps({"schema": "torch-topo/1", "kind": "host", **h}))
                for h in doc["hosts"]], True
    # A live probe has no format; a file it was saved to says "probe" (`probe -o`).
    return ([topology] if isinstance(topology, Topology) and topology.format else []), False


def _file_findings(topo, pinned: bool, host: str | None = None) -> list[Finding]:
    """The reader's warnings on a topology file, each a finding, and a file without GPUs (error:
    nothing to check, nothing a run could place ranks on). A pinned file's NVLink is
    `_probe_findings`'. `host` names a cluster file's host ("host 2 (node2)"); each message
    starts with it."""
    said = f"{host}: " if host else ""
    findings = [] if pinned else _nvlink_findings(topo, pinned=False)
    findings += [] if pinned or host else _left_out_nvlink_findings(topo)
    findings += [_reader_finding(text) for text in topo.warnings if text != topo.nvlink_warning]
    findings = [replace(f, message=said + f.message) for f in findings]
    if topo.gpu_count == 0:
        findings.append(Finding(
            "file-no-gpus", "error",
            "the file holds no GPU: there is no layout to check, and no rank to place"
            if host is None else f"{host} holds no GPU: the ranks placed on it have none to run on",
            "give the topology of a GPU host: `nvidia-smi topo -m`, NCCL's own dump "
            "(NCCL_TOPO_DUMP_FILE) or `python -m torch_topo probe -o FILE` there (a cloud's "
            "NCCL XML without GPUs is a skeleton NCCL fills in at run time)"))
    return findings


def _cluster_file_findings(hosts: list[Topology]) -> list[Finding]:
    """`_file_findings` of each host of a cluster file, naming the host."""
    return [f for i, topo in enumerate(hosts)
            for f in _file_findings(topo, pinned=False, host=f"host {i}" + (
                f" ({topo.hostname})" if topo.hostname else ""))]


def _left_out_nvlink_findings(topo) -> list[Finding]:
    """An NCCL XML read as written whose GPUs have no NVLink between them where their model
    has it on its SXM board, or names no model: clouds leave NVLink out of the file (NCCL adds
    it from NVML at run time), so the checks ran on PCI paths. The message is what `show
    --nvlink complete` says of the file without this host's live probe."""
    left_out = topo.nvlink_left_out()
    if left_out is None:
        return []
    origin, completed_warning = left_out
    return [Finding(
        "file-nvlink-left-out", "warning",
        f"NVLink {'probably' if origin == 'inferred' else 'possibly'} left out: the checks ran "
        "on the file's PCI paths between its GPUs; `--nvlink complete` reads it as: "
        f"{completed_warning}",
        "check it as the run will see it: `--nvlink complete` (doctor, plan, show; "
        'load_topology(FILE, nvlink="complete")) fills it from this host\'s live probe or the '
        "GPU model; or give a file with NVLink: NCCL's own dump (NCCL_TOPO_DUMP_FILE) or "
        "`python -m torch_topo probe -o FILE` on the GPU host")]


def reader_warnings(topo: Topology) -> list[str]:
    """The reader's warnings on `topo` that doctor grades as warnings (rows cut off, cells that
    disagree, a rate assumed), not the notes on what a format never carries nor the NVLink
    line: what `plan` must show beside numbers that rest on them."""
    return [text for text in topo.warnings
            if text != topo.nvlink_warning and _reader_finding(text).severity == "warning"]


def _reader_finding(text: str) -> Finding:
    if text.startswith("probe:"):  # a file the probe wrote keeps its sources' lines
        if probe_failed(text):
            return Finding("reader-warning", "warning", text,
                           "the message ends with the fix; then write the file again on the "
                           "host (`python -m torch_topo probe -o FILE`)")
        return Finding("reader-warning", "info", text,
                       "nothing to do: that source was absent where the probe ran")
    if any(note in text for note in _READER_NOTES):
        return Finding("reader-warning", "info", text,
                       "nothing to do: the file does not carry it (the message says what "
                       "stands in)")
    return Finding("reader-warning", "warning", text,
                   "the checks take the file as the reader completed it (the message says how); "
                   "save the whole file again on the host: `nvidia-smi topo -m`, NCCL's own dump "
                   "(NCCL_TOPO_DUMP_FILE) or `python -m torch_topo probe -o FILE`")


def _probe_findings(pinned_path: str | None, pinned, live) -> list[Finding]:
    """A pinned file that disagrees with the live probe of this host, and where its NVLink
    came from."""
    if pinned_path is None:
        return []
    findings = _nvlink_findings(pinned, pinned=True)
    if live.gpu_count == 0:
        return findings + [Finding(
            "pinned-unverified", "info",
            f"the live probe sees no GPUs here; {pinned_path} ({pinned.gpu_count} GPUs) cannot "
            "be checked against the machine", "run doctor on the GPU host")]
    differences = pinned_differences(pinned, live)
    if not differences:
        return findings
    # A wrong GPU count or bus id misplaces ranks; VMs misreport path classes, which is often why a
    # file is pinned, so those only warn.
    paths_only = all(d.startswith("GPUs ") for d in differences)
    shown = "; ".join(differences[:6]) + (
        f"; and {len(differences) - 6} more" if len(differences) > 6 else "")
    return findings + [Finding(
        "pinned-paths-differ" if paths_only else "pinned-mismatch",
        "warning" if paths_only else "error",
        f"pinned topology {pinned_path} disagrees with the live probe ({live.source}), pinned vs "
        f"live: {shown}",
        "keep the file if this host misreports its topology (common in VMs); else pin the file "
        "dumped on this machine type (`python -m torch_topo convert` of its `lstopo FILE.xml` or "
        "`nvidia-smi topo -m`) or unset TORCH_TOPO_FILE / NCCL_TOPO_FILE")]


def live_probe_findings(live) -> list[Finding]:
    """Findings of the live probe itself: each source that failed (warning) and a host without
    GPUs (info: the layout checks have nothing to check)."""
    findings = [Finding("probe-source-failed", "warning", text,
                        "the message ends with the fix; a pinned topology file (TORCH_TOPO_FILE) "
                        "replaces the live probe")
                for text in live.warnings if probe_failed(text)]
    if live.gpu_count == 0:
        findings.append(Finding(
            "live-no-gpus", "info",
            f"the live probe of this host ({live.source}) found no GPU; only the environment is "
            "checked", "run doctor on a GPU host, or give it a topology FILE"))
    return findings


def _kv_findings(mesh: dict[str, int], kv_heads: int | None) -> list[Finding]:
    sp = mesh.get("sp", 1)
    if kv_heads is None or sp <= 1:
        return []
    if kv_heads < sp:
        severity = "warning" if sp % kv_heads == 0 else "error"
        return [Finding(
            "kv-heads-below-ulysses", severity,
            f"kv_heads={kv_heads} < Ulysses degree sp={sp}: "
            + (f"K/V heads are replicated {sp // kv_heads}x across the group"
               if severity == "warning" else
               "sp is not a multiple of kv_heads, so K/V heads cannot be replicated evenly"),
            f"use sp <= {kv_heads} and put the rest of the sequence split on ring attention (cp)")]
    if kv_heads % sp:
        return [Finding("kv-heads-uneven", "error",
                        f"kv_heads={kv_heads} is not divisible by sp={sp}",
                        "choose sp dividing the K/V head count")]
    return []


def diagnose(topology, mesh: dict[str, int] | str | None = None, *, hosts: int = 1,
             kv_heads: int | None = None, pinned_path: str | None = None,
             environ=None, live=None, inter_host_gbps: float | None = None,
             inter_host_latency_us: float | None = None,
             nvlink_domain_hosts: int | None = None) -> list[Finding]:
    """Findings for a topology (file, Topology or cluster) and an optional mesh.

    Without a mesh, the common tensor-parallel degrees 2 and 4 are checked (dp filling the rest).
    Hosts holding different rank counts fit no mesh: a `mesh` is a ValueError, and without one
    the layout checks give way to the note `layout-unchecked`; every other check runs.
    `pinned_path` (a file pinned by TORCH_TOPO_FILE / NCCL_TOPO_FILE) is compared with `live`, a
    live probe `Topology` (default: probe this host), after its missing NVLink is filled as for
    the run (`load_topology(..., nvlink="complete")`; finding `pinned-no-nvlink`).
    `inter_host_gbps` and `inter_host_latency_us` pin the network between hosts as
    `resolve_cluster` does; ranks without a GPU are priced at Gloo's latency between hosts as
    the backend prices them (`resolve_cluster(gloo_latency=True)`), on the flat or hierarchical
    side the backend's size rule takes for them on that network (`BackendChoices`) under
    `environ`'s switches (`TORCH_TOPO_HIERARCHICAL`, `TORCH_TOPO_AWARE`; default `os.environ`).
    `nvlink_domain_hosts` puts every that many consecutive hosts in one multi-node NVLink
    domain (`with_nvlink_domains`; GB200 NVL72: 18 trays), so their GPU pairs are NVLink paths.
    A topology read from a file (a path, or a `Topology` a reader made, a saved probe included)
    also gets each of the reader's warnings as a finding (`reader-warning`, `file-no-nvlink`),
    an NCCL XML read as written whose GPUs' model has NVLink (or is not named) but the file none
    `file-nvlink-left-out`, and, holding no GPU, `file-no-gpus`; a `mesh` on such a file is a
    ValueError. Each host of a cluster file gets the same, but `file-nvlink-left-out`, naming
    the host.
    """
    env = os.environ if environ is None else environ
    # The forms plan() takes ("dp=4,tp=2" too); the checks below read a {name: size}.
    mesh = dict(mesh_items(mesh)) if mesh is not None else None
    if kv_heads is not None and not is_int_in(kv_heads, 1):
        raise ValueError(f"kv_heads: got {kv_heads!r}, expected an int >= 1")
    name = os.fspath(topology) if isinstance(topology, (str, os.PathLike)) else None
    pinned = None
    if pinned_path is not None:
        # Checked as it will run: with the NVLink NCCL would add at run time (pinned-no-nvlink).
        live = live_probe() if live is None else live
        pinned = load_topology(pinned_path, nvlink="complete", live=live)
        if isinstance(topology, (str, os.PathLike)) and os.fspath(topology) == pinned_path:
            topology = pinned
    read, cluster_file = ([pinned], False) if topology is pinned else _file_hosts(topology)
    if mesh and read and not any(h.gpu_count for h in read):
        raise ValueError(f"mesh: {name or read[0].source} holds no GPU to place a mesh on; give "
                         "the topology of a GPU host")
    source, source_hosts = topology, hosts
    if nvlink_domain_hosts is not None:
        # On the topology as it will run (a pinned file completed above); the document it
        # gives holds every host.
        source, source_hosts = with_nvlink_domains(topology, hosts, nvlink_domain_hosts,
                                                   "nvlink_domain_hosts"), 1
    # Groups of ranks without a GPU take the side the backend's rule picks on that network,
    # under the environment's switches (TORCH_TOPO_HIERARCHICAL=never keeps them flat).
    cluster, backend = priced_as_the_backend(
        source, source_hosts,
        TopoConfig.from_env(env, inter_host_gbps=inter_host_gbps,
                            inter_host_latency_us=inter_host_latency_us),
        network={"inter_host_gbps": inter_host_gbps,
                 "inter_host_latency_us": inter_host_latency_us})
    findings: list[Finding] = []
    counts = rank_counts(cluster)
    per_host = counts[0]
    if len(counts) > 1:
        findings += _unequal_hosts(counts, mesh)  # a ValueError with a mesh
        meshes = []
    else:
        meshes = [mesh] if mesh else [{"dp": cluster.world_size // tp, "tp": tp}
                                      for tp in (2, 4) if per_host % tp == 0 and per_host > tp]
    for m in meshes:
        layout = _layout_findings(cluster, m, per_host, backend)
        findings += layout + _numa_findings(cluster, m, {f.code for f in layout})
    findings += _kv_findings(mesh or {}, kv_heads)
    findings += _pcie_findings(cluster)
    findings += _network_findings(cluster)
    findings += _environment_findings(env)
    if cluster_file:
        findings += _cluster_file_findings(read)
    elif read:
        findings += _file_findings(read[0], pinned=topology is pinned)
    findings += _probe_findings(pinned_path, pinned, live)
    return findings
