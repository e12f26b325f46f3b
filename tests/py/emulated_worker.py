# SPDX-License-Identifier: Apache-2.0
"""Rank program for tests/py/test_emulate.py, run by `python -m torch_topo.emulate`.

Runs collectives on a "gloo" world group, checks each against a result computed locally from
the seeded inputs of every rank, and repeats them on a "topo" group (when torch_topo and its
backend load) compared with the gloo result. Writes <out>/rank<R>.json. `--kill-rank R` makes
rank R kill itself with SIGKILL while the others wait in an all_reduce (on the topo group when
there is one).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

_NUMEL = 1000  # not divisible by the world sizes tested (4, 6): uneven shards on purpose


def _input(rank: int, salt: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randint(-100, 100, (_NUMEL,), generator=gen).to(torch.float32)


def _run_collectives(group, world: int, rank: int) -> dict[str, torch.Tensor]:
    """The results of one round of collectives on `group`."""
    out = {}
    t = _input(rank, 1)
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=group)
    out["all_reduce_sum"] = t
    t = _input(rank, 2)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    out["all_reduce_max"] = t
    gathered = [torch.empty(_NUMEL) for _ in range(world)]
    dist.all_gather(gathered, _input(rank, 3), group=group)
    out["all_gather"] = torch.stack(gathered)
    shard = torch.empty(_NUMEL)
    dist.reduce_scatter(shard, [_input(rank, 4 + r) for r in range(world)], group=group)
    out["reduce_scatter"] = shard
    t = _input(rank, 20)
    dist.broadcast(t, src=world - 1, group=group)
    out["broadcast"] = t
    return out


def _expected(world: int, rank: int) -> dict[str, torch.Tensor]:
    # Integer-valued float32 inputs: sums are exact in any order, so equality is exact.
    everyone = range(world)
    return {
        "all_reduce_sum": sum(_input(r, 1) for r in everyone),
        "all_reduce_max": torch.stack([_input(r, 2) for r in everyone]).amax(0),
        "all_gather": torch.stack([_input(r, 3) for r in everyone]),
        "reduce_scatter": sum(_input(r, 4 + rank) for r in everyone),
        "broadcast": _input(world - 1, 20),
    }


def _mismatches(got: dict, want: dict) -> list[str]:
    return [name for name in want if not torch.equal(got[name], want[name])]


def _topo_group(timeout: timedelta):
    try:
        import torch_topo  # noqa: F401  (registers the backend)
    except ImportError as exc:
        return None, f"torch_topo not importable: {exc}"
    if "topo" not in dist.Backend.backend_list:
        return None, "torch_topo does not register the 'topo' backend yet"
    return dist.new_group(backend="topo", timeout=timeout), ""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--timeout-s", type=float, default=20.0)
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    record = {"rank": rank, "hostname": socket.gethostname(),
              "node": int(os.environ["NODE_RANK"]), "local_rank": int(os.environ["LOCAL_RANK"])}
    path = os.path.join(args.out, f"rank{rank}.json")
    timeout = timedelta(seconds=args.timeout_s)
    code = 0
    try:
        dist.init_process_group("gloo", timeout=timeout)
        if args.kill_rank >= 0:
            # On the topo group where the backend loads: its failure path is the one to test.
            group, why = _topo_group(timeout)
            record["kill_backend"] = "gloo" if group is None else "topo"
            dist.barrier()
            if rank == args.kill_rank:
                os.kill(os.getpid(), signal.SIGKILL)
            t0 = time.monotonic()
            try:
                big = torch.ones(4 << 20)  # 16 MiB: the victim dies before its part arrives
                dist.all_reduce(big, group=group)
                record["error"] = None
            except Exception as exc:  # noqa: BLE001  (the test inspects the message)
                record["error"] = f"{type(exc).__name__}: {exc}"[:500]
            record["error_after_s"] = time.monotonic() - t0
            code = 3
        else:
            gloo = _run_collectives(dist.group.WORLD, world, rank)
            record["gloo_mismatches"] = _mismatches(gloo, _expected(world, rank))
            group, why = _topo_group(timeout)
            record["topo_unavailable"] = why
            if group is not None:
                record["topo_mismatches"] = _mismatches(_run_collectives(group, world, rank),
                                                        gloo)
            dist.barrier()
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        record["exception"] = traceback.format_exc()[-2000:]
        code = 4
    with open(path, "w") as f:
        json.dump(record, f)
    return code


if __name__ == "__main__":
    sys.exit(main())
