# SPDX-License-Identifier: Apache-2.0
"""docs/ops.md's code blocks, run as written on a Gloo pool, against single-process attention."""

import pytest
from ops_pool import get_pool


@pytest.mark.timeout(300)
def test_2d_snippet_runs_and_matches_attention():
    get_pool(4).run("doc_cases.two_d_snippet")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", ["bfloat16", "float64"])
def test_ring_snippet_runs_and_matches_attention(dtype):
    get_pool(2).run("doc_cases.ring_snippet", dtype=dtype)
