# SPDX-License-Identifier: Apache-2.0
"""benchmarks/soak.py: a short soak on local processes passes, and its checks catch a wrong
result (so a passing soak means something)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import soak  # noqa: E402


def _soak_backend() -> str:
    # The soak exists for "topo"; before the backend registers, the same run on gloo still
    # exercises the generator and the checks end to end.
    import torch_topo  # noqa: F401

    return "topo" if "topo" in dist.Backend.backend_list else "gloo"


@pytest.mark.timeout(180)
def test_short_soak_on_local_processes(tmp_path):
    backend = _soak_backend()
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "soak.py"), "--count", "60",
         "--local-procs", "3", "--backend", backend, "--timeout-s", "60", "--json", str(out)],
        capture_output=True, text=True, timeout=170, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert (result["backend"], result["collectives"], result["checked"], result["failed"]) == (
        backend, 60, 180, 0)
    assert "60 collectives, 180 rank results checked, 0 failed" in proc.stdout


@pytest.mark.parametrize("options, message", [
    (["--count", "0"], "argument --count: got 0, expected >= 1"),
    (["--local-procs", "-1"], "argument --local-procs: got -1, expected >= 1"),
    # Started as many processes as asked, until the machine gave out.
    (["--local-procs", "100000"], "argument --local-procs: got 100000, expected at most 4096 "
                                  "(each a process, started at once)"),
    (["--count", "many"], "argument --count: got 'many', expected an integer"),
    (["--timeout-s", "0"], "argument --timeout-s: got 0, expected > 0"),
    (["--timeout-s", "nan"], "argument --timeout-s: got nan, expected > 0"),
    # A traceback once the soak had run.
    (["--json", "/nonexistent/soak.json", "--count", "2", "--local-procs", "1"],
     "--json: no folder to write '/nonexistent/soak.json' into"),
    # A folder passed its folder check, and open() failed once the soak had run.
    (["--json", "/tmp", "--count", "2", "--local-procs", "1"],
     "--json: '/tmp' is a folder, expected a file name"),
])
def test_bad_option_is_one_line_naming_it(options, message):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "soak.py"), *options],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"soak.py: error: {message}"), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


@pytest.fixture
def single_rank_group(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1,
                            timeout=timedelta(seconds=30))
    yield
    dist.barrier()  # no rank tears down while a peer still reads from it
    dist.destroy_process_group()


def test_checks_catch_a_wrong_result(single_rank_group, monkeypatch):
    case = {"op": "all_reduce", "dtype": torch.int32, "numel": 17, "redop": dist.ReduceOp.SUM,
            "root": 0}
    assert soak.run_step(7, 0, case, rank=0, world=1)
    real = dist.all_reduce

    def off_by_one(t, *args, **kwargs):
        work = real(t, *args, **kwargs)
        t[3] += 1
        return work

    monkeypatch.setattr(dist, "all_reduce", off_by_one)
    assert not soak.run_step(7, 0, case, rank=0, world=1)


def test_reference_reductions_by_hand():
    a, b = torch.tensor([1, -2, 3], dtype=torch.int64), torch.tensor([4, 2, -1], dtype=torch.int64)
    R = dist.ReduceOp
    assert soak.reduce_local([a, b], R.SUM).tolist() == [5, 0, 2]
    assert soak.reduce_local([a, b], R.PRODUCT).tolist() == [4, -4, -3]
    assert soak.reduce_local([a, b], R.MAX).tolist() == [4, 2, 3]
    assert soak.reduce_local([a, b], R.BXOR).tolist() == [1 ^ 4, -2 ^ 2, 3 ^ -1]
