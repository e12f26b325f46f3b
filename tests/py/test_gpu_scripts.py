# SPDX-License-Identifier: Apache-2.0
"""The GPU scripts on a machine without CUDA: each imports, says so, writes a JSON that says so
and exits 0 (scripts/gpu_check.sh relies on both), so a CPU-only checkout can run them; and
their argument handling."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the machine without CUDA")
@pytest.mark.parametrize("script", ["sequence_parallel_gpu.py", "overlap_gpu.py",
                                    "rehearsal_gpu.py"])
def test_gpu_script_without_cuda_says_so(tmp_path, script):
    out = tmp_path / "figures.json"
    env = dict(os.environ, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), "--quick",
                           "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no CUDA device here" in proc.stdout
    assert json.loads(out.read_text()) == {"skipped": "no CUDA device"}


HOSTID_CHECK = os.path.join(ROOT, "tests", "gpu", "nccl_hostid_check.py")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this checks the machine without CUDA")
def test_hostid_check_without_cuda_says_so(tmp_path):
    out = tmp_path / "hostid.json"
    env = dict(os.environ, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, HOSTID_CHECK, "--json", str(out)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no CUDA device here" in proc.stdout
    assert json.loads(out.read_text()) == {"skipped": "no CUDA device"}


REHEARSAL = os.path.join(ROOT, "benchmarks", "rehearsal_gpu.py")


@pytest.mark.timeout(240)
def test_rehearsal_benchmark_tables_over_gloo(tmp_path):
    # The GPU benchmark's launches and table with Gloo ranks: both modes measured per size.
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, REHEARSAL, "--allow-cpu", "--worlds", "2", "--ops",
                           "all_reduce", "--min-bytes", "4K", "--max-bytes", "16K", "--reps",
                           "1", "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=220)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["world"], r["collective"], r["bytes"]) for r in rows] == [
        (2, "all_reduce", 4096), (2, "all_reduce", 16384)]
    for r in rows:
        for mode in ("never", "always"):
            assert r[f"topo_{mode}_us"] > 0
            assert r[f"ratio_{mode}"] == pytest.approx(r["inner_us"] / r[f"topo_{mode}_us"])
    assert "# all_reduce, world 2 (2 played hosts), one GPU: gloo vs topo" in proc.stdout


@pytest.mark.parametrize("script", [REHEARSAL, HOSTID_CHECK])
def test_scripts_refuse_world_sizes_they_cannot_play(script):
    proc = subprocess.run([sys.executable, script, "--worlds", "2", "3"], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 2
    assert "--worlds: got 3, expected even sizes >= 2" in proc.stderr
