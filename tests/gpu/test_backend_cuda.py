# SPDX-License-Identifier: Apache-2.0
"""The CUDA path of "topo" on one GPU (world size 1, NCCL inner backend): stream contract,
composed ops, split for init_device_mesh with device_id, DDP; and a CPU tensor on the same group.
Each test runs in a fresh subprocess so one group per process holds."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import os, tempfile, torch, torch.distributed as dist
import torch_topo
tmp = tempfile.mkdtemp()
dev = torch.device("cuda", 0)
torch.cuda.set_device(dev)
dist.init_process_group("topo", store=dist.FileStore(os.path.join(tmp, "s"), 1), rank=0,
                        world_size=1, {device_id})
"""


def _run(body: str, device_id: bool = True) -> None:
    prelude = PRELUDE.format(device_id="device_id=dev" if device_id else "")
    code = prelude + textwrap.dedent(body) + "\ndist.destroy_process_group()\nprint('OK')\n"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=100)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.timeout(120)
def test_cuda_reductions_and_stream_contract():
    _run("""
    assert dist.get_backend() == "topo"
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.arange(1 << 20, device=dev, dtype=torch.float32)
        want = x.clone()
        for op, scale in ((dist.ReduceOp.SUM, 1.0), (dist.ReduceOp.AVG, 1.0),
                          (dist._make_nccl_premul_sum(0.5), 0.5)):
            y = x.clone()
            w = dist.all_reduce(y, op=op, async_op=True)
            w.wait()  # the side stream waits; no host block
            torch.testing.assert_close(y, want * scale)
            fut = w.get_future().wait()
            torch.testing.assert_close(fut[0], want * scale)
    torch.cuda.synchronize()
    out = torch.empty(8, device=dev)
    dist.all_gather_into_tensor(out, torch.ones(8, device=dev))
    torch.testing.assert_close(out, torch.ones(8, device=dev))
    rs = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(rs, torch.full((4,), 3.0, device=dev), op=dist.ReduceOp.AVG)
    torch.testing.assert_close(rs, torch.full((4,), 3.0, device=dev))
    a2a = torch.empty(6, device=dev)
    dist.all_to_all_single(a2a, torch.arange(6.0, device=dev))
    torch.testing.assert_close(a2a, torch.arange(6.0, device=dev))
    b = torch.arange(5.0, device=dev)
    dist.broadcast(b, 0)
    torch.testing.assert_close(b, torch.arange(5.0, device=dev))
    c = torch.ones(3)  # a CPU tensor on the same group goes to Gloo
    dist.all_reduce(c)
    assert c.tolist() == [1.0, 1.0, 1.0]
    dist.barrier()
    """)


@pytest.mark.timeout(120)
def test_cuda_device_mesh_with_device_id_and_ddp():
    _run("""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.nn.parallel import DistributedDataParallel as DDP
    mesh = init_device_mesh("cuda", (1, 1), mesh_dim_names=("dp", "tp"))
    t = torch.ones(4, device=dev)
    dist.all_reduce(t, group=mesh["tp"].get_group())
    assert dist.get_backend(mesh["dp"].get_group()) == "topo"
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 4).to(dev), device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 16, device=dev)).square().mean().backward()
        opt.step()
    torch.cuda.synchronize()
    """)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device_id", [True, False], ids=["device_id", "no_device_id"])
def test_nccl_and_gloo_subgroups_of_a_topo_world(device_id):
    # Issue 16: with device_id, torch handed our TopoBackend to the NCCL child as split_from.
    _run("""
    nccl = dist.new_group([0], backend="nccl")
    gloo = dist.new_group([0], backend="gloo")
    topo = dist.new_group([0])
    assert (dist.get_backend(nccl), dist.get_backend(gloo), dist.get_backend(topo)) == (
        "nccl", "gloo", "topo")
    want = torch.arange(6.0, device=dev)
    for group in (nccl, topo, dist.group.WORLD):
        t = want.clone()
        dist.all_reduce(t, group=group)
        out = torch.empty(6, device=dev)
        dist.all_gather_into_tensor(out, t, group=group)
        torch.testing.assert_close(out, want)
    c = torch.arange(3.0)
    dist.all_reduce(c, group=gloo)
    assert c.tolist() == [0.0, 1.0, 2.0]
    torch.cuda.synchronize()
    """, device_id=device_id)


@pytest.mark.timeout(120)
def test_cuda_flat_ops_pass_straight_to_nccl():
    # Issue 16 item 7: a flat op returns NCCL's own work: no TopoWork ("topo:" profiler range),
    # no internal stream, no event pair.
    _run("""
    from torch.profiler import profile
    t = torch.ones(1024, device=dev)
    with profile() as prof:
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
    names = {e.name for e in prof.events()}
    assert any(n.startswith("nccl:all_reduce") for n in names), sorted(names)
    assert not any(n.startswith("topo:") for n in names), sorted(names)
    torch.testing.assert_close(t, torch.ones(1024, device=dev))
    """)
