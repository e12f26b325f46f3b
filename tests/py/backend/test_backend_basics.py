# SPDX-License-Identifier: Apache-2.0
"""Every c10d op of "topo" against the same call on plain Gloo in the same processes, element
by element (bitwise where topo runs Gloo's own algorithms, so any difference is a bug; its own
one-step forms against references computed the same way), for world sizes 1-4 and a subset at
8."""

from __future__ import annotations

import collective_cases
import group_cases
import pytest
import routing_cases

WORLDS = [1, 2, 3, 4]
ALL_CASES = [
    collective_cases.allreduce_all,
    collective_cases.allreduce_future,
    collective_cases.allreduce_sparse,
    collective_cases.allreduce_coalesced_all,
    collective_cases.strided_views,
    collective_cases.reduce_all,
    collective_cases.broadcast_all,
    collective_cases.allgather_all,
    collective_cases.allgather_coalesced_all,
    collective_cases.reduce_scatter_all,
    collective_cases.gather_scatter_all,
    collective_cases.alltoall_all,
    collective_cases.p2p_all,
    group_cases.barrier_and_seq,
    group_cases.object_collectives,
    group_cases.subgroups,
    group_cases.decisions_logged,
    routing_cases.pass_through_on_cpu,
]
SUBSET_AT_8 = [collective_cases.allreduce_all, collective_cases.allgather_all,
               collective_cases.reduce_scatter_all, collective_cases.alltoall_all,
               collective_cases.p2p_all]


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
