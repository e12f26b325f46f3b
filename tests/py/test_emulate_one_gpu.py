# SPDX-License-Identifier: Apache-2.0
"""The one-GPU rehearsal (`python -m torch_topo.emulate --one-gpu`, issue 21) on CPU: each
rank's environment, the played host and cluster files, a run of "topo" over Gloo that believes
in 2 hosts x 2 GPUs, and refusals. The same launcher with NCCL on a GPU is in
tests/gpu/test_rehearsal_cuda.py."""

from __future__ import annotations

import json
import os
import sys

import pytest

from torch_topo import _C, emulate
from torch_topo.emulation import netns
from torch_topo.emulation.one_gpu import HOSTID_PREFIX, visible_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, "tests", "py", "rehearsal_worker.py")
# 8 A100 behind 4 PCIe switches, 4 EFA NICs (AWS p4d); read by hand from the file.
P4D = os.path.join(ROOT, "tests", "data", "nccl_topo_xml", "aws_p4d.24xlarge_8xA100_topo.xml")

_ENV_PROBE = (
    "import json, os, sys; "
    "keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'NODE_RANK', "
    "'MASTER_ADDR', 'MASTER_PORT', 'CUDA_VISIBLE_DEVICES', 'NCCL_HOSTID', "
    "'NCCL_SOCKET_IFNAME', 'NCCL_IB_DISABLE', 'NCCL_P2P_DISABLE', 'TORCH_TOPO_PLAY', "
    "'TORCH_TOPO_FILE', 'EMULATED_CLUSTER_FILE']; "
    "rec = {k: os.environ.get(k) for k in keys}; "
    "rec['host'] = json.load(open(os.environ['TORCH_TOPO_FILE'])); "
    "rec['cluster'] = json.load(open(os.environ['EMULATED_CLUSTER_FILE'])); "
    "json.dump(rec, open(os.path.join(sys.argv[1], 'rank%s.json' % os.environ['RANK']), 'w'))"
)


def _records(out_dir, world: int) -> list[dict]:
    return [json.load(open(os.path.join(out_dir, f"rank{r}.json"))) for r in range(world)]


@pytest.fixture
def no_namespaces(monkeypatch):
    """The rehearsal needs neither root nor namespaces: any use of them fails the test."""
    def refuse():
        raise AssertionError("the one-GPU rehearsal touched network namespaces")

    monkeypatch.setattr(netns, "check_available", refuse)
    monkeypatch.setattr(netns, "ClusterNetwork", lambda *a, **k: refuse())


@pytest.mark.timeout(60)
def test_rank_environment_and_played_files(tmp_path, monkeypatch, no_namespaces):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")  # the user's own choice wins
    monkeypatch.setenv("NCCL_HOSTID", "everyone-the-same")  # must not survive
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    rc = emulate.main(["--one-gpu", "--nodes", "2", "--procs-per-node", "3", "--placement",
                       "interleaved", "--topology", P4D, "--nccl-env", "NCCL_P2P_DISABLE=1",
                       "--", sys.executable, "-c", _ENV_PROBE, str(tmp_path)])
    assert rc == 0
    recs = _records(tmp_path, 6)
    ports = {rec["MASTER_PORT"] for rec in recs}
    assert len(ports) == 1
    hostids = [rec["NCCL_HOSTID"] for rec in recs]
    assert len(set(hostids)) == 6 and all(h.startswith(HOSTID_PREFIX) for h in hostids)
    for r, rec in enumerate(recs):
        node, local = r % 2, r // 2  # interleaved by hand
        assert (rec["RANK"], rec["WORLD_SIZE"], rec["LOCAL_RANK"], rec["LOCAL_WORLD_SIZE"],
                rec["NODE_RANK"]) == (str(r), "6", "0", "1", str(r))
        assert (rec["MASTER_ADDR"], rec["CUDA_VISIBLE_DEVICES"]) == ("127.0.0.1", "0")
        assert (rec["NCCL_SOCKET_IFNAME"], rec["NCCL_IB_DISABLE"], rec["NCCL_P2P_DISABLE"]) == (
            "eth9", "1", "1")
        assert rec["TORCH_TOPO_PLAY"] == f"node{node}:{local}"
        host = rec["host"]
        assert (host["kind"], len(host["gpus"]), len(host["nics"])) == ("host", 8, 4)
        cluster = rec["cluster"]
        assert [h["hostname"] for h in cluster["hosts"]] == ["node0", "node1"]
        assert cluster["ranks"][r] == {"host": node, "local_gpu": local, "local_rank": local}
        assert "inter_host_bandwidth_gbps" not in cluster  # no emulated link: the NICs say
    # The cluster file is what the planner reads.
    parsed = json.loads(_C.planner_cluster_json(text=json.dumps(recs[0]["cluster"])))
    assert len(parsed["hosts"]) == 2 and len(parsed["ranks"]) == 6


@pytest.mark.timeout(300)
@pytest.mark.parametrize("hierarchical", ["always", "never"])
def test_topo_believes_in_two_hosts_over_gloo(tmp_path, monkeypatch, no_namespaces,
                                              hierarchical):
    # The GPU test's program and checks, with CPU tensors: every collective, dtype and op
    # through "topo" against local references, plus a DeviceMesh and new_group subgroups.
    monkeypatch.setenv("TORCH_TOPO_HIERARCHICAL", hierarchical)
    rc = emulate.main(["--one-gpu", "--nodes", "2", "--procs-per-node", "2", "--topology",
                       P4D, "--timeout-s", "240", "--",
                       sys.executable, WORKER, "--out", str(tmp_path), "--mesh"])
    recs = _records(tmp_path, 4)
    assert rc == 0, [r.get("exception") for r in recs]
    for rec in recs:
        assert rec["torch_topo"].startswith(ROOT), rec["torch_topo"]
        assert rec["hosts"] == ["node0", "node1"]
        assert rec["gpus_per_host"] == [8, 8]
        assert rec["placements"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
        assert rec["failed"] == [] and rec["checked"] >= 100, rec
        want = "hierarchical" if hierarchical == "always" else "flat"
        assert rec["all_reduce_choices"] == [want], rec
        assert {d["backend"] for d in rec["mesh"].values()} == {"topo"}


@pytest.mark.timeout(240)
def test_train_llama_under_the_rehearsal_matches_single_process(tmp_path, no_namespaces):
    # tests/gpu/test_rehearsal_cuda.py's training case with CPU tensors: the example's
    # distributed loss against its own single-process reference, DDP at world 4.
    out = tmp_path / "result.json"
    rc = emulate.main(["--one-gpu", "--nodes", "2", "--procs-per-node", "2", "--topology",
                       P4D, "--timeout-s", "200", "--",
                       sys.executable, os.path.join(ROOT, "examples", "train_llama.py"),
                       "--dp", "4", "--ddp", "--steps", "2", "--check-steps", "2", "--backend",
                       "topo", "--device", "cpu", "--no-checkpoint", "--json", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["world_size"] == 4
    for got, want in zip(r["losses"], r["reference_losses"], strict=True):
        assert abs(got - want) <= 1e-4, (r["losses"], r["reference_losses"])


@pytest.mark.timeout(240)
def test_sequence_parallel_attention_under_the_rehearsal(tmp_path, no_namespaces):
    # tests/gpu/test_rehearsal_cuda.py's attention cases with CPU tensors: Ulysses, ring
    # (zigzag) and 2-D against single-process SDPA, forward and backward, at world 4.
    worker = os.path.join(ROOT, "tests", "py", "rehearsal_attention_worker.py")
    rc = emulate.main(["--one-gpu", "--nodes", "2", "--procs-per-node", "2", "--topology",
                       P4D, "--timeout-s", "200", "--",
                       sys.executable, worker, "--out", str(tmp_path)])
    recs = _records(tmp_path, 4)
    assert rc == 0, recs
    for rec in recs:
        assert len(rec) == 5 and set(rec.values()) == {"ok"}, rec


def test_failing_rank_code_is_the_exit_code(no_namespaces, capfd):
    code = "import os, sys; sys.exit(7 if os.environ['RANK'] == '1' else 0)"
    rc = emulate.main(["--one-gpu", "--nodes", "1", "--procs-per-node", "2", "--topology",
                       P4D, "--", sys.executable, "-c", code])
    assert rc == 7
    assert "rank 1 failed with exit code 7" in capfd.readouterr().err


@pytest.mark.parametrize("argv,fragment", [
    (["--one-gpu", "--nodes", "2", "--procs-per-node", "1", "--", "true"],
     "--one-gpu: needs --topology FILE"),
    (["--one-gpu", "--nodes", "2", "--procs-per-node", "1", "--topology", P4D,
      "--inter-bw", "1gbit", "--", "true"], "--inter-bw: not with --one-gpu"),
    (["--one-gpu", "--nodes", "2", "--procs-per-node", "9", "--topology", P4D, "--", "true"],
     "--procs-per-node: got 9, but"),
    (["--one-gpu", "--nodes", "2", "--procs-per-node", "1", "--topology", P4D,
      "--nccl-env", "P2P=1", "--", "true"], "--nccl-env: got 'P2P=1', expected NCCL_NAME"),
    (["--one-gpu", "--nodes", "2", "--procs-per-node", "1", "--topology", P4D,
      "--nccl-env", "NCCL_HOSTID=x", "--", "true"], "NCCL_HOSTID is set per rank"),
    (["--one-gpu", "-1", "--nodes", "2", "--procs-per-node", "1", "--topology", P4D,
      "--", "true"], "--one-gpu: got GPU -1"),
    (["--nodes", "2", "--procs-per-node", "1", "--nccl-env", "NCCL_P2P_DISABLE=1", "--",
      "true"], "--nccl-env: only with --one-gpu"),
])
def test_bad_options_exit_2(argv, fragment, capsys, no_namespaces):
    assert emulate.main(argv) == 2
    assert fragment in capsys.readouterr().err


def test_gpu_index_follows_the_callers_visible_devices():
    assert visible_gpu(1, {}) == "1"
    assert visible_gpu(1, {"CUDA_VISIBLE_DEVICES": "3,5"}) == "5"
    with pytest.raises(ValueError, match=r"shows 2; expected 0..1"):
        visible_gpu(2, {"CUDA_VISIBLE_DEVICES": "3,5"})
