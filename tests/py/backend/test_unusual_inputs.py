# SPDX-License-Identifier: Apache-2.0
"""Unusual but legal tensors (layouts, zero-element and 0-dim, complex/bool/8-bit dtypes, tensors
that require grad, inference tensors, list forms of mixed shapes, async works waited out of
order) on "topo" against plain Gloo, flat and with hierarchical="always" on ranks played as two
hosts (world 4: 2 x 2, so the schedules' rail and intra-host steps both run)."""

from __future__ import annotations

import collective_cases
import pytest
import unusual_cases
from pool import two_hosts_env

CASES = [unusual_cases.layouts, unusual_cases.empty_and_scalar, unusual_cases.dtypes,
         unusual_cases.requires_grad, unusual_cases.inference_tensors,
         unusual_cases.list_shapes, unusual_cases.async_out_of_order]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("hierarchical", ["never", "always"])
@pytest.mark.parametrize("world", [2, 4])
def test_unusual_inputs_match_gloo(pool_factory, world, hierarchical, case):
    pool = pool_factory(world, two_hosts_env(world, hierarchical))
    results = pool.run(case)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems[:20])


@pytest.mark.parametrize("world", [4])
def test_hierarchical_pool_runs_the_schedules(pool_factory, world):
    # Every call of async_out_of_order has a hierarchical form, so "always" must take it.
    for bad, choices in pool_factory(world, two_hosts_env(world, "always")).run(
            unusual_cases.decisions_of_async):
        assert not bad and choices == ["hierarchical"], (bad, choices)


# CPU sparse tensors reach "topo" through allreduce (torch sends only CUDA ones to
# allreduce_sparse); with levels they failed: the two-rank pair across hosts measured them with
# nbytes ("not defined for sparse tensors") and the schedules took their strides (as_strided).
@pytest.mark.timeout(300)
@pytest.mark.parametrize("world, hierarchical", [(2, "auto"), (2, "always"), (4, "always")])
def test_sparse_all_reduce_across_played_hosts_matches_gloo(pool_factory, world, hierarchical):
    results = pool_factory(world, two_hosts_env(world, hierarchical)).run(collective_cases.allreduce_sparse)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems)


# Integer AVG was refused on Gloo (ValueError) though NCCL averages integers: the same program
# failed on CPU only. Flat, the two-rank one-step exchange, and the schedules.
@pytest.mark.timeout(300)
@pytest.mark.parametrize("world, hierarchical", [(2, "auto"), (4, "never"), (4, "always")])
def test_integer_avg_truncates_as_nccl_does(pool_factory, world, hierarchical):
    results = pool_factory(world, two_hosts_env(world, hierarchical)).run(collective_cases.integer_avg)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems[:20])
