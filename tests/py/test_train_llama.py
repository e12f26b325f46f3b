# SPDX-License-Identifier: Apache-2.0
"""examples/train_llama.py on 2 and 4 CPU processes for 2 steps: the loss matches the
single-process run of the same model and data (the example computes that reference in rank 0
and compares; the test re-checks the figures it reports), and the checkpoint round trip
restores exactly what was saved. Sequence parallelism runs over "topo": Ulysses, ring attention
with the zigzag layout, both at once (2-D), and the planner's own split (--sp auto) on ranks
playing two DGX-1 hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from planner_support import DGX1

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_llama.py")
# Ranks 0,1 play the NV2 pair (GPUs 0 and 3) of one DGX-1, ranks 2,3 the same pair of another.
TWO_DGX1_PAIRS = {"TORCH_TOPO_FILE": str(DGX1),
                  "TORCH_TOPO_PLAY": "hostA:0,hostA:3,hostB:0,hostB:3"}

# name, ranks, backend, example options, extra environment
CASES = [
    ("dp2_replicate", 2, "gloo", ["--dp", "2"], {}),
    ("tp2_overlap", 2, "gloo", ["--tp", "2"], {}),
    ("dp2_tp2_fsdp", 4, "gloo", ["--dp", "2", "--tp", "2", "--fsdp"], {}),
    ("dp4_ddp", 4, "gloo", ["--dp", "4", "--ddp"], {}),
    ("sp2_ulysses_topo", 2, "topo", ["--sp", "2", "--no-checkpoint"], {}),
    ("sp2_ring_zigzag_topo", 2, "topo", ["--sp", "2", "--ring", "--no-checkpoint"], {}),
    ("sp4_2d_topo", 4, "topo", ["--sp", "4", "--ulysses", "2", "--no-checkpoint"], {}),
    ("sp_auto_topo", 4, "topo", ["--sp", "auto", "--no-checkpoint"], TWO_DGX1_PAIRS),
]
# (Ulysses degree, ring degree) each sequence-parallel case must run with.
SPLITS = {"sp2_ulysses_topo": (2, 1), "sp2_ring_zigzag_topo": (1, 2), "sp4_2d_topo": (2, 2),
          "sp_auto_topo": (2, 2)}


def _run(ranks: int, backend: str, options: list[str], extra_env: dict, tmp_path) -> dict:
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(ranks), EXAMPLE, *options, "--steps", "2", "--check-steps",
           "2", "--backend", backend, "--device", "cpu", "--checkpoint-dir",
           str(tmp_path / "ckpt"), "--json", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TOPO_", "NCCL_TOPO"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", **extra_env)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=170)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.timeout(200)
@pytest.mark.parametrize("name, ranks, backend, options, extra_env", CASES,
                         ids=[c[0] for c in CASES])
def test_example_matches_single_process(name, ranks, backend, options, extra_env, tmp_path):
    r = _run(ranks, backend, options, extra_env, tmp_path)
    assert r["world_size"] == ranks and r["backend"] == backend
    assert len(r["reference_losses"]) == 2
    for got, want in zip(r["losses"], r["reference_losses"], strict=True):
        assert abs(got - want) <= 1e-4, (r["losses"], r["reference_losses"])
    assert r["checkpoint_ok"] is (None if "--no-checkpoint" in options else True)
    assert r["tokens_per_s"] > 0
    if name in SPLITS:
        assert (r["ulysses_degree"], r["ring_degree"]) == SPLITS[name]
    if name == "sp_auto_topo":
        # Ulysses (the mesh's last dimension) inside each played host's NV2 pair, ring across.
        ulysses_groups = {frozenset(row) for plane in r["mesh"] for row in plane}
        assert ulysses_groups == {frozenset({0, 1}), frozenset({2, 3})}, r["mesh"]


def test_bad_mesh_is_refused(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, EXAMPLE, "--tp", "2", "--sp", "2"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert res.returncode == 2
    assert "--tp and --sp" in res.stderr
