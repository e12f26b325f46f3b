# SPDX-License-Identifier: Apache-2.0
"""Flat or hierarchical for a group of ranks, as a `_C.PlannerCluster` (or the size rule's
stand-in, `hierarchy._RuleModel`) prices the two sides: which it prefers, and the predicted
lines `plan --explain` and TORCH_TOPO_DEBUG print."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch_topo import size_ranges
from torch_topo.size_ranges import SizeRanges

__all__ = ["CHOICE_SIZES", "predicted_choices", "prefers_hierarchical"]

CHOICE_SIZES = (64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)
"""Message sizes whose predicted flat and hierarchical times `predicted_choices` prints."""


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds != float("inf") else "n/a"


def predicted_choices(model, groups: list[list[int]], ops=("all_reduce", "all_gather",
                      "reduce_scatter", "broadcast"), sizes=CHOICE_SIZES,
                      thresholds: Mapping[str, SizeRanges] | None = None) -> list[str]:
    """One line per op: at each size both sides' predicted time and the side taken, from a
    `_C.PlannerCluster` (what `plan --explain` prints for a mesh dimension across hosts and
    TORCH_TOPO_DEBUG for a "topo" group's hierarchy). `groups` run at once, as a dimension's
    groups do, sharing the links they cross. The side taken is the one `prefers_hierarchical`
    names, or with `thresholds` ({op: size ranges}, `hierarchy.hierarchical_thresholds`)
    hierarchical inside an op's ranges."""
    lines = []
    for op in ops:
        cells = []
        for nbytes in sizes:
            both = model.compare_hierarchical(op, nbytes, groups)
            flat, hier = both["flat"], both["hierarchical"]
            if thresholds is not None:
                hierarchical = size_ranges.contains(thresholds.get(op, ()), nbytes)
            else:
                hierarchical = prefers_hierarchical(both)
            taken = "hierarchical" if hierarchical else "flat"
            how = flat["algorithm"] + (f"/{flat['protocol']}" if flat["protocol"] else "")
            cells.append(f"{size_ranges.size_text(nbytes)}: flat {how} {_us(flat['seconds'])}, "
                         f"hierarchical {_us(hier['seconds'])} -> {taken}")
        lines.append(f"{op} " + "; ".join(cells))
    return lines


def prefers_hierarchical(both: Mapping[str, Any]) -> bool:
    """Whether a `compare_hierarchical` result puts hierarchical ahead: applicable, and faster
    than flat by the result's margin."""
    hier = both["hierarchical"]
    return hier["applicable"] and hier["seconds"] * both["margin"] < both["flat"]["seconds"]
