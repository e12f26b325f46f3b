# SPDX-License-Identifier: Apache-2.0
"""NUMA binding of a rank to the CPUs nearest its GPU (`TopoConfig(bind_numa=True)`).

The "topo" backend binds at init_process_group (`bind_at_init`, from the world group's creator,
before the inner backends start their threads); `init_device_mesh` binds only in a world that
did not (another backend) and otherwise reports the init-time binding. Binding covers the
whole process: every existing thread's affinity (threads created later inherit it) and, where
the kernel offers it, a preferred memory node for the calling thread and the threads it starts.

The launcher wins: when the process affinity is already narrower than the online CPUs
(`torchrun --numa-binding`, `numactl`, `taskset`, a batch system's cpuset) or a batch system
says it bound the task, nothing is changed and the report says why. The CPU list comes from
the topology (the GPU's CPU affinity, else its NUMA node's cpulist) and is intersected with the
CPUs that exist here, so a topology file playing GPUs of a bigger machine still binds sensibly.
What was done is printed once per process.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["NumaBindingReport", "apply_numa_binding", "bind_at_init", "init_report",
           "parse_cpulist"]

# Batch systems that bind tasks themselves and say so in the environment.
_LAUNCHER_BIND_VARS = ("SLURM_CPU_BIND", "OMPI_MCA_hwloc_base_binding_policy")
# set_mempolicy(2): syscall numbers by machine, and the "preferred node" mode.
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 260}
_MPOL_PREFERRED = 1
_init_report: NumaBindingReport | None = None


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
    memory: str = ""
    """The memory policy set (e.g. "preferred node 0"), or why none was."""
    threads: int = 0
    """Threads whose affinity was set (all of the process's at the time)."""

    def __str__(self) -> str:
        memory = f"; memory: {self.memory}" if self.memory else ""
        return f"numa binding (rank {self.rank}): {self.action}: {self.reason}{memory}"


def _launcher_binding(online: set[int], current: set[int], environ) -> str:
    if current != online:
        return (f"affinity already restricted to {len(current)} of {len(online)} online CPUs "
                "(torchrun --numa-binding, numactl, taskset or a cpuset)")
    for var in _LAUNCHER_BIND_VARS:
        value = environ.get(var, "")
        if value and value.lower() not in ("none", "no", "off"):
            return f"{var}={value} says the launcher binds tasks"
    return ""


def _bind_threads(cpus: set[int]) -> int:
    """Sets the affinity of every thread of this process; returns how many were set."""
    done = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
            done += 1
        except ProcessLookupError:  # the thread ended meanwhile
            pass
    return done


def _prefer_memory_node(node: int) -> str:
    """Makes `node` the calling thread's preferred memory node (inherited by threads it starts
    later); returns what was done, or why nothing was."""
    if node < 0:
        return "no NUMA node known for this GPU"
    if not os.path.isdir(f"/sys/devices/system/node/node{node}"):
        return f"NUMA node {node} does not exist here; policy left unchanged"
    number = _SET_MEMPOLICY.get(platform.machine())
    if number is None:
        return f"set_mempolicy not wired for {platform.machine()}; policy left unchanged"
    bits = ctypes.sizeof(ctypes.c_ulong) * 8
    mask = (ctypes.c_ulong * (node // bits + 1))()
    mask[node // bits] = 1 << (node % bits)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, _MPOL_PREFERRED, mask, ctypes.c_ulong(len(mask) * bits + 1)) != 0:
        return f"set_mempolicy failed: {os.strerror(ctypes.get_errno())}; policy left unchanged"
    return f"preferred node {node}"


def _bind(wanted_text: str, numa_node: int, rank: int, gpu: str, environ) -> NumaBindingReport:
    current = set(os.sched_getaffinity(0))
    base = dict(rank=rank, numa_node=numa_node)
    if not wanted_text:
        return NumaBindingReport(action="unavailable", cpus=sorted(current), **base,
                                 reason="the topology gives no CPU affinity or NUMA cpulist "
                                        f"for {gpu}")
    wanted = parse_cpulist(wanted_text)
    online = _online_cpus()
    launcher = _launcher_binding(online, current, environ)
    if launcher:
        return NumaBindingReport(action="launcher", cpus=sorted(current), wanted=sorted(wanted),
                                 reason=launcher + "; left unchanged", **base)
    target = wanted & online
    if not target:
        return NumaBindingReport(action="no_overlap", cpus=sorted(current), wanted=sorted(wanted),
                                 reason=f"none of CPUs {wanted_text} exist here (online: "
                                        f"{sorted(online)}); affinity left unchanged", **base)
    threads = _bind_threads(target)
    memory = _prefer_memory_node(numa_node)
    return NumaBindingReport(action="bound", cpus=sorted(os.sched_getaffinity(0)),
                             wanted=sorted(wanted), threads=threads, memory=memory, **base,
                             reason=f"{threads} threads bound to {sorted(target)} (NUMA node "
                                    f"{numa_node}, topology cpulist {wanted_text})")


def apply_numa_binding(cluster, rank: int, *, enabled: bool = True, environ=None) -> NumaBindingReport:
    """Binds all threads of this process to the CPUs nearest the GPU `rank` runs on in
    `cluster`, and prefers that GPU's NUMA node for the calling thread's memory.

    Args:
        cluster: a `_C.PlannerCluster` (see `torch_topo.plan.resolve_cluster`).
        rank: this process's global rank.
        enabled: `TopoConfig.bind_numa`; False only reports.
        environ: environment to inspect (default os.environ).
    """
    from torch_topo import _C
    from torch_topo.validation import is_int_in

    # enabled="no" bound the threads; rank 1.0 failed in pybind11, True bound as rank 1.
    if not isinstance(enabled, bool):
        raise ValueError(f"apply_numa_binding: enabled: got {enabled!r}, expected True or False")
    if not isinstance(cluster, _C.PlannerCluster):
        raise ValueError(f"apply_numa_binding: cluster: got {type(cluster).__name__}, expected a "
                         "torch_topo._C.PlannerCluster (torch_topo.plan.resolve_cluster)")
    if not is_int_in(rank, 0, cluster.world_size - 1):
        raise ValueError(f"apply_numa_binding: rank: got {rank!r}, expected an int in "
                         f"0..{cluster.world_size - 1}")
    env = os.environ if environ is None else environ
    if not enabled:
        return NumaBindingReport(action="disabled", rank=rank,
                                 cpus=sorted(os.sched_getaffinity(0)),
                                 reason="TopoConfig.bind_numa is False")
    info = cluster.rank_cpus(rank)
    return _bind(info["cpu_affinity"] or info["numa_cpus"], info["numa_node"], rank,
                 f"GPU {cluster.rank_gpu(rank)}", env)


def bind_at_init(config, rank: int, group_size: int, play_index: int,
                 environ=None) -> NumaBindingReport | None:
    """Binds this process to its GPU's CPUs from its own topology record (probe, or the pinned
    file it plays), once per process: called by the world group's creator before any inner
    backend exists. Returns the report (also printed to stderr), or None with bind_numa off."""
    global _init_report
    if not config.bind_numa:
        return None
    from torch_topo.cluster import own_record
    from torch_topo.probe import resolve_pinned_file

    text, node, gpu = "", -1, -1
    # A rank that plays a host without a topology file has no GPU whose CPUs are known.
    if resolve_pinned_file(config) is not None or not config.effective("play"):
        record = own_record(config, group_size, play_index)
        gpu = record["local_device"]
    if gpu >= 0:
        host = record["topology"].native
        info = host.gpus[gpu]
        node = info.numa_node
        text = info.cpu_affinity or next((n.cpus for n in host.numa_nodes if n.id == node), "")
    report = _bind(text, node, rank, f"GPU {gpu}" if gpu >= 0 else "a CPU-only rank",
                   os.environ if environ is None else environ)
    _init_report = report
    print(f"torch_topo: {report}", file=sys.stderr, flush=True)
    return report


def init_report() -> NumaBindingReport | None:
    """The binding `bind_at_init` did in this process, or None."""
    return _init_report
