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
    doc = _doc_with_affinity("60000-60003")
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


@pytest.mark.parametrize("args,kwargs,match", [
    # Each bound this process before (enabled="no" is truthy, True read as rank 1), or failed
    # in pybind11 (rank 1.0) or with an AttributeError (no cluster).
    ((0,), {"enabled": "no"}, r"apply_numa_binding: enabled: got 'no', expected True or False"),
    ((True,), {}, r"apply_numa_binding: rank: got True, expected an int in 0..7"),
    ((1.0,), {}, r"apply_numa_binding: rank: got 1.0"),
    ((99,), {"enabled": False}, r"apply_numa_binding: rank: got 99"),
])
def test_arguments_are_checked_before_binding(args, kwargs, match):
    cluster = resolve_cluster(DGX1)
    before = set(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match=match):
        apply_numa_binding(cluster, *args, environ={}, **kwargs)
    with pytest.raises(ValueError, match=r"apply_numa_binding: cluster: got NoneType"):
        apply_numa_binding(None, 0, environ={})
    assert set(os.sched_getaffinity(0)) == before


# A one-rank "topo" world whose GPU the topology file puts next to CPU 1 only (this machine has
# CPUs 0-1): a thread started before init_process_group and the threads Gloo starts afterwards
# must all end up on CPU 1, with memory preferred on node 0. Prints every thread's
# Cpus_allowed_list, the memory policy mode, and the binding lines printed on stderr.
INIT_BIND = """
import ctypes, glob, io, json, os, sys, threading
import torch, torch.distributed as dist
import torch_topo
stop = threading.Event()
early = threading.Thread(target=stop.wait)
early.start()
err = io.StringIO()
sys.stderr, real_err = err, sys.stderr
cfg = torch_topo.TopoConfig(bind_numa=True, topology_file=FILE, play="h:0")
dist.init_process_group("topo", store=dist.FileStore(STORE, 1), rank=0, world_size=1,
                        pg_options=cfg)
dist.all_reduce(torch.ones(4))
dist.new_group(backend="topo", pg_options=cfg)
mesh = torch_topo.init_device_mesh("cpu", (1,), mesh_dim_names=("dp",), config=cfg)
sys.stderr = real_err
lists = {}
for status in glob.glob("/proc/self/task/*/status"):
    with open(status) as f:
        line = next(l for l in f if l.startswith("Cpus_allowed_list:"))
    lists[status.split("/")[4]] = line.split()[1]
mode = ctypes.c_int(-1)
libc = ctypes.CDLL(None, use_errno=True)
if os.uname().machine == "x86_64":
    libc.syscall(239, ctypes.byref(mode), None, ctypes.c_ulong(0), None, ctypes.c_ulong(0))
stop.set(); early.join()
print(json.dumps({"lists": lists, "early": str(early.native_id), "mode": mode.value,
                  "report": mesh.topo_numa_report.action,
                  "printed": [l for l in err.getvalue().splitlines() if "numa binding" in l]}))
dist.destroy_process_group()
"""


def _one_gpu_file(tmp_path, cpus: str) -> str:
    from torch_topo.topology import load_topology

    doc = json.loads(load_topology(str(DGX1)).to_json())
    for gpu in doc["gpus"]:
        gpu["cpu_affinity"], gpu["numa_node"] = cpus, 0
    path = tmp_path / "near_cpu.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _init_bind(tmp_path, cpus: set[int] | None = None) -> dict:
    code = INIT_BIND.replace("FILE", repr(_one_gpu_file(tmp_path, "1"))).replace(
        "STORE", repr(str(tmp_path / "store")))
    return _run(code, cpus)


@pytest.mark.timeout(180)
@pytest.mark.skipif(_online() != {0, 1} or set(os.sched_getaffinity(0)) != {0, 1},
                    reason="emulates 'nearest CPUs' as CPU 1 of a 2-CPU machine, unbound")
def test_init_process_group_binds_every_thread(tmp_path):
    out = _init_bind(tmp_path)
    assert len(out["lists"]) >= 3  # main, the early thread, Gloo's threads
    assert out["early"] in out["lists"]
    assert set(out["lists"].values()) == {"1"}, out["lists"]
    if os.uname().machine == "x86_64":  # where the script asks get_mempolicy
        assert out["mode"] == 1  # MPOL_PREFERRED (node 0, the GPU's in the file)
    assert out["report"] == "bound"
    assert len(out["printed"]) == 1 and "bound to [1]" in out["printed"][0], out["printed"]


@pytest.mark.timeout(180)
@pytest.mark.skipif(_online() != {0, 1}, reason="needs exactly CPUs 0-1")
def test_init_process_group_respects_a_launcher_binding(tmp_path):
    out = _init_bind(tmp_path, cpus={0})  # as `taskset -c 0` would start it
    assert set(out["lists"].values()) == {"0"}, out["lists"]
    assert out["report"] == "launcher"
    assert len(out["printed"]) == 1 and "already restricted to 1 of 2" in out["printed"][0]
