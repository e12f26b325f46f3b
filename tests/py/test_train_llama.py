# SPDX-License-Identifier: Apache-2.0
"""examples/train_llama.py on 2 and 4 CPU processes for 2 steps: the loss matches the
single-process run of the same model and data (the example computes that reference in rank 0
and compares; the test re-checks the figures it reports), and the checkpoint round trip
(torch.distributed.checkpoint) restores exactly what was saved, sequence parallelism
included. Sequence parallelism runs over "topo": Ulysses, ring attention with the zigzag
layout, both at once (2-D), with tensor parallelism, and the cost model's own split (--sp auto)
on ranks playing two DGX-1 hosts. Every command of the example's docstring (torchrun, the
emulator) runs as written (its defaults), on 4 CPU ranks."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from planner_support import DGX1

from torch_topo import AttentionShape, UlyssesConfig, resolve_sequence_parallel_degrees
from torch_topo.config import TopoConfig
from torch_topo.mesh import _played_cluster, cpu_cluster_doc
from torch_topo.plan import resolve_cluster

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
    # Two played hosts of CPU ranks at 12.5 GB/s: the size rule takes two levels below 2 MiB
    # only, so a step mixes hierarchical calls (a 1.3 MB bucket) and flat ones (7-8 MB buckets,
    # the 8 MB broadcast) on one group.
    ("dp4_ddp_topo_band", 4, "topo", ["--dp", "4", "--ddp", "--dim", "256", "--ffn-dim", "1024"],
     {"TORCH_TOPO_PLAY": "hostA:0,hostA:1,hostB:0,hostB:1", "TORCH_TOPO_INTER_HOST_GBPS": "12.5"}),
    ("sp2_ulysses_topo", 2, "topo", ["--sp", "2"], {}),
    ("sp2_ring_zigzag_topo", 2, "topo", ["--sp", "2", "--ring"], {}),
    ("sp4_2d_fsdp_topo", 4, "topo", ["--sp", "4", "--ulysses", "2", "--fsdp"], {}),
    ("tp2_sp2_ring_fsdp_topo", 4, "topo", ["--tp", "2", "--sp", "2", "--ring", "--fsdp"], {}),
    ("sp_auto_topo", 4, "topo", ["--sp", "auto"], TWO_DGX1_PAIRS),
]
# (Ulysses degree, ring degree) each sequence-parallel case must run with.
SPLITS = {"sp2_ulysses_topo": (2, 1), "sp2_ring_zigzag_topo": (1, 2), "sp4_2d_fsdp_topo": (2, 2),
          "tp2_sp2_ring_fsdp_topo": (1, 2)}


def _launch(args: list[str], extra_env: dict, out) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TOPO_", "NCCL_TOPO"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", **extra_env)
    res = subprocess.run([*args, "--json", str(out)], capture_output=True, text=True, env=env,
                         timeout=250, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # FSDP2's warning that the model returned a view (an in-place op on it would skip the
    # all-gather of gradients), twice per rank with --sp and --fsdp.
    assert "returned a view tensor" not in res.stderr, res.stderr[-3000:]
    return json.loads(out.read_text())


def _run(ranks: int, backend: str, options: list[str], extra_env: dict, tmp_path) -> dict:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(ranks), EXAMPLE, *options, "--steps", "2", "--check-steps",
           "2", "--backend", backend, "--device", "cpu", "--checkpoint-dir",
           str(tmp_path / "ckpt")]
    return _launch(cmd, extra_env, tmp_path / "result.json")


def _expected_split(r: dict, cluster=None) -> tuple[int, int]:
    """The cost model's split for the run's attention shape on `cluster`, default a host of
    CPU ranks (laid out contiguously, as init_device_mesh does without a GPU topology)."""
    shape = AttentionShape(heads=4 // r["tp"], kv_heads=2 // r["tp"], head_dim=16, seq_len=64,
                           batch=4, dtype=torch.float32)
    mesh = {"dp": r["dp"], "sp": r["sp"], **({"tp": r["tp"]} if r["tp"] > 1 else {})}
    cfg = UlyssesConfig(sequence_parallel_size=r["sp"], attention=shape)
    if cluster is None:
        cluster = resolve_cluster(cpu_cluster_doc(r["world_size"]))
    return resolve_sequence_parallel_degrees(cfg, r["world_size"], cluster, mesh)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name, ranks, backend, options, extra_env", CASES,
                         ids=[c[0] for c in CASES])
def test_example_matches_single_process(name, ranks, backend, options, extra_env, tmp_path):
    r = _run(ranks, backend, options, extra_env, tmp_path)
    assert r["world_size"] == ranks and r["backend"] == backend
    assert len(r["reference_losses"]) == 2
    for got, want in zip(r["losses"], r["reference_losses"], strict=True):
        assert abs(got - want) <= 1e-4, (r["losses"], r["reference_losses"])
    assert r["checkpoint_ok"] is True
    assert (tmp_path / "ckpt").is_dir()  # a --checkpoint-dir the user named is kept
    assert r["tokens_per_s"] > 0
    if name in SPLITS:
        assert (r["ulysses_degree"], r["ring_degree"]) == SPLITS[name]
    if name == "sp_auto_topo":
        # The split the cost model predicts fastest on the cluster the ranks play.
        played = _played_cluster(str(DGX1), [("hostA", 0), ("hostA", 3), ("hostB", 0),
                                             ("hostB", 3)], TopoConfig())
        assert (r["ulysses_degree"], r["ring_degree"]) == _expected_split(r, played)


def _docstring_commands() -> list[list[str]]:
    """The commands of the example's docstring (torchrun and the emulator), split into
    arguments."""
    with open(EXAMPLE) as f:
        doc = f.read().split('"""')[1].replace("\\\n", " ")
    return [line.split() for line in doc.splitlines()
            if line.strip().startswith(("torchrun ", "python -m torch_topo.emulate "))]


DOC_COMMANDS = _docstring_commands()


def _as_launched(command: list[str]) -> list[str]:
    """torchrun as a module of this interpreter (--standalone: a free rendezvous port), and the
    emulator's command run by this interpreter."""
    if command[0] == "torchrun":
        assert command[1:4] == ["--nproc-per-node", "4", "examples/train_llama.py"]
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", *command[1:]]
    assert command[:3] == ["python", "-m", "torch_topo.emulate"]
    split = command.index("--")
    assert command[split + 1:split + 3] == ["python", "examples/train_llama.py"]
    return [sys.executable, *command[1:split + 1], sys.executable, *command[split + 2:]]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", DOC_COMMANDS, ids=[" ".join(c) for c in DOC_COMMANDS])
def test_docstring_command_runs_with_its_defaults(command, tmp_path):
    launch = _as_launched(command)
    r = _launch(launch, {}, tmp_path / "result.json")
    assert r["world_size"] == 4 and r["checkpoint_ok"] is True
    assert r["max_loss_diff"] <= r["loss_tolerance"] and len(r["reference_losses"]) == 2
    if "auto" in command:
        # Issue 23: 4 ranks, 4 query and 2 K/V heads: the split must fit the heads (Ulysses 4
        # replicates K/V) and be the one the cost model predicts fastest.
        assert (r["ulysses_degree"], r["ring_degree"]) == _expected_split(r)
        assert r["ulysses_degree"] * r["ring_degree"] == r["sp"] == 4 // r["tp"]
        chosen = f"Ulysses {r['ulysses_degree']} x ring {r['ring_degree']}: "
        assert any(line.startswith("  " + chosen) and line.endswith("<- chosen")
                   for line in r["plan"].splitlines()), r["plan"]


@pytest.mark.parametrize("options, message", [
    (["--ring"], r"--ring: needs --sp > 1"),
    # Malformed options were argparse's usage block too, once per rank under torchrun.
    (["--tp", "x"], r"argument --tp: invalid int value: 'x'"),
    (["--bogus"], r"unrecognized arguments: --bogus"),
    # Rules that need the world size (1 here: a lone process) or the model were tracebacks.
    (["--dp", "2"], r"--dp x --tp x --sp: got 2 x 1 x 1 = 2, expected the world size 1"),
    (["--heads", "3"], r"--heads: got 3, expected a divisor of --dim 64"),
    # The model's or torch's words, naming no option, or a traceback (odd width per head).
    (["--kv-heads", "3"], r"--kv-heads: got 3, expected a divisor of --heads 4"),
    (["--dim", "6", "--heads", "2", "--kv-heads", "1"],
     r"--dim: got 6, expected an even width per head \(--dim / --heads 2 = 3\)"),
    (["--tp", "4"], r"--tp: got 4, expected a divisor of --kv-heads 2"),
    (["--lr", "-1"], r"--lr: got -1.0, expected a finite number >= 0"),
    (["--backend", "nccl", "--device", "cpu"],
     r"--backend nccl: needs a CUDA device; got --device cpu"),
    # --sp auto leaves a lone process 1 rank: the split asked for was dropped without a word.
    (["--sp", "auto", "--ring"],
     r"--ring: needs --sp > 1; --sp auto left 1 rank \(world 1 / \(--dp 1 x --tp 1\)\)"),
    (["--sp", "auto", "--ulysses", "2"], r"--ulysses: needs --sp > 1; --sp auto left 1 rank"),
    (["--steps", "1", "--check-steps", "2"], r"--check-steps: got 2, expected <= --steps 1"),
    # ZeroDivisionError tracebacks inside the model, or taken without a word.
    (["--heads", "0"], r"--heads: got 0, expected >= 1"),
    (["--dim", "0"], r"--dim: got 0, expected >= 1"),
    (["--check-steps", "-1"], r"--check-steps: got -1, expected >= 0"),
    (["--ulysses", "2"], r"--ulysses: needs --sp > 1"),
    # Tracebacks once the training had run.
    (["--json", "/nonexistent/result.json"], r"--json: no folder to write "
                                             r"'/nonexistent/result.json' into"),
    (["--json", "/tmp"], r"--json: '/tmp' is a folder, expected a file name"),
    (["--checkpoint-dir", "/proc/ckpt"], r"--checkpoint-dir: cannot create '/proc/ckpt': "
                                         r"No such file or directory"),
    pytest.param(["--device", "cuda"], r"--device cuda: no CUDA device here",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here")),
])
def test_bad_options_are_refused(options, message):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TOPO_", "NCCL_TOPO"))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    if "--checkpoint-dir" not in options:
        options = [*options, "--no-checkpoint"]
    res = subprocess.run([sys.executable, EXAMPLE, *options],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2, res.stderr[-2000:]
    assert re.search(r"^train_llama.py: error: " + message, res.stderr, re.M), res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr


@pytest.fixture
def example(monkeypatch):
    """examples/train_llama.py as a module."""
    monkeypatch.syspath_prepend(os.path.dirname(EXAMPLE))
    import train_llama

    return train_llama


def _report_of(example, chunks, calibrated, capsys) -> tuple[str, dict]:
    """The printed overlap line and the JSON's overlap entry."""
    choices = [["all_gather_matmul", [64, 64], c] for c in calibrated]
    # Wall 0.05 s, compute 0.01 s, comm 0.03 s: by hand (0.01 + 0.03 - 0.05) / 0.01 = -1.
    overlap = example.overlap_summary([{"t_wall": 0.05, "t_compute": 0.01, "t_comm": 0.03}],
                                      chunks, choices)
    r = {"plan": "p", "mode": "replicate", "backend": "gloo", "device": "cpu", "world_size": 2,
         "dp": 1, "tp": 2, "sp": 1, "median_step_s": 0.1, "tokens_per_s": 1.0,
         "overlap": overlap, "overlap_chunks": choices, "chunks": chunks,
         "reference_losses": [], "checkpoint_ok": None}
    example.print_report(r)
    line = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("tp overlap ops"))
    return line, json.loads(json.dumps(r))["overlap"]


def test_one_chunk_reports_nothing_to_hide(example, capsys):
    # At one chunk the ops run unchunked: the "hidden fraction" (-0.85, -7.84 on CPU ranks) was
    # only the overhead between compute and collective, and the JSON still carried it.
    nothing = "one chunk everywhere: the unchunked ops, nothing to hide"
    for chunks, calibrated in ((None, [1, 1]), (1, [])):
        line, overlap = _report_of(example, chunks, calibrated, capsys)
        assert line.endswith(f"comm 30.0 ms; {nothing}"), line
        assert overlap["hidden_fraction"] is None, overlap
        assert overlap["hidden_fraction_note"] == nothing
    for chunks, calibrated in ((None, [1, 4]), (4, [])):
        line, overlap = _report_of(example, chunks, calibrated, capsys)
        assert line.endswith("comm 30.0 ms, hidden fraction -1.00"), line
        assert overlap["hidden_fraction"] == pytest.approx(-1.0)
        assert "hidden_fraction_note" not in overlap


def test_check_steps_defaults_to_steps_when_fewer(example):
    # --steps 1 alone was refused for a --check-steps 2 the user never gave.
    assert example.parse_args(["--steps", "1"]).check_steps == 1
    assert example.parse_args([]).check_steps == 2
    assert example.parse_args(["--steps", "3", "--check-steps", "0"]).check_steps == 0


@pytest.mark.parametrize("batch, seq_len, sp, chunks, message", [
    # 3 tokens over tp 2, and 1 token per sp rank over tp 2: a traceback at step 0 (a shape
    # mismatch in all_gather_matmul, an IndexError in the model's token shard).
    (1, 3, 1, None, "--tp: got 2, expected a divisor of 3, the tokens a tp group shares out "
                    "(--batch x --seq-len / --sp)"),
    (1, 2, 2, None, "--tp: got 2, expected a divisor of 1, the tokens a tp group shares out "
                    "(--batch x --seq-len / --sp)"),
    (4, 64, 2, 65, "--chunks: got 65, expected <= 64, the token rows each tp rank's overlap ops "
                   "split (--batch x --seq-len / --sp / --tp)"),
])
def test_tp_token_rules(example, batch, seq_len, sp, chunks, message):
    args = argparse.Namespace(batch=batch, seq_len=seq_len, sp=sp, tp=2, chunks=chunks)
    with pytest.raises(ValueError) as err:
        example.check_tp_tokens(args)
    assert str(err.value) == message
    example.check_tp_tokens(argparse.Namespace(batch=4, seq_len=64, sp=2, tp=2, chunks=64))


@pytest.mark.timeout(120)
def test_default_checkpoint_folder_is_removed(tmp_path):
    # The temporary folder the run made for its checkpoint stayed behind after every run.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TOPO_", "NCCL_TOPO"))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    res = subprocess.run([sys.executable, EXAMPLE, "--steps", "1", "--check-steps", "0",
                          "--device", "cpu", "--json", str(tmp_path / "result.json")],
                         capture_output=True, text=True, env=env, timeout=110, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["checkpoint_ok"] is True
    assert not list(tmp_path.glob("train_llama_ckpt_*"))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("options, line", [
    # 4 sequences x 64 tokens over 2 tp ranks
    (["--chunks", "1000"], "--chunks: got 1000, expected <= 128, the token rows each tp rank's "
                           "overlap ops split (--batch x --seq-len / --sp / --tp)"),
    (["--batch", "1", "--seq-len", "3"], "--tp: got 2, expected a divisor of 3, the tokens a tp "
                                         "group shares out (--batch x --seq-len / --sp)"),
], ids=["chunks", "tokens"])
def test_tp_token_rules_refuse_before_any_step(options, line, tmp_path):
    # Refused by the first overlap op of the first step: a traceback on every rank.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_TOPO_", "NCCL_TOPO"))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc-per-node", "2", EXAMPLE, "--tp", "2", *options,
                          "--backend", "gloo", "--device", "cpu", "--no-checkpoint"],
                         capture_output=True, text=True, env=env, timeout=170, cwd=ROOT)
    assert res.returncode != 0
    # each rank says so in one line
    assert res.stderr.count(f"train_llama.py: error: {line}") == 2, res.stderr[-3000:]
    assert "train_llama.py\", line" not in res.stderr, res.stderr[-3000:]  # torchrun's own only
