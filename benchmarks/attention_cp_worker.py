# SPDX-License-Identifier: Apache-2.0
"""One rank of the sequence-parallel attention comparison benchmarks/rehearsal_ops_gpu.py
launches: causal attention over the world group, forward and backward, by topo's Ulysses, topo's
ring (zigzag) and torch's `context_parallel` (torch.distributed.tensor.experimental, its ring
with the head-tail load balancer), on the same inputs and ranks. Each method's time is the
slowest rank's median; its error is the largest absolute difference of this rank's output and
dQ/dK/dV from single-process SDPA in float32 on the whole sequence (the same bf16 inputs on a
GPU). Writes <out>/rank<R>.json after each method, so a method that fails or hangs costs none of
the others' figures; a method that cannot run records {"not_available": reason}."""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from overlap_worker import init_rank, median_time, reason  # noqa: E402

import torch_topo  # noqa: E402,F401  (registers "topo")
from torch_topo.ops import ring_attention, ulysses_attention, zigzag_shard  # noqa: E402

# device type: batch, sequence (whole), heads, head dim, dtype; --quick divides the sequence.
SHAPES = {"cpu": (1, 512, 4, 32, torch.float32), "cuda": (1, 16384, 16, 128, torch.bfloat16)}
GRADS = ("out", "dq", "dk", "dv")


def reference(q, k, v, g) -> dict[str, torch.Tensor]:
    """Output and input gradients of causal SDPA on the whole sequence, in float32."""
    leaves = [t.float().transpose(1, 2).detach().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=True)
    (out * g.float().transpose(1, 2)).sum().backward()
    return dict(zip(GRADS, (t.transpose(1, 2) for t in (out, *(x.grad for x in leaves))),
                    strict=True))


def errors(got: dict, want: dict) -> dict[str, float]:
    return {n: (got[n].float() - want[n]).abs().max().item() for n in GRADS}


def topo_method(op: str, full: tuple, ref: dict, reps: int) -> dict:
    """Ulysses on contiguous shards or the zigzag ring, against the reference's same rows."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if op == "ulysses":
        s = full[0].shape[1] // world
        shard = lambda t: t[:, rank * s:(rank + 1) * s].contiguous()  # noqa: E731
        attend = lambda q, k, v: ulysses_attention(q, k, v, causal=True)  # noqa: E731
    else:
        shard = lambda t: zigzag_shard(t, dim=1)  # noqa: E731
        attend = lambda q, k, v: ring_attention(q, k, v, causal=True,  # noqa: E731
                                                balance="zigzag")
    q, k, v, g = (shard(t) for t in full)

    def run():
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        out = attend(*leaves)
        (out * g).sum().backward()
        return dict(zip(GRADS, (out, *(x.grad for x in leaves)), strict=True))

    got = run()
    return {"ms": median_time(run, reps, full[0].device) * 1e3,
            "max_abs_diff": errors(got, {n: shard(t) for n, t in ref.items()})}


def torch_context_parallel(full: tuple, ref: dict, reps: int, mesh) -> dict:
    """torch's context parallelism as its documentation shows it: the [b, h, s, d] buffers
    sharded by the context manager, plain SDPA inside, the results unsharded afterwards."""
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import context_parallel_unshard

    q, k, v, g = (t.transpose(1, 2).contiguous() for t in full)
    buffers = [q, k, v, g]
    with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2] * 4,
                          no_restore_buffers=set(buffers)):
        def run():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            out = F.scaled_dot_product_attention(*leaves, is_causal=True)
            (out * g).sum().backward()
            return [out, *(x.grad for x in leaves)]

        local = run()
        ms = median_time(run, reps, q.device) * 1e3
    whole = context_parallel_unshard(mesh, [t.detach() for t in local], [2] * 4)
    got = dict(zip(GRADS, (t.transpose(1, 2) for t in whole), strict=True))
    return {"ms": ms, "max_abs_diff": errors(got, ref)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for rank<R>.json")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--quick", action="store_true", help="a quarter of the sequence, 3 reps")
    args = p.parse_args()
    from torch.distributed.device_mesh import init_device_mesh

    device = init_rank("topo", args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    batch, seq, heads, head_dim, dtype = SHAPES[device.type]
    seq, reps = (seq // 4, 3) if args.quick else (seq, 7)
    gen = torch.Generator().manual_seed(0)  # every rank draws the same whole inputs
    full = tuple(torch.randn(batch, seq, heads, head_dim, generator=gen).to(device, dtype)
                 for _ in range(4))
    ref = reference(*full)
    record = {"world": world, "shape": f"b {batch}, s {seq}, h {heads}, d {head_dim}, "
                                       f"{str(dtype).split('.')[-1]}, causal"}
    path = os.path.join(args.out, f"rank{rank}.json")
    methods = {"topo ulysses": lambda: topo_method("ulysses", full, ref, reps),
               "topo ring zigzag": lambda: topo_method("ring", full, ref, reps),
               "torch context_parallel": lambda: torch_context_parallel(
                   full, ref, reps, init_device_mesh(device.type, (world,)))}
    for name, method in methods.items():
        try:
            record[name] = method()
        except Exception as exc:  # noqa: BLE001  (the row says why; the others still run)
            record[name] = {"not_available": reason(exc)}
        with open(path, "w") as f:
            json.dump(record, f)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
