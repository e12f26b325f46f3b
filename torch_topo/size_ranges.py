# SPDX-License-Identifier: Apache-2.0
"""Message-size ranges over which a group takes the hierarchical schedule (the Python side of
csrc/topo/size_ranges.h). A two-level schedule saves latency steps on small messages and pays
an extra pass over the bytes on large ones, so it may win only in a band: a choice is a tuple
of (from, below) byte ranges, below None for no upper end; () is never."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

SizeRanges = tuple[tuple[int, int | None], ...]


def contains(ranges: Iterable[tuple[int, int | None]], nbytes: int) -> bool:
    """Whether a payload of `nbytes` lies in one of `ranges`."""
    return any(lo <= nbytes and (hi is None or nbytes < hi) for lo, hi in ranges)


def from_scan(sizes: Sequence[int], wins: Callable[[int], bool]) -> SizeRanges:
    """The ranges where `wins` holds over ascending powers of two `sizes`, as the planner's scan
    (computeHierarchicalThresholds) cuts them: a winning size s stands for [s, 2s), the first
    for everything below it too and the last for everything above."""
    out: list[list] = []
    for size in sizes:
        won, open_ = wins(size), bool(out) and out[-1][1] is None
        if won and not open_:
            out.append([0 if size == sizes[0] else size, None])
        elif not won and open_:
            out[-1][1] = size
    return tuple((lo, hi) for lo, hi in out)


def describe(ranges: Iterable[tuple[int, int | None]]) -> str:
    """"never", "every size" or the ranges ("[64 KiB, 16 MiB)", "from 1 MiB")."""
    ranges = tuple(ranges)
    if not ranges:
        return "never"
    if ranges == ((0, None),):
        return "every size"
    return ", ".join(f"from {size_text(lo)}" if hi is None
                     else f"[{size_text(lo)}, {size_text(hi)})" for lo, hi in ranges)


def size_text(nbytes: int, short: bool = False) -> str:
    """Bytes in the largest binary unit that divides them: "64 KiB", "1536 B"; `short` as
    nccl-tests tables print sizes: "64K", "1536"."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}" if short else f"{nbytes >> shift} {unit}iB"
    return str(nbytes) if short else f"{nbytes} B"
