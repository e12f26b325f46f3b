# SPDX-License-Identifier: Apache-2.0
"""Hierarchical schedules against plain flat Gloo, in the same processes.

Each configuration is one pool of local processes that play hosts (through TopoConfig.play
strings and the store's host-name exchange). Every schedule runs over Gloo inner groups built by
torch_topo.hierarchy with a tiny pipelining chunk (so every call crosses several chunks), and its
result is compared element by element with the same collective on a flat Gloo group.

Tolerances: integers, MIN/MAX, broadcast and gathers are exact. float32 sums differ from the flat
ring's summation order by a few ulps of the partial sums: rtol 1e-5, atol 1e-5 for values of
order 1 over at most 8 ranks. float64: rtol/atol 1e-12. bfloat16 inputs are small integers
(products stay powers of two times small factors), so every order gives the exact same value and
the comparison is exact.
"""

from __future__ import annotations

import json
import os
import traceback
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from rank_processes import process

from torch_topo import _C
from torch_topo.cluster import parse_play
from torch_topo.config import TopoConfig
from torch_topo.hierarchy import (
    HostLayout,
    attach_hierarchy,
    backend_thresholds,
    build_levels,
    exchange_hostnames,
    hierarchical_thresholds,
)

TIMEOUT = timedelta(seconds=60)
CHUNK_BYTES = 64  # several pipeline chunks even for tensors of a few dozen elements
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64]
FLOAT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
INT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
PREMUL_FACTOR = 0.75
# (numel or shape, non-contiguous): sizes not divisible by 2 or 3 local ranks, one that spans
# many chunks, and a strided view.
SHAPES = [((7,), False), ((3, 5), True), ((61,), False)]

# Named configurations: host of every rank (the play string is built from these).
CONFIGS = {
    "2x2": ["h0", "h0", "h1", "h1"],
    "2x2-interleaved": ["h0", "h1", "h0", "h1"],
    "3x2": ["h0", "h0", "h1", "h1", "h2", "h2"],
    "1+2": ["h0", "h1", "h1"],
    "3+5-mixed": ["h0", "h1", "h1", "h0", "h1", "h1", "h0", "h1"],
}
# Even (2x2) and uneven (1+2) hosts reach every schedule and every c10d call the inner backends
# take, on every dtype (2-, 4- and 8-byte elements chunk differently); the others vary the
# layout only, which neither the dtype nor the torch release changes: they run float32 and
# int64 (float and bitwise ops, 4- and 8-byte chunks).
BREADTH_CONFIGS = {"2x2-interleaved", "3x2", "3+5-mixed"}


def _ops_for(dtype):
    return FLOAT_OPS if dtype.is_floating_point else INT_OPS


def _reduce_op(name):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(dist.ReduceOp, name)


def _values(gen, shape, dtype, op):
    """Seeded inputs whose reduction stays in range (and exact for bfloat16)."""
    if dtype == torch.bfloat16:
        return torch.randint(-2, 3, shape, generator=gen).to(dtype)
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
        return (1 + 0.1 * x if op == "PRODUCT" else x).to(dtype)
    if op == "PRODUCT":
        return torch.randint(-3, 4, shape, generator=gen, dtype=dtype)
    if op in ("BAND", "BOR", "BXOR"):
        return torch.randint(0, 1 << 20, shape, generator=gen, dtype=dtype)
    return torch.randint(-1000, 1000, shape, generator=gen, dtype=dtype)


def _make(gen, shape, dtype, op, strided):
    vals = _values(gen, shape, dtype, op)
    if not strided:
        return vals
    base = torch.zeros(shape[:-1] + (2 * shape[-1],), dtype=dtype)
    view = base[..., ::2]
    view.copy_(vals)
    return view


class FlatRef:
    """The same collective on a flat Gloo group; AVG and PREMUL_SUM as SUM then one scaling."""

    def __init__(self, pg, size):
        self.pg = pg
        self.size = size

    def _finish(self, t, op):
        if op == "AVG":
            t.copy_(t.div(self.size, rounding_mode=None if t.is_floating_point() else "trunc"))
        elif op == "PREMUL_SUM":
            t.mul_(PREMUL_FACTOR)
        return t

    @staticmethod
    def _inner(op):
        return dist.ReduceOp.SUM if op in ("AVG", "PREMUL_SUM") else getattr(dist.ReduceOp, op)

    def all_reduce(self, t, op):
        t = t.contiguous()
        o = dist.AllreduceOptions()
        o.reduceOp = self._inner(op)
        self.pg.allreduce([t], o).wait()
        return self._finish(t, op)

    def reduce(self, t, root, op):
        t = t.contiguous()
        o = dist.ReduceOptions()
        o.reduceOp = self._inner(op)
        o.rootRank = root
        self.pg.reduce([t], o).wait()
        return self._finish(t, op)

    def reduce_scatter(self, inputs, op):
        out = torch.empty_like(inputs[0].contiguous())
        o = dist.ReduceScatterOptions()
        o.reduceOp = self._inner(op)
        self.pg.reduce_scatter([out], [[x.contiguous() for x in inputs]], o).wait()
        return self._finish(out, op)

    def all_gather(self, t):
        outs = [torch.empty_like(t.contiguous()) for _ in range(self.size)]
        self.pg.allgather([outs], [t.contiguous()]).wait()
        return outs

    def broadcast(self, t, root):
        t = t.contiguous()
        o = dist.BroadcastOptions()
        o.rootRank = root
        self.pg.broadcast([t], o).wait()
        return t


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.checked = 0
        self.failures: list[str] = []

    def same(self, what, got, want):
        self.checked += 1
        got = got.reshape(want.shape)
        if got.dtype != want.dtype:
            self.failures.append(f"rank {self.rank} {what}: dtype {got.dtype} vs {want.dtype}")
            return
        if want.dtype == torch.float32:
            ok = torch.allclose(got, want, rtol=1e-5, atol=1e-5)
        elif want.dtype == torch.float64:
            ok = torch.allclose(got, want, rtol=1e-12, atol=1e-12)
        else:
            ok = torch.equal(got, want)
        if not ok:
            diff = (got.double() - want.double()).abs().max().item()
            self.failures.append(f"rank {self.rank} {what}: max abs diff {diff}\n"
                                 f"got  {got.flatten()[:8].tolist()}\nwant {want.flatten()[:8].tolist()}")


def _run_cases(rank, size, levels, ref, check, full):
    gen = torch.Generator().manual_seed(1234 + rank)
    roots = sorted({0, size - 1, size // 2})
    dtypes = DTYPES if full else [torch.float32, torch.int64]
    for dtype in dtypes:
        for op in _ops_for(dtype):
            for shape, strided in SHAPES:
                tag = f"{dtype} {op} {shape}{' strided' if strided else ''}"
                # all_reduce, in place, on the very tensor (strided views included).
                x = _make(gen, shape, dtype, op, strided)
                want = ref.all_reduce(x.clone(), op)
                _C._hierarchical_all_reduce(levels, x, _reduce_op(op))
                check.same(f"all_reduce {tag}", x, want)
                # reduce to each root: the root's tensor gets the result, others stay as they were.
                for root in roots:
                    x = _make(gen, shape, dtype, op, strided)
                    before = x.clone()
                    want = ref.reduce(x.clone(), root, op)
                    _C._hierarchical_reduce(levels, x, root, _reduce_op(op))
                    check.same(f"reduce root {root} {tag}", x, want if rank == root else before)
                # reduce_scatter: list form with strided blocks, tensor form from their concat.
                blocks = [_make(gen, shape, dtype, op, strided) for _ in range(size)]
                want = ref.reduce_scatter(blocks, op)
                out = _make(gen, shape, dtype, op, strided)
                _C._hierarchical_reduce_scatter_list(levels, out, blocks, _reduce_op(op))
                check.same(f"reduce_scatter list {tag}", out, want)
                flat_in = torch.cat([b.reshape(-1) for b in blocks])
                out = torch.empty(shape, dtype=dtype)
                _C._hierarchical_reduce_scatter(levels, out, flat_in, _reduce_op(op))
                check.same(f"reduce_scatter {tag}", out, want)
        for shape, strided in SHAPES:
            tag = f"{dtype} {shape}{' strided' if strided else ''}"
            x = _make(gen, shape, dtype, "SUM", strided)
            want = ref.all_gather(x)
            outs = [torch.zeros(shape, dtype=dtype) for _ in range(size)]
            _C._hierarchical_all_gather_list(levels, outs, x)
            for r in range(size):
                check.same(f"all_gather list [{r}] {tag}", outs[r], want[r])
            out = torch.zeros((size,) + shape, dtype=dtype)
            _C._hierarchical_all_gather(levels, out, x)
            check.same(f"all_gather {tag}", out, torch.stack(want))
            # In place as FSDP2 does it: the input is this rank's slice of the output.
            out = torch.zeros((size,) + shape, dtype=dtype)
            out[rank].copy_(x)
            _C._hierarchical_all_gather(levels, out, out[rank])
            check.same(f"all_gather in-place {tag}", out, torch.stack(want))
            for root in roots:
                x = _make(gen, shape, dtype, "SUM", strided)
                want = ref.broadcast(x.clone(), root)
                _C._hierarchical_broadcast(levels, x, root)
                check.same(f"broadcast root {root} {tag}", x, want)


def _worker(rank, hosts, tmp, full):
    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    flat = dist.ProcessGroupGloo(dist.PrefixStore("flat", store), rank, size, TIMEOUT)
    # Hosts come from a play string indexed by rank, exchanged through the store.
    names = exchange_hostnames(store, rank, size, parse_play(_play(hosts), size, rank)[0])
    layout = HostLayout.from_hostnames(names)
    lv = build_levels(dist.PrefixStore("hier", store), rank, layout,
                      chunk_bytes=CHUNK_BYTES, timeout=TIMEOUT)
    levels = _C._ScheduleLevels(*lv.as_args())
    check = Checker(rank)
    _run_cases(rank, size, levels, FlatRef(flat, size), check, full)
    return {"checked": check.checked, "failures": check.failures,
            "layout": [list(layout.host_of_rank), list(layout.local_of_rank)],
            "uniform": lv.uniform}


def _rank_main(body, rank, hosts, tmp, full):
    """One spawned rank: `body` returns its result dict; an exception becomes its failure. The
    result goes to tmp/result{rank}.json for _spawn to collect."""
    try:
        result = body(rank, hosts, tmp, full)
    except Exception:
        result = {"checked": 0, "failures": [f"rank {rank}: {traceback.format_exc()}"]}
    with open(os.path.join(tmp, f"result{rank}.json"), "w") as f:
        json.dump(result, f)


def _play(hosts):
    """The TopoConfig.play string that puts rank r on hosts[r], local GPUs in rank order."""
    return ",".join(f"{h}:{hosts[:r].count(h)}" for r, h in enumerate(hosts))


def _spawn(hosts, tmp, full, target=_worker):
    """Every rank's result dict, after asserting that no rank reported a failure."""
    procs = [process(_rank_main, (target, r, hosts, str(tmp), full)) for r in range(len(hosts))]
    for p in procs:
        p.start()
    for p in procs:
        p.join(150)
    for p in procs:
        if p.is_alive():
            p.kill()
    results = []
    for r in range(len(hosts)):
        path = tmp / f"result{r}.json"
        assert path.exists(), f"rank {r} wrote no result (crashed or hung)"
        results.append(json.loads(path.read_text()))
    failures = [f for res in results for f in res["failures"]]
    assert not failures, "\n".join(failures[:10])
    return results


@pytest.mark.timeout(200)
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.breadth) if n in BREADTH_CONFIGS else n for n in CONFIGS])
def test_schedules_match_flat_gloo(name, tmp_path):
    hosts = CONFIGS[name]
    results = _spawn(hosts, tmp_path, full=name not in BREADTH_CONFIGS)
    want_layout = HostLayout.from_hostnames(hosts)
    for res in results:
        assert res["layout"] == [list(want_layout.host_of_rank), list(want_layout.local_of_rank)]
        assert res["uniform"] == want_layout.uniform
        assert res["checked"] > 100


class _RecordingBackend:
    """Stands in for _C.TopoBackend: records what attach_hierarchy hands over."""

    def __init__(self):
        self.levels = {}
        self.thresholds = {}

    def set_levels(self, device_type, *args):
        self.levels[device_type] = args

    def set_hierarchical_thresholds(self, device_type, thresholds):
        self.thresholds[device_type] = dict(thresholds)


def _attach_worker(rank, hosts, tmp, _full):
    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    flat = dist.ProcessGroupGloo(dist.PrefixStore("flat", store), rank, size, TIMEOUT)
    play = ",".join(f"{h}:0" for h in hosts)
    backend = _RecordingBackend()
    cfg = TopoConfig(hierarchical="always", play=play, pipeline_chunk_bytes=1024)
    layout = attach_hierarchy(backend, dist.PrefixStore("pg", store), rank, size,
                              list(range(size)), cfg, timeout=TIMEOUT)
    levels = _C._ScheduleLevels(*backend.levels["cpu"])
    x = torch.arange(1000, dtype=torch.float32) * (rank + 1)
    want = FlatRef(flat, size).all_reduce(x.clone(), "SUM")
    _C._hierarchical_all_reduce(levels, x, dist.ReduceOp.SUM)
    check = Checker(rank)
    check.same("all_reduce via attach_hierarchy", x, want)
    return {"checked": check.checked, "failures": check.failures,
            "thresholds": backend.thresholds, "hosts": layout.host_count,
            "chunk_bytes": levels.chunk_bytes}


@pytest.mark.timeout(120)
def test_attach_hierarchy_hands_levels_to_backend(tmp_path):
    results = _spawn(["a", "b", "a"], tmp_path, False, target=_attach_worker)
    for res in results:
        assert res["hosts"] == 2 and res["chunk_bytes"] == 1024 and res["checked"] == 1
        assert res["thresholds"] == {"cpu": {op: 0 for op in
                                             ("allreduce", "allgather", "_allgather_base",
                                              "reduce_scatter", "_reduce_scatter_base",
                                              "broadcast", "reduce")}}


def test_layout_from_hostnames():
    lay = HostLayout.from_hostnames(["b", "a", "b", "a", "a"])
    assert lay.host_names == ("b", "a")
    assert lay.host_of_rank == (0, 1, 0, 1, 1)
    assert lay.local_of_rank == (0, 0, 1, 1, 2)
    assert not lay.uniform
    assert lay.rail(1) == [2, 3]
    assert HostLayout.from_hostnames(["x", "y", "x", "y"]).ring_crossings() == 2
    assert HostLayout.from_hostnames(["x", "x", "y", "y"]).ring_crossings() == 1
    with pytest.raises(ValueError, match="empty host name"):
        HostLayout.from_hostnames(["x", ""])


def test_thresholds_follow_config():
    two = HostLayout.from_hostnames(["a", "a", "b", "b"])
    one = HostLayout.from_hostnames(["a", "a"])
    assert hierarchical_thresholds(two, TopoConfig(hierarchical="never")) == {}
    assert hierarchical_thresholds(two, TopoConfig(use_topo_aware_collectives=False)) == {}
    assert hierarchical_thresholds(one, TopoConfig(hierarchical="always")) == {}
    assert set(hierarchical_thresholds(two, TopoConfig(hierarchical="always")).values()) == {0}
    # A slow, high-latency host link (1 Gbit/s, 1 ms: the emulator's) favours two levels for
    # large all-reduces; a link as fast as the intra path leaves the contiguous ring flat.
    slow = hierarchical_thresholds(two, TopoConfig(), inter_gbps=0.125, inter_latency_us=1000)
    assert 0 <= slow["all_reduce"] <= 1 << 20
    fast = hierarchical_thresholds(two, TopoConfig(), inter_gbps=50.0, inter_latency_us=1)
    assert "all_reduce" not in fast
    # TopoBackend measures all-gathers by their per-rank input.
    assert backend_thresholds({"all_gather": 4096, "reduce": 10}, 4) == {
        "allgather": 1024, "_allgather_base": 1024, "reduce": 10}


def _init_topo_always(rank, hosts, tmp):
    """The default group as "topo" with hierarchical="always" on the played `hosts`; returns a
    flat Gloo reference over the same ranks and this rank's Checker."""
    import torch_topo  # noqa: F401  (registers "topo")

    size = len(hosts)
    store = dist.FileStore(os.path.join(tmp, "store"), size)
    # 1024 bytes: the smallest chunk TopoConfig allows, so the 700-element tensors span several.
    cfg = TopoConfig(hierarchical="always", play=_play(hosts), pipeline_chunk_bytes=1024)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=TIMEOUT, pg_options=cfg)
    return FlatRef(dist.new_group(backend="gloo"), size), Checker(rank)


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
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    choices = {c for _, _, c in backend.last_decisions()}
    dist.barrier()
    dist.destroy_process_group()
    return {"checked": check.checked, "failures": check.failures, "choices": sorted(choices)}


@pytest.mark.timeout(150)
def test_complex_reduce_scatter_on_uneven_hosts(tmp_path):
    results = _spawn(CONFIGS["1+2"], tmp_path, False, target=_complex_worker)
    for res in results:
        assert res["checked"] == 12, res["checked"]
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
