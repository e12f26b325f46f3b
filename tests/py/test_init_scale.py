# SPDX-License-Identifier: Apache-2.0
"""The cluster exchange at simulated scale (benchmarks/init_scale.py's harness, ranks as threads
over one HashStore): what each rank reads from the store must not grow with the world."""

from __future__ import annotations

import math

import pytest
import torch.distributed as dist
from benchmark_scripts import load_benchmark


def _init_scale():
    return load_benchmark("init_scale")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mixed", [False, True])
def test_reads_per_rank_do_not_grow_with_the_world(mixed):
    init_scale = _init_scale()
    small, large = (init_scale.simulate(n, processes=0, store=dist.HashStore(), mixed=mixed)
                    for n in (32, 64))
    assert (small["hosts"], large["hosts"]) == (4, 8)
    # Every rank but group rank 0 (which reads each placement) makes as many calls at both sizes,
    # one more where it writes a host record.
    calls = min(small["ops_per_rank"][1:])
    for run in (small, large):
        assert calls <= min(run["ops_per_rank"][1:]) <= max(run["ops_per_rank"][1:]) <= calls + 1
    # Mean bytes read per rank: growth exponent near 0 (reading every rank's record is >= 1).
    growth = math.log(large["read_mean"] / small["read_mean"]) / math.log(2)
    assert growth < 0.15, (small["read_mean"], large["read_mean"])
    # Store traffic in all: linear, not quadratic.
    assert large["total"] / small["total"] < 2 * 1.15, (small["total"], large["total"])
    # The f8f051a exchange read every rank's whole record: about 16 KB per rank per rank.
    assert large["read_mean"] * 100 < init_scale.old_read_per_rank(64, mixed)


def test_counting_store_counts_what_crosses_the_store():
    init_scale = _init_scale()
    store = init_scale.CountingStore(dist.HashStore())
    store.set("k", b"12345")
    assert store.get("k") == b"12345"
    assert store.multi_get(["k", "k"]) == [b"12345", b"12345"]
    assert (store.sent, store.read, store.ops) == (1 + 5 + 1 + 2, 5 + 10, 3)


def _exchange_all(owns: list[dict]) -> list:
    """Runs the exchange for every record as threads over one HashStore; per rank the Cluster
    or the exception it raised."""
    import threading
    from datetime import timedelta

    from torch_topo import cluster

    store = dist.HashStore()
    out: list = [None] * len(owns)

    def one(r: int) -> None:
        try:
            out[r] = cluster.exchange_records(store, r, len(owns), owns[r],
                                              timeout=timedelta(seconds=30))[0]
        except Exception as exc:  # compared by the test
            out[r] = exc

    threads = [threading.Thread(target=one, args=(r,)) for r in range(len(owns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.timeout(120)
def test_exchanged_mixed_cluster_equals_one_assembled_from_whole_records():
    from torch_topo import _C

    owns = _init_scale().own_records(32, mixed=True)
    # Reference: the C++ assembly from every rank's own whole host JSON (no digests, no table).
    reference = _C.assemble_cluster([
        _C.RankRecord(r, o["hostname"], o["local_rank"], o["local_device"],
                      host_json=o["topology"].to_json()) for r, o in enumerate(owns)])
    for rank, built in enumerate(_exchange_all(owns)):
        assert not isinstance(built, Exception), built
        assert built.rank == rank
        assert built.hostnames == [h.hostname for h in reference.hosts]
        assert [built.hostnames[p.host] for p in built.placements] == \
            [o["hostname"] for o in owns]
        assert [h.to_json() for h in built.hosts] == [_C.host_to_json(h, -1) for h in reference.hosts]
        assert [(p.host, p.local_gpu, p.local_rank) for p in built.placements] == \
            [(p.host, p.local_gpu, p.local_rank) for p in reference.ranks]


@pytest.mark.timeout(120)
def test_a_rank_disagreeing_on_its_host_is_named_on_every_rank():
    from torch_topo import _C

    owns = _init_scale().own_records(16, mixed=True)
    # Rank 3 claims host node0000 (A100) with node0001's H100 graph.
    owns[3] = dict(owns[3], topology=owns[8]["topology"])
    for result in _exchange_all(owns):
        assert isinstance(result, _C.TopoMismatchError), result
        assert "ranks 0 and 3 on host 'node0000' disagree on the host topology" in str(result)


@pytest.mark.timeout(120)
def test_host_names_alone_cost_each_rank_the_same_calls_at_any_size():
    # Play mode without a topology file exchanges only host names (torch_topo.hierarchy).
    import threading

    from torch_topo.hierarchy import exchange_hostnames

    init_scale = _init_scale()
    reads = {}
    for world in (32, 64):
        base = dist.HashStore()
        stores = [init_scale.CountingStore(base) for _ in range(world)]
        want = [f"node{r // 8}" for r in range(world)]
        got: list = [None] * world

        def one(r: int, stores=stores, want=want, got=got, world=world) -> None:
            got[r] = exchange_hostnames(stores[r], r, world, want[r])

        threads = [threading.Thread(target=one, args=(r,)) for r in range(world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == [want] * world
        reads[world] = ({s.ops for s in stores[1:]}, max(s.read for s in stores[1:]))
    assert reads[32][0] == reads[64][0] and len(reads[64][0]) == 1, reads
    # The compressed list of repeated names grows far slower than one read per rank would.
    assert reads[64][1] < 1.5 * reads[32][1], reads
