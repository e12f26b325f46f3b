# SPDX-License-Identifier: Apache-2.0
"""Collective sweeps (layer: Python package, used by `python -m torch_topo bench` and
benchmarks/collective_perf.py): each collective over a range of sizes on "topo" and on its plain
inner backend (Gloo for CPU tensors, NCCL for CUDA) in the same processes, nccl-tests style.

Sizes follow nccl-tests: all_reduce and broadcast move `size` bytes, all_gather's `size` is the
gathered output, reduce_scatter's the input, all_to_all's the whole buffer. busbw = algbw x the
nccl-tests factor from the cost model (`_C.bus_bandwidth_factor`: all_reduce 2(n-1)/n,
all_gather, reduce_scatter and all_to_all (n-1)/n, broadcast 1). Times are the slowest rank's
median over repetitions, topo and inner repetitions interleaved so machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from torch_topo import _C

__all__ = ["COLLECTIVES", "DTYPES", "MAX_BYTES", "SweepConfig", "alternating", "parse_bytes",
           "rotated", "size_series", "sweep_collectives"]

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
DTYPES = ("float32", "float64", "bfloat16", "float16")
MAX_BYTES = (1 << 63) - 1
"""The largest size parse_bytes takes, torch's limit on a tensor's size in bytes; below it, a
size the device cannot hold still ends in each rank's allocation error."""
_REDUCING = ("all_reduce", "reduce_scatter")
# nccl-tests prints these ops' count as its paramcount, the buffer over the ranks: one rank's
# send (all_gather), one rank's receive (reduce_scatter), what one rank sends each peer
# (all_to_all); the others' whole buffer.
_COUNTED_PER_RANK = ("all_gather", "reduce_scatter", "all_to_all")
# torch 2.14 renames the flat forms (the old names warn); older releases have only the old ones.
_ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)


def parse_bytes(text: str) -> int:
    """ "8", "64K", "16M", "1G" (binary units, optional trailing B) -> bytes, 1 to MAX_BYTES;
    an argparse type."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    body = text.strip().upper().removesuffix("B")
    try:
        value = float(body[:-1]) * units[body[-1]] if body and body[-1] in units else int(body)
        if math.isnan(value):  # "nanK": no size at all, not one out of range
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected bytes like 8, 64K, 16M") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected at least 1 byte")
    # int(inf) raised OverflowError, and a size past int64 reached every rank, whose
    # torch.ones refused it as a TypeError traceback.
    if value > MAX_BYTES:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected at most {MAX_BYTES} bytes "
                                         "(2^63 - 1: torch counts a tensor's size in signed "
                                         "64-bit integers)")
    return int(value)


def alternating(rep: int, first, second) -> tuple:
    """(first, second) on even repetitions, (second, first) on odd ones: side-by-side timings
    take turns going first, so whatever the first block after a barrier pays (clocks, a
    sleeping host thread, caches) is not always charged to one side."""
    return tuple(rotated(rep, (first, second)))


def rotated(rep: int, items) -> list:
    """`items` rotated left by `rep`: with more than two sides each takes every place in turn,
    as `alternating` does for two."""
    items = list(items)
    k = rep % len(items)
    return items[k:] + items[:k]


def size_series(lo: int, hi: int, factor: int) -> tuple[int, ...]:
    """lo, lo*factor, ... while <= hi: the sizes of an nccl-tests style sweep."""
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return tuple(sizes)


@dataclass(kw_only=True, frozen=True, slots=True)
class SweepConfig:
    """What one sweep measures."""

    collectives: tuple[str, ...] = COLLECTIVES
    """Collectives in the order they run; each from COLLECTIVES."""
    min_bytes: int = 8
    """Smallest size (nccl-tests meaning, see the module docstring)."""
    max_bytes: int = 16 << 20
    """Largest size; sizes grow by `factor` from min_bytes while <= max_bytes."""
    factor: int = 4
    """Size step."""
    reps: int = 5
    """Interleaved topo/inner repetitions per size; the median is reported."""
    dtype: str = "float32"
    """Element type, one of DTYPES."""
    sizes: tuple[int, ...] = field(init=False)
    """The sizes swept (derived)."""

    def __post_init__(self) -> None:
        bad = [c for c in self.collectives if c not in COLLECTIVES]
        if bad or not self.collectives:
            raise ValueError(f"collectives: got {list(self.collectives)}, expected a non-empty "
                             f"list of {', '.join(COLLECTIVES)}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype: got {self.dtype!r}, expected one of {', '.join(DTYPES)}")
        if self.factor < 2:
            raise ValueError(f"factor: got {self.factor}, expected >= 2")
        if not 1 <= self.min_bytes <= self.max_bytes:
            raise ValueError(f"min_bytes/max_bytes: got {self.min_bytes}/{self.max_bytes}, "
                             "expected 1 <= min_bytes <= max_bytes")
        if self.reps < 1:
            raise ValueError(f"reps: got {self.reps}, expected >= 1")
        object.__setattr__(self, "sizes", size_series(self.min_bytes, self.max_bytes, self.factor))

    @property
    def steps(self) -> int:
        """Measurements in the sweep (collectives x sizes), for progress reporting."""
        return len(self.collectives) * len(self.sizes)


def _make_op(name: str, nbytes: int, n: int, dtype: torch.dtype, device: torch.device):
    """(element count, closure issuing one collective of `nbytes` on a given group)."""
    elem = torch.empty((), dtype=dtype).element_size()
    count = max(n, nbytes // elem // n * n)  # divisible by n for the sharded forms

    def full(k):
        return torch.ones(k, dtype=dtype, device=device)

    if name == "all_reduce":
        t = full(count)
        return count, lambda g: dist.all_reduce(t, group=g)
    if name == "all_gather":
        out, inp = full(count), full(count // n)
        return count, lambda g: _ALL_GATHER(out, inp, group=g)
    if name == "reduce_scatter":
        out, inp = full(count // n), full(count)
        return count, lambda g: _REDUCE_SCATTER(out, inp, group=g)
    if name == "all_to_all":
        out, inp = full(count), full(count)
        return count, lambda g: dist.all_to_all_single(out, inp, group=g)
    t = full(count)  # broadcast (names are checked by SweepConfig); every group spans the world
    return count, lambda g: dist.broadcast(t, 0, group=g)


def _iters_for(nbytes: int) -> int:
    # About the same wall time per size: many calls for small messages, few for large.
    return max(2, min(200, (8 << 20) // max(nbytes, 1)))


def _time_block(fn, group, ctl, iters: int, sync: Callable[[], None]) -> float:
    dist.barrier(group=ctl)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        fn(group)
    sync()
    return (time.perf_counter() - start) / iters


def _measure(fn, topo, inner, ctl, iters: int, reps: int, sync) -> tuple[float, float]:
    for g in (topo, inner):
        for _ in range(2):
            fn(g)
    t_topo, t_inner = [], []
    for rep in range(reps):
        for group, times in alternating(rep, (topo, t_topo), (inner, t_inner)):
            times.append(_time_block(fn, group, ctl, iters, sync))
    local = torch.tensor([statistics.median(t_topo), statistics.median(t_inner)],
                         dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=ctl)
    return local[0].item(), local[1].item()


def sweep_collectives(config: SweepConfig, *, topo, inner, ctl, inner_name: str,
                      device: torch.device,
                      progress: Callable[[str], None] | None = None) -> list[dict]:
    """Runs the sweep on every rank of `topo`; returns one record per collective and size.

    Args:
        topo: the "topo" group measured.
        inner: a plain group of the inner backend over the same ranks.
        ctl: a Gloo group over the same ranks for barriers and the slowest-rank reduction.
        inner_name: the inner backend's name ("gloo", "nccl"), recorded with each row.
        device: where the buffers live.
        progress: called with a label after each measurement (rank 0 passes one).
    """
    n = dist.get_world_size(group=topo)
    dtype = getattr(torch, config.dtype)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    records = []
    for name in config.collectives:
        factor = _C.bus_bandwidth_factor(name, n)
        for nbytes in config.sizes:
            count, fn = _make_op(name, nbytes, n, dtype, device)
            t_topo, t_inner = _measure(fn, topo, inner, ctl, _iters_for(nbytes), config.reps, sync)
            real = count * torch.empty((), dtype=dtype).element_size()
            records.append({
                "collective": name, "size": real,
                "count": count // n if name in _COUNTED_PER_RANK else count, "type": config.dtype,
                "redop": "sum" if name in _REDUCING else "none", "ranks": n, "inner": inner_name,
                "topo_time_us": t_topo * 1e6, "inner_time_us": t_inner * 1e6,
                "topo_algbw_GBps": real / t_topo / 1e9, "inner_algbw_GBps": real / t_inner / 1e9,
                "topo_busbw_GBps": real / t_topo / 1e9 * factor,
                "inner_busbw_GBps": real / t_inner / 1e9 * factor,
                "ratio": t_inner / t_topo,
                "overhead_us": (t_topo - t_inner) * 1e6,
            })
            if progress is not None:
                progress(f"{name} {real} B")
    return records
