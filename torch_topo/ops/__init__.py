# SPDX-License-Identifier: Apache-2.0
"""Model-facing ops: communication/compute overlap (and, from the seqpar layer, sequence-parallel
attention). Each algorithm lives in its own module."""

from torch_topo.ops.overlap import (
    OverlapRecorder,
    all_gather_matmul,
    hidden_fraction,
    matmul_reduce_scatter,
)

__all__ = ["OverlapRecorder", "all_gather_matmul", "hidden_fraction", "matmul_reduce_scatter"]
