# SPDX-License-Identifier: Apache-2.0
"""Every c10d op of "topo" against the same call on plain Gloo in the same processes, element
by element (bitwise where topo runs Gloo's own algorithms, so any difference is a bug; its own
one-step forms against references computed the same way), for world sizes 1-4 and a subset at
8."""

from __future__ import annotations

import cases
import pytest
import routing_cases

WORLDS = [1, 2, 3, 4]
ALL_CASES = [
    cases.allreduce_all,
    cases.allreduce_future,
    cases.allreduce_sparse,
    cases.allreduce_coalesced_all,
    cases.strided_views,
    cases.reduce_all,
    cases.broadcast_all,
    cases.allgather_all,
    cases.allgather_coalesced_all,
    cases.reduce_scatter_all,
    cases.gather_scatter_all,
    cases.alltoall_all,
    cases.p2p_all,
    cases.barrier_and_seq,
    cases.object_collectives,
    cases.subgroups,
    cases.decisions_logged,
    routing_cases.pass_through_on_cpu,
]
SUBSET_AT_8 = [cases.allreduce_all, cases.allgather_all, cases.reduce_scatter_all,
               cases.alltoall_all, cases.p2p_all]


def _check(pool, case):
    results = pool.run(case)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("world", WORLDS)
def test_op_matches_gloo(pool_factory, world, case):
    _check(pool_factory(world), case)


# The ops of worlds 1-4 at 8 ranks: no code path of its own, so the other torch releases skip
# it (breadth).
@pytest.mark.breadth
@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", SUBSET_AT_8, ids=lambda c: c.__name__)
@pytest.mark.parametrize("world", [8])
def test_op_matches_gloo_8(pool_factory, world, case):
    _check(pool_factory(world), case)
