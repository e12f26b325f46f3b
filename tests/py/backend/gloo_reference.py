# SPDX-License-Identifier: Apache-2.0
"""What the backend cases share: seeded inputs, the ReduceOps and dtypes they run, and plain
Gloo as the independent reference. AVG and PREMUL_SUM, which Gloo lacks, are referenced as Gloo
SUM followed by the same scaling written out here.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int32, torch.int64]
COMPLEX = [torch.complex64, torch.complex128]
ALL_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
PREMUL_FACTOR = 0.375


def seeded(rank: int, shape, dtype, salt: int = 0) -> torch.Tensor:
    if dtype.is_complex:
        part = torch.float32 if dtype == torch.complex64 else torch.float64
        return torch.complex(seeded(rank, shape, part, salt), seeded(rank, shape, part, salt + 1))
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        # Small magnitudes keep PRODUCT finite in float16 for 8 ranks.
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 1.5 + 0.25).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=torch.int64).to(dtype)


def dtypes_for(op: str):
    if op in ("BAND", "BOR", "BXOR"):
        return INTS
    if op == "PREMUL_SUM":
        return FLOATS
    return FLOATS + INTS


def topo_op(op: str, dtype):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(R, op)


def ref_reduce(op: str):
    """The Gloo op and the scaling that completes it (AVG, PREMUL_SUM)."""
    if op == "AVG":  # integers as NCCL averages them: a truncating division of the sum
        return R.SUM, lambda t, size: t.div_(size, rounding_mode=None if (
            t.is_floating_point() or t.is_complex()) else "trunc")
    if op == "PREMUL_SUM":
        return R.SUM, lambda t, size: t.mul_(PREMUL_FACTOR)
    return getattr(R, op), None


def _finish(work, async_op):
    if async_op:
        work.wait()


def _diff(name, got, want, out):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        out.append(f"{name}: got {got.flatten()[:6].tolist()} want {want.flatten()[:6].tolist()}")


_FOLDS = {
    "SUM": torch.add, "AVG": torch.add, "PREMUL_SUM": torch.add, "PRODUCT": torch.mul,
    "MIN": torch.minimum, "MAX": torch.maximum, "BAND": torch.bitwise_and,
    "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor,
}


def reduce_scatter_ref(rank, size, ref, x, op):
    """What "topo" computes on Gloo (one all-to-all, then block r of every rank folded in rank
    order), from the inputs gathered over the plain Gloo group `ref`: each rank's block of the
    result is exact to the bit, independently of either side's collective."""
    inputs = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(inputs, x, group=ref)
    blocks = [t.chunk(size)[rank] for t in inputs]
    want = blocks[0].clone()
    for b in blocks[1:]:
        want = _FOLDS[op](want, b)
    _, scale = ref_reduce(op)
    if scale:
        scale(want, size)
    return want
