# SPDX-License-Identifier: Apache-2.0
"""Measuring the machine against its topology: collective sweeps on "topo" and its plain inner
backend (`sweep`), host/device and peer copies (`copies`), checks against the topology and cost
model (`links`), output (`report`) and the launch of the ranks (`launch`). The CLI verb is
`python -m torch_topo bench` (torch_topo/cli/bench.py); docs/bench.md describes both."""

from torch_topo.bench.launch import BENCH_SCHEMA, BenchOptions, bench_rank, run_bench
from torch_topo.bench.links import DEFAULT_MIN_FRACTION, LinkCheck, link_findings
from torch_topo.bench.report import Progress, format_links, format_tables, plot
from torch_topo.bench.sweep import COLLECTIVES, DTYPES, SweepConfig, parse_bytes, sweep_collectives

__all__ = [
    "BENCH_SCHEMA",
    "COLLECTIVES",
    "DEFAULT_MIN_FRACTION",
    "DTYPES",
    "BenchOptions",
    "LinkCheck",
    "Progress",
    "SweepConfig",
    "bench_rank",
    "format_links",
    "format_tables",
    "link_findings",
    "parse_bytes",
    "plot",
    "run_bench",
    "sweep_collectives",
]
