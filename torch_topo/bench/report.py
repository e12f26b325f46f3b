# SPDX-License-Identifier: Apache-2.0
"""Text, progress and plot output of the bench (layer: Python package): nccl-tests-style tables of
sweep records, the link check table, a one-line progress meter and a busbw-vs-size PNG."""

from __future__ import annotations

import sys
import time

__all__ = ["TABLE_COLUMNS", "format_tables", "format_links", "Progress", "plot"]

TABLE_COLUMNS = ("size", "count", "type", "redop", "topo_time_us", "topo_algbw_GBps",
                 "topo_busbw_GBps", "inner_time_us", "inner_algbw_GBps", "inner_busbw_GBps",
                 "ratio")
"""Record keys of the table columns, left to right (the `|` separators are not columns)."""


def format_tables(records: list[dict], reps: int | None = None) -> str:
    """One nccl-tests-style table per collective: topo and the inner backend side by side, and
    ratio = inner time / topo time (above 1: topo is faster)."""
    out = []
    for name in dict.fromkeys(r["collective"] for r in records):
        rows = [r for r in records if r["collective"] == name]
        inner = rows[0]["inner"]
        median = f"median of {reps}" if reps else "median"
        out += [f"# {name}: {rows[0]['ranks']} ranks, topo vs plain {inner} (time: slowest "
                f"rank, {median}, us; algbw and busbw: GB/s)",
                f"# {'size':>10} {'count':>10} {'type':>8} {'redop':>5} | {'topo time':>10} "
                f"{'algbw':>8} {'busbw':>8} | {inner + ' time':>10} {'algbw':>8} {'busbw':>8} | "
                f"{'ratio':>6}"]
        for r in rows:
            out.append(f"  {r['size']:>10} {r['count']:>10} {r['type']:>8} {r['redop']:>5} | "
                       f"{r['topo_time_us']:>10.1f} {r['topo_algbw_GBps']:>8.3f} "
                       f"{r['topo_busbw_GBps']:>8.3f} | {r['inner_time_us']:>10.1f} "
                       f"{r['inner_algbw_GBps']:>8.3f} {r['inner_busbw_GBps']:>8.3f} | "
                       f"{r['ratio']:>6.2f}")
        out.append("")
    return "\n".join(out)


def format_links(checks: list[dict], min_fraction: float) -> str:
    """The link checks: measured against expected GB/s per direction, and where the expectation
    comes from."""
    if not checks:
        return "# links: nothing to measure (no GPU and a single host)\n"
    out = [f"# links (GB/s per direction; below {min_fraction:.0%} of expected is a finding)",
           f"# {'kind':<10} {'link':<22} {'measured':>9} {'expected':>9} {'ratio':>6}  basis"]
    for c in checks:
        expected = "?" if c["expected_gbps"] is None else f"{c['expected_gbps']:.1f}"
        ratio = "?" if c["fraction"] is None else f"{c['fraction']:.2f}"
        out.append(f"  {c['kind']:<10} {c['subject']:<22} {c['measured_gbps']:>9.2f} "
                   f"{expected:>9} {ratio:>6}  {c['basis']}")
    return "\n".join(out) + "\n"


class Progress:
    """A progress line for long sweeps: rewritten in place on a terminal, silent otherwise (logs
    and pipes get the tables only)."""

    def __init__(self, total: int, stream=None, min_interval_s: float = 0.2):
        self.total = total
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._last = float("-inf")
        self._min_interval_s = min_interval_s
        self._width = 0

    def __call__(self, label: str) -> None:
        self.done += 1
        now = time.monotonic()
        if not self.enabled or (now - self._last < self._min_interval_s and self.done < self.total):
            return
        self._last = now
        line = f"bench: {self.done}/{self.total} {label} ({now - self._start:.0f} s)"
        self._width = max(self._width, len(line))
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


def plot(records: list[dict], path: str) -> None:
    """busbw against size, one panel per collective, topo and the inner backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["collective"] for r in records))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.5), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        rows = [r for r in records if r["collective"] == name]
        sizes = [r["size"] for r in rows]
        ax.plot(sizes, [r["topo_busbw_GBps"] for r in rows], "o-", label="topo")
        ax.plot(sizes, [r["inner_busbw_GBps"] for r in rows], "s--", label=rows[0]["inner"])
        ax.set_xscale("log", base=2)
        ax.set_title(f"{name} ({rows[0]['ranks']} ranks)")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
