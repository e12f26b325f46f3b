# SPDX-License-Identifier: Apache-2.0
"""Trains a small model with DDP over the "topo" backend on several local CPU processes and
prints a short report (the README's first command runs this through scripts/demo.sh).

    python examples/ddp_demo.py --procs 4 --steps 20
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn


def _run(rank: int, args, store_path: str, results) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_topo  # noqa: F401  (registers "topo")

    torch.set_num_threads(1)
    store = dist.FileStore(store_path, args.procs)
    dist.init_process_group("topo", store=store, rank=rank, world_size=args.procs,
                            timeout=timedelta(seconds=60))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    w_true = torch.randn(32, 1, generator=torch.Generator().manual_seed(123))
    losses = []
    start = time.perf_counter()
    for _ in range(args.steps):
        x = torch.randn(64, 32, generator=g)
        y = x @ w_true
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    elapsed = time.perf_counter() - start
    # Replicas must agree: gather a parameter checksum from every rank.
    checksum = torch.tensor([sum(p.sum().item() for p in model.parameters())])
    sums = [torch.zeros(1) for _ in range(args.procs)]
    dist.all_gather(sums, checksum)
    results.put((rank, dist.get_backend(), losses[0], losses[-1], elapsed,
                 max(s.item() for s in sums) - min(s.item() for s in sums)))
    dist.barrier()  # no rank tears down while a peer still reads from it
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=4, help="local processes (ranks)")
    parser.add_argument("--steps", type=int, default=20, help="training steps")
    args = parser.parse_args()
    if args.procs < 1 or args.steps < 1:
        raise SystemExit("ddp_demo: --procs and --steps must be >= 1")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_run, args=(r, args, os.path.join(tmp, "store"), results))
                 for r in range(args.procs)]
        for p in procs:
            p.start()
        rows = sorted(results.get(timeout=300) for _ in procs)
        for p in procs:
            p.join(timeout=60)
    print(f"DDP over backend={rows[0][1]!r}: {args.procs} processes, {args.steps} steps")
    print(f"{'rank':>4} {'loss[0]':>10} {'loss[-1]':>10} {'ms/step':>8}")
    for rank, _, first, last, elapsed, _ in rows:
        print(f"{rank:>4} {first:>10.4f} {last:>10.4f} {1000 * elapsed / args.steps:>8.2f}")
    spread = max(r[5] for r in rows)
    ok = spread == 0.0 and all(r[3] < r[2] for r in rows)
    print(f"replicas identical: {spread == 0.0} (checksum spread {spread:.3g}); "
          f"loss decreased on every rank: {all(r[3] < r[2] for r in rows)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
