# SPDX-License-Identifier: Apache-2.0
"""The topology of this host: a pinned file when one is given, else the live probe.

Precedence (docs/design.md §2: cloud VMs misreport their topology, and a pinned file is the fix):
`TopoConfig.topology_file`, else `TORCH_TOPO_FILE`, else `NCCL_TOPO_FILE`, else the live probe
(hwloc or /sys for NUMA, PCI and NICs; NVML for GPUs). When a pinned file wins and the live probe
found GPUs, the two are compared and a `PinnedTopologyWarning` names any difference in GPU count
or PCI bus ids.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.topology import Topology, load_topology

__all__ = ["probe", "resolve_pinned_file", "cpus_near_gpu", "PinnedTopologyWarning"]


class PinnedTopologyWarning(UserWarning):
    """A pinned topology file and the live probe of this host disagree."""


def resolve_pinned_file(
    config: TopoConfig | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The pinned topology file that wins over the live probe, or None.

    Args:
        config: its `topology_file` wins when set.
        environ: the environment to read (default `os.environ`): `TORCH_TOPO_FILE`, then
            `NCCL_TOPO_FILE` (NCCL's own variable, so a file already given to NCCL pins us too).
    """
    env = os.environ if environ is None else environ
    if config is not None and config.topology_file:
        return config.topology_file
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE"):
        if env.get(var):
            return env[var]
    return None


def _gpu_bus_ids(host) -> list[str]:
    return [gpu.bus_id for gpu in host.gpus]


def _warn_if_disagree(path: str, pinned: Topology, live) -> None:
    live_ids = _gpu_bus_ids(live)
    if not live_ids:
        return  # a CPU machine (or a container without the driver) has nothing to compare
    pinned_ids = _gpu_bus_ids(pinned.native)
    if len(pinned_ids) != len(live_ids):
        warnings.warn(
            f"pinned topology {path}: has {len(pinned_ids)} GPUs but the live probe of this host "
            f"found {len(live_ids)}; the pinned file is used (unset TORCH_TOPO_FILE / "
            "NCCL_TOPO_FILE to use the live probe)",
            PinnedTopologyWarning,
            stacklevel=3,
        )
        return
    differ = [
        f"GPU {i}: {p} vs {q}"
        for i, (p, q) in enumerate(zip(pinned_ids, live_ids, strict=True))
        if p and q and p.lower() != q.lower()
    ]
    if differ:
        warnings.warn(
            f"pinned topology {path}: PCI bus ids differ from the live probe (pinned vs live): "
            + "; ".join(differ[:4])
            + (f"; and {len(differ) - 4} more" if len(differ) > 4 else "")
            + "; the pinned file is used",
            PinnedTopologyWarning,
            stacklevel=3,
        )


def probe(config: TopoConfig | None = None, *, live=None) -> Topology:
    """The topology of this host.

    Args:
        config: pinned-file options (`topology_file`); None reads `TopoConfig.from_env()`.
        live: a live probe result (`torch_topo._C.HostTopology` or `Topology`) to use instead of
            probing, for tests and for callers that probed already.
    """
    cfg = TopoConfig.from_env() if config is None else config
    live_host = _C.probe_host() if live is None else live
    if isinstance(live_host, Topology):
        live_host = live_host.native
    pinned = resolve_pinned_file(cfg)
    if pinned is None:
        return Topology(live_host)
    topology = load_topology(pinned)
    _warn_if_disagree(pinned, topology, live_host)
    return topology


def cpus_near_gpu(topology: Topology, gpu: int) -> set[int]:
    """CPU ids local to `gpu` (its cpu affinity, else its NUMA node's CPUs); an empty set when
    the topology does not say, in which case callers should not bind.

    Args:
        topology: the host topology.
        gpu: CUDA index on that host.
    """
    host = topology.native
    if not 0 <= gpu < len(host.gpus):
        raise ValueError(
            f"cpus_near_gpu: gpu: got {gpu}, expected 0..{len(host.gpus) - 1} "
            f"({len(host.gpus)} GPUs in {host.source or 'the topology'})"
        )
    info = host.gpus[gpu]
    text = info.cpu_affinity
    if not text and info.numa_node >= 0:
        text = next((n.cpus for n in host.numa_nodes if n.id == info.numa_node), "")
    return set(_C.parse_cpulist(text, f"GPU {gpu} cpu affinity"))
