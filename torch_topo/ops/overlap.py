# SPDX-License-Identifier: Apache-2.0
"""Tensor-parallel linear layers with their collective overlapped: `matmul_reduce_scatter` (row
parallel, Megatron sequence-parallel output) and `all_gather_matmul` (column parallel input).

Rows (dim 0) are cut into chunks; chunk k's collective runs while chunk k+1 computes (C++ core
in csrc/ops/overlap.cpp: async c10d work on CPU, a high-priority communication stream and events
on CUDA). Each op's backward is the other op, also overlapped. `OverlapRecorder` collects
per-chunk timestamps so the hidden fraction of communication can be measured.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from torch_topo import _C

__all__ = [
    "ChunkTiming",
    "CallTiming",
    "OverlapRecorder",
    "all_gather_matmul",
    "hidden_fraction",
    "inject_delays",
    "matmul_reduce_scatter",
]


@dataclass(frozen=True, slots=True)
class ChunkTiming:
    """Host timestamps (seconds, `torch_topo._C.overlap_now_seconds` clock) of one chunk."""

    chunk: int
    compute_start: float
    compute_end: float
    comm_issue: float
    comm_end: float
    """0.0 when the backend's Work never reported completion through its future."""


@dataclass(slots=True)
class CallTiming:
    """One overlapped call: its chunks and the wall interval around it."""

    op: str
    start: float
    end: float
    chunks: list[ChunkTiming]

    @property
    def t_compute(self) -> float:
        """Seconds spent in the chunks' matmuls (their sum)."""
        return sum(c.compute_end - c.compute_start for c in self.chunks)

    @property
    def t_comm(self) -> float:
        """Seconds during which at least one collective was in flight (union of intervals)."""
        spans = sorted((c.comm_issue, c.comm_end) for c in self.chunks if c.comm_end > 0)
        total, cur_start, cur_end = 0.0, None, None
        for s, e in spans:
            if cur_end is None or s > cur_end:
                if cur_end is not None:
                    total += cur_end - cur_start
                cur_start, cur_end = s, e
            else:
                cur_end = max(cur_end, e)
        if cur_end is not None:
            total += cur_end - cur_start
        return total

    @property
    def t_wall(self) -> float:
        return self.end - self.start


def hidden_fraction(t_comm: float, t_compute: float, t_overlapped: float) -> float:
    """(t_comm + t_compute - t_overlapped) / min(t_comm, t_compute): 1 when the shorter side is
    fully hidden behind the longer, 0 when the two ran back to back (DESIGN.md §6)."""
    shorter = min(t_comm, t_compute)
    if not shorter > 0:
        raise ValueError(
            f"hidden_fraction: got t_comm={t_comm}, t_compute={t_compute}, expected both > 0"
        )
    return (t_comm + t_compute - t_overlapped) / shorter


@dataclass(slots=True)
class OverlapRecorder:
    """Context manager collecting a `CallTiming` per overlapped call (forward and backward)
    made on this thread while it is active."""

    calls: list[CallTiming] = field(default_factory=list)

    def __enter__(self) -> OverlapRecorder:
        _state.recorders.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _state.recorders.remove(self)

    def summary(self) -> dict[str, float]:
        """Totals over all calls: t_compute, t_comm, t_wall (seconds) and, when both sides
        took time, their hidden fraction from these in-run measurements."""
        t_compute = sum(c.t_compute for c in self.calls)
        t_comm = sum(c.t_comm for c in self.calls)
        t_wall = sum(c.t_wall for c in self.calls)
        out = {"calls": len(self.calls), "t_compute": t_compute, "t_comm": t_comm,
               "t_wall": t_wall}
        if t_compute > 0 and t_comm > 0:
            out["hidden_fraction"] = hidden_fraction(t_comm, t_compute, t_wall)
        return out


class _State(threading.local):
    def __init__(self) -> None:
        self.recorders: list[OverlapRecorder] = []
        self.delays = (0, 0, 0)


_state = _State()


@contextlib.contextmanager
def inject_delays(compute_us: int = 0, comm_us: int = 0, seed: int = 0) -> Iterator[None]:
    """Test hook: random pauses of up to `compute_us` before each chunk's matmul and up to
    `comm_us` before each collective is issued, drawn per rank from `seed`, so ranks reach the
    chunks out of step. Results must not change."""
    if compute_us < 0 or comm_us < 0:
        raise ValueError(
            f"inject_delays: got compute_us={compute_us}, comm_us={comm_us}, expected >= 0"
        )
    previous = _state.delays
    _state.delays = (compute_us, comm_us, seed)
    try:
        yield
    finally:
        _state.delays = previous


def _resolve_group(group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    if group is None:
        if not dist.is_initialized():
            raise ValueError("overlap ops: group is None and torch.distributed is not initialised")
        return dist.distributed_c10d._get_default_group()
    if not isinstance(group, dist.ProcessGroup):
        raise ValueError(f"overlap ops: group: got {type(group).__name__}, expected a ProcessGroup")
    return group


def _run(op: str, x: torch.Tensor, weight: torch.Tensor, group, chunks: int, max_inflight: int,
         gather_first: bool, keep_gathered: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Runs the C++ all_gather_matmul (`gather_first`) or matmul_reduce_scatter, recording
    its timing under the label `op` when a recorder is active."""
    recording = bool(_state.recorders)
    compute_us, comm_us, seed = _state.delays
    kwargs = dict(chunks=chunks, max_inflight=max_inflight, record_timing=recording,
                  compute_delay_max_us=compute_us, comm_delay_max_us=comm_us, delay_seed=seed)
    start = _C.overlap_now_seconds()
    if gather_first:
        out, gathered, timing = _C.overlap_all_gather_matmul(
            x, weight, group, keep_gathered=keep_gathered, **kwargs
        )
    else:
        out, gathered, timing = _C.overlap_matmul_reduce_scatter(x, weight, group, **kwargs)
    if recording:
        call = CallTiming(op, start, _C.overlap_now_seconds(), [ChunkTiming(*t) for t in timing])
        for recorder in _state.recorders:
            recorder.calls.append(call)
    return out, gathered


class MatmulReduceScatterFunction(torch.autograd.Function):
    """out = reduce_scatter_dim0(x @ weight.T); backward: d_x = all_gather(d_out) @ weight
    (overlapped), d_weight = all_gather(d_out).T @ x."""

    @staticmethod
    def forward(ctx, x, weight, group, chunks, max_inflight):
        ctx.group, ctx.chunks, ctx.max_inflight = group, chunks, max_inflight
        ctx.save_for_backward(x, weight)
        out, _ = _run("matmul_reduce_scatter", x, weight, group, chunks, max_inflight,
                      gather_first=False)
        return out

    @staticmethod
    def backward(ctx, d_out):
        x, weight = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        d_x, gathered = _run("matmul_reduce_scatter.backward", d_out.contiguous(), weight.t(),
                             ctx.group, ctx.chunks, ctx.max_inflight, gather_first=True,
                             keep_gathered=need_w)
        d_w = gathered.t().mm(x) if need_w else None
        return (d_x if need_x else None), d_w, None, None, None


class AllGatherMatmulFunction(torch.autograd.Function):
    """out = all_gather_dim0(x) @ weight.T; backward: d_x = reduce_scatter(d_out @ weight)
    (overlapped), d_weight = d_out.T @ all_gather(x) (kept from forward)."""

    @staticmethod
    def forward(ctx, x, weight, group, chunks, max_inflight):
        ctx.group, ctx.chunks, ctx.max_inflight = group, chunks, max_inflight
        need_w = weight.requires_grad
        out, gathered = _run("all_gather_matmul", x, weight, group, chunks, max_inflight,
                             gather_first=True, keep_gathered=need_w)
        ctx.save_for_backward(gathered if need_w else None, weight)
        return out

    @staticmethod
    def backward(ctx, d_out):
        gathered, weight = ctx.saved_tensors
        d_out = d_out.contiguous()
        d_x = None
        if ctx.needs_input_grad[0]:
            d_x, _ = _run("all_gather_matmul.backward", d_out, weight.t(), ctx.group,
                          ctx.chunks, ctx.max_inflight, gather_first=False)
        d_w = d_out.t().mm(gathered) if ctx.needs_input_grad[1] else None
        return d_x, d_w, None, None, None


def _flatten_rows(name: str, x: torch.Tensor, group_size: int | None) -> torch.Tensor:
    if x.dim() < 2:
        raise ValueError(f"{name}: x: got {x.dim()}-D shape {tuple(x.shape)}, expected >= 2-D")
    if group_size is not None and x.shape[0] % group_size:
        raise ValueError(
            f"{name}: x.shape[0]: got {x.shape[0]}, expected a multiple of the group size "
            f"{group_size}"
        )
    return x.reshape(-1, x.shape[-1])


def matmul_reduce_scatter(x: torch.Tensor, weight: torch.Tensor,
                          group: dist.ProcessGroup | None = None, chunks: int = 4, *,
                          max_inflight: int = 2) -> torch.Tensor:
    """Row-parallel linear with a sequence-parallel output:
    reduce_scatter over dim 0 of `x @ weight.T`, summed over `group`.

    Args:
        x: [D0, ..., K_local] partial input (this rank's slice of the features); D0 divisible
            by the group size.
        weight: [N, K_local], this rank's columns of the full weight (nn.Linear layout).
        group: process group; None is the default group.
        chunks: row chunks per rank block, one collective each (1 disables pipelining).
        max_inflight: collectives in flight at once (bounds the chunk buffers alive).

    Returns:
        [D0 / P, ..., N]: rank r's rows of the sum over ranks.
    """
    group = _resolve_group(group)
    size = group.size()
    flat = _flatten_rows("matmul_reduce_scatter", x, size)
    out = MatmulReduceScatterFunction.apply(flat, weight, group, chunks, max_inflight)
    return out.view(x.shape[0] // size, *x.shape[1:-1], weight.shape[0])


def all_gather_matmul(x: torch.Tensor, weight: torch.Tensor,
                      group: dist.ProcessGroup | None = None, chunks: int = 4, *,
                      max_inflight: int = 2) -> torch.Tensor:
    """Column-parallel linear on a sequence-parallel input: all_gather over dim 0 of `x`, then
    `@ weight.T`.

    Args:
        x: [D0_local, ..., K], this rank's rows.
        weight: [N_local, K], this rank's rows of the full weight (nn.Linear layout).
        group, chunks, max_inflight: as `matmul_reduce_scatter`.

    Returns:
        [P * D0_local, ..., N_local], rows in rank order.
    """
    group = _resolve_group(group)
    flat = _flatten_rows("all_gather_matmul", x, None)
    out = AllGatherMatmulFunction.apply(flat, weight, group, chunks, max_inflight)
    return out.view(group.size() * x.shape[0], *x.shape[1:-1], weight.shape[0])
