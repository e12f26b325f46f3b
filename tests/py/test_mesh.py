# SPDX-License-Identifier: Apache-2.0
"""Tests of torch_topo.init_device_mesh on 4 CPU processes playing GPUs of a topology file:
the DeviceMesh carries the planned groups and works with DTensor and FSDP2. The process-group
backend is a parameter (TORCH_TOPO_TEST_BACKEND, default gloo) so the same test runs on "topo"."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from planner_support import DGX1

BACKEND = os.environ.get("TORCH_TOPO_TEST_BACKEND", "gloo")
WORKER = pathlib.Path(__file__).with_name("mesh_worker.py")


def _launch(tmp_path, world: int, play: str) -> list[dict]:
    store = tmp_path / "store"
    procs, outs = [], []
    for rank in range(world):
        out = tmp_path / f"rank{rank}.json"
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world),
               "PYTHONPATH": os.pathsep.join(sys.path)}
        env.pop("TORCH_TOPO_FILE", None)
        procs.append(subprocess.Popen(
            [sys.executable, str(WORKER), str(store), str(out), str(DGX1), play, BACKEND],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs.append(out)
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=240)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, log in zip(procs, logs, strict=False):
        assert p.returncode == 0, log[-3000:]
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.timeout(300)
def test_four_ranks_playing_dgx1_get_nv2_pairs(tmp_path):
    # Ranks 0-3 play DGX-1 GPUs 0-3. Among them only 0-3 and 1-2 are NV2 pairs that cover all
    # four (read off the file): tp must be {0,3} and {1,2}; contiguous would pair 0-1 (NV1).
    results = _launch(tmp_path, 4, "")
    expected_tp = {frozenset({0, 3}), frozenset({1, 2})}
    for r in results:
        assert frozenset(r["tp"]) in expected_tp and r["rank"] in r["tp"]
        assert r["mesh"] == r["plan_mesh"] == results[0]["mesh"]
        assert r["dtensor_ok"] and r["fsdp_ok"]
        assert r["numa"] == "disabled"
    # dp joins the ranks holding the same tp coordinate.
    assert {frozenset(r["dp"]) for r in results} == {frozenset(c) for c in zip(*results[0]["mesh"], strict=False)}
