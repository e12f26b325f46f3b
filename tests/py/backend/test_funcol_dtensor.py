# SPDX-License-Identifier: Apache-2.0
"""Functional collectives (with their autograd forms) and DTensor on a CPU DeviceMesh over
"topo", against the same calls on plain Gloo, flat and with hierarchical="always" on ranks
played as two hosts (world 4: 2 x 2)."""

from __future__ import annotations

import funcol_cases
import pytest
from pool import two_hosts_env

CASES = [funcol_cases.funcol, funcol_cases.dtensor, funcol_cases.mixed_dtype_reduce_scatter_coalesced]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("hierarchical", ["never", "always"])
@pytest.mark.parametrize("world", [2, 4])
def test_funcol_and_dtensor_match_gloo(pool_factory, world, hierarchical, case):
    results = pool_factory(world, two_hosts_env(world, hierarchical)).run(case)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems[:20])
