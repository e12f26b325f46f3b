# SPDX-License-Identifier: Apache-2.0
"""Hierarchical schedules against plain flat Gloo, in the same processes, and the host layout,
thresholds and levels that set them up.

Each configuration is one pool of local processes that play hosts. Every schedule runs over
Gloo inner groups built by torch_topo.hierarchy with a tiny pipelining chunk (so every call
crosses several chunks), and its result is compared element by element with the same collective
on a flat Gloo group (tolerances: hierarchical_harness).
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
from hierarchical_harness import (
    CONFIGS,
    TIMEOUT,
    Checker,
    FlatRef,
    _make,
    _play,
    _reduce_op,
    _spawn,
)

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

CHUNK_BYTES = 64  # several pipeline chunks even for tensors of a few dozen elements
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64]
FLOAT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
INT_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
# (numel or shape, non-contiguous): sizes not divisible by 2 or 3 local ranks, one that spans
# many chunks, and a strided view.
SHAPES = [((7,), False), ((3, 5), True), ((61,), False)]
# Even (2x2) and uneven (1+2) hosts reach every schedule and every c10d call the inner backends
# take, on every dtype (2-, 4- and 8-byte elements chunk differently); the others vary the
# layout only, which neither the dtype nor the torch release changes: they run float32 and
# int64 (float and bitwise ops, 4- and 8-byte chunks).
BREADTH_CONFIGS = {"2x2-interleaved", "3x2", "3+5-mixed"}


def _ops_for(dtype):
    return FLOAT_OPS if dtype.is_floating_point else INT_OPS


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


@pytest.mark.timeout(200)
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.breadth) if n in BREADTH_CONFIGS else n for n in CONFIGS])
def test_schedules_match_flat_gloo(name, tmp_path):
    hosts = CONFIGS[name]
    results = _spawn(hosts, tmp_path, full=name not in BREADTH_CONFIGS, target=_worker)
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
        assert res["thresholds"] == {"cpu": {op: [[0, None]] for op in
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
    assert set(hierarchical_thresholds(two, TopoConfig(hierarchical="always")).values()) == {
        ((0, None),)}
    # A slow, high-latency host link (1 Gbit/s, 1 ms: the emulator's) favours two levels for
    # large all-reduces; over a link as fast as the intra path they win on small messages only
    # (three inner calls against the ring's six steps), and the contiguous ring keeps the rest.
    slow = hierarchical_thresholds(two, TopoConfig(), inter_gbps=0.125, inter_latency_us=1000)
    assert slow["all_reduce"][-1][1] is None and 0 <= slow["all_reduce"][-1][0] <= 1 << 20
    fast = hierarchical_thresholds(two, TopoConfig(), inter_gbps=50.0, inter_latency_us=1)
    ((lo, hi),) = fast["all_reduce"]
    assert lo == 0 and hi is not None and hi <= 1 << 20
    # TopoBackend measures all-gathers by their per-rank input.
    assert backend_thresholds({"all_gather": ((4096, 8192), (1 << 20, None)),
                               "reduce": ((10, None),)}, 4) == {
        "allgather": ((1024, 2048), (1 << 18, None)),
        "_allgather_base": ((1024, 2048), (1 << 18, None)), "reduce": ((10, None),)}


def _documented_rule(names: list[str], op: str, gbps: float, latency_us: float) -> tuple | None:
    """docs/schedules.md's size rule computed from its formulas: the (from, below) ranges of
    powers of two (1 KiB to 16 GiB) where the two-level time is below the flat ring's, each
    winning size s standing for [s, 2s), 1 KiB for [0, 2 KiB) and 16 GiB for all above; None
    when there is none."""
    g, hosts = len(names), len(set(names))
    local = max(names.count(h) for h in set(names))
    # Ring edges r -> r+1 that leave one host, most over any host.
    crossings = max(sum(1 for r in range(g) if names[r] == h and names[(r + 1) % g] != h)
                    for h in set(names))
    f = 2 if op == "all_reduce" else 1
    s = 2 if op in ("all_gather", "reduce_scatter") else 3
    a_inter, a_intra, o = latency_us * 1e-6, 10e-6, 30e-6
    b_inter, b_intra = gbps * 1e9, 5e9

    def two_levels_win(size):
        flat = f * (g - 1) * (a_inter + o) + f * (g - 1) / g * size * crossings / b_inter
        two = (f * (hosts - 1) * a_inter + f * (local - 1) * a_intra + s * o
               + f * (hosts - 1) / hosts * size / b_inter + f * (local - 1) / local * size / b_intra)
        return two < flat

    sizes = [1 << p for p in range(10, 35)]
    winners = [size for size in sizes if two_levels_win(size)]
    if not winners:
        return None
    # Every winning octave [s, 2s), then neighbours merged.
    octaves = [[0 if s == sizes[0] else s, None if s == sizes[-1] else 2 * s] for s in winners]
    merged = [octaves[0]]
    for lo, hi in octaves[1:]:
        if merged[-1][1] == lo:
            merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    return tuple(map(tuple, merged))


@pytest.mark.parametrize("names", [["a", "a", "b", "b"], ["a", "b", "a", "b"],
                                   ["a", "a", "a", "b"], ["a", "b", "c", "a", "b", "c"]])
@pytest.mark.parametrize("gbps, latency_us", [(0.125, 1.0), (1.25, 1.0), (5.0, 1.0),
                                              (1.25, 50.0), (50.0, 1.0)])
def test_size_rule_follows_the_documented_formulas(names, gbps, latency_us):
    got = hierarchical_thresholds(HostLayout.from_hostnames(names), TopoConfig(
        inter_host_gbps=gbps, inter_host_latency_us=latency_us))
    want = {op: t for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
            if (t := _documented_rule(names, op, gbps, latency_us)) is not None}
    assert got == want


def test_pinned_bandwidth_wins_over_a_reused_clusters():
    """A group whose members an earlier "topo" group's exchange covered reuses that cluster,
    with the bandwidth pinned (or not) then: the group's own TopoConfig.inter_host_gbps was
    ignored by the size rule (CPU ranks on no GPU)."""
    from types import SimpleNamespace

    names = ["a", "a", "b", "b"]
    earlier = SimpleNamespace(inter_host_bandwidth_gbps=50.0, inter_host_latency_us=1.0,
                              placements=[SimpleNamespace(local_gpu=-1)] * 4)
    got = hierarchical_thresholds(HostLayout.from_hostnames(names), TopoConfig(
        inter_host_gbps=0.125, inter_host_latency_us=1.0), cluster=earlier)
    assert got["broadcast"] == _documented_rule(names, "broadcast", 0.125, 1.0) == ((8192, None),)
    assert _documented_rule(names, "broadcast", 50.0, 1.0) is None


def test_cpu_tensors_of_gpu_ranks_are_priced_at_gloos_latency(tmp_path):
    """CPU collectives of ranks placed on GPUs take the cost model over the exchanged cluster,
    whose latency is NCCL's network hop (2.7 us) unless pinned; Gloo's steps cross hosts over
    TCP, so they are priced at the pinned latency, else at least 50 us, as the size rule and the
    one-step cap price them. Reference: the planner built by hand on the same cluster document
    with that latency."""
    import json
    from pathlib import Path

    from torch_topo.cluster import Cluster

    p4d = Path(__file__).resolve().parents[2] / "data" / "nccl_topo_xml" / \
        "aws_p4d.24xlarge_8xA100_topo.xml"
    doc = {**json.loads(_C.planner_cluster_json(path=str(p4d), hosts=2)),
           "inter_host_latency_us": 2.7}
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    cluster = Cluster(_C.load_cluster_file(str(tmp_path / "cluster.json")), 0)
    layout = HostLayout.from_hostnames(["a"] * 8 + ["b"] * 8)

    def by_hand(latency_us):
        planner = _C.PlannerCluster(json.dumps({**doc, "inter_host_latency_us": latency_us}),
                                    4 << 20, "alpha_beta", 0)
        found = planner.hierarchical_thresholds(list(range(16)))
        return {op: tuple(t) for op, t in found.items() if t}

    assert by_hand(50.0) != by_hand(2.7)  # the latency moves a threshold on these hosts
    for config, latency_us in ((TopoConfig(), 50.0), (TopoConfig(inter_host_latency_us=20.0), 20.0)):
        got = hierarchical_thresholds(layout, config, cluster=cluster, device_type="cpu")
        assert got == by_hand(latency_us)


def test_a_level_that_fails_to_form_names_itself(tmp_path):
    """A rail peer that never arrives: Gloo's error names a store key or a socket; the one
    raised says which level of the hierarchy failed, with which ranks, and where to look."""
    from datetime import timedelta

    store = dist.FileStore(str(tmp_path / "store"), 2)
    layout = HostLayout.from_hostnames(["a", "b"])
    with pytest.raises(RuntimeError) as caught:
        build_levels(store, 0, layout, timeout=timedelta(seconds=1))
    text = str(caught.value)
    assert text.startswith("torch_topo: building the cpu level 'rail0' of the group's hierarchy "
                           "(local rank 0 of every host, 2 ranks; this rank is 0 there) failed: ")
    assert text.endswith("see the other ranks' errors")
    assert isinstance(caught.value, type(caught.value.__cause__))  # Gloo's own type kept
