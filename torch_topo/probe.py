# SPDX-License-Identifier: Apache-2.0
"""The topology of this host: a pinned file when one is given, else the live probe.

Precedence (docs/design.md §2: cloud VMs misreport their topology, and a pinned file is the fix):
`TopoConfig.topology_file`, else `TORCH_TOPO_FILE`, else `NCCL_TOPO_FILE`, else the live probe
(hwloc or /sys for NUMA, PCI and NICs; NVML for GPUs). When a pinned file wins and the live probe
found GPUs, the two are compared and a `PinnedTopologyWarning` names any difference in GPU count
or PCI bus ids. A pinned NCCL XML without NVLink gets it as NCCL would at run time: from the live
probe when the file describes this host, else from the GPU model, else a warning
(`load_topology(..., nvlink="complete")`).

The live probe never fails for a broken source: each of NVML, hwloc and sysfs that fails costs its
own facts and adds a warning to `Topology.warnings` ("probe:<source> failed: <reason>; <what was
done instead>; <fix>"). Each distinct warning is also logged once per process on the
"torch_topo.probe" logger: failures at WARNING, expected absences (no NVML on a CPU machine) at
INFO.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Mapping

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.topology import Topology, load_topology
from torch_topo.validation import is_int_in

__all__ = [
    "probe",
    "live_probe",
    "pinned_differences",
    "probe_failed",
    "resolve_pinned_file",
    "cpus_near_gpu",
    "PinnedTopologyWarning",
]


class PinnedTopologyWarning(UserWarning):
    """A pinned topology file and the live probe of this host disagree."""


_log = logging.getLogger(__name__)
_logged: set[str] = set()
_FAILED = re.compile(r"probe:\w+ failed: ")


def probe_failed(warning: str) -> bool:
    """True for a live-probe warning of a source that failed, False for notes and absences."""
    return _FAILED.match(warning) is not None


def _log_probe_warnings(host) -> None:
    for text in host.warnings:
        if text.startswith("probe:") and text not in _logged:
            _logged.add(text)
            _log.log(logging.WARNING if probe_failed(text) else logging.INFO, "%s", text)


def resolve_pinned_file(
    config: TopoConfig | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """The pinned topology file that wins over the live probe, or None.

    Args:
        config: its `topology_file` wins when set or given (given as None: no pinned file,
            whatever the variables say).
        environ: the environment to read (default `os.environ`): `TORCH_TOPO_FILE`, then
            `NCCL_TOPO_FILE` (NCCL's own variable, so a file already given to NCCL pins us too).

    Raises:
        ValueError: the pinned path is no file; the message names where the pin was set
            (loading it later would name only the path, far from the setting).
    """
    env = os.environ if environ is None else environ
    # A given field wins whatever its value (topology_file=None probes live); only the
    # constructor sets a field, so a set one was given.
    if config is not None and "topology_file" in config.explicit_fields:
        if not config.topology_file:
            return None
        return _existing(config.topology_file, "TopoConfig.topology_file (or TORCH_TOPO_FILE)")
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE"):
        if env.get(var, "").strip():  # blank is unset, as TopoConfig.from_env reads it
            return _existing(env[var], var)
    return None


def _existing(path: str, setting: str) -> str:
    if not os.path.isfile(path):
        raise ValueError(f"{setting}: got {path!r}, expected an existing topology file")
    return path


def live_probe() -> Topology:
    """The live probe of this host, whatever file is pinned; its warnings are logged once."""
    host = _C.probe_host()
    _log_probe_warnings(host)
    return Topology(host)


def pinned_differences(pinned: Topology, live: Topology, *, paths: bool = True) -> list[str]:
    """What a pinned topology gets wrong about this host, pinned value first: the GPU count, else
    PCI bus ids, and with `paths` the path class of each GPU pair. Empty when they agree or when
    the live probe found no GPU (a CPU machine, or no driver: nothing to compare).

    Args:
        pinned: the pinned file's topology.
        live: the live probe's (`live_probe()`).
        paths: also compare path classes (NV lane counts included).
    """
    live_ids = [g.bus_id or "" for g in live.native.gpus]
    pinned_ids = [g.bus_id or "" for g in pinned.native.gpus]
    if not live_ids:
        return []
    if len(pinned_ids) != len(live_ids):
        return [f"has {len(pinned_ids)} GPUs but the live probe of this host found {len(live_ids)}"]
    out = [
        f"GPU {i}: {p} vs {q}"
        for i, (p, q) in enumerate(zip(pinned_ids, live_ids, strict=True))
        if p and q and p.lower() != q.lower()
    ]
    if paths:
        n = len(live_ids)
        out += [
            f"GPUs {i}-{j}: {a} vs {b}"
            for i in range(n)
            for j in range(i + 1, n)
            if (a := _path_label(pinned, i, j)) != (b := _path_label(live, i, j))
        ]
    return out


def _path_label(topo: Topology, i: int, j: int) -> str:
    cls = topo.path(i, j)
    return f"NV{topo.nvlinks(i, j)}" if cls == "NV" else cls


def _summary(differences: list[str], shown: int = 4) -> str:
    more = len(differences) - shown
    return "; ".join(differences[:shown]) + (f"; and {more} more" if more > 0 else "")


def probe(config: TopoConfig | None = None, *, live=None) -> Topology:
    """The topology of this host.

    Args:
        config: pinned-file options (`topology_file`); None reads `TopoConfig.from_env()`.
        live: a live probe result (`torch_topo._C.HostTopology` or `Topology`) to use instead of
            probing, for tests and for callers that probed already.
    """
    if config is not None and not isinstance(config, TopoConfig):
        raise ValueError(f"probe: config: got {type(config).__name__}, expected a "
                         "torch_topo.TopoConfig or None")
    cfg = TopoConfig.from_env() if config is None else config
    if live is None:
        live_topo = live_probe()
    elif isinstance(live, Topology | _C.HostTopology):
        live_topo = live if isinstance(live, Topology) else Topology(live)
    else:  # Topology's own TypeError did not name `live`
        raise ValueError(f"probe: live: got {type(live).__name__}, expected None, a Topology or "
                         "a torch_topo._C.HostTopology")
    pinned = resolve_pinned_file(cfg)
    if pinned is None:
        return live_topo
    # NCCL adds the NVLink a cloud's file leaves out from NVML at run time; so do we.
    topology = load_topology(pinned, nvlink="complete", live=live_topo)
    # Path classes are left to `doctor`: VMs misreport them, which is why files get pinned.
    differences = pinned_differences(topology, live_topo, paths=False)
    if differences:
        warnings.warn(
            f"pinned topology {pinned}: disagrees with the live probe of this host (pinned vs "
            f"live): {_summary(differences)}; the pinned file is used (unset TORCH_TOPO_FILE / "
            "NCCL_TOPO_FILE to use the live probe)",
            PinnedTopologyWarning,
            stacklevel=2,
        )
    return topology


def cpus_near_gpu(topology: Topology, gpu: int) -> set[int]:
    """CPU ids local to `gpu` (its cpu affinity, else its NUMA node's CPUs); an empty set when
    the topology does not say, in which case callers should not bind.

    Args:
        topology: the host topology.
        gpu: CUDA index on that host.
    """
    if not isinstance(topology, Topology):
        raise ValueError(f"cpus_near_gpu: topology: got {type(topology).__name__}, expected a "
                         "Topology (torch_topo.probe() or load_topology)")
    host = topology.native
    where = host.source or "the topology"
    if not host.gpus:  # the range below would read "0..-1"
        raise ValueError(f"cpus_near_gpu: gpu: got {gpu!r}, but {where} has no GPUs")
    if not is_int_in(gpu, 0, len(host.gpus) - 1):
        raise ValueError(
            f"cpus_near_gpu: gpu: got {gpu!r}, expected 0..{len(host.gpus) - 1} "
            f"({len(host.gpus)} GPUs in {where})"
        )
    info = host.gpus[gpu]
    text = info.cpu_affinity
    if not text and info.numa_node >= 0:
        text = next((n.cpus for n in host.numa_nodes if n.id == info.numa_node), "")
    return set(_C.parse_cpulist(text, f"GPU {gpu} cpu affinity"))
