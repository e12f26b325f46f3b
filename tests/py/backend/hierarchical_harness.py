# SPDX-License-Identifier: Apache-2.0
"""What the hierarchical tests share: local processes that play hosts (through TopoConfig.play
strings and the store's host-name exchange), the same collective on a flat Gloo group as the
reference, and the comparison of the two.

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

import torch
import torch.distributed as dist
from rank_processes import process

from torch_topo.config import TopoConfig

TIMEOUT = timedelta(seconds=60)
PREMUL_FACTOR = 0.75

# Named configurations: host of every rank (the play string is built from these).
CONFIGS = {
    "2x2": ["h0", "h0", "h1", "h1"],
    "2x2-interleaved": ["h0", "h1", "h0", "h1"],
    "3x2": ["h0", "h0", "h1", "h1", "h2", "h2"],
    "1+2": ["h0", "h1", "h1"],
    "3+5-mixed": ["h0", "h1", "h1", "h0", "h1", "h1", "h0", "h1"],
}


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


def _spawn(hosts, tmp, full, target):
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
