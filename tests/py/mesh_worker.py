# SPDX-License-Identifier: Apache-2.0
"""One rank of tests/py/test_mesh.py: init the world, build the planned DeviceMesh from a
topology file it plays, use it with DTensor and FSDP2, and write what it saw as JSON."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store, out, topology, play, backend = sys.argv[1:6]
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor

    import torch_topo  # noqa: F401  (registers "topo" when the backend layer is built)

    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    cfg = torch_topo.TopoConfig(topology_file=topology, play=play or None)
    mesh = torch_topo.init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"), config=cfg)
    x = torch.arange(16.0).reshape(4, 4)
    dt = distribute_tensor(x, mesh, [Shard(0), Shard(1)])
    dtensor_ok = bool(torch.equal(dt.full_tensor(), x)) and bool(torch.equal((dt * 2).full_tensor(), 2 * x))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    ref = [p.detach().clone() for p in model.parameters()]
    fully_shard(model, mesh=mesh["dp"])
    model(torch.ones(2, 4)).sum().backward()
    grads = [p.grad.full_tensor() for p in model.parameters()]
    # d(sum(W x + b))/dW = rows of x summed over the batch (2 x ones), db = batch size.
    fsdp_ok = bool(torch.allclose(grads[0], torch.full_like(ref[0], 2.0)) and
                   torch.allclose(grads[1], torch.full_like(ref[1], 2.0)))
    with open(out, "w") as f:
        json.dump({"rank": rank, "tp": dist.get_process_group_ranks(mesh.get_group("tp")),
                   "dp": dist.get_process_group_ranks(mesh.get_group("dp")),
                   "mesh": mesh.mesh.tolist(), "plan_mesh": mesh.topo_plan.mesh,
                   "dtensor_ok": dtensor_ok, "fsdp_ok": fsdp_ok,
                   "numa": mesh.topo_numa_report.action}, f)
    # A rank that tears down while a peer still reads its last sends resets the connection.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
