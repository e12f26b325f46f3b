# SPDX-License-Identifier: Apache-2.0
"""This process's GPU (issue 21): init_process_group's device_id, else LOCAL_RANK, else the
current device, on a faked 8-GPU host (torch.cuda and torch.accelerator answer as on an AWS
p4d, whose topology file is pinned). Ranks that never call torch.cuda.set_device used to all
claim GPU 0 and fail the cluster exchange."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torch_topo import local_device

ROOT = Path(__file__).resolve().parents[2]
P4D = ROOT / "tests" / "data" / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml"
# CUDA index d is the p4d file's GPU 7 - d (CUDA_VISIBLE_DEVICES may renumber GPUs so): the
# cluster must match by PCI bus id, not by index.
P4D_BUS = [(0x10, 0x1C), (0x10, 0x1D), (0x20, 0x1C), (0x20, 0x1D), (0x90, 0x1C), (0x90, 0x1D),
           (0xA0, 0x1C), (0xA0, 0x1D)]


def _fake_cuda(monkeypatch, count: int = 8, current: int = 0) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)


def test_order_local_rank_then_current_device(monkeypatch):
    _fake_cuda(monkeypatch, count=4, current=3)
    assert local_device.local_cuda_index({}) == 3
    assert local_device.local_cuda_index({"LOCAL_RANK": "2"}) == 2
    assert local_device.local_cuda_index({"LOCAL_RANK": " "}) == 3  # empty counts as unset
    # More ranks than GPUs: that rank has no GPU of its own (not a second claim on GPU 0).
    assert local_device.local_cuda_index({"LOCAL_RANK": "4"}) == -1
    with pytest.raises(ValueError, match=r"LOCAL_RANK: got 'one', expected a rank number"):
        local_device.local_cuda_index({"LOCAL_RANK": "one"})
    with pytest.raises(ValueError, match=r"LOCAL_RANK: got -1"):
        local_device.local_cuda_index({"LOCAL_RANK": "-1"})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert local_device.local_cuda_index({"LOCAL_RANK": "2"}) == -1


def test_device_id_of_the_init_call_wins(monkeypatch):
    _fake_cuda(monkeypatch, count=4, current=0)
    # The frame torch's init_process_group runs the creator from, as torch names it.
    scope = {"__name__": "torch.distributed.distributed_c10d", "local_device": local_device}
    exec("def _new_process_group_helper(device_id, environ):\n"
         "    return local_device.local_cuda_index(environ)\n", scope)
    helper = scope["_new_process_group_helper"]
    assert helper(torch.device("cuda", 3), {"LOCAL_RANK": "1"}) == 3
    assert helper(None, {"LOCAL_RANK": "1"}) == 1
    assert helper(torch.device("cpu"), {}) == 0
    # A function of that name elsewhere is not torch's.
    other = {"__name__": "mine", "local_device": local_device}
    exec("def _new_process_group_helper(device_id):\n"
         "    return local_device.local_cuda_index({})\n", other)
    assert other["_new_process_group_helper"](torch.device("cuda", 3)) == 0


_RANK = """
import json, os, sys, types, torch
rank, world, store_path, out, device_id = sys.argv[1:6]
bus = json.loads(os.environ["FAKE_BUS"])
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 8
torch.cuda.current_device = lambda: 0  # nobody calls set_device
torch.cuda.get_device_properties = lambda d: types.SimpleNamespace(
    pci_domain_id=0, pci_bus_id=bus[7 - d][0], pci_device_id=bus[7 - d][1])
torch.accelerator.current_accelerator = lambda *a, **k: torch.device("cuda")
torch.accelerator.device_count = lambda: 8
import torch.distributed as dist
import torch_topo
from torch_topo import backend, cluster
backend._cuda_usable = lambda: False  # Gloo only: this machine has no NCCL device
kw = {"device_id": torch.device("cuda", int(device_id))} if device_id != "-" else {}
dist.init_process_group("topo", store=dist.FileStore(store_path, int(world)), rank=int(rank),
                        world_size=int(world), **kw)
c = cluster.world_cluster()
report = torch_topo.numa.init_report()  # bound at init from the same record
json.dump({"gpus": [p.local_gpu for p in c.placements], "numa_node": report.numa_node},
          open(out, "w"))
dist.all_reduce(torch.zeros(1))  # on Gloo: barrier() would use the (fake) bound CUDA device
dist.destroy_process_group()
"""


def _run_host(tmp_path, device_ids, local_ranks) -> list[dict]:
    """Ranks of one faked p4d host; each returns the GPU of every rank in its cluster and the
    NUMA node it bound to at init."""
    procs = []
    for r, (dev, local) in enumerate(zip(device_ids, local_ranks, strict=True)):
        env = dict(os.environ, PYTHONPATH=str(ROOT), TORCH_TOPO_FILE=str(P4D),
                   FAKE_BUS=json.dumps(P4D_BUS), TORCH_TOPO_BIND_NUMA="1")
        env.pop("TORCH_TOPO_PLAY", None)
        env.pop("LOCAL_RANK", None)
        if local is not None:
            env["LOCAL_RANK"] = str(local)
        procs.append(subprocess.Popen(
            [sys.executable, "-c", _RANK, str(r), str(len(device_ids)),
             str(tmp_path / "store"), str(tmp_path / f"{r}.json"), dev],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=150)
        assert p.returncode == 0, out[-3000:]
    return [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(len(procs))]


def _numa_node(gpu: int) -> int:
    from torch_topo.topology import load_topology

    return load_topology(str(P4D)).native.gpus[gpu].numa_node


@pytest.mark.timeout(180)
def test_device_id_places_ranks_on_their_gpus(tmp_path):
    # CUDA 2 and 5 are the file's GPUs 5 and 2, whatever LOCAL_RANK says.
    got = _run_host(tmp_path, ["2", "5"], [0, 1])
    assert [g["gpus"] for g in got] == [[5, 2], [5, 2]]
    assert [g["numa_node"] for g in got] == [_numa_node(5), _numa_node(2)]


@pytest.mark.timeout(180)
def test_local_rank_places_ranks_without_set_device(tmp_path):
    # The "both claim GPU 0": LOCAL_RANK 0 and 1 are CUDA 0 and 1, the file's 7 and 6.
    got = _run_host(tmp_path, ["-", "-"], [0, 1])
    assert [g["gpus"] for g in got] == [[7, 6], [7, 6]]
    assert [g["numa_node"] for g in got] == [_numa_node(7), _numa_node(6)]
