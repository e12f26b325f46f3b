# SPDX-License-Identifier: Apache-2.0
"""Ecosystem cases run on every rank of a RankPool: DDP, FSDP2 and DeviceMesh on "topo" against
the same run on a plain Gloo group in the same processes."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def _batches(rank: int, steps: int):
    g = torch.Generator().manual_seed(77 + rank)
    return [(torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g))
            for _ in range(steps)]


def _train(model, rank, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for x, y in _batches(rank, steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def ddp_matches_gloo(rank, size, ref, steps=20):
    """Max abs parameter difference after `steps` DDP steps (topo vs gloo)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    a = DDP(_model(), bucket_cap_mb=0.001)  # several buckets: several allreduces per step
    b = DDP(_model(), process_group=ref, bucket_cap_mb=0.001)
    _train(a, rank, steps)
    _train(b, rank, steps)
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters(), strict=True))


def fsdp2_matches_gloo(rank, size, ref, steps=10):
    """Max abs full-parameter difference after `steps` FSDP2 steps (topo vs gloo)."""
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard

    def shard(model, mesh):
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    a = shard(_model(), init_device_mesh("cpu", (size,)))
    b = shard(_model(), DeviceMesh.from_group(ref, "cpu"))
    _train(a, rank, steps)
    _train(b, rank, steps)
    return max((p.full_tensor() - q.full_tensor()).abs().max().item()
               for p, q in zip(a.parameters(), b.parameters(), strict=True))


def mesh_2d(rank, size, ref):
    """init_device_mesh (dp, tp) on topo: each dimension's group reduces like Gloo's."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    bad = []
    layout = torch.arange(size).reshape(2, size // 2)
    for dim, groups in (("dp", layout.t().tolist()), ("tp", layout.tolist())):
        group = mesh[dim].get_group()
        if dist.get_backend(group) != "topo":
            bad.append(f"{dim}: backend {dist.get_backend(group)}")
        refs = [dist.new_group(g, backend="gloo") for g in groups]
        mine = next(r for g, r in zip(groups, refs, strict=True) if rank in g)
        x = torch.arange(6, dtype=torch.float32) * (rank + 1)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, group=group)
        dist.all_reduce(b, group=mine)
        if not torch.equal(a, b):
            bad.append(f"{dim}: {a.tolist()} != {b.tolist()}")
    return bad
