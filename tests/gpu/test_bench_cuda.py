# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo bench` on GPUs: host/device copy rates against an independent CUDA-event
measurement, the one-rank-per-GPU spawn path with NCCL as the inner backend, the link checks
against the live probe and against the H200 VM's NCCL dump (link_width="0" is a finding), and
peer copies where there are two GPUs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H200_VM = os.path.join(ROOT, "tests", "data", "nccl_topo_xml",
                       "h200_1xGPU_firecracker-vm_nccl2.28.9_topo_dump.xml")
SHORT = ["--max-bytes", "1M", "--factor", "16", "--reps", "2", "--json", "--check"]


def _bench(*args: str, **env_extra: str) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **env_extra)
    for var in ("RANK", "WORLD_SIZE", "TORCH_TOPO_FILE", "NCCL_TOPO_FILE"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "torch_topo", "bench", *args], env=env,
                          capture_output=True, text=True, timeout=100)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _event_gbps(dst: torch.Tensor, src: torch.Tensor, iters: int = 8) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        dst.copy_(src, non_blocking=True)
    end.record()
    end.synchronize()
    return src.numel() * iters / (start.elapsed_time(end) * 1e-3) / 1e9


def test_host_device_rates_match_cuda_events():
    from torch_topo.bench.copies import host_device_gbps

    dev = torch.device("cuda", 0)
    nbytes = 256 << 20
    h2d, d2h = host_device_gbps(dev, nbytes)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    ref_h2d, ref_d2h = _event_gbps(gpu, host), _event_gbps(host, gpu)
    assert h2d == pytest.approx(ref_h2d, rel=0.25) and d2h == pytest.approx(ref_d2h, rel=0.25)
    assert 1.0 < h2d < 200.0 and 1.0 < d2h < 200.0  # a PCIe/C2C link, not a device-local copy


def test_bench_live_probe_one_rank_per_gpu():
    code, result = _bench(*SHORT)
    n = torch.cuda.device_count()
    assert (result["world_size"], result["device"], result["inner_backend"]) == (n, "cuda", "nccl")
    h2d = [c for c in result["links"] if c["kind"] == "h2d"]
    assert len(h2d) == n and all(c["measured_gbps"] > 1.0 for c in h2d)
    assert len([c for c in result["links"] if c["kind"] == "p2p"]) == n * (n - 1) // 2
    problems = [f for f in result["findings"] if f["severity"] != "info"]
    assert code == (1 if problems else 0)
    for r in result["collectives"]:
        assert r["inner"] == "nccl" and r["topo_time_us"] > 0 and r["inner_time_us"] > 0


def test_bench_against_the_h200_vm_dump_flags_unknown_width():
    # The dump describes one GPU: bench one rank on the first GPU whatever the machine has.
    code, result = _bench(*SHORT, "--topology", H200_VM, "--collectives", "all_reduce",
                          CUDA_VISIBLE_DEVICES="0")
    assert code == 1
    host_copies = [c for c in result["links"] if c["kind"] in ("h2d", "d2h")]
    assert [(c["kind"], c["subject"]) for c in host_copies] == [("h2d", "host0 GPU0"),
                                                                 ("d2h", "host0 GPU0")]
    assert all(c["expected_gbps"] == pytest.approx(48.0) for c in host_copies)  # Gen5, x16 assumed
    assert all(c["link"] == "PCIe-unknown-width" for c in host_copies)
    assert "pcie-width-unknown" in {f["code"] for f in result["findings"]}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_peer_copy_matches_cuda_events():
    from torch_topo.bench.copies import peer_gbps

    a, b = torch.device("cuda", 0), torch.device("cuda", 1)
    nbytes = 256 << 20
    measured = peer_gbps(a, b, nbytes)
    x = torch.empty(nbytes, dtype=torch.uint8, device=a)
    y = torch.empty(nbytes, dtype=torch.uint8, device=b)
    with torch.cuda.device(a):
        forward = _event_gbps(y, x)
    with torch.cuda.device(b):
        backward = _event_gbps(x, y)
    assert measured == pytest.approx(min(forward, backward), rel=0.25)
