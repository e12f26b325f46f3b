# SPDX-License-Identifier: Apache-2.0
"""One rank of tests/py/test_mesh.py: init the world, build the planned DeviceMesh, optionally
use it with DTensor and FSDP2, and write what it saw as JSON.

Arguments: STORE OUT SPEC, SPEC being JSON with "backend", "pg_options" (TopoConfig fields for
init_process_group, or null), "mesh_config" (TopoConfig fields for init_device_mesh, or null:
no config, so the mesh plans on whatever the environment and the live cluster give) and "use"
(exercise DTensor and FSDP2 on the mesh)."""

from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist


def _use_mesh(mesh) -> dict:
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor

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
    return {"dtensor_ok": dtensor_ok, "fsdp_ok": fsdp_ok}


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store, out, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    import torch_topo  # noqa: F401  (registers "topo" when the backend layer is built)
    from torch_topo import cluster

    pg_options = spec.get("pg_options")
    dist.init_process_group(spec["backend"], init_method=f"file://{store}", rank=rank,
                            world_size=world,
                            pg_options=torch_topo.TopoConfig(**pg_options) if pg_options else None)
    mesh_config = spec.get("mesh_config")
    cfg = torch_topo.TopoConfig(**mesh_config) if mesh_config is not None else None
    mesh = torch_topo.init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"),
                                       config=cfg)
    result = {"rank": rank, "backend": dist.get_backend(),
              "tp": dist.get_process_group_ranks(mesh.get_group("tp")),
              "dp": dist.get_process_group_ranks(mesh.get_group("dp")),
              "mesh": mesh.mesh.tolist(), "plan_mesh": mesh.topo_plan.mesh,
              "layout": mesh.topo_plan.layout, "numa": mesh.topo_numa_report.action,
              "exchanges": len(cluster._exchanges)}
    if spec.get("use", True):
        result.update(_use_mesh(mesh))
    with open(out, "w") as f:
        json.dump(result, f)
    # A rank that tears down while a peer still reads its last sends resets the connection.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
