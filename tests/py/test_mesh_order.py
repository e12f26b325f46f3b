# SPDX-License-Identifier: Apache-2.0
"""A planned mesh keeps its rank order in every group torch builds for it, flattened dimensions
included: torch's DeviceMesh sorts a new group's ranks and reuses the default group (ranks
sorted) for a dimension as large as the world (pytorch PR 193224). Four CPU ranks play DGX-1
GPUs 0-3, whose NV2 pairs {0, 3} and {1, 2} make the planned mesh's order differ from the
ranks' (checked first); the world-sized flattened dimension must then carry that order: group
ranks, an all_gather, DTensor shards and FSDP2 gradients agree with the mesh coordinates."""

from __future__ import annotations

import inspect
import json

import pytest
import torch.distributed as dist
from planner_support import DGX1


def _main(rank, world, store_path, out_dir):
    import os
    from pathlib import Path

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor

    import torch_topo

    os.environ["TORCH_TOPO_FILE"] = str(DGX1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world)
    mesh = torch_topo.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    order = mesh.mesh.flatten().tolist()
    flat = mesh._flatten("dp_tp")  # as large as the world
    ranks = dist.get_process_group_ranks(flat.get_group())
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([float(rank)]), group=flat.get_group())
    x = torch.arange(8.0).reshape(4, 2)
    dt = distribute_tensor(x, flat, [Shard(0)])
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 4)
    fully_shard(model, mesh=flat)
    model(torch.ones(3, 2)).sum().backward()
    # d(sum(W x + b))/dW: the batch's 3 ones per column; db: 3.
    grads_ok = all(torch.equal(p.grad.full_tensor(), torch.full_like(p.grad.full_tensor(), 3.0))
                   for p in model.parameters())
    # What torch's own DeviceMesh does with the same mesh (the behaviour guarded against).
    plain = DeviceMesh("cpu", mesh.mesh, mesh_dim_names=("dp", "tp"))._flatten("dp_tp")
    result = {"order": order, "flat_mesh": flat.mesh.tolist(), "group_ranks": ranks,
              "local_rank": flat.get_local_rank(), "gathered": [int(g.item()) for g in gathered],
              "shard": dt.to_local().tolist(), "full_ok": bool(torch.equal(dt.full_tensor(), x)),
              "grads_ok": grads_ok,
              "plain_ranks": dist.get_process_group_ranks(plain.get_group())}
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.skipif("sort_ranks" not in inspect.signature(dist.new_group).parameters,
                    reason="torch < 2.12 refuses this mesh (test_mesh checks that)")
@pytest.mark.timeout(240)
def test_flattened_world_dimension_keeps_the_planned_order(tmp_path):
    from rank_processes import start_processes

    start_processes(_main, args=(4, str(tmp_path / "store"), str(tmp_path)), nprocs=4)
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(4)]
    order = results[0]["order"]
    assert order != sorted(order), "the plan kept rank order: the case is not exercised"
    for rank, r in enumerate(results):
        assert r["order"] == r["flat_mesh"] == r["group_ranks"] == r["gathered"] == order
        assert r["local_rank"] == order.index(rank)
        row = order.index(rank)
        assert r["shard"] == [[2.0 * row, 2.0 * row + 1]]
        assert r["full_ok"] and r["grads_ok"]
        # torch alone hands out the default group: sorted ranks, not the mesh's order.
        assert r["plain_ranks"] == sorted(order)
