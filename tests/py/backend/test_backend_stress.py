# SPDX-License-Identifier: Apache-2.0
"""Many random collectives back to back on "topo", async works waited out of order, each
checked against plain Gloo."""

from __future__ import annotations

import collective_cases
import pytest


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [3, 4])
def test_mixed_collectives_match_gloo(pool_factory, world):
    results = pool_factory(world).run(collective_cases.mixed_stress)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems[:20])
