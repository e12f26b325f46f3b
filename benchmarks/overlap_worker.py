# SPDX-License-Identifier: Apache-2.0
"""One rank of the overlap measurement train_compare.py launches: matmul_reduce_scatter over
the world group, its inner dimension K sized so the matmuls take about as long as the
reduce_scatters (where overlap could pay most), the chunk count the op's own calibration picks
for that shape (`chunks=None`), then at that count compute alone, communication alone and the
op, each the median of several repetitions, and the unchunked op;
hidden fraction = (t_comm + t_compute - t_overlapped) / min(both).

`--device cuda` runs it on this rank's GPU in bf16 with larger blocks (what
benchmarks/rehearsal_ops_gpu.py launches on one GPU at world 2 and 4); `--symm-mem` then adds
torch's symmetric-memory fused matmul + reduce-scatter on the same shape, or the reason it cannot
run, written after the other figures so that a failure or hang there costs none of them."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

import torch_topo  # noqa: F401  (registers "topo" when the backend is built)
from torch_topo.ops import hidden_fraction, matmul_reduce_scatter
from torch_topo.ops.overlap import overlap_choices

# device type: rows per rank, N, dtype, the K of the first probe, probes, the largest K. On a
# GPU a small K's matmuls are launch overhead, not flops, so the first probe starts high and a
# second corrects it; matching a loopback socket's rate there takes a K in the 100,000s.
SHAPES = {"cpu": (64, 512, torch.float32, 256, 1, 8192),
          "cuda": (256, 1024, torch.bfloat16, 8192, 2, 262144)}


def median_time(fn, reps: int, device: torch.device) -> float:
    """Seconds of `fn` on the slowest rank: every rank's median over `reps` calls, each started
    together (a barrier) and ended when this rank's work on `device` is done."""
    cuda = device.type == "cuda"
    times = []
    for _ in range(reps):
        dist.barrier()
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    # On the GPU: a CPU tensor would make topo build its Gloo side just for this.
    t = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    return t.item()


def _chunks(rows: int, chunks: int) -> list[slice]:
    size = rows // chunks
    return [slice(c * size, (c + 1) * size) for c in range(chunks)]


def measure(k: int, chunks: int | None, reps: int, device: torch.device) -> dict:
    """Figures at `chunks`, or at the count the op calibrates for this shape when None."""
    world = dist.get_world_size()
    rows, n, dtype = SHAPES[device.type][:3]
    x = torch.randn(world * rows, k, device=device, dtype=dtype)
    w = torch.randn(n, k, device=device, dtype=dtype)
    calibration = {}
    if chunks is None:
        matmul_reduce_scatter(x, w)  # the op's one-time calibration for this shape
        choice = overlap_choices()[-1]
        chunks, calibration = choice.chunks, {"seconds": choice.seconds, "reason": choice.reason}
    blocks = x.view(world, rows, k)
    spans = _chunks(rows, chunks)
    partials = [blocks[:, s].matmul(w.t()).reshape(-1, n) for s in spans]
    out = torch.empty(rows, n, device=device, dtype=dtype)

    def compute():  # the op's matmuls, chunk by chunk
        for s in spans:
            blocks[:, s].matmul(w.t())

    def comm():  # the op's collectives, issued back to back
        works = [dist.reduce_scatter_tensor(out[s], p, async_op=True)
                 for s, p in zip(spans, partials, strict=True)]
        for work in works:
            work.wait()

    t_compute = median_time(compute, reps, device)
    t_comm = median_time(comm, reps, device)
    t_overlapped = median_time(lambda: matmul_reduce_scatter(x, w, chunks=chunks), reps,
                               device)
    t_unchunked = median_time(lambda: matmul_reduce_scatter(x, w, chunks=1), reps, device)
    return {"shape": f"x [{world * rows}, {k}] w [{n}, {k}]", "k": k, "chunks": chunks,
            "calibration": calibration.get("seconds", {}),
            "reason": calibration.get("reason", "fixed"),
            "t_compute": t_compute, "t_comm": t_comm, "t_overlapped": t_overlapped,
            "t_unchunked": t_unchunked,
            # One chunk runs the collective after the matmul by construction: nothing hidden.
            "hidden_fraction": (hidden_fraction(t_comm, t_compute, t_overlapped)
                                if chunks > 1 else None),
            "compute_slowdown": t_overlapped / t_compute}


def reason(exc: BaseException) -> str:
    """An exception as one short line, for a row that could not be measured."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"


def symm_mem_fused(k: int, reps: int, t_comm: float, t_compute: float,
                   device: torch.device) -> dict:
    """torch's fused matmul + reduce-scatter over symmetric memory on `measure`'s shape, its
    hidden fraction against the same compute-alone and communication-alone times, and its
    largest difference from matmul_reduce_scatter; {"not_available": reason} where it cannot
    run. On one GPU the ranks' buffers share a device, which torch refuses unless
    TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 (the launcher sets it)."""
    if device.type != "cuda":
        return {"not_available": f"needs CUDA tensors, this run is on {device.type}"}
    try:
        import torch.distributed._symmetric_memory as symm_mem

        world = dist.get_world_size()
        rows, n, dtype = SHAPES["cuda"][:3]
        x = torch.randn(world * rows, k, device=device, dtype=dtype)
        w = torch.randn(n, k, device=device, dtype=dtype)
        name = dist.group.WORLD.group_name
        symm_mem.enable_symm_mem_for_group(name)

        def fused():
            return torch.ops.symm_mem.fused_matmul_reduce_scatter(x, w.t(), "sum", 0, name)

        diff = (fused().float() - matmul_reduce_scatter(x, w, chunks=1).float()).abs().max()
        t_fused = median_time(fused, reps, device)
        return {"t_fused": t_fused, "max_abs_diff": diff.item(),
                "hidden_fraction": hidden_fraction(t_comm, t_compute, t_fused)}
    except Exception as exc:  # noqa: BLE001  (any failure is the row's reason)
        return {"not_available": reason(exc)}


def _write(path: str | None, result: dict) -> None:
    if dist.get_rank() == 0 and path:
        with open(path, "w") as f:
            json.dump(result, f)


def init_rank(backend: str, device_kind: str) -> torch.device:
    """Joins the launcher's process group; a CUDA rank binds its LOCAL_RANK GPU and hands it to
    the group as device_id, as torch recommends."""
    kwargs = {}
    device = torch.device("cpu")
    if device_kind == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(backend, **kwargs)
    return device


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--chunks", type=int, default=None, help="default: the op's calibration")
    p.add_argument("--fixed-chunks", type=int, default=None,
                   help="also measure at this chunk count (a hidden fraction even where the "
                        "calibration keeps one chunk)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--symm-mem", action="store_true",
                   help="also torch's symmetric-memory fused matmul + reduce-scatter")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    backend = "topo" if "topo" in dist.Backend.backend_list else "gloo"
    device = init_rank(backend, args.device)
    reps = 3 if args.quick else 7
    # Communication does not depend on K, compute grows linearly with it: a probe at one K
    # gives the K where the two match.
    k, probes, k_max = SHAPES[device.type][3:]
    for _ in range(probes):
        probe = measure(k, 4, 2, device)
        k = int(min(k_max, max(64, k * probe["t_comm"] / probe["t_compute"])) // 64 * 64)
    result = measure(k, args.chunks, reps, device)
    result.update(backend=backend, device=device.type)
    if args.fixed_chunks:
        result["fixed"] = measure(k, args.fixed_chunks, reps, device)
    _write(args.json, result)
    if args.symm_mem:
        result["symm_mem"] = symm_mem_fused(k, reps, result["t_comm"], result["t_compute"],
                                            device)
        _write(args.json, result)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
