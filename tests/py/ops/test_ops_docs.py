# SPDX-License-Identifier: Apache-2.0
"""docs/ops.md's code blocks, run as written on a Gloo pool, against single-process attention."""

import pytest
from ops_pool import get_pool


@pytest.mark.timeout(300)
def test_2d_snippet_runs_and_matches_attention():
    get_pool(4).run("doc_cases.two_d_snippet")
