# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo show [FILE] [--json]`: the topology of a file or of this host, as an
nvidia-smi style matrix with legend, the GPU bandwidth matrix, NIC and NUMA affinity."""

from __future__ import annotations

import argparse
import importlib.util
import json

import torch_topo
from torch_topo.cli._options import add_nvlink, nvlink_mode
from torch_topo.topology import Topology, read_topology

__all__ = ["add_parser", "run", "show_dict", "render_text", "SHOW_SCHEMA"]

SHOW_SCHEMA = "torch-topo-show/1"

_LEGEND = (
    ("X", "Self"),
    ("NV#", "Connection traversing a bonded set of # NVLinks (direct or through NVSwitch)"),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("PXB", "Connection traversing multiple PCIe bridges (without the PCIe Host Bridge)"),
    ("PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
    ("NODE", "Connection traversing PCIe and the interconnect between host bridges of a NUMA node"),
    ("SYS", "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes"),
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("show", help="show the topology of a file or of this host",
                              description=__doc__)
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="nvidia-smi text, NCCL XML, hwloc XML or torch-topo JSON; "
                        "omitted: probe this host")
    add_nvlink(p)
    p.add_argument("--json", action="store_true", help=f"print one JSON object ({SHOW_SCHEMA})")
    p.set_defaults(run=run)


def _probe() -> Topology:
    if importlib.util.find_spec("torch_topo.probe") is None:
        raise RuntimeError("no FILE given and this build has no live probe (torch_topo.probe); "
                           "pass a topology file")
    return torch_topo.probe()


def _live() -> Topology:
    from torch_topo.probe import live_probe  # absent from builds without the probe (_probe)

    return live_probe()


def show_dict(topo: Topology) -> dict:
    """The `show --json` object; keys are documented in docs/topology.md."""
    n = topo.gpu_count
    nics = topo.nics
    return {
        "schema": SHOW_SCHEMA,
        "source": topo.source,
        "format": topo.format or None,
        "gpu_count": n,
        "gpus": [{"index": g.index, "bus_id": g.bus_id, "numa_node": g.numa_node, "name": g.name,
                  "sm": g.sm, "cpu_affinity": g.cpu_affinity} for g in topo.gpus],
        "path_matrix": [[topo.path(i, j) for j in range(n)] for i in range(n)],
        "nvlink_matrix": [[topo.nvlinks(i, j) for j in range(n)] for i in range(n)],
        "bandwidth_matrix": [[topo.bandwidth(i, j) for j in range(n)] for i in range(n)],
        "latency_matrix": [[topo.latency(i, j) for j in range(n)] for i in range(n)],
        "nics": [{"name": c.name, "bus_id": c.bus_id, "numa_node": c.numa_node,
                  "speed_gbps": c.speed_gbps, "latency_us": c.latency_us} for c in nics],
        "nic_path_matrix": [[topo.nic_path(i, k) for k in range(len(nics))] for i in range(n)],
        "numa_nodes": [{"id": k, "cpus": v or None} for k, v in sorted(topo.numa_nodes.items())],
        "nvlink_origin": topo.nvlink_origin,
        "warnings": topo.warnings,
    }


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in [header, *rows]]


def render_text(topo: Topology) -> str:
    """nvidia-smi style report of `topo`."""
    n, nics, gpus = topo.gpu_count, topo.nics, topo.gpus
    names = [topo.gpu_label(i) for i in range(n)]
    out = [f"Topology of {topo.source} ({topo.format or 'probe'}): {n} GPUs, {len(nics)} NICs", ""]
    header = ["", *names, *(c.name for c in nics), "CPU Affinity", "NUMA Affinity"]
    rows = []
    for i in range(n):
        cells = [topo.cell(i, j) for j in range(n)] + [topo.nic_path(i, k) for k in range(len(nics))]
        numa = gpus[i].numa_node
        rows.append([names[i], *cells, gpus[i].cpu_affinity or "N/A",
                     "N/A" if numa is None else str(numa)])
    out += _table(header, rows)
    if n:  # one GPU too, as `plan` says it
        out += ["", topo.nvlink_note()]
    out += ["", "Legend:", ""] + [f"  {k:<4} = {v}" for k, v in _LEGEND]
    if n:
        out += ["", "GPU-to-GPU bandwidth (GB/s per direction):", ""]
        bw = [[names[i], *("-" if i == j else f"{topo.bandwidth(i, j):.1f}" for j in range(n))]
              for i in range(n)]
        out += _table(["", *names], bw)
    if nics:
        out += ["", "NICs:"]
        for k, c in enumerate(nics):
            near = [names[i] for i in range(n) if topo.nic_path(i, k) in ("PIX", "PXB")]
            speed = "speed unknown" if c.speed_gbps is None else f"{c.speed_gbps:g} Gbit/s"
            numa = "NUMA ?" if c.numa_node is None else f"NUMA {c.numa_node}"
            latency = "" if c.latency_us is None else f", plugin latency {c.latency_us:g} us"
            out.append(f"  {c.name}: {numa}, {speed}{latency}, nearest GPUs: "
                       f"{' '.join(near) or 'none'}")
    numa_nodes = topo.numa_nodes
    if numa_nodes:
        out += ["", "NUMA nodes:"]
        for node, cpus in sorted(numa_nodes.items()):
            members = [names[i] for i in range(n) if gpus[i].numa_node == node]
            out.append(f"  {node}: CPUs {cpus or '?'}; GPUs {' '.join(members) or 'none'}")
    if topo.warnings:
        out += ["", "Warnings:"] + [f"  {w}" for w in topo.warnings]
    return "\n".join(out)


def _pinned() -> str | None:
    from torch_topo.config import TopoConfig
    from torch_topo.probe import resolve_pinned_file  # absent from builds without the probe

    return resolve_pinned_file(TopoConfig.from_env())


def run(args: argparse.Namespace) -> int:
    # `--nvlink file` without FILE shows the pinned file as written, as plan plans on it.
    path = args.file or (_pinned() if args.nvlink == "file" else None)
    if path:
        nvlink = nvlink_mode(args)
        live = _live() if nvlink == "complete" else None
        # A pinned file is named by its setting already when it is no file at all.
        name = "FILE" if args.file else "pinned topology file"
        topo = read_topology(path, name, nvlink=nvlink, live=live)
    else:
        topo = _probe()
    if args.json:
        print(json.dumps(show_dict(topo), indent=2))
    else:
        print(render_text(topo))
    return 0
