# SPDX-License-Identifier: Apache-2.0
"""NUMA binding of a rank to the CPUs nearest its GPU (`TopoConfig(bind_numa=True)`).

The launcher wins: when the process affinity is already narrower than the online CPUs
(`torchrun --numa-binding`, `numactl`, `taskset`, a batch system's cpuset) or a batch system
says it bound the task, nothing is changed and the report says why. The CPU list comes from
the topology (the GPU's CPU affinity, else its NUMA node's cpulist) and is intersected with the
CPUs that exist here, so a topology file playing GPUs of a bigger machine still binds sensibly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["NumaBindingReport", "apply_numa_binding", "parse_cpulist"]

# Batch systems that bind tasks themselves and say so in the environment.
_LAUNCHER_BIND_VARS = ("SLURM_CPU_BIND", "OMPI_MCA_hwloc_base_binding_policy")


def parse_cpulist(text: str) -> set[int]:
    """ "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; ValueError on malformed text."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            start, end = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"cpulist: got {part!r} in {text!r}, expected N or N-M") from None
        if end < start:
            raise ValueError(f"cpulist: got {part!r}, expected a range with start <= end")
        cpus.update(range(start, end + 1))
    return cpus


def _online_cpus() -> set[int]:
    try:
        with open("/sys/devices/system/cpu/online") as f:
            return parse_cpulist(f.read())
    except OSError:
        return set(range(os.cpu_count() or 1))


@dataclass(kw_only=True)
class NumaBindingReport:
    """What `apply_numa_binding` did and why."""

    action: Literal["bound", "launcher", "unavailable", "no_overlap", "disabled"]
    """bound: affinity set here; launcher: left as the launcher set it; unavailable: the
    topology gives no CPUs for this GPU; no_overlap: none of those CPUs exist on this machine;
    disabled: bind_numa is off."""
    rank: int = -1
    numa_node: int = -1
    cpus: list[int] = field(default_factory=list)
    """The affinity after the call."""
    wanted: list[int] = field(default_factory=list)
    """CPUs the topology puts nearest the GPU (before intersecting with this machine)."""
    reason: str = ""

    def __str__(self) -> str:
        return f"numa binding (rank {self.rank}): {self.action}: {self.reason}"


def _launcher_binding(online: set[int], current: set[int], environ) -> str:
    if current != online:
        return (f"affinity already restricted to {len(current)} of {len(online)} online CPUs "
                "(torchrun --numa-binding, numactl, taskset or a cpuset)")
    for var in _LAUNCHER_BIND_VARS:
        value = environ.get(var, "")
        if value and value.lower() not in ("none", "no", "off"):
            return f"{var}={value} says the launcher binds tasks"
    return ""


def apply_numa_binding(cluster, rank: int, *, enabled: bool = True, environ=None) -> NumaBindingReport:
    """Binds this process to the CPUs nearest the GPU `rank` runs on in `cluster`.

    Args:
        cluster: a `_C.PlannerCluster` (see `torch_topo.plan.resolve_cluster`).
        rank: this process's global rank.
        enabled: `TopoConfig.bind_numa`; False only reports.
        environ: environment to inspect (default os.environ).
    """
    env = os.environ if environ is None else environ
    current = set(os.sched_getaffinity(0))
    if not enabled:
        return NumaBindingReport(action="disabled", rank=rank, cpus=sorted(current),
                                 reason="TopoConfig.bind_numa is False")
    if not 0 <= rank < cluster.world_size:
        raise ValueError(f"rank: got {rank}, expected 0..{cluster.world_size - 1}")
    info = cluster.rank_cpus(rank)
    text = info["cpu_affinity"] or info["numa_cpus"]
    base = dict(rank=rank, numa_node=info["numa_node"])
    if not text:
        return NumaBindingReport(action="unavailable", cpus=sorted(current), **base,
                                 reason="the topology gives no CPU affinity or NUMA cpulist "
                                        f"for GPU {cluster.rank_gpu(rank)}")
    wanted = parse_cpulist(text)
    online = _online_cpus()
    launcher = _launcher_binding(online, current, env)
    if launcher:
        return NumaBindingReport(action="launcher", cpus=sorted(current), wanted=sorted(wanted),
                                 reason=launcher + "; left unchanged", **base)
    target = wanted & online
    if not target:
        return NumaBindingReport(action="no_overlap", cpus=sorted(current), wanted=sorted(wanted),
                                 reason=f"none of CPUs {text} exist here (online: "
                                        f"{sorted(online)}); affinity left unchanged", **base)
    os.sched_setaffinity(0, target)
    return NumaBindingReport(action="bound", cpus=sorted(os.sched_getaffinity(0)),
                             wanted=sorted(wanted), **base,
                             reason=f"bound to {sorted(target)} (NUMA node {info['numa_node']}, "
                                    f"topology cpulist {text})")
