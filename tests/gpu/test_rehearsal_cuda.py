# SPDX-License-Identifier: Apache-2.0
"""Many ranks, one GPU (issue 21): every multi-rank CUDA path of "topo" over real NCCL, with
`python -m torch_topo.emulate --one-gpu` running world 2 and 4 as 2 played hosts (a distinct
NCCL_HOSTID per rank). Each result is checked against an independent reference:

- tests/py/rehearsal_worker.py: every c10d collective, dtype and reduce op NCCL supports, flat
  and hierarchical ("always", "never", "auto"), coalesced ops, uneven all-to-all,
  batch_isend_irecv, the overlap ops with real collectives, an init_device_mesh (split from the world: device_id is given) and
  new_group(backend="nccl") subgroups, against results computed locally from every rank's
  inputs (the same program runs over Gloo in tests/py/test_emulate_one_gpu.py);
- Ulysses, ring (zigzag) and 2-D attention at world 4, forward and backward, against
  single-GPU SDPA with autograd (tests/py/rehearsal_attention_worker.py);
- examples/train_llama.py at world 4 on CUDA (DDP, FSDP2 tp2 x dp2 with a DCP round trip,
  Ulysses, ring) against the single-process loss the example computes;
- NCCL hints of init_device_mesh groups split from the world, confirmed from NCCL's own log;
- a rank killed mid-collective: the others fail within the timeout, each reporting an error,
  nobody hangs.

`GPU_CHECK_NCCL_ENV` (space-separated NCCL_NAME=VALUE, set by scripts/gpu_check.sh from what
tests/gpu/nccl_hostid_check.py found working) is passed to every launch as --nccl-env."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, "tests", "py", "rehearsal_worker.py")
EXAMPLE = os.path.join(ROOT, "examples", "train_llama.py")
# Two NVLink-paired GPUs per played host: 8 x V100 in a hybrid cube-mesh (DGX-1).
DGX1 = os.path.join(ROOT, "tests", "data", "nvidia_smi_topo",
                    "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt")


def _launch(world: int, command: list[str], env_extra: dict | None = None,
            timeout_s: float = 120, grace_s: float = 20) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch_topo.emulate", "--one-gpu", "--nodes", "2",
           "--procs-per-node", str(world // 2), "--topology", DGX1, "--timeout-s",
           str(timeout_s), "--grace-s", str(grace_s)]
    for item in os.environ.get("GPU_CHECK_NCCL_ENV", "").split():
        cmd += ["--nccl-env", item]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TOPO_", "NCCL_TOPO"))}
    # A stuck collective fails inside the ranks, naming itself, before the launcher kills them.
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
               TORCH_TOPO_TIMEOUT="60")
    env.update(env_extra or {})
    return subprocess.run(cmd + ["--", *command], capture_output=True, text=True, env=env,
                          timeout=timeout_s + 40)


def _records(out_dir, world: int) -> list[dict]:
    """Each rank's record; a rank that died before writing one (a kill, a watchdog abort)
    reads as {"missing": True}, so the launcher's output still reaches the assertion."""
    recs = []
    for r in range(world):
        path = os.path.join(out_dir, f"rank{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                recs.append(json.load(f))
        else:
            recs.append({"missing": True})
    return recs


@pytest.mark.timeout(200)
@pytest.mark.parametrize("world, hierarchical", [(2, "always"), (2, "auto"), (4, "always"),
                                                 (4, "never")])
def test_every_collective_over_nccl(tmp_path, world, hierarchical):
    proc = _launch(world, [sys.executable, WORKER, "--out", str(tmp_path), "--device", "cuda",
                           "--mesh"], {"TORCH_TOPO_HIERARCHICAL": hierarchical})
    recs = _records(tmp_path, world)
    assert proc.returncode == 0, [r.get("exception", r) for r in recs] + [proc.stderr[-3000:]]
    for rec in recs:
        assert rec["hosts"] == ["node0", "node1"]
        assert rec["failed"] == [] and rec["checked"] >= 100, rec
        assert {d["backend"] for d in rec["mesh"].values()} == {"topo"}
        if hierarchical != "auto":
            want = "hierarchical" if hierarchical == "always" else "flat"
            assert rec["all_reduce_choices"] == [want], rec


@pytest.mark.timeout(200)
def test_sequence_parallel_attention_world4_against_sdpa(tmp_path):
    worker = os.path.join(ROOT, "tests", "py", "rehearsal_attention_worker.py")
    proc = _launch(4, [sys.executable, worker, "--out", str(tmp_path), "--device", "cuda"])
    recs = _records(tmp_path, 4)
    assert proc.returncode == 0, [recs, proc.stderr[-2000:]]
    for rec in recs:
        assert len(rec) == 10 and set(rec.values()) == {"ok"}, rec


# name, example options: world 4, 2 played hosts of an NVLink pair each.
TRAIN_CASES = [
    ("ddp_dp4", ["--dp", "4", "--ddp"]),
    ("fsdp2_tp2_dp2", ["--dp", "2", "--tp", "2", "--fsdp"]),
    ("ulysses_sp4", ["--sp", "4", "--no-checkpoint"]),
    ("ring_sp4", ["--sp", "4", "--ring", "--no-checkpoint"]),
]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("name, options", TRAIN_CASES, ids=[c[0] for c in TRAIN_CASES])
def test_train_llama_world4_matches_single_process(tmp_path, name, options):
    out = tmp_path / "result.json"
    proc = _launch(4, [sys.executable, EXAMPLE, *options, "--steps", "3", "--check-steps", "3",
                       "--backend", "topo", "--device", "cuda", "--checkpoint-dir",
                       str(tmp_path / "ckpt"), "--json", str(out)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["world_size"] == 4 and r["backend"] == "topo"
    # fp32 on one GPU; TF32 and the collectives' summation order move the loss a little.
    for got, want in zip(r["losses"], r["reference_losses"], strict=True):
        assert abs(got - want) <= 2e-3, (r["losses"], r["reference_losses"])
    assert r["checkpoint_ok"] is (None if "--no-checkpoint" in options else True)


_HINTS = """
import json, os, sys, torch, torch.distributed as dist
import torch_topo
from torch_topo import TopoConfig, nccl_hints
rank = int(os.environ["RANK"])
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
dist.init_process_group("topo", device_id=dev)
mesh = torch_topo.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"),
                                   config=TopoConfig(nccl_hints=True))
for dim in ("dp", "tp"):
    t = torch.ones(1024, device=dev)
    dist.all_reduce(t, group=mesh[dim].get_group())
torch.cuda.synchronize()
json.dump({"planned": mesh.topo_plan.nccl_hints, "applied": nccl_hints.applied()},
          open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w"))
dist.destroy_process_group()
"""


@pytest.mark.timeout(200)
def test_nccl_hints_reach_nccl_for_mesh_groups_split_from_the_world(tmp_path):
    # With device_id, DeviceMesh splits its groups from the world (torch_topo.split puts each
    # group's planned NCCL_ALGO in the environment during the split). NCCL itself logs the
    # value it read at communicator init (src/graph/tuning.cc, INFO under NCCL_ENV).
    proc = _launch(4, [sys.executable, "-c", _HINTS, str(tmp_path)],
                   {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ENV"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = _records(tmp_path, 4)
    if not any(rec["planned"] for rec in recs):
        pytest.skip(f"the plan gave no NCCL hint for this mesh: nothing to confirm ({recs[0]})")
    text = proc.stdout + proc.stderr
    for rank, rec in enumerate(recs):
        assert rec["applied"], (rank, rec)  # a planned hint was applied on every rank
        for _ranks, variables in rec["applied"]:
            algo = variables.get("NCCL_ALGO")
            if algo:
                assert f"NCCL_ALGO set by environment to {algo}" in text, (rank, rec)


_KILL = """
import os, signal, time, torch, torch.distributed as dist
import torch_topo
rank = int(os.environ["RANK"])
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
dist.init_process_group("topo", device_id=dev)
dist.barrier()
torch.cuda.synchronize()
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
t0 = time.monotonic()
try:
    x = torch.ones(16 << 20, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {rank}: no error after {time.monotonic() - t0:.1f} s", flush=True)
except Exception as exc:
    print(f"rank {rank}: {type(exc).__name__} after {time.monotonic() - t0:.1f} s: "
          f"{str(exc)[:300]}", flush=True)
raise SystemExit(3)
"""


@pytest.mark.timeout(200)
def test_killed_rank_fails_the_others_within_the_timeout():
    timeout_s = 30
    start = time.monotonic()
    # The launcher's grace outlasts the collective timeout: survivors must end on their own.
    proc = _launch(4, [sys.executable, "-c", _KILL],
                   {"TORCH_TOPO_TIMEOUT": str(timeout_s), "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"},
                   timeout_s=150, grace_s=100)
    elapsed = time.monotonic() - start
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert "rank 1 failed with exit code 137" in text, text[-3000:]
    # Each survivor ends by an error or NCCL's watchdog abort within the timeout (plus
    # start-up), never by the launcher killing it (a hang).
    assert "killing ranks" not in text, text[-3000:]
    assert elapsed < 2 * timeout_s + 40, (elapsed, text[-3000:])
    # ... and says why: its own exception, or the NCCL watchdog's report (c10d's log prefix
    # names the rank) before it ends the process.
    for rank in (0, 2, 3):
        assert f"rank {rank}: no error" not in text, text[-3000:]
        assert (re.search(rf"rank {rank}: \w+ after", text)
                or re.search(rf"Rank {rank}\][^\n]*(NCCL|[Ww]atchdog|[Tt]imeout|[Aa]bort|error)",
                             text)), (rank, text[-3000:])
