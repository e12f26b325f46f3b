# SPDX-License-Identifier: Apache-2.0
"""One rank of the overlap measurement train_compare.py launches: matmul_reduce_scatter over
the world group, its inner dimension K sized so the matmuls take about as long as the
reduce_scatters (where overlap could pay most), the chunk count the op's own calibration picks
for that shape (`chunks=None`), then at that count compute alone, communication alone and the
op, each the median of several repetitions, and the unchunked op;
hidden fraction = (t_comm + t_compute - t_overlapped) / min(both)."""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

import torch_topo  # noqa: F401  (registers "topo" when the backend is built)
from torch_topo.ops import hidden_fraction, matmul_reduce_scatter
from torch_topo.ops.overlap import overlap_choices

ROWS_PER_RANK, N = 64, 512


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    t = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    return t.item()


def _chunks(rows: int, chunks: int) -> list[slice]:
    size = rows // chunks
    return [slice(c * size, (c + 1) * size) for c in range(chunks)]


def measure(k: int, chunks: int | None, reps: int) -> dict:
    """Figures at `chunks`, or at the count the op calibrates for this shape when None."""
    world = dist.get_world_size()
    x = torch.randn(world * ROWS_PER_RANK, k)
    w = torch.randn(N, k)
    calibration = {}
    if chunks is None:
        matmul_reduce_scatter(x, w)  # the op's one-time calibration for this shape
        choice = overlap_choices()[-1]
        chunks, calibration = choice.chunks, {"seconds": choice.seconds, "reason": choice.reason}
    blocks = x.view(world, ROWS_PER_RANK, k)
    spans = _chunks(ROWS_PER_RANK, chunks)
    partials = [blocks[:, s].matmul(w.t()).reshape(-1, N) for s in spans]
    out = torch.empty(ROWS_PER_RANK, N)

    def compute():  # the op's matmuls, chunk by chunk
        for s in spans:
            blocks[:, s].matmul(w.t())

    def comm():  # the op's collectives, issued back to back
        works = [dist.reduce_scatter_tensor(out[s], p, async_op=True)
                 for s, p in zip(spans, partials, strict=True)]
        for work in works:
            work.wait()

    t_compute = _median_time(compute, reps)
    t_comm = _median_time(comm, reps)
    t_overlapped = _median_time(lambda: matmul_reduce_scatter(x, w, chunks=chunks), reps)
    t_unchunked = _median_time(lambda: matmul_reduce_scatter(x, w, chunks=1), reps)
    return {"shape": f"x [{world * ROWS_PER_RANK}, {k}] w [{N}, {k}]", "chunks": chunks,
            "calibration": calibration.get("seconds", {}),
            "reason": calibration.get("reason", "fixed"),
            "t_compute": t_compute, "t_comm": t_comm, "t_overlapped": t_overlapped,
            "t_unchunked": t_unchunked,
            # One chunk runs the collective after the matmul by construction: nothing hidden.
            "hidden_fraction": (hidden_fraction(t_comm, t_compute, t_overlapped)
                                if chunks > 1 else None),
            "compute_slowdown": t_overlapped / t_compute}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--chunks", type=int, default=None, help="default: the op's calibration")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    backend = "topo" if "topo" in dist.Backend.backend_list else "gloo"
    dist.init_process_group(backend)
    reps = 3 if args.quick else 7
    # Communication does not depend on K, compute grows linearly with it: one probe at K=256
    # gives the K where the two match.
    probe = measure(256, 4, 2)
    k = int(min(8192, max(64, 256 * probe["t_comm"] / probe["t_compute"])) // 64 * 64)
    result = measure(k, args.chunks, reps)
    result["backend"] = backend
    if dist.get_rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
