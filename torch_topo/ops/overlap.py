# SPDX-License-Identifier: Apache-2.0
"""Tensor-parallel linear layers with their collective overlapped: `matmul_reduce_scatter` (row
parallel, Megatron sequence-parallel output) and `all_gather_matmul` (column parallel input).

Rows (dim 0) are cut into chunks; chunk k's collective runs while chunk k+1 computes (C++ core
in csrc/ops/overlap.cpp: async c10d work on CPU, a high-priority communication stream and events
on CUDA). Each op's backward is the other op, also overlapped. `OverlapRecorder` collects
per-chunk timestamps so the hidden fraction of communication can be measured.

`chunks=None` (the default) picks the chunk count by a one-time calibration per shape, group
and direction: the op runs unchunked and chunked in a few interleaved rounds, each round's time
is the slowest rank's, and chunking is kept only where it beats the unchunked op by a margin in
every round; otherwise the op runs as one matmul and one collective (`overlap_choices()` lists
the decisions, `TORCH_TOPO_DEBUG=1` prints them).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from torch_topo import _C
from torch_topo.config import parse_bool
from torch_topo.ops.utils import CheckInputs, check_same_shape, check_tensors, resolve_group
from torch_topo.validation import is_int_in

__all__ = [
    "CALIBRATION_CHUNKS",
    "ChunkChoice",
    "ChunkTiming",
    "CallTiming",
    "OverlapRecorder",
    "all_gather_matmul",
    "calibrate_with",
    "hidden_fraction",
    "inject_delays",
    "matmul_reduce_scatter",
    "overlap_choices",
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
        return covered_time([(c.comm_issue, c.comm_end) for c in self.chunks if c.comm_end > 0])

    @property
    def t_wall(self) -> float:
        return self.end - self.start


def covered_time(spans) -> float:
    """Length of the union of (start, end) intervals: time covered by at least one."""
    total, cur_start, cur_end = 0.0, None, None
    for s, e in sorted(spans):
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def hidden_fraction(t_comm: float, t_compute: float, t_overlapped: float) -> float:
    """(t_comm + t_compute - t_overlapped) / min(t_comm, t_compute): 1 when the shorter side is
    fully hidden behind the longer, 0 when the two ran back to back, negative when the wall time
    exceeds their sum (gaps where neither ran: overhead) (docs/design.md §6)."""
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


# Chunk counts a calibration tries, and by how much a chunked run must beat the unchunked one,
# in every interleaved round, to be chosen: a shared CPU's run-to-run spread is of that size
# (docs/overlap.md), so a win in the median alone is not enough, and one chunk is never slower
# than itself.
CALIBRATION_CHUNKS = (1, 2, 4)
CALIBRATION_MARGIN = 0.9
CALIBRATION_ROUNDS = 5


@dataclass(frozen=True, slots=True)
class ChunkChoice:
    """One calibration: the op and shapes it is for, the median over rounds of the slowest
    rank's seconds per tried chunk count, and the count chosen and why."""

    op: str
    x_shape: tuple[int, ...]
    weight_shape: tuple[int, ...]
    group_size: int
    seconds: dict[int, float]
    chunks: int
    reason: str


class _Calibrations:
    """Per process: chosen chunk count per (direction, shapes, dtype, device, group,
    max_inflight, keep_gathered). Every rank calls the ops in the same order with the same
    shapes (they are collectives), so every rank calibrates the same key at the same call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.chosen: dict[tuple, ChunkChoice] = {}
        # Test hook: seconds per chunk count instead of timing the op (see `calibrate_with`).
        self.timer = None


_calibrations = _Calibrations()


def overlap_choices() -> list[ChunkChoice]:
    """Every chunk-count calibration made in this process so far, in order."""
    with _calibrations.lock:
        return list(_calibrations.chosen.values())


@contextlib.contextmanager
def calibrate_with(timer) -> Iterator[None]:
    """Test hook: `timer(op, chunks)` returns the seconds a calibration should see for a chunk
    count instead of running the op (None: measure); previous choices are forgotten on entry
    and exit."""
    with _calibrations.lock:
        previous, _calibrations.timer = _calibrations.timer, timer
        _calibrations.chosen.clear()
    try:
        yield
    finally:
        with _calibrations.lock:
            _calibrations.timer = previous
            _calibrations.chosen.clear()


def _debug_enabled() -> bool:
    text = os.environ.get("TORCH_TOPO_DEBUG", "").strip()
    return bool(text) and parse_bool("TORCH_TOPO_DEBUG", text)  # the package's one reading


def _choose_chunks(op: str, x: torch.Tensor, weight: torch.Tensor, group, max_inflight: int,
                   gather_first: bool, keep_gathered: bool) -> int:
    """The chunk count of `op` for these shapes on `group`: 1 where nothing can be pipelined,
    else the count a one-time calibration measured fastest (by the margin above)."""
    size = group.size()
    rows = x.shape[0] if gather_first else x.shape[0] // size
    key = (gather_first, tuple(x.shape), tuple(weight.shape), x.dtype, x.device.type, id(group),
           size, max_inflight, keep_gathered)
    with _calibrations.lock:
        known = _calibrations.chosen.get(key)
    if known is not None:
        return known.chunks
    candidates = [c for c in CALIBRATION_CHUNKS if c <= max(rows, 1)]
    if size == 1 or len(candidates) == 1:
        seconds, chunks = {}, 1
        reason = "one rank" if size == 1 else f"{rows} row(s) per rank: nothing to pipeline"
    else:
        rounds = _measure(op, x, weight, group, max_inflight, gather_first, keep_gathered,
                          candidates)
        seconds = {c: statistics.median(r[c] for r in rounds) for c in candidates}
        winners = [c for c in candidates[1:]
                   if all(r[c] <= CALIBRATION_MARGIN * r[1] for r in rounds)]
        if winners:
            chunks = min(winners, key=lambda c: (seconds[c], c))
            reason = (f"beats unchunked by >= {1 - CALIBRATION_MARGIN:.0%} in every one of "
                      f"{len(rounds)} rounds")
        else:
            chunks = 1
            reason = (f"no chunk count beats unchunked by {1 - CALIBRATION_MARGIN:.0%} in every "
                      f"one of {len(rounds)} rounds: nothing worth hiding")
    choice = ChunkChoice(op, tuple(x.shape), tuple(weight.shape), size, seconds, chunks, reason)
    with _calibrations.lock:
        _calibrations.chosen[key] = choice
    if _debug_enabled() and group.rank() == 0:
        tried = ", ".join(f"{c}: {t * 1e3:.2f} ms" for c, t in seconds.items())
        print(f"[torch_topo] {op} x {list(x.shape)} w {list(weight.shape)} {x.dtype} on "
              f"{size} ranks: chunks {chunks} ({reason}"
              + (f"; slowest rank's median per chunk count {tried}" if tried else "") + ")",
              file=sys.stderr, flush=True)
    return chunks


def _measure(op: str, x: torch.Tensor, weight: torch.Tensor, group, max_inflight: int,
             gather_first: bool, keep_gathered: bool, candidates: list[int]
             ) -> list[dict[int, float]]:
    """Seconds per chunk count in each of CALIBRATION_ROUNDS interleaved rounds (after one
    warm-up round), each the maximum over the group's ranks, so every rank decides alike."""
    timer = _calibrations.timer
    rows = []
    for rnd in range(CALIBRATION_ROUNDS + 1):
        row = []
        for c in candidates:
            if timer is not None:
                row.append(timer(op, c))
                continue
            start = _C.overlap_now_seconds()
            _call(x, weight, group, c, max_inflight, gather_first, keep_gathered, False,
                  (0, 0, 0))
            if x.device.type == "cuda":
                torch.cuda.synchronize(x.device)
            row.append(_C.overlap_now_seconds() - start)
        if rnd > 0:
            rows.append(row)
    table = torch.tensor(rows, dtype=torch.float64, device=x.device)
    dist.all_reduce(table, op=dist.ReduceOp.MAX, group=group)
    return [dict(zip(candidates, row, strict=True)) for row in table.tolist()]


def _resolve_group(where: str, group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    if group is None and not dist.is_initialized():
        raise ValueError(f"{where}: group is None and torch.distributed is not initialised")
    return resolve_group(where, group)


def _call(x, weight, group, chunks: int, max_inflight: int, gather_first: bool,
          keep_gathered: bool, recording: bool, delays: tuple):
    compute_us, comm_us, seed = delays
    kwargs = dict(chunks=chunks, max_inflight=max_inflight, record_timing=recording,
                  compute_delay_max_us=compute_us, comm_delay_max_us=comm_us, delay_seed=seed)
    if gather_first:
        return _C.overlap_all_gather_matmul(x, weight, group, keep_gathered=keep_gathered,
                                            **kwargs)
    return _C.overlap_matmul_reduce_scatter(x, weight, group, **kwargs)


def _run(op: str, x: torch.Tensor, weight: torch.Tensor, group, chunks: int | None,
         max_inflight: int, gather_first: bool, keep_gathered: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Runs the C++ all_gather_matmul (`gather_first`) or matmul_reduce_scatter, with the
    calibrated chunk count when `chunks` is None, recording its timing under the label `op`
    when a recorder is active."""
    if chunks is None:
        chunks = _choose_chunks(op, x, weight, group, max_inflight, gather_first, keep_gathered)
    recording = bool(_state.recorders)
    start = _C.overlap_now_seconds()
    out, gathered, timing = _call(x, weight, group, chunks, max_inflight, gather_first,
                                  keep_gathered, recording, _state.delays)
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


def _check_shapes(name: str, x: torch.Tensor, weight: torch.Tensor,
                  group_size: int | None) -> None:
    """The caller's shapes (the core sees x flattened to [rows, K] and would name those)."""
    if x.dim() < 2:
        raise ValueError(f"{name}: x: got {x.dim()}-D shape {tuple(x.shape)}, expected >= 2-D")
    if weight.dim() != 2:
        raise ValueError(f"{name}: weight: got {weight.dim()}-D shape {list(weight.shape)}, "
                         "expected 2-D [out_features, in_features]")
    if weight.device != x.device:
        raise ValueError(f"{name}: weight: got device {weight.device}, expected x's device "
                         f"{x.device}")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{name}: in_features: got x {list(x.shape)} and weight "
                         f"{list(weight.shape)}, expected x.shape[-1] == weight.shape[1]")
    if group_size is not None and x.shape[0] % group_size:
        raise ValueError(
            f"{name}: x.shape[0]: got {x.shape[0]}, expected a multiple of the group size "
            f"{group_size}"
        )


def _flat_rows(x: torch.Tensor) -> torch.Tensor:
    """x as [rows, K], the core's layout. The rows are counted, not -1: reshape cannot infer a
    dim of an empty tensor."""
    return x.reshape(x.shape[:-1].numel(), x.shape[-1])


def _check_counts(name: str, chunks: object, max_inflight: object) -> None:
    for arg, value in (("chunks", chunks), ("max_inflight", max_inflight)):
        # The C++ op checks the range; a float or an int past int64 reached it as a pybind11
        # "incompatible function arguments" TypeError.
        if value is not None and not is_int_in(value, 1, 2**63 - 1):
            raise ValueError(f"{name}: {arg}: got {value!r}, expected an int >= 1")


def _agree(name: str, group, x: torch.Tensor, weight: torch.Tensor, exchanged: torch.Tensor,
           rule: str, group_size: int | None, chunks: object, max_inflight: object,
           check_inputs: CheckInputs) -> None:
    """Every rank checks its shapes and counts, and the ranks agree on `exchanged` (the block
    the collective moves), the weight's dtype and `chunks` (other counts of equal blocks aborted
    Gloo), so that bad input on one rank raises on all (check_same_shape) rather than leaving
    the others in the collective."""
    weight_dtype = torch.empty((), dtype=weight.dtype, device=weight.device)

    def validate():
        _check_counts(name, chunks, max_inflight)
        _check_shapes(name, x, weight, group_size)

    # 0: the op chooses (a calibration every rank decides alike); -1: refused by validate.
    chunk_setting = 0 if chunks is None else chunks if is_int_in(chunks, 1, 2**63 - 1) else -1
    check_same_shape(name, group, {"exchanged": exchanged, "weight": weight_dtype},
                     check_inputs, rule=rule, validate=validate,
                     settings={"chunks": chunk_setting})


def matmul_reduce_scatter(x: torch.Tensor, weight: torch.Tensor,
                          group: dist.ProcessGroup | None = None, chunks: int | None = None,
                          *, max_inflight: int = 2, check_inputs: CheckInputs = "once"
                          ) -> torch.Tensor:
    """Row-parallel linear with a sequence-parallel output:
    reduce_scatter over dim 0 of `x @ weight.T`, summed over `group`.

    Args:
        x: [D0, ..., K_local] partial input (this rank's slice of the features); D0 divisible
            by the group size.
        weight: [N, K_local], this rank's columns of the full weight (nn.Linear layout).
        group: process group; None is the default group.
        chunks: row chunks per rank block, one collective each (1 disables pipelining);
            None calibrates once per shape and group (see the module docstring), and the
            backward pass, the other op on other shapes, calibrates its own.
        max_inflight: collectives in flight at once (bounds the chunk buffers alive).
        check_inputs: verify with one small all_gather (and a host sync) that every rank's
            exchanged block, weight dtype and chunks agree: "once" per group and shapes, True
            on every call, False never (torch_topo.ops.utils.check_same_shape).

    Returns:
        [D0 / P, ..., N]: rank r's rows of the sum over ranks.
    """
    check_tensors("matmul_reduce_scatter", x=x, weight=weight)
    group = _resolve_group("matmul_reduce_scatter", group)
    size = group.size()
    # Ranks that disagree on the exchanged block aborted Gloo (SIGABRT); a zero-stride view
    # carries the [rows, N] shape of x @ weight.T without allocating it.
    product = torch.empty((), dtype=x.dtype, device=x.device).expand(
        x.shape[:-1].numel() if x.dim() else 0, weight.shape[0] if weight.dim() else 0)
    _agree("matmul_reduce_scatter", group, x, weight, product,
           "the same dtype, rows and out_features", size, chunks, max_inflight, check_inputs)
    flat = _flat_rows(x)
    out = MatmulReduceScatterFunction.apply(flat, weight, group, chunks, max_inflight)
    return out.view(x.shape[0] // size, *x.shape[1:-1], weight.shape[0])


def all_gather_matmul(x: torch.Tensor, weight: torch.Tensor,
                      group: dist.ProcessGroup | None = None, chunks: int | None = None, *,
                      max_inflight: int = 2, check_inputs: CheckInputs = "once"
                      ) -> torch.Tensor:
    """Column-parallel linear on a sequence-parallel input: all_gather over dim 0 of `x`, then
    `@ weight.T`.

    Args:
        x: [D0_local, ..., K], this rank's rows.
        weight: [N_local, K], this rank's rows of the full weight (nn.Linear layout).
        group, chunks, max_inflight, check_inputs: as `matmul_reduce_scatter`.

    Returns:
        [P * D0_local, ..., N_local], rows in rank order.
    """
    check_tensors("all_gather_matmul", x=x, weight=weight)
    group = _resolve_group("all_gather_matmul", group)
    _agree("all_gather_matmul", group, x, weight, x, "the same dtype, rows and in_features",
           None, chunks, max_inflight, check_inputs)
    flat = _flat_rows(x)
    out = AllGatherMatmulFunction.apply(flat, weight, group, chunks, max_inflight)
    return out.view(group.size() * x.shape[0], *x.shape[1:-1], weight.shape[0])
