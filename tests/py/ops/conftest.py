# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the ops tests: rank pools live for the session and close at its end."""

import pytest
from ops_pool import close_pools


@pytest.fixture(scope="session", autouse=True)
def _close_rank_pools():
    yield
    close_pools()
