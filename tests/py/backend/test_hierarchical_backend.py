# SPDX-License-Identifier: Apache-2.0
"""The "topo" group itself with hierarchical="always", on local processes that play hosts: every
op with a hierarchical form dispatches to it and matches flat Gloo; dtypes Gloo refuses keep
the group in step; the schedules run asynchronously on CPU; shutdown frees the inner backends;
set_timeout bounds the schedules' waits.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from hierarchical_harness import (
    CONFIGS,
    PREMUL_FACTOR,
    TIMEOUT,
    Checker,
    FlatRef,
    _init_topo_always,
    _make,
    _play,
    _reduce_op,
    _spawn,
)

from torch_topo.config import TopoConfig


def _dispatch_worker(rank, hosts, tmp, _full):
    """The "topo" group itself, with hierarchical="always": every op with a hierarchical form
    takes it (its decision log says so) and matches flat Gloo."""
    size = len(hosts)
    ref, check = _init_topo_always(rank, hosts, tmp)
    gen = torch.Generator().manual_seed(99 + rank)
    for dtype in (torch.float32, torch.int64):
        for op in ("SUM", "AVG", "MAX") if dtype.is_floating_point else ("SUM", "BXOR"):
            x = _make(gen, (700,), dtype, op, False)
            want = ref.all_reduce(x.clone(), op)
            dist.all_reduce(x, op=_reduce_op(op))
            check.same(f"all_reduce {dtype} {op}", x, want)
            x = _make(gen, (7,), dtype, op, False)
            want = ref.reduce(x.clone(), 1, op)
            before = x.clone()
            dist.reduce(x, dst=1, op=_reduce_op(op))
            check.same(f"reduce {dtype} {op}", x, want if rank == 1 else before)
            blocks = [_make(gen, (300,), dtype, op, False) for _ in range(size)]
            want = ref.reduce_scatter(blocks, op)
            out = torch.empty(300, dtype=dtype)
            dist.reduce_scatter_tensor(out, torch.cat(blocks), op=_reduce_op(op))
            check.same(f"reduce_scatter_tensor {dtype} {op}", out, want)
            dist.reduce_scatter(out, blocks, op=_reduce_op(op))
            check.same(f"reduce_scatter {dtype} {op}", out, want)
        x = _make(gen, (9,), dtype, "SUM", False)
        want = ref.all_gather(x)
        out = torch.empty(size * 9, dtype=dtype)
        dist.all_gather_into_tensor(out, x)
        check.same(f"all_gather_into_tensor {dtype}", out, torch.cat(want))
        outs = [torch.empty(9, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, x)
        check.same(f"all_gather {dtype}", torch.stack(outs), torch.stack(want))
        x = _make(gen, (9,), dtype, "SUM", False)
        want = ref.broadcast(x.clone(), size - 1)
        dist.broadcast(x, src=size - 1)
        check.same(f"broadcast {dtype}", x, want)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    choices = {}
    for op, _, choice in backend.last_decisions():
        choices.setdefault(op, set()).add(choice)
    dist.barrier()  # no rank tears down while a peer still reads from it
    dist.destroy_process_group()
    return {"checked": check.checked, "failures": check.failures,
            "choices": {op: sorted(c) for op, c in choices.items()}}


@pytest.mark.timeout(150)
def test_topo_backend_dispatches_hierarchical(tmp_path):
    results = _spawn(CONFIGS["2x2-interleaved"], tmp_path, False, target=_dispatch_worker)
    for res in results:
        # Four reductions per (dtype, op): 3 float32 ops, 2 int64; three data moves per dtype.
        assert res["checked"] == (3 + 2) * 4 + 2 * 3, res["checked"]
        assert res["choices"] == {op: ["hierarchical"] for op in
                                  ("allreduce", "reduce", "_reduce_scatter_base",
                                   "reduce_scatter", "_allgather_base", "allgather",
                                   "broadcast")}, res["choices"]


def _band_worker(rank, hosts, tmp, _full):
    """hierarchical="auto" on two played hosts of two CPU ranks at 12.5 GB/s: the size rule
    takes the two-level schedule below some size only (fewer slow steps on small messages, an
    extra pass over the bytes on large ones), and the group runs each all_reduce on the side
    its ranges give. Then ranges with a gap set by hand: sizes in the gap run flat."""
    from planner_support import in_ranges

    import torch_topo  # noqa: F401  (registers "topo")
    from torch_topo.hierarchy import HostLayout, backend_thresholds, hierarchical_thresholds

    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    cfg = TopoConfig(hierarchical="auto", play=_play(hosts), inter_host_gbps=12.5)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=TIMEOUT, pg_options=cfg)
    ref, check = FlatRef(dist.new_group(backend="gloo"), size), Checker(rank)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    want_ranges = backend_thresholds(
        hierarchical_thresholds(HostLayout.from_hostnames(hosts), cfg), size)["allreduce"]
    gen = torch.Generator().manual_seed(3 + rank)
    sides = {"auto": [], "gap": []}
    for case, numels in (("auto", (256, 16 << 10, 256 << 10, 1 << 20)),
                         ("gap", (128, 256, 512, 1024, 2048, 4096))):
        if case == "gap":
            want_ranges = ((1024, 2048), (8192, None))
            backend.set_hierarchical_thresholds("cpu", {"allreduce": list(want_ranges)})
        for numel in numels:
            x = _make(gen, (numel,), torch.float32, "SUM", False)
            want = ref.all_reduce(x.clone(), "SUM")
            dist.all_reduce(x)
            check.same(f"{case} all_reduce {numel}", x, want)
            op, nbytes, taken = backend.last_decisions()[-1]
            sides[case].append([nbytes, taken,
                                "hierarchical" if in_ranges(want_ranges, nbytes) else "flat"])
    dist.barrier()
    dist.destroy_process_group()
    return {"checked": check.checked, "failures": check.failures, "sides": sides}


@pytest.mark.timeout(150)
def test_group_takes_hierarchical_inside_its_ranges_only(tmp_path):
    results = _spawn(CONFIGS["2x2"], tmp_path, False, target=_band_worker)
    for res in results:
        assert res["checked"] == 10, res["checked"]
        for case, rows in res["sides"].items():
            assert all(taken == want for _, taken, want in rows), (case, rows)
            # Both sides occur: the ranges are a band, not "from a size up" nor "never".
            assert {taken for _, taken, _ in rows} == {"hierarchical", "flat"}, (case, rows)
        assert [taken for _, taken, _ in res["sides"]["gap"]] == [  # 512 B .. 16 KiB
            "flat", "hierarchical", "flat", "flat", "hierarchical", "hierarchical"]


def _refused_dtype_worker(rank, hosts, tmp, _full):
    """A dtype Gloo's collectives refuse (int16) with hierarchical="always": every rank raises
    Gloo's own error, and the group stays in step. The broadcast schedule scatters on the root's
    host only, so Gloo refused there alone and the other host's rank waited in the rail group:
    every later op on the levels timed out."""
    import torch_topo  # noqa: F401  (registers "topo")

    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    # A short timeout: a desynchronised level group fails the next op in seconds, not minutes.
    cfg = TopoConfig(hierarchical="always", play=_play(hosts), pipeline_chunk_bytes=1024,
                     timeout_s=10)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=TIMEOUT, pg_options=cfg)
    ref = dist.new_group(backend="gloo")
    check = Checker(rank)
    calls = {
        "broadcast": lambda x, g: dist.broadcast(x, size - 1, group=g),
        "all_reduce": lambda x, g: dist.all_reduce(x, group=g),
        "reduce": lambda x, g: dist.reduce(x, size - 1, group=g),
        "all_gather_into_tensor": lambda x, g: dist.all_gather_into_tensor(
            torch.empty(size * x.numel(), dtype=x.dtype), x, group=g),
        "reduce_scatter_tensor": lambda x, g: dist.reduce_scatter_tensor(
            torch.empty(x.numel() // size, dtype=x.dtype), x, group=g),
    }
    for name, call in calls.items():
        errors = []
        for group in (None, ref):
            try:
                call(torch.arange(6 * size, dtype=torch.int16), group)
                errors.append("no error")
            except RuntimeError as e:
                errors.append(str(e))
        if errors[0] != errors[1]:
            check.failures.append(f"rank {rank} {name} int16: topo {errors[0]!r}, "
                                  f"Gloo {errors[1]!r}")
        x = torch.arange(700, dtype=torch.float32) * (rank + 1)
        want = FlatRef(ref, size).all_reduce(x.clone(), "SUM")
        dist.all_reduce(x)
        check.same(f"all_reduce after {name} int16", x, want)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    refused = [d for d in backend.last_decisions() if d[1] == 12 * size or d[1] == 12]
    dist.barrier()
    dist.destroy_process_group()
    return {"checked": check.checked, "failures": check.failures,
            "refused": [list(d) for d in refused]}


@pytest.mark.timeout(150)
def test_refused_dtype_stays_flat_and_in_step(tmp_path):
    results = _spawn(["h0", "h1"], tmp_path, False, target=_refused_dtype_worker)
    for res in results:
        assert res["checked"] == 5, res["checked"]
        assert res["refused"] and all(d[2] == "flat" for d in res["refused"]), res["refused"]


def _complex_worker(rank, hosts, tmp, _full):
    """Complex reduce-scatters (torch's Python layer hands them to the backend as they are) on
    uneven hosts with hierarchical="always": the leaders' schedule reduces and scatters over
    the intra-host group, where Gloo refused complex tensors ("Invalid scalar type") although
    the flat op and the uniform schedule take them. Integer-valued inputs make every
    summation order exact, so the reference (Gloo-gathered inputs summed here) is bitwise."""
    size = len(hosts)
    ref, check = _init_topo_always(rank, hosts, tmp)
    gen = torch.Generator().manual_seed(5 + rank)
    for dtype in (torch.complex64, torch.complex128):
        part = torch.float32 if dtype == torch.complex64 else torch.float64
        x = torch.complex(torch.randint(-9, 10, (size * 5,), generator=gen).to(part),
                          torch.randint(-9, 10, (size * 5,), generator=gen).to(part))
        gathered = ref.all_gather(torch.view_as_real(x))
        total = sum(torch.view_as_complex(g).chunk(size)[rank] for g in gathered)
        for op in ("SUM", "AVG", "PREMUL_SUM"):
            want = total / size if op == "AVG" else total * PREMUL_FACTOR \
                if op == "PREMUL_SUM" else total
            out = torch.empty(5, dtype=dtype)
            dist.reduce_scatter_tensor(out, x, op=_reduce_op(op))
            check.same(f"reduce_scatter_tensor {dtype} {op}", out, want)
            out = torch.empty(5, dtype=dtype)
            dist.reduce_scatter(out, list(x.chunk(size)), op=_reduce_op(op))
            check.same(f"reduce_scatter {dtype} {op}", out, want)
        # PRODUCT stays flat, where complex values are folded: the leaders' level reduce moved
        # real views and refused it ("reduceOn: got a complex tensor"). Integer parts up to 9
        # keep every product exact.
        want = torch.ones(5, dtype=dtype)
        for g in gathered:
            want = want * torch.view_as_complex(g).chunk(size)[rank]
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.PRODUCT)
        check.same(f"reduce_scatter_tensor {dtype} PRODUCT", out, want)
        out = torch.empty(5, dtype=dtype)
        dist.reduce_scatter(out, list(x.chunk(size)), op=dist.ReduceOp.PRODUCT)
        check.same(f"reduce_scatter {dtype} PRODUCT", out, want)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    choices = {c for _, _, c in backend.last_decisions()}
    dist.barrier()
    dist.destroy_process_group()
    return {"checked": check.checked, "failures": check.failures, "choices": sorted(choices)}


@pytest.mark.timeout(150)
def test_complex_reduce_scatter_on_uneven_hosts(tmp_path):
    results = _spawn(CONFIGS["1+2"], tmp_path, False, target=_complex_worker)
    for res in results:
        assert res["checked"] == 16, res["checked"]
        assert "hierarchical" in res["choices"], res["choices"]


def _async_worker(rank, hosts, tmp, _full):
    """Hierarchical ops on CPU run on the backend's schedule worker: an async_op call returns
    before its schedule has run, several may be in flight (mixed with flat ops), their futures
    fire without wait(), barrier() orders after them, and a group freed with a dropped op in
    flight tears down (the worker never drops Python-owned tensors while the caller holds the
    GIL)."""
    import time

    size = len(hosts)
    ref, check = _init_topo_always(rank, hosts, tmp)
    gen = torch.Generator().manual_seed(7 + rank)
    # Rank 0 joins late: a blocking schedule would hold every other rank's call until then.
    late_s = 2.0
    if rank == 0:
        time.sleep(late_s)
    x = _make(gen, (700,), torch.float32, "SUM", False)
    x_in = x.clone()
    start = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    returned_s = time.monotonic() - start
    future = work.get_future()
    want = ref.all_reduce(x_in, "SUM")
    # Several in flight at once, a flat-only op (all_to_all) between them.
    xs = [_make(gen, (300 + 50 * i,), torch.float32, "SUM", False) for i in range(4)]
    wants = [ref.all_reduce(t.clone(), "SUM") for t in xs]
    blocks = [_make(gen, (200,), torch.float32, "SUM", False) for _ in range(size)]
    want_rs = ref.reduce_scatter(blocks, "SUM")
    a2a_in = torch.arange(size * 3, dtype=torch.float32) + 100 * rank
    want_a2a = torch.cat([torch.arange(3, dtype=torch.float32) + 3 * rank + 100 * src
                          for src in range(size)])
    works = [dist.all_reduce(t, async_op=True) for t in xs[:2]]
    a2a_out = torch.empty_like(a2a_in)
    works.append(dist.all_to_all_single(a2a_out, a2a_in, async_op=True))
    works += [dist.all_reduce(t, async_op=True) for t in xs[2:]]
    rs_out = torch.empty(200)
    works.append(dist.reduce_scatter_tensor(rs_out, torch.cat(blocks), async_op=True))
    future.wait()  # fires from the worker, no work.wait() needed
    check.same("all_reduce issued before the late rank", x, want)
    for w in works:
        w.wait()
    for i, (t, w) in enumerate(zip(xs, wants, strict=True)):
        check.same(f"all_reduce {i} in flight with others", t, w)
    check.same("reduce_scatter_tensor in flight", rs_out, want_rs)
    check.same("all_to_all_single between schedules", a2a_out, want_a2a)
    # Dropped without a wait: the barrier must still order after it.
    dropped = torch.ones(500) * (rank + 1)
    dist.all_reduce(dropped, async_op=True)
    dist.barrier()
    check.same("all_reduce before barrier", dropped, torch.full((500,), size * (size + 1) / 2))
    dist.all_reduce(torch.ones(300), async_op=True)  # in flight when the group goes
    dist.barrier()
    dist.destroy_process_group()
    return {"checked": check.checked, "failures": check.failures, "returned_s": returned_s}


@pytest.mark.timeout(150)
def test_hierarchical_ops_are_asynchronous_on_cpu(tmp_path):
    results = _spawn(CONFIGS["2x2-interleaved"], tmp_path, False, target=_async_worker)
    for rank, res in enumerate(results):
        assert res["checked"] == 8, res["checked"]
        if rank:
            # Waiting for the late rank inside the call would take ~2 s.
            assert res["returned_s"] < 1.0, res["returned_s"]


def _gloo_worker_threads() -> int:
    """Threads of this process that run a Gloo backend's queue (torch names them)."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as comm:
            count += comm.read().strip() == "pt_gloo_runloop"
    return count


def _shutdown_worker(rank, hosts, tmp, _full):
    """destroy_process_group frees the inner Gloo backends of a "topo" group that DDP still
    holds: their worker threads are gone when it returns (a worker left into interpreter exit
    aborts the process, 1 run in 3 of a DDP script on this machine), and the group then
    refuses ops by name."""
    from torch.nn.parallel import DistributedDataParallel

    import torch_topo  # noqa: F401  (registers "topo")

    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    cfg = TopoConfig(hierarchical="always", play=_play(hosts))
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=TIMEOUT, pg_options=cfg)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.full((3, 4), float(rank + 1))).square().sum().backward()
    group = dist.group.WORLD
    dist.barrier()
    before = _gloo_worker_threads()
    dist.destroy_process_group()
    after = _gloo_worker_threads()
    refused = {}
    # torch's own split_group under our wrapper: the wrapper needs the group registered, which
    # destroy ends, so only torch's method reaches TopoBackend::split.
    split = type(group).split_group.__wrapped__
    for op, call in (("allreduce", lambda: group.allreduce([torch.ones(2)]).wait()),
                     ("split", lambda: split(group, list(range(size))))):
        try:
            call()
            refused[op] = ""
        except ValueError as e:
            refused[op] = str(e)
    return {"failures": [], "before": before, "after": after,
            "refused": refused, "model_alive": model.module.weight.grad is not None}


@pytest.mark.timeout(150)
def test_destroy_frees_inner_backends_that_ddp_still_holds(tmp_path):
    results = _spawn(CONFIGS["2x2"], tmp_path, False, target=_shutdown_worker)
    for res in results:
        assert res["model_alive"]
        # The flat Gloo group and the intra-host and rail levels each run worker threads.
        assert res["before"] >= 6, res["before"]
        assert res["after"] == 0, res
        for op, message in res["refused"].items():
            assert message.startswith(f"TopoBackend::{op}: the group was shut down"), res


SET_TIMEOUT_S = 2.0
# The stalled rank's longest wait: well past the shortened timeouts of the others' two calls,
# well before TIMEOUT. It leaves as soon as they have all reported: a peer that exits earlier
# would fail their calls with a closed connection instead of the timeout.
STALL_S = 12.0


def _set_timeout_worker(rank, hosts, tmp, _full):
    """set_timeout shortens the group's timeout after creation; with a rank stalled, the
    others' hierarchical collectives must fail within it, as plain Gloo's do. The schedules'
    peer steps are Gloo sends and receives, whose unbounded wait lasts the timeout their pair
    had when the group connected: they waited for the stalled rank to exit instead."""
    import time

    import torch_topo  # noqa: F401  (registers "topo")

    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    cfg = TopoConfig(hierarchical="always", play=_play(hosts), pipeline_chunk_bytes=1024)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=TIMEOUT, pg_options=cfg)
    ref = dist.new_group(backend="gloo")
    x = torch.ones(700)
    dist.all_reduce(x)
    dist.all_reduce(x, group=ref)  # every connection is up before the stall
    short = timedelta(seconds=SET_TIMEOUT_S)
    # ProcessGroup.set_timeout, which dist.set_timeout (torch 2.14) calls: torch 2.11-2.13 have
    # only it (their private _set_pg_timeout skips backends other than Gloo and NCCL).
    dist.group.WORLD.set_timeout(short)
    ref.set_timeout(short)
    outcome = {}
    if rank != size - 1:
        for label, group in (("gloo", ref), ("topo", None)):
            start = time.monotonic()
            try:
                dist.all_reduce(x, group=group)
                outcome[label] = ("no error", time.monotonic() - start)
            except RuntimeError as e:
                outcome[label] = (str(e).splitlines()[0], time.monotonic() - start)
    else:
        peers = [os.path.join(tmp, f"result{r}.json") for r in range(size - 1)]
        deadline = time.monotonic() + STALL_S
        while time.monotonic() < deadline and not all(map(os.path.exists, peers)):
            time.sleep(0.1)
    with open(os.path.join(tmp, f"result{rank}.json"), "w") as f:
        json.dump({"failures": [], "outcome": outcome}, f)
    os._exit(0)  # a group with a stalled peer cannot be torn down cleanly


@pytest.mark.timeout(150)
def test_set_timeout_bounds_hierarchical_collectives(tmp_path):
    results = _spawn(CONFIGS["2x2"], tmp_path, False, target=_set_timeout_worker)
    for rank, res in enumerate(results[:-1]):
        for label, (message, elapsed) in res["outcome"].items():
            assert "imed out" in message, f"rank {rank} {label}: {message}"
            assert elapsed < SET_TIMEOUT_S + 4.0, f"rank {rank} {label}: {elapsed:.1f}s, {message}"
