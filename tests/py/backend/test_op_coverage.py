# SPDX-License-Identifier: Apache-2.0
"""No missing c10d op (issue 17): every public collective of the installed torch runs on "topo"
and gives what plain Gloo gives on the same inputs, or fails the way Gloo fails."""

from __future__ import annotations

import op_coverage
import pytest


def test_every_public_group_function_is_classified():
    # A torch release that adds a collective makes this fail until op_coverage calls it.
    assert op_coverage.unclassified() == []
    assert "all_reduce" in op_coverage.public_group_functions()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
def test_every_collective_matches_gloo(pool_factory, world):
    results = pool_factory(world).run(op_coverage.every_collective)
    problems = [f"rank {r}: {name}: topo {got} / gloo {want}"
                for r, rows in enumerate(results) for name, got, want, same in rows if not same]
    assert not problems, "\n".join(problems)
    names = [name for name, *_ in results[0]]
    assert set(names) == set(op_coverage.public_group_functions()) - op_coverage.NOT_COLLECTIVES
    # gather_into_tensor is what issue 17 found missing: it must run on topo, not merely fail
    # like Gloo.
    for rows in results:
        for name, got, _, _ in rows:
            if name in ("gather_into_tensor", "gather_single"):
                assert got.startswith("('ok'"), f"{name} on topo: {got}"
