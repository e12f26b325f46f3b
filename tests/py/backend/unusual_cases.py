# SPDX-License-Identifier: Apache-2.0
"""Legal but unusual tensors on every public collective, each call run on "topo" and on a plain
Gloo group over the same ranks (run on every rank of a RankPool, flat or hierarchical by the
pool's config): strided, transposed, offset and channels_last layouts; zero-element and 0-dim
tensors; complex, bool and 8-bit dtypes; list forms whose tensors differ in shape; async works
waited out of issue order.

Each call is `call(rank, size, group, ref, layout, dtype, shape)` and returns what it produced on
this rank. Integer-valued data throughout, so results are exact whatever order a backend sums
in. References: plain Gloo reads a tensor that is not contiguous as one dense block from its
first element (collective_cases.strided_views), and its tensor forms need dim-0 blocks where
NCCL and "topo" take element counts, so the Gloo side (`ref=True`) gets contiguous copies, and
the tensor forms' 0-dim tensors as 1-element views; a call Gloo refuses must fail with the same
error kind on "topo".
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
from op_coverage import _outcome, _same

LAYOUTS = ["transposed", "strided", "offset", "channels_last"]
DTYPES = [torch.complex64, torch.complex128, torch.bool, torch.uint8, torch.int8, torch.float16,
          torch.bfloat16]
EMPTY_SHAPES = [(0,), (), (2, 0)]


def _data(rank: int, shape, dtype=torch.int64, salt: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(97 * rank + salt)
    t = torch.randint(-9, 10, shape, generator=g, dtype=torch.int64)
    if dtype == torch.bool:
        return t > 0
    if dtype == torch.uint8:
        return t.abs().to(dtype)
    if dtype.is_complex:
        return torch.complex(t.double(), (t * 3 % 7).double()).to(dtype)
    return t.to(dtype)


def _lay(t: torch.Tensor, layout: str, ref: bool) -> torch.Tensor:
    """`t`'s values in `layout` ("plain": a contiguous copy); the reference side gets them
    contiguous."""
    if not ref and layout == "grad":  # a leaf that requires grad, as a model's parameter is
        return t.clone().requires_grad_()
    if not ref and layout == "grad_transposed":  # a transposed view of such a leaf
        return t.t().contiguous().requires_grad_().t()
    if not ref and layout.startswith("inference"):  # made under torch.inference_mode()
        with torch.inference_mode():
            return _lay(t, layout.partition("_")[2] or "plain", ref)
    if ref or layout == "plain" or t.dim() < 2:
        out = t.clone()
    elif layout == "transposed":
        out = torch.empty(t.shape[::-1], dtype=t.dtype).t().copy_(t)
    elif layout == "strided":  # every other column of a wider buffer
        out = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype)[..., ::2].copy_(t)
    elif layout == "offset":  # contiguous, 3 elements into its storage
        out = torch.zeros(t.numel() + 3, dtype=t.dtype)[3:].view(t.shape).copy_(t)
    else:
        out = t.contiguous(memory_format=torch.channels_last)
    return out


def _rows(shape, size):
    """`shape` with size times the rows (a 0-dim shape becomes `size` elements)."""
    return (size * shape[0],) + tuple(shape[1:]) if shape else (size,)


def _flat_for_gloo(t, ref):
    # Gloo's tensor forms refuse 0-dim tensors (all-gather) or hang on them (reduce-scatter).
    return t.view(-1) if ref and t.dim() == 0 else t


def _all_reduce(rank, size, g, ref, layout, dtype, shape):
    t = _lay(_data(rank, shape, dtype), layout, ref)
    dist.all_reduce(t, group=g)
    return t


def _broadcast(rank, size, g, ref, layout, dtype, shape):
    t = _lay(_data(rank, shape, dtype), layout, ref)
    dist.broadcast(t, src=size - 1, group=g)
    return t


def _reduce(rank, size, g, ref, layout, dtype, shape):
    t = _lay(_data(rank, shape, dtype), layout, ref)
    dist.reduce(t, dst=1, group=g)
    return t if rank == 1 else None  # other ranks' buffers are scratch space


def _all_gather(rank, size, g, ref, layout, dtype, shape):
    outs = [_lay(torch.zeros(shape, dtype=dtype), layout, ref) for _ in range(size)]
    dist.all_gather(outs, _lay(_data(rank, shape, dtype), layout, ref), group=g)
    return outs


def _all_gather_into_tensor(rank, size, g, ref, layout, dtype, shape):
    out = _lay(torch.zeros(_rows(shape, size), dtype=dtype), layout, ref)
    x = _flat_for_gloo(_lay(_data(rank, shape, dtype), layout, ref), ref)
    dist.all_gather_into_tensor(out, x, group=g)
    return out


def _reduce_scatter(rank, size, g, ref, layout, dtype, shape):
    out = _lay(torch.zeros(shape, dtype=dtype), layout, ref)
    dist.reduce_scatter(out, [_lay(_data(rank, shape, dtype, j), layout, ref)
                              for j in range(size)], group=g)
    return out


def _reduce_scatter_tensor(rank, size, g, ref, layout, dtype, shape):
    out = _flat_for_gloo(_lay(torch.zeros(shape, dtype=dtype), layout, ref), ref)
    dist.reduce_scatter_tensor(out, _lay(_data(rank, _rows(shape, size), dtype), layout, ref),
                               group=g)
    return out.view(shape)


def _all_to_all_single(rank, size, g, ref, layout, dtype, shape):
    if not shape:
        shape = (1,)  # split along dim 0, which a 0-dim tensor lacks
    # Uneven, with empty splits: rank s sends rank d no rows where d == s or 3 divides s + d.
    rows = [[0 if s == d or (s + d) % 3 == 0 else s + d for d in range(size)]
            for s in range(size)]
    send = [rows[rank][j] * shape[0] for j in range(size)]
    recv = [rows[j][rank] * shape[0] for j in range(size)]
    x = _lay(_data(rank, (sum(send),) + tuple(shape[1:]), dtype), layout, ref)
    out = _lay(torch.zeros((sum(recv),) + tuple(shape[1:]), dtype=dtype), layout, ref)
    dist.all_to_all_single(out, x, recv, send, group=g)
    return out


def _all_to_all(rank, size, g, ref, layout, dtype, shape):
    ins = [_lay(_data(rank, shape, dtype, j), layout, ref) for j in range(size)]
    outs = [_lay(torch.zeros(shape, dtype=dtype), layout, ref) for _ in range(size)]
    if not ref:
        dist.all_to_all(outs, ins, group=g)
        return outs
    # torch 2.11's Gloo has no list form: the reference is its flat form.
    n = ins[0].numel()
    flat = torch.empty(size * n, dtype=dtype)
    dist.all_to_all_single(flat, torch.cat([t.reshape(-1) for t in ins]), group=g)
    return [flat.narrow(0, j * n, n).view(shape) for j in range(size)]


def _gather(rank, size, g, ref, layout, dtype, shape):
    outs = [_lay(torch.zeros(shape, dtype=dtype), layout, ref) for _ in range(size)]
    dist.gather(_lay(_data(rank, shape, dtype), layout, ref), outs if rank == 0 else None,
                dst=0, group=g)
    return outs if rank == 0 else None


def _scatter(rank, size, g, ref, layout, dtype, shape):
    ins = [_lay(_data(j, shape, dtype, 3), layout, ref) for j in range(size)]
    out = _lay(torch.zeros(shape, dtype=dtype), layout, ref)
    dist.scatter(out, ins if rank == size - 1 else None, src=size - 1, group=g)
    return out


CALLS = {f.__name__[1:]: f for f in (
    _all_reduce, _broadcast, _reduce, _all_gather, _all_gather_into_tensor, _reduce_scatter,
    _reduce_scatter_tensor, _all_to_all_single, _all_to_all, _gather, _scatter)}


def _compare(rank, size, ref, grid) -> list[str]:
    """The (call, layout, dtype, shape) entries of `grid` where "topo" and Gloo differ."""
    bad = []
    for name, layout, dtype, shape in grid:
        call = CALLS[name]
        args = {"layout": layout, "dtype": dtype, "shape": shape}
        got = _outcome(functools.partial(call, ref=False, **args), rank, size, None)
        want = _outcome(functools.partial(call, ref=True, **args), rank, size, ref)
        if got[0] == want[0] == "ok":
            same = _same(got[1], want[1])
        else:
            same = got[0] == want[0] and got[1] == want[1]  # the same kind of error on both
        if not same:
            bad.append(f"{name} {layout} {dtype} {shape}: topo {str(got)[:160]} / gloo "
                       f"{str(want)[:160]}")
    return bad


def layouts(rank, size, ref):
    return _compare(rank, size, ref, [
        (name, layout, dtype, (2, 3, 2, 2) if layout == "channels_last" else (2, 3))
        for name in CALLS for layout in LAYOUTS for dtype in (torch.int64,)])


def empty_and_scalar(rank, size, ref):
    return _compare(rank, size, ref, [(name, layout, torch.int64, shape) for name in CALLS
                                      for shape in EMPTY_SHAPES
                                      for layout in ("plain", "transposed")])


def dtypes(rank, size, ref):
    return _compare(rank, size, ref, [(name, layout, dtype, (2, 3)) for name in CALLS
                                      for dtype in DTYPES for layout in ("plain", "strided")])


def requires_grad(rank, size, ref):
    """Tensors that require grad (a parameter broadcast or reduced in place), against plain
    tensors on Gloo, which writes them through raw pointers. Our own copies, folds and schedule
    steps ran with grad mode on (a new thread has it on) and autograd refused their in-place
    writes: every hierarchical op and every staged or folded flat one raised."""
    return _compare(rank, size, ref, [(name, layout, torch.float32, (2, 3)) for name in CALLS
                                      for layout in ("grad", "grad_transposed")])


def inference_tensors(rank, size, ref):
    """Inference tensors (made under torch.inference_mode(), as a served model's are), used
    outside inference mode and inside it, against plain tensors on Gloo. Our copies, folds and
    epilogues (on Gloo's threads or the schedule worker, where inference mode, being
    thread-local, was off) wrote them in place, which autograd refuses outside that mode."""
    grid = [(name, layout, torch.float32, (2, 3)) for name in CALLS
            for layout in ("inference", "inference_transposed")]
    bad = _compare(rank, size, ref, grid)
    with torch.inference_mode():
        bad += [f"inside inference mode: {m}" for m in _compare(rank, size, ref, grid)]
    return bad


def list_shapes(rank, size, ref):
    """List forms whose tensors differ in size or only in shape: Gloo refuses both (its rank 1
    fails a check and the others wait out the timeout, so it is not called here), and "topo"
    must refuse them on every rank with a ValueError naming the tensor, whether the call runs
    flat or hierarchical (the schedules and the flat one-step reduce-scatter move element
    counts, so equal counts in other shapes went through them)."""
    bad = []
    x = _data(rank, (2, 3))
    for label, shapes in (("uneven", [(2, 3)] * (size - 1) + [(2, 4)]),
                          ("reshaped", [(2, 3)] * (size - 1) + [(6,)])):
        for name, call, fragment in (
                ("all_gather", lambda shapes=shapes: dist.all_gather(
                    [torch.zeros(s, dtype=x.dtype) for s in shapes], x),
                 "TopoBackend::allgather: output tensor"),
                ("reduce_scatter", lambda shapes=shapes: dist.reduce_scatter(
                    torch.zeros(2, 3, dtype=x.dtype), [_data(rank, s) for s in shapes]),
                 "TopoBackend::reduce_scatter: input")):
            try:
                call()
                bad.append(f"{name} {label}: no error")
            except ValueError as e:
                if fragment not in str(e):
                    bad.append(f"{name} {label}: {e}")
            except Exception as e:  # noqa: BLE001  (the kind of error is what is checked)
                bad.append(f"{name} {label}: {type(e).__name__}: {e}")
    return bad


def async_out_of_order(rank, size, ref):
    """Async works of several kinds in flight together, on unusual tensors, waited in reverse
    issue order, twice over; each against the same call on Gloo (contiguous copies)."""
    bad = []
    for round_ in range(2):
        ar = _lay(_data(rank, (6, 5)), "transposed", False)
        ag_in = _lay(_data(rank, (2, 3, 2, 2), torch.float32), "channels_last", False)
        ag = _lay(torch.zeros(_rows((2, 3, 2, 2), size)), "channels_last", False)
        rs_in = _lay(_data(rank, _rows((4, 3), size), torch.int8), "strided", False)
        rs = _lay(torch.zeros((4, 3), dtype=torch.int8), "strided", False)
        bc = _lay(_data(rank, (3, 2), torch.complex64), "offset", False)
        red = _data(rank, (5,), torch.bool)
        lst = [torch.zeros(0, dtype=torch.float16) for _ in range(size)]
        works = [dist.all_reduce(ar, async_op=True),
                 dist.all_gather_into_tensor(ag, ag_in, async_op=True),
                 dist.reduce_scatter_tensor(rs, rs_in, async_op=True),
                 dist.broadcast(bc, src=size - 1, async_op=True),
                 dist.reduce(red, dst=1, async_op=True),
                 dist.reduce_scatter(torch.zeros(0, dtype=torch.float16), lst, async_op=True)]
        for w in reversed(works):
            w.wait()
        got = {"all_reduce": ar, "all_gather_into_tensor": ag, "reduce_scatter_tensor": rs,
               "broadcast": bc, "reduce": red if rank == 1 else None}
        want = {"all_reduce": _all_reduce(rank, size, ref, True, "plain", torch.int64, (6, 5)),
                "all_gather_into_tensor": _all_gather_into_tensor(
                    rank, size, ref, True, "plain", torch.float32, (2, 3, 2, 2)),
                "reduce_scatter_tensor": _reduce_scatter_tensor(
                    rank, size, ref, True, "plain", torch.int8, (4, 3)),
                "broadcast": _broadcast(rank, size, ref, True, "plain", torch.complex64, (3, 2)),
                "reduce": _reduce(rank, size, ref, True, "plain", torch.bool, (5,))}
        for name, value in got.items():
            if not _same(value, want[name]):
                bad.append(f"round {round_} {name}: {value} / gloo {want[name]}")
    return bad


def decisions_of_async(rank, size, ref):
    """The flat/hierarchical choices of the calls of `async_out_of_order`."""
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    bad = async_out_of_order(rank, size, ref)
    return bad, sorted({choice for _, _, choice in backend.last_decisions()[-12:]})
