# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the backend tests: one RankPool alive at a time, tests grouped by world size."""

from __future__ import annotations

import pytest
from pool import RankPool

_active: dict[str, RankPool] = {}


def get_pool(size: int, env: dict[str, str] | None = None) -> RankPool:
    """The pool of `size` ranks with the extra environment `env`; the previous pool of another
    size or environment is closed first (memory)."""
    pool = _active.get("pool")
    if pool is not None and (pool.size, pool.env) != (size, dict(env or {})):
        pool.close()
        pool = None
    if pool is None:
        pool = _active["pool"] = RankPool(size, env)
    return pool


@pytest.fixture
def pool_factory():
    return get_pool


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "breadth: the same code path on more shapes than the others in its test; "
        "run on the main torch only (scripts/test_torch.sh deselects it for other releases)")


def pytest_collection_modifyitems(items):
    # Group this folder's tests by world size so each pool is spawned once; others keep their
    # places.
    here = str(__file__).rsplit("/", 1)[0]
    slots = [i for i, item in enumerate(items) if str(item.path).startswith(here)]

    def world(item):
        callspec = getattr(item, "callspec", None)
        return callspec.params.get("world", 0) if callspec else 0

    ordered = sorted((items[i] for i in slots), key=world)
    for i, item in zip(slots, ordered, strict=True):
        items[i] = item


def pytest_sessionfinish(session, exitstatus):
    pool = _active.pop("pool", None)
    if pool is not None:
        pool.close()
