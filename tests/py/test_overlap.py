# SPDX-License-Identifier: Apache-2.0
"""Overlap ops on 2 and 4 CPU processes: forward and backward against the unchunked computation
(full matmul, then a plain Gloo collective / single-process autograd), chunks 1, 2, 3, 4, 8,
with random delays on either side, bad input, the timing records, and the calibrated chunk
count (`chunks=None`): what it picks for given timings, that every rank picks the same, and
that results equal the unchunked op's."""

from __future__ import annotations

import os
import re
import tempfile
import traceback

import pytest
import torch
import torch.distributed as dist
from rank_processes import context, process

CHUNKS = (1, 2, 3, 4, 8)
ROWS_PER_RANK = 8  # 3 chunks split it unevenly (3, 3, 2)
K, N = 24, 20


# ---------------------------------------------------------------- process pool (one per size)
def _worker(rank: int, world: int, store_path: str, tasks, results) -> None:
    import torch_topo  # noqa: F401  (registers "topo" when the backend has landed)

    backend = "topo" if "topo" in dist.Backend.backend_list else "gloo"
    store = dist.FileStore(store_path, world)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world)
    # The independent reference always runs on plain Gloo.
    gloo = dist.new_group(backend="gloo") if backend != "gloo" else dist.group.WORLD
    while True:
        item = tasks.get()
        if item is None:
            break
        name, args = item
        try:
            results.put((rank, "ok", globals()[name](gloo, *args)))
        except Exception:  # reported to the test, which fails with the traceback
            results.put((rank, "error", traceback.format_exc()))
    dist.barrier()  # no rank tears down while a peer still reads from it
    dist.destroy_process_group()


class Pool:
    def __init__(self, world: int) -> None:
        ctx = context()
        self.world = world
        self._dir = tempfile.TemporaryDirectory()
        self.tasks = [ctx.Queue() for _ in range(world)]
        self.results = ctx.Queue()
        store = os.path.join(self._dir.name, "store")
        self.procs = [
            process(_worker, (r, world, store, self.tasks[r], self.results), daemon=True)
            for r in range(world)
        ]
        for p in self.procs:
            p.start()

    def run(self, name: str, *args, timeout: float = 120.0) -> list:
        for q in self.tasks:
            q.put((name, args))
        out = [None] * self.world
        for _ in range(self.world):
            rank, status, value = self.results.get(timeout=timeout)
            if status != "ok":
                pytest.fail(f"rank {rank} failed in {name}:\n{value}")
            out[rank] = value
        return out

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.procs:
            p.join(timeout=20)
            if p.is_alive():
                p.kill()
        self._dir.cleanup()


@pytest.fixture(scope="module", params=[2, 4], ids=["world2", "world4"])
def pool(request):
    p = Pool(request.param)
    yield p
    p.close()


# ---------------------------------------------------------------- tasks run on every rank
def _inputs(dtype: torch.dtype, exact: bool, seed: int, *shape: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed * 7919 + dist.get_rank())
    if exact:
        # Small integers: every sum is exact, so any reduction order gives the same bits.
        return torch.randint(-4, 5, shape, generator=gen).to(dtype)
    return torch.randn(shape, generator=gen, dtype=dtype)


def _max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def task_forward(gloo, dtype: torch.dtype, exact: bool, chunks: int, delays: tuple) -> dict:
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter
    from torch_topo.ops.overlap import inject_delays

    world = dist.get_world_size()
    x = _inputs(dtype, exact, 1, world * ROWS_PER_RANK, K)
    w = _inputs(dtype, exact, 2, N, K)
    with inject_delays(*delays, seed=chunks):
        mrs = matmul_reduce_scatter(x, w, chunks=chunks)
    ref = torch.empty(ROWS_PER_RANK, N, dtype=dtype)
    dist.reduce_scatter_tensor(ref, x @ w.t(), group=gloo)

    xs = _inputs(dtype, exact, 3, ROWS_PER_RANK, K)
    with inject_delays(*delays, seed=chunks + 100):
        agm = all_gather_matmul(xs, w, chunks=chunks)
    gathered = torch.empty(world * ROWS_PER_RANK, K, dtype=dtype)
    dist.all_gather_into_tensor(gathered, xs, group=gloo)
    return {
        "mrs_bitwise": torch.equal(mrs, ref),
        "mrs_err": _max_error(mrs, ref),
        "agm_bitwise": torch.equal(agm, gathered @ w.t()),
        "agm_err": _max_error(agm, gathered @ w.t()),
    }


def _gather_cat(gloo, t: torch.Tensor, dim: int) -> torch.Tensor:
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous(), group=gloo)
    return torch.cat(parts, dim)


def _grad_errors(gloo, op, x, w, g, dims: tuple[int, int, int], chunks: int, delays: tuple,
                 seed: int) -> tuple[float, float]:
    """Gradients of <op(x, w), g> against the unsharded layer: x, w and g are gathered along
    `dims` into the full tensors, the full layer runs under autograd in this process alone, and
    this rank's slices of its gradients are compared."""
    from torch_topo.ops.overlap import inject_delays

    rank, world = dist.get_rank(), dist.get_world_size()
    x, w = x.requires_grad_(), w.requires_grad_()
    with inject_delays(*delays, seed=seed):
        (op(x, w, chunks=chunks) * g).sum().backward()
    xd, wd, gd = dims
    xf = _gather_cat(gloo, x.detach(), xd).requires_grad_()
    wf = _gather_cat(gloo, w.detach(), wd).requires_grad_()
    ((xf @ wf.t()) * _gather_cat(gloo, g, gd)).sum().backward()
    return (_max_error(x.grad, xf.grad.chunk(world, xd)[rank]),
            _max_error(w.grad, wf.grad.chunk(world, wd)[rank]))


def task_backward(gloo, chunks: int, delays: tuple) -> dict:
    """Sharded ops vs the unsharded single-process layer under autograd (float64)."""
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    dt, m = torch.float64, dist.get_world_size() * ROWS_PER_RANK
    # Row parallel: x [M, K_r] and w [N, K_r] are this rank's feature columns.
    mrs = _grad_errors(gloo, matmul_reduce_scatter, _inputs(dt, False, 10, m, K // 2),
                       _inputs(dt, False, 11, N, K // 2),
                       _inputs(dt, False, 12, ROWS_PER_RANK, N), (1, 1, 0), chunks, delays,
                       chunks + 200)
    # Column parallel: x [M_r, K] is this rank's rows, w [N_r, K] its output features.
    agm = _grad_errors(gloo, all_gather_matmul, _inputs(dt, False, 13, ROWS_PER_RANK, K),
                       _inputs(dt, False, 14, N // 2, K), _inputs(dt, False, 15, m, N // 2),
                       (0, 0, 1), chunks, delays, chunks + 300)
    return {"mrs_dx": mrs[0], "mrs_dw": mrs[1], "agm_dx": agm[0], "agm_dw": agm[1]}


def task_bad_input(gloo) -> list[str]:
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    world = dist.get_world_size()
    w = torch.randn(N, K)
    cases = [
        lambda: matmul_reduce_scatter(torch.randn(world * 2 + 1, K), w),
        lambda: matmul_reduce_scatter(torch.randn(world * 2, K), w, chunks=3),
        lambda: matmul_reduce_scatter(torch.randn(world * 2, K + 1), w, chunks=1),
        lambda: all_gather_matmul(torch.randn(4, K), w, chunks=0),
        lambda: all_gather_matmul(torch.randn(4, K), w.double(), chunks=1),
        lambda: all_gather_matmul(torch.randn(4, K), w, chunks=1, max_inflight=0),
        # A 3-D x is flattened to rows inside: the message must still show the caller's shape.
        lambda: matmul_reduce_scatter(torch.randn(world, 3, K + 1), w, chunks=1),
        # A float or an int past int64 was a pybind11 "incompatible function arguments".
        lambda: matmul_reduce_scatter(torch.randn(world * 2, K), w, chunks=2.0),
        lambda: all_gather_matmul(torch.randn(4, K), w, chunks=1, max_inflight=2**64),
        # A 0-D weight was an IndexError before any check.
        lambda: matmul_reduce_scatter(torch.randn(world * 2, K), torch.tensor(1.0)),
        # What new_group gives the ranks it leaves out, and a mesh dimension's name.
        lambda: matmul_reduce_scatter(torch.randn(world * 2, K), w,
                                      group=dist.GroupMember.NON_GROUP_MEMBER),
        lambda: all_gather_matmul(torch.randn(4, K), w, group="tp"),
    ]
    return [line.splitlines()[0] for line in _value_errors(cases)]


def _value_errors(cases) -> list[str]:
    """Each case's ValueError message, or "no error"."""
    messages = []
    for case in cases:
        try:
            case()
            messages.append("no error")
        except ValueError as e:
            messages.append(str(e))
    return messages


def task_timing(gloo, chunks: int) -> list[tuple]:
    from torch_topo.ops import OverlapRecorder, all_gather_matmul, matmul_reduce_scatter

    world = dist.get_world_size()
    with OverlapRecorder() as rec:
        matmul_reduce_scatter(torch.randn(world * ROWS_PER_RANK, K), torch.randn(N, K),
                              chunks=chunks)
        all_gather_matmul(torch.randn(ROWS_PER_RANK, K), torch.randn(N, K), chunks=chunks)
    return [(c.op, len(c.chunks), c.start, c.end,
             [(t.compute_start, t.compute_end, t.comm_issue, t.comm_end) for t in c.chunks])
            for c in rec.calls]


# Calibration timings per chunk count (seconds) a test feeds the decision.
TIMINGS = {
    "chunked_faster": {1: 1.0, 2: 0.6, 4: 0.5},
    "all_equal": {1: 1.0, 2: 1.0, 4: 1.0},
    "within_margin": {1: 1.0, 2: 0.95, 4: 0.97},
    "chunked_slower": {1: 1.0, 2: 1.3, 4: 1.8},
}


def task_auto_chunks(gloo, timings: str | None, rank0_only: bool = False) -> dict:
    """Runs both ops forward and backward with chunks=None under the given calibration
    timings (None: real measurement; `rank0_only`: only rank 0 sees them, the others see
    chunking slower), and compares every output and gradient with the unchunked op's."""
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter
    from torch_topo.ops.overlap import calibrate_with, overlap_choices

    table = TIMINGS.get(timings)
    if rank0_only and dist.get_rank() != 0:
        table = TIMINGS["chunked_slower"]
    timer = (lambda op, c: table[c]) if table else None
    world, dt = dist.get_world_size(), torch.float64
    x = _inputs(dt, True, 20, world * ROWS_PER_RANK, K)
    w = _inputs(dt, True, 21, N, K)
    g = _inputs(dt, True, 22, ROWS_PER_RANK, N)
    xs = _inputs(dt, True, 23, ROWS_PER_RANK, K)
    gs = _inputs(dt, True, 24, world * ROWS_PER_RANK, N)

    def run(chunks):
        out = {}
        for name, op, a, grad in (("mrs", matmul_reduce_scatter, x, g),
                                  ("agm", all_gather_matmul, xs, gs)):
            a, b = a.clone().requires_grad_(), w.clone().requires_grad_()
            y = op(a, b, chunks=chunks)
            (y * grad).sum().backward()
            out[name], out[name + "_dx"], out[name + "_dw"] = y.detach(), a.grad, b.grad
        return out

    reference = run(1)
    with calibrate_with(timer):  # also forgets earlier choices: this test's calls calibrate
        auto = run(None)
        choices = overlap_choices()
    return {"equal": {k: torch.equal(auto[k], reference[k]) for k in reference},
            "chosen": [(c.op, c.chunks) for c in choices],
            "seconds": [c.seconds for c in choices]}


# ---------------------------------------------------------------- tests
NO_DELAY = (0, 0)
DELAYS = [NO_DELAY, (3000, 0), (0, 3000)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("delays", DELAYS, ids=["none", "compute", "comm"])
def test_forward_exact_inputs_bitwise(pool, delays):
    for chunks in CHUNKS:
        for rank, r in enumerate(pool.run("task_forward", torch.float64, True, chunks, delays)):
            assert r["mrs_bitwise"], (chunks, rank, r)
            assert r["agm_bitwise"], (chunks, rank, r)


@pytest.mark.timeout(240)
def test_forward_random_float32(pool):
    # all_gather_matmul computes each row with the same GEMM as the unchunked reference; the
    # reduce_scatter sums P partials whose order Gloo may choose per message size, so float32
    # agrees to rounding: |err| <= 1e-5 for K=24 products of N(0,1) values (|y| ~ 5).
    for chunks in CHUNKS:
        for r in pool.run("task_forward", torch.float32, False, chunks, NO_DELAY):
            assert r["mrs_err"] <= 1e-5, (chunks, r)
            assert r["agm_err"] <= 1e-5, (chunks, r)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("delays", [NO_DELAY, (2000, 2000)], ids=["none", "both"])
def test_backward_matches_unsharded_autograd(pool, delays):
    for chunks in CHUNKS:
        for r in pool.run("task_backward", chunks, delays):
            assert max(r.values()) <= 1e-12, (chunks, r)


def test_bad_input_names_the_problem(pool):
    expected = ["x.shape[0]: got", "chunks: got 3, expected <= rows per rank 2", "in_features",
                "chunks: got 0", "dtypes", "max_inflight: got 0",
                f", 3, {K + 1}] and weight [{N}, {K}], expected x.shape[-1] == weight.shape[1]",
                "matmul_reduce_scatter: chunks: got 2.0, expected an int >= 1",
                f"all_gather_matmul: max_inflight: got {2**64}, expected an int >= 1",
                "matmul_reduce_scatter: weight: got 0-D shape [], expected 2-D [out_features, "
                "in_features]",
                "matmul_reduce_scatter: group: got -100, expected a ProcessGroup this rank "
                "belongs to (new_group returns GroupMember.NON_GROUP_MEMBER",
                "all_gather_matmul: group: got 'tp', expected a ProcessGroup"]
    for messages in pool.run("task_bad_input"):
        for fragment, message in zip(expected, messages, strict=True):
            assert fragment in message, (fragment, message)


def task_empty(gloo, chunks: int | None) -> list[str]:
    """Empty inputs (no rows, no in_features, no out_features) against what torch's own calls
    give: the matmul, then Gloo's reduce_scatter_tensor / all_gather_into_tensor. Gradients are
    sums over an empty set or of an empty d_out, so zeros of each input's shape."""
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    world, wrong = dist.get_world_size(), []
    for op, x_shape, w_shape in [
        (matmul_reduce_scatter, (0, K), (N, K)), (matmul_reduce_scatter, (world, 0, K), (N, K)),
        (matmul_reduce_scatter, (world * 2, 0), (N, 0)),
        (matmul_reduce_scatter, (world * 2, K), (0, K)),
        (all_gather_matmul, (0, K), (N, K)), (all_gather_matmul, (1, 0, K), (N, K)),
        (all_gather_matmul, (2, 0), (N, 0)), (all_gather_matmul, (2, K), (0, K)),
    ]:
        x = torch.randn(x_shape, requires_grad=True)
        w = torch.randn(w_shape, requires_grad=True)
        out = op(x, w, chunks=chunks)
        product = x.detach() @ w.detach().t()
        if op is matmul_reduce_scatter:
            ref = product.new_empty(x_shape[0] // world, *product.shape[1:])
            dist.reduce_scatter_tensor(ref, product, group=gloo)
        else:
            ref = product.new_empty(x_shape[0] * world, *product.shape[1:])
            dist.all_gather_into_tensor(ref, product, group=gloo)
        out.sum().backward()
        if not (torch.equal(out, ref) and torch.equal(x.grad, torch.zeros_like(x))
                and torch.equal(w.grad, torch.zeros_like(w))):
            wrong.append(f"{op.__name__} x {x_shape} w {w_shape}: out {tuple(out.shape)} vs "
                         f"{tuple(ref.shape)}, grads {x.grad} {w.grad}")
    return wrong


@pytest.mark.parametrize("chunks", [1, None], ids=["one_chunk", "calibrated"])
def test_empty_inputs_give_torchs_empty_result(pool, chunks):
    # Zero rows per rank was refused as "chunks: got 1, expected <= rows per rank 0", and the
    # calibration found no chunk count to try.
    assert pool.run("task_empty", chunks) == [[]] * pool.world


def task_not_tensors(gloo) -> list[str]:
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    w = torch.randn(N, K)
    messages = []
    for call in (lambda: matmul_reduce_scatter(None, w), lambda: matmul_reduce_scatter(
            torch.randn(8, K), w.tolist()), lambda: all_gather_matmul(3, w)):
        try:
            call()
        except TypeError as e:
            messages.append(str(e))
    return messages


def test_arguments_that_are_no_tensors_name_themselves(pool):
    # They failed with AttributeError ("'NoneType' object has no attribute 'dtype'").
    assert pool.run("task_not_tensors") == [[
        "matmul_reduce_scatter: x: got NoneType, expected a torch.Tensor",
        "matmul_reduce_scatter: weight: got list, expected a torch.Tensor",
        "all_gather_matmul: x: got int, expected a torch.Tensor"]] * pool.world


def task_shapes_differ(gloo) -> list[str]:
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    rank, world = dist.get_rank(), dist.get_world_size()
    # Every rank holds a shape of its own that no other test used: the check runs once per
    # shape a group agreed on, so a rank whose shape was agreed earlier would skip it.
    cases = [
        lambda: matmul_reduce_scatter(torch.randn(world * (11 + rank), K), torch.randn(N, K),
                                      chunks=1),
        lambda: all_gather_matmul(torch.randn(2, K + 7 + rank), torch.randn(N, K + 7 + rank),
                                  chunks=1),
        # Equal shapes, other chunk counts: blocks of other sizes aborted Gloo too.
        lambda: matmul_reduce_scatter(torch.randn(world * 19, K), torch.randn(N, K),
                                      chunks=1 + rank),
        lambda: all_gather_matmul(torch.randn(6, K), torch.randn(N, K),
                                  chunks=None if rank else 2, check_inputs=True),
    ]
    return _value_errors(cases)


def task_one_rank_bad(gloo) -> list[str]:
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    last, world = dist.get_rank() == dist.get_world_size() - 1, dist.get_world_size()
    # Only the last rank's input breaks a rule, in shapes no other test used (see above).
    cases = [
        # rows not a multiple of the group size
        lambda: matmul_reduce_scatter(torch.randn(world * 13 + last, K), torch.randn(N, K)),
        # in_features of x and weight differ (K may differ across ranks, so this is local)
        lambda: matmul_reduce_scatter(torch.randn(world * 14, K + 1),
                                      torch.randn(N, K + 1 + last)),
        lambda: all_gather_matmul(torch.randn(15, K), torch.randn(N, K + last)),
        # the weight's dtype
        lambda: all_gather_matmul(torch.randn(16, K),
                                  torch.randn(N, K, dtype=torch.float64 if last else None)),
        # the weight's device (not in the records: the rank's own check)
        lambda: matmul_reduce_scatter(torch.randn(world * 17, K),
                                      torch.randn(N, K, device="meta" if last else "cpu")),
    ]
    return _value_errors(cases)


def test_bad_input_on_one_rank_raises_on_every_rank(pool):
    # The bad rank raised before the shape check and the others waited in its all_gather
    # until the group's timeout.
    results = pool.run("task_one_rank_bad")
    for messages in results:
        # rows and dtypes are in the compared records; the weight's record is its dtype alone
        assert "differ across ranks" in messages[0] and "differ across ranks" in messages[3]
        assert re.search(r"rank \d has exchanged float32 \[16, \d+\], weight float(32|64), "
                         r"chunks=0, rank \d has exchanged float32 \[16, \d+\], weight "
                         r"float(32|64), chunks=0; every rank", messages[3]), messages[3]
    for messages in results[:-1]:
        assert "the input of rank(s) [" in messages[1] and "refused" in messages[2], messages
    assert "in_features: got" in results[-1][1] and "in_features: got" in results[-1][2]
    for messages in results[:-1]:
        assert "the input of rank(s) [" in messages[4] and "refused" in messages[4], messages
    assert "weight: got device meta, expected x's device cpu" in results[-1][4]


def test_shapes_that_differ_across_ranks_fail_on_every_rank(pool):
    # Both aborted Gloo (SIGABRT in the exchange) before the ranks compared shapes.
    for messages in pool.run("task_shapes_differ"):
        assert "matmul_reduce_scatter: tensor shapes or dtypes differ across ranks" in messages[0]
        assert "every rank must hold the same dtype, rows and out_features" in messages[0]
        assert "all_gather_matmul: tensor shapes or dtypes differ across ranks" in messages[1]
        assert "in_features" in messages[1]
        assert re.search(r"^matmul_reduce_scatter: settings differ across ranks: rank \d has "
                         r"chunks=\d, rank \d has chunks=\d; every rank must give the same "
                         r"chunks$", messages[2]), messages[2]
        # 0: chunks=None, the op's own choice
        assert messages[3].startswith("all_gather_matmul: settings differ across ranks: ")
        assert "chunks=2" in messages[3] and "chunks=0" in messages[3], messages[3]


def test_timing_records_every_chunk_in_order(pool):
    for calls in pool.run("task_timing", 4):
        assert [c[0] for c in calls] == ["matmul_reduce_scatter", "all_gather_matmul"]
        for op, n, start, end, chunks in calls:
            assert n == 4
            for cs, ce, ci, cend in chunks:
                assert start <= cs <= ce <= end
                assert start <= ci < cend <= end
                if op == "matmul_reduce_scatter":
                    assert ci >= ce  # a chunk's reduce_scatter follows its matmul
                else:
                    # a chunk's matmul waits for its all_gather (whose completion stamp is
                    # written by the future callback, a moment after the waiter wakes)
                    assert ci < cs


@pytest.mark.timeout(240)
@pytest.mark.parametrize("timings,expected", [("chunked_faster", 4), ("all_equal", 1),
                                              ("within_margin", 1), ("chunked_slower", 1)])
def test_calibrated_chunks_follow_timings(pool, timings, expected):
    for r in pool.run("task_auto_chunks", timings):
        assert all(r["equal"].values()), r["equal"]
        # forward and backward of both ops: four calibrations, each with the expected count
        assert [op for op, _ in r["chosen"]] == [
            "matmul_reduce_scatter", "matmul_reduce_scatter.backward",
            "all_gather_matmul", "all_gather_matmul.backward"], r["chosen"]
        assert all(c == expected for _, c in r["chosen"]), r["chosen"]


@pytest.mark.timeout(240)
def test_calibration_takes_the_slowest_rank(pool):
    # Only rank 0 measures chunking as faster; the others measure it slower, so the group
    # must agree on one chunk, and every rank must have seen the same (maximum) timings.
    results = pool.run("task_auto_chunks", "chunked_faster", True)
    for r in results:
        assert all(r["equal"].values()), r["equal"]
        assert all(c == 1 for _, c in r["chosen"]), r["chosen"]
        assert r["seconds"] == results[0]["seconds"]
        assert all(s == {1: 1.0, 2: 1.3, 4: 1.8} for s in r["seconds"]), r["seconds"]


@pytest.mark.timeout(240)
def test_measured_calibration_agrees_across_ranks(pool):
    results = pool.run("task_auto_chunks", None)
    for r in results:
        assert all(r["equal"].values()), r["equal"]
        assert r["chosen"] == results[0]["chosen"]
        assert all(c in (1, 2, 4) for _, c in r["chosen"]), r["chosen"]
        for seconds in r["seconds"]:
            assert set(seconds) == {1, 2, 4} and all(t > 0 for t in seconds.values())
