# SPDX-License-Identifier: Apache-2.0
"""Calls that must fail, run on every rank of a RankPool (an empty list passes): bad inputs
raise a TopoArgumentError naming the problem (a ValueError, and a RuntimeError as Gloo raises for
the same calls), and a wait that times out or a future that cannot complete behaves as on the
plain Gloo group over the same ranks.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from gloo_reference import R, _diff


def bad_inputs(rank, size, ref):
    """Each call must raise TopoArgumentError (ValueError and RuntimeError) naming the problem,
    without C++ frames; where plain Gloo refuses the same call, it must raise a RuntimeError
    there (the type that code written against Gloo catches). Returns the misses."""
    bad = []
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    gloo = ref._get_backend(torch.device("cpu"))

    def raised(fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def expect(fragment, fn, on_gloo=None):
        e = raised(fn)
        if e is None:
            bad.append(f"{fragment!r}: no error")
        elif not (type(e).__name__ == "TopoArgumentError" and isinstance(e, ValueError)
                  and isinstance(e, RuntimeError)):
            bad.append(f"{fragment!r}: got {type(e).__mro__}: {e}")
        elif fragment not in str(e) or "Exception raised from" in str(e):
            bad.append(f"{fragment!r} not in {e}, or C++ frames in it")
        if on_gloo is not None and not isinstance(raised(on_gloo), RuntimeError):
            bad.append(f"{fragment!r}: plain Gloo did not raise a RuntimeError")

    f = torch.ones(4)
    i = torch.ones(4, dtype=torch.int32)
    b = torch.ones(4, dtype=torch.bool)
    expect("TopoBackend::allreduce: ReduceOp.BAND needs an integer tensor",
           lambda: dist.all_reduce(f, op=R.BAND), lambda: dist.all_reduce(f, op=R.BAND, group=ref))
    expect("TopoBackend::allreduce: ReduceOp.AVG needs a floating-point, complex or integer "
           "tensor: got Bool", lambda: dist.all_reduce(b, op=R.AVG))
    expect("TopoBackend::allreduce: ReduceOp.PREMUL_SUM needs a floating-point or complex "
           "tensor: got Int", lambda: dist.all_reduce(i, op=dist._make_nccl_premul_sum(2.0)))
    c = torch.ones(4 * size, dtype=torch.complex64)
    expect("TopoBackend::_reduce_scatter_base: ReduceOp.MAX needs a real tensor: got ComplexFloat",
           lambda: dist.reduce_scatter_tensor(torch.empty(4, dtype=c.dtype), c, op=R.MAX))
    expect("TopoBackend::reduce_scatter: ReduceOp.MIN needs a real tensor: got ComplexFloat",
           lambda: dist.reduce_scatter(torch.empty(4, dtype=c.dtype), list(c.chunk(size)),
                                       op=R.MIN))
    opts = dist.BroadcastOptions()
    opts.rootRank = size
    expect("TopoBackend::broadcast: root rank out of range", lambda: backend.broadcast([f], opts),
           lambda: gloo.broadcast([f], opts))
    ropts = dist.ReduceOptions()
    ropts.rootRank = -1
    expect("TopoBackend::reduce: root rank out of range", lambda: backend.reduce([f], ropts))
    expect("TopoBackend::_allgather_base: output has",
           lambda: backend._allgather_base(torch.empty(4 * size + 1), f))
    expect("TopoBackend::_reduce_scatter_base: input has",
           lambda: backend._reduce_scatter_base(torch.empty(3), torch.empty(3 * size + 2),
                                                dist.ReduceScatterOptions()))
    expect("TopoBackend::allgather: output list holds",
           lambda: backend.allgather([[torch.empty(4)] * (size + 1)], [f]))
    expect("TopoBackend::alltoall_base: input split sizes sum to",
           lambda: backend.alltoall_base(torch.empty(size), torch.empty(size), [1] * size,
                                         [2] * size, dist.AllToAllOptions()),
           # Gloo of torch 2.11 checks the splits when its work runs: wait for it.
           lambda: gloo.alltoall_base(torch.empty(size), torch.empty(size), [1] * size,
                                      [2] * size, dist.AllToAllOptions()).wait())
    expect("TopoBackend::send: destination rank out of range",
           lambda: backend.send([f], size, 0))
    expect("TopoBackend::recv: source rank out of range", lambda: backend.recv([f], -2, 0))
    return bad


def wait_timeout_then_wait(rank, size, ref):
    """wait(timeout) that runs out while a late rank has not joined raises and leaves the op
    running, as on plain Gloo: a later wait() completes it, with the AVG scaling and the
    one-step reduce-scatter's fold. Inputs are small integers, so every order sums exactly."""
    import datetime

    bad = []
    short = datetime.timedelta(milliseconds=50)
    for name in ("all_reduce AVG", "reduce_scatter_tensor"):
        results = {}
        for label, group in (("gloo", ref), ("topo", dist.group.WORLD)):
            x = torch.arange(2 * size, dtype=torch.float64) + rank
            out = torch.empty(2, dtype=torch.float64)
            if rank == 0 and size > 1:
                time.sleep(0.5)
            if name == "all_reduce AVG":
                # Gloo has no AVG: its reference is the SUM, scaled below.
                op = R.SUM if label == "gloo" else R.AVG
                work, got = dist.all_reduce(x, op=op, group=group, async_op=True), x
            else:
                work = dist.reduce_scatter_tensor(out, x, group=group, async_op=True)
                got = out
            try:
                work.wait(timeout=short)
            except RuntimeError as e:
                if "timed out" not in str(e):
                    bad.append(f"{name} {label}: first wait raised {e}")
            try:
                work.wait()
            except RuntimeError as e:
                bad.append(f"{name} {label}: wait() after a wait(timeout) raised {e}")
                continue
            if label == "gloo" and name == "all_reduce AVG":
                got = got / size
            results[label] = got
            # Gloo's own reduce-scatter work never reports itself completed: topo's only.
            if label == "topo" and not (work.is_completed() and work.is_success()):
                bad.append(f"{name} topo: not completed successfully after wait()")
        if len(results) == 2:
            _diff(f"{name} after wait(timeout)", results["topo"], results["gloo"], bad)
    return bad


def p2p_future_refused(rank, size, ref):
    """Gloo's send and recv works have no future, and "topo"'s refuse theirs while pending too:
    only wait() completes them, so a caller waiting on the future would wait forever."""
    bad = []
    if size == 1 or rank > 1:
        return bad
    peer = 1 - rank
    for label, group in (("gloo", ref), ("topo", dist.group.WORLD)):
        t = torch.full((3,), float(rank))
        work = dist.isend(t, peer, group=group) if rank == 0 else dist.irecv(t, peer, group=group)
        try:
            work.get_future()
            bad.append(f"{label}: get_future() of a pending {'send' if rank == 0 else 'recv'} "
                       "returned a future that only wait() completes")
        except RuntimeError as e:
            if label == "topo" and "wait()" not in str(e):
                bad.append(f"topo: get_future() error does not say to call wait(): {e}")
        work.wait()
        _diff(f"{label} p2p", t, torch.zeros(3), bad)
    # A batch of sends and receives ends in one work over Gloo's: the same holds for it.
    t = torch.full((3,), float(rank))
    op = dist.isend if rank == 0 else dist.irecv
    works = dist.batch_isend_irecv([dist.P2POp(op, t, peer)])
    for w in works:
        try:
            w.get_future()
            bad.append("topo: get_future() of a pending batch_isend_irecv work returned a future "
                       "that only wait() completes")
        except RuntimeError:
            pass
        w.wait()
    _diff("topo batch_isend_irecv", t, torch.zeros(3), bad)
    return bad


def _expect_refused(ops, what: str, bad: list[str]) -> None:
    """batch_isend_irecv(ops) must raise, as on Gloo; `what` names the op meant to be refused."""
    try:
        dist.batch_isend_irecv(ops)
        bad.append(f"{what} in batch_isend_irecv was not refused")
    except (RuntimeError, ValueError):
        pass


def refused_batch_leaves_the_group_usable(rank, size, ref):
    """A batch_isend_irecv whose op is refused on every rank raises there, as on Gloo, and the
    group's later collectives and batches still run: torch's coalescing manager left the group
    in its coalescing state, so all_reduce, all_gather_into_tensor and reduce_scatter_tensor
    returned their inputs untouched without an error (Gloo does not coalesce). Reference: the
    same collectives on the plain Gloo group."""
    bad = []
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    strided = torch.zeros(4, 2)[:, 0]  # not contiguous: refused by the inner backend
    _expect_refused([dist.P2POp(dist.isend, strided, nxt),
                     dist.P2POp(dist.irecv, torch.zeros(4), prv)], "a non-contiguous send", bad)
    got = {}
    for label, group in (("gloo", ref), ("topo", dist.group.WORLD)):
        x = torch.arange(3.0) + rank
        dist.all_reduce(x, group=group)
        gathered = torch.zeros(2 * size)
        dist.all_gather_into_tensor(gathered, torch.full((2,), float(rank)), group=group)
        scattered = torch.zeros(1)
        dist.reduce_scatter_tensor(scattered, torch.arange(float(size)) + rank, group=group)
        got[label] = (x, gathered, scattered)
    for name, g, t in zip(("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"),
                          got["gloo"], got["topo"], strict=True):
        _diff(f"{name} after the refused batch", t, g, bad)
    if size > 1:
        received = torch.zeros(3)
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((3,), float(rank)), nxt),
                                         dist.P2POp(dist.irecv, received, prv)]):
            w.wait()
        _diff("the next batch_isend_irecv", received, torch.full((3,), float(prv)), bad)
    return bad


def batch_refused_after_posting_completes_its_ops(rank, size, ref):
    """A batch_isend_irecv refused at its last op, after a send and a receive it had posted: the
    posted pair stays in flight, as unbatched ops would (and as NCCL launches them at the block's
    end), so it completes and the group's next collective runs. Over Gloo the dropped works
    cancelled their transfers, and the next all_reduce waited out the group's timeout.
    Reference: the plain Gloo group's all_reduce, and the peer's sent values."""
    bad = []
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    received = torch.zeros(5)
    _expect_refused([dist.P2POp(dist.isend, torch.full((5,), float(rank)), nxt),
                     dist.P2POp(dist.irecv, received, prv),
                     dist.P2POp(dist.isend, torch.zeros(5), size)], "a send to rank world_size",
                    bad)
    got = {}
    for label, group in (("gloo", ref), ("topo", dist.group.WORLD)):
        x = torch.arange(4.0) * (rank + 1)
        dist.all_reduce(x, group=group)
        got[label] = x
    _diff("all_reduce after the batch refused at its last op", got["topo"], got["gloo"], bad)
    # Nothing is left to wait on: the posted receive lands in its tensor in its own time.
    deadline = time.monotonic() + 10
    while not torch.equal(received, torch.full((5,), float(prv))) and time.monotonic() < deadline:
        time.sleep(0.01)
    _diff("the receive posted before the refused op", received, torch.full((5,), float(prv)), bad)
    return bad

