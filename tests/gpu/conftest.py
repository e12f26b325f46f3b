# SPDX-License-Identifier: Apache-2.0
"""GPU tests: marked `gpu`, skipped (and reported as skipped) without CUDA."""

from __future__ import annotations

import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; run by scripts/gpu_check.sh")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        # The marker itself: `"gpu" in item.keywords` also matched tests/py modules whose file
        # names contain "gpu" (test_gpu_scripts.py, test_emulate_one_gpu.py), skipping them
        # when tests/py and tests/gpu run together (scripts/test.sh).
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
