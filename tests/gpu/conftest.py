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
        if "gpu" in item.keywords:
            item.add_marker(skip)
