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
@pytest.mark.parametrize("script", ["sequence_parallel_gpu.py", "overlap_gpu.py"])
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


def test_hostid_check_refuses_world_sizes_it_cannot_play():
    proc = subprocess.run([sys.executable, HOSTID_CHECK, "--worlds", "2", "3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--worlds: got 3, expected even sizes >= 2" in proc.stderr
