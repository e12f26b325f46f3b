# SPDX-License-Identifier: Apache-2.0
"""Rank program of the one-GPU rehearsal tests (`python -m torch_topo.emulate --one-gpu`):
tests/py/test_emulate_one_gpu.py runs it with CPU tensors (Gloo), tests/gpu/test_rehearsal_cuda.py
with CUDA tensors (NCCL, every rank on the one GPU).

Initialises "topo" from the launcher's environment (with `--device cuda`, device_id
cuda:$LOCAL_RANK), records the cluster topo believes in, runs all_reduce, all_gather and
reduce_scatter on seeded integer-valued inputs and compares each with the result computed
locally from every rank's inputs, and notes whether the all_reduce took the hierarchical
schedule. Writes <out>/rank<R>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

_NUMEL = 1 << 16  # 256 KiB of float32


def _input(rank: int, salt: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(100 * salt + rank)
    return torch.randint(-50, 50, (_NUMEL,), generator=gen).to(torch.float32)


def _checks(rank: int, world: int, device: torch.device) -> dict[str, bool]:
    # Integer-valued float32: sums are exact in any order, so equality is exact.
    ok = {}
    t = _input(rank, 1).to(device)
    dist.all_reduce(t)
    ok["all_reduce"] = torch.equal(t.cpu(), sum(_input(r, 1) for r in range(world)))
    out = torch.empty(world * _NUMEL, device=device)
    dist.all_gather_into_tensor(out, _input(rank, 2).to(device))
    ok["all_gather"] = torch.equal(out.cpu(), torch.cat([_input(r, 2) for r in range(world)]))
    shard = torch.empty(_NUMEL // world, device=device)
    dist.reduce_scatter_tensor(shard, _input(rank, 3).to(device))
    want = sum(_input(r, 3) for r in range(world)).chunk(world)[rank]
    ok["reduce_scatter"] = torch.equal(shard.cpu(), want)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    record: dict[str, object] = {"rank": rank}
    code = 0
    try:
        import torch_topo
        from torch_topo.cluster import world_cluster

        kwargs = {}
        device = torch.device("cpu")
        if args.device == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
            kwargs["device_id"] = device
        dist.init_process_group("topo", **kwargs)
        cluster = world_cluster()
        record["hosts"] = cluster.hostnames
        record["gpus_per_host"] = [h.gpu_count for h in cluster.hosts]
        record["placements"] = [[p.host, p.local_gpu] for p in cluster.placements]
        record["checks"] = _checks(rank, world, device)
        backend = dist.group.WORLD._get_backend(device)
        record["all_reduce_choice"] = next(
            (c for op, _, c in backend.last_decisions() if op == "allreduce"), None)
        record["torch_topo"] = torch_topo.__file__
        dist.barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001  (the test shows it)
        record["exception"] = traceback.format_exc()[-3000:]
        code = 4
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    return code


if __name__ == "__main__":
    sys.exit(main())
