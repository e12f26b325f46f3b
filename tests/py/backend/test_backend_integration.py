# SPDX-License-Identifier: Apache-2.0
"""DDP, FSDP2 and DeviceMesh on "topo", each against the same run on plain Gloo."""

from __future__ import annotations

import model_cases
import pytest


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
def test_ddp_20_steps_equal_gloo(pool_factory, world):
    # Tolerance 0: topo hands DDP's buckets to the same Gloo allreduce in the same order, so the
    # sums are computed in the same order and the parameters are bitwise equal; any difference
    # means a bucket went elsewhere or was scaled twice.
    diffs = pool_factory(world).run(model_cases.ddp_matches_gloo)
    assert max(diffs) == 0.0, diffs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 4])
def test_fsdp2_10_steps_match_gloo(pool_factory, world):
    # FSDP2 sends AVG/PREMUL_SUM reduce-scatters to topo but SUM plus its own division to Gloo
    # (Gloo lacks both), so the division happens at another point: allow 1e-6.
    diffs = pool_factory(world).run(model_cases.fsdp2_matches_gloo)
    assert max(diffs) <= 1e-6, diffs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [4])
def test_device_mesh_2d(pool_factory, world):
    results = pool_factory(world).run(model_cases.mesh_2d)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems)
