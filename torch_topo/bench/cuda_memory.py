# SPDX-License-Identifier: Apache-2.0
"""Peak CUDA memory of one call (layer: Python package, CUDA only), shared by the GPU benchmarks
and the GPU tests that hold our ops' memory against torch's."""

from __future__ import annotations

import torch

__all__ = ["peak_bytes"]


def peak_bytes(fn) -> int:
    """Bytes allocated at the peak while `fn` runs, beyond what was allocated before it; its
    result is held until the peak is read, so outputs count as they would for a caller."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    result = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del result
    return peak
