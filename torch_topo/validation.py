"""Argument checks shared by the package's public entry points."""

from __future__ import annotations

MAX_LOCAL_PROCESSES = 4096
"""Most processes this package's launchers (emulate, bench --procs, the soak benchmark) start
at once on one machine: a typo such as 10000 started that many before anything could fail."""


def is_int_in(value: object, low: int, high: int | None = None) -> bool:
    """True when `value` is an int with low <= value (<= high when given). A bool is refused
    although Python counts it as an int: True passed as a size or index 1 is almost always a
    misplaced flag."""
    return (isinstance(value, int) and not isinstance(value, bool) and value >= low
            and (high is None or value <= high))
