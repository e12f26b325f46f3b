# SPDX-License-Identifier: Apache-2.0
"""Tests of torch_topo.numa on CPU: a topology file plays the GPUs; binding intersects the
GPU's CPUs with this machine's, defers to a launcher that already bound, and reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from planner_support import DGX1

from torch_topo import _C
from torch_topo.numa import apply_numa_binding, parse_cpulist
from torch_topo.plan import resolve_cluster


def _online() -> set[int]:
    with open("/sys/devices/system/cpu/online") as f:
        return parse_cpulist(f.read())


def _run(code: str, cpus: set[int] | None = None) -> dict:
    """Runs `code` in a fresh interpreter (affinity changes stay there); it prints JSON."""
    prefix = f"import os; os.sched_setaffinity(0, {sorted(cpus)!r})\n" if cpus else ""
    out = subprocess.run([sys.executable, "-c", prefix + textwrap.dedent(code)], check=True,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return json.loads(out.stdout.strip().splitlines()[-1])


BIND = """
import json, dataclasses
from torch_topo.numa import apply_numa_binding
from torch_topo.plan import resolve_cluster
cluster = resolve_cluster(DOC)
report = apply_numa_binding(cluster, RANK, environ={})
print(json.dumps(dataclasses.asdict(report)))
"""


def _doc_with_affinity(cpulist: str) -> str:
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1)))
    for g in doc["hosts"][0]["gpus"]:
        g["cpu_affinity"] = cpulist
    return json.dumps(doc)


def test_parse_cpulist():
    assert parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    with pytest.raises(ValueError, match="cpulist"):
        parse_cpulist("3-1")


@pytest.mark.skipif(set(os.sched_getaffinity(0)) != _online(), reason="this process is already bound")
def test_binds_to_gpu_cpus_that_exist_here():
    # DGX-1 GPU 0 sits on CPUs 0-11,24-35; this machine may have fewer: bind to the overlap.
    report = _run(BIND.replace("DOC", repr(str(DGX1))).replace("RANK", "0"))
    want = parse_cpulist("0-11,24-35") & _online()
    assert report["action"] == "bound" and set(report["cpus"]) == want
    assert report["numa_node"] == 0


@pytest.mark.skipif(set(os.sched_getaffinity(0)) != _online(), reason="this process is already bound")
def test_reports_when_no_cpu_overlaps():
    doc = _doc_with_affinity("100000-100003")
    report = _run(BIND.replace("DOC", repr(doc)).replace("RANK", "1"))
    assert report["action"] == "no_overlap"
    assert set(report["cpus"]) == _online()  # left unchanged


@pytest.mark.skipif(len(_online()) < 2, reason="needs two CPUs to restrict the affinity")
def test_leaves_a_launcher_binding_alone():
    first = min(_online())
    report = _run(BIND.replace("DOC", repr(str(DGX1))).replace("RANK", "0"), cpus={first})
    assert report["action"] == "launcher" and report["cpus"] == [first]


def test_launcher_env_and_disabled():
    cluster = resolve_cluster(DGX1)
    before = set(os.sched_getaffinity(0))
    if before == _online():
        report = apply_numa_binding(cluster, 0, environ={"SLURM_CPU_BIND": "cores"})
        assert report.action == "launcher" and "SLURM_CPU_BIND" in report.reason
    report = apply_numa_binding(cluster, 0, enabled=False)
    assert report.action == "disabled"
    assert set(os.sched_getaffinity(0)) == before
    with pytest.raises(ValueError, match="rank"):
        apply_numa_binding(cluster, 99)
