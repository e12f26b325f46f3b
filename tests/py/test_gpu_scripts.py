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
                                    "rehearsal_gpu.py", "rehearsal_ops_gpu.py"])
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
REHEARSAL_OPS = os.path.join(ROOT, "benchmarks", "rehearsal_ops_gpu.py")


@pytest.mark.timeout(240)
def test_rehearsal_benchmark_tables_over_gloo(tmp_path):
    # The GPU benchmark's launches and table with Gloo ranks: every mode measured per size.
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
        for mode in ("never", "auto", "always"):
            assert r[f"topo_{mode}_us"] > 0
            assert r[f"ratio_{mode}"] == pytest.approx(r["inner_us"] / r[f"topo_{mode}_us"])
    assert "# all_reduce, world 2 (2 played hosts), one GPU: gloo vs topo" in proc.stdout


@pytest.mark.timeout(240)
def test_rehearsal_ops_benchmark_over_gloo(tmp_path):
    # The ops benchmark's launches, rank programs and tables with Gloo ranks at world 2: the
    # overlap figures are consistent with the hidden-fraction formula, topo's attention matches
    # SDPA, and torch's CUDA-only features are printed rows with their reason, not a crash.
    out = tmp_path / "ops.json"
    proc = subprocess.run([sys.executable, REHEARSAL_OPS, "--allow-cpu", "--worlds", "2",
                           "--quick", "--json", str(out)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=220)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["failures"] == []
    overlap = report["overlap"]
    assert [r["what"].split(",")[0] for r in overlap] == [
        "topo matmul_reduce_scatter", "topo matmul_reduce_scatter",
        "torch symm_mem fused_matmul_reduce_scatter"]
    fixed = overlap[1]
    assert fixed["what"] == "topo matmul_reduce_scatter, 4 chunk(s), fixed"
    shorter = min(fixed["compute_ms"], fixed["comm_ms"])
    assert fixed["hidden_fraction"] == pytest.approx(
        (fixed["compute_ms"] + fixed["comm_ms"] - fixed["ms"]) / shorter)
    assert overlap[2]["not_available"] == "needs CUDA tensors, this run is on cpu"
    assert "| not available: needs CUDA tensors, this run is on cpu" in proc.stdout
    ulysses, ring, cp = report["attention"]
    for row in (ulysses, ring):
        assert row["ms"] > 0 and row["cp_over_this"] is None, row
        assert max(row["max_abs_diff"].values()) < 1e-5, row
    assert cp["method"] == "torch context_parallel"
    assert "does not have a sharding strategy" in cp["not_available"]  # CPU SDPA: torch's refusal


def test_rehearsal_ops_rows_take_the_worst_rank():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from rehearsal_ops_gpu import attention_rows

    diff = lambda x: {"out": x, "dq": 2 * x, "dk": 0.0, "dv": 0.0}  # noqa: E731
    records = [{"shape": "s", "topo ulysses": {"ms": 4.0, "max_abs_diff": diff(1e-3)},
                "topo ring zigzag": {"ms": 2.0, "max_abs_diff": diff(1e-4)},
                "torch context_parallel": {"ms": 8.0, "max_abs_diff": diff(0.0)}},
               {"shape": "s", "topo ulysses": {"ms": 4.0, "max_abs_diff": diff(3e-3)},
                "topo ring zigzag": {"not_available": "RuntimeError: boom"}}]
    ulysses, ring, cp = attention_rows(2, records)
    assert ulysses["max_abs_diff"] == diff(3e-3) and ulysses["cp_over_this"] == 2.0
    assert ring["not_available"] == "RuntimeError: boom"
    assert cp["not_available"] == "did not finish"  # rank 1 never wrote it


@pytest.mark.parametrize("script", [REHEARSAL, REHEARSAL_OPS, HOSTID_CHECK])
def test_scripts_refuse_world_sizes_they_cannot_play(script):
    proc = subprocess.run([sys.executable, script, "--worlds", "2", "3"], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 2
    assert "--worlds: got 3, expected even sizes >= 2" in proc.stderr


def test_rehearsal_ops_leaves_out_symmetric_memory_after_it_did_not_finish(tmp_path,
                                                                          monkeypatch):
    # A rank stuck in torch's symmetric-memory rendezvous holds the launch until its timeout:
    # the next world runs without it and says why.
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import argparse

    import rehearsal_ops_gpu as bench

    programs = []

    def launch(world, program, timeout_s, **env):
        programs.append(program)
        run = {"shape": "x", "chunks": 4, "reason": "fixed", "t_compute": 1e-3, "t_comm": 1e-3,
               "t_overlapped": 1.5e-3, "hidden_fraction": 0.5}
        with open(program[program.index("--json") + 1], "w") as f:
            json.dump(run, f)  # what the worker writes before it tries symmetric memory
        return f"world {world}: exit 124"

    monkeypatch.setattr(bench, "_launch", launch)
    args = argparse.Namespace(quick=True, timeout_s=1, symm_mem_stuck=None)
    first, _ = bench.overlap_part(args, 2, "cuda", str(tmp_path))
    second, _ = bench.overlap_part(args, 4, "cuda", str(tmp_path))
    assert "--symm-mem" in programs[0] and "--symm-mem" not in programs[1]
    assert first[-1]["not_available"] == "did not finish"
    assert second[-1]["not_available"] == "left out: did not finish at world 2"


@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_gpu_prepare_refuses_a_build_switch_other_than_0_or_1(value):
    # Anything but "1" skipped the build, so GPU_PREPARE_BUILD=yes prepared no module at all.
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_prepare.sh")],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, GPU_PREPARE_BUILD=value))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"gpu_prepare: GPU_PREPARE_BUILD: got '{value}', expected 0 or 1\n"
