# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo bench`: nccl-tests-style collective tables for "topo" and its plain inner
backend side by side, and the machine's links measured against its topology: host/device copies
per GPU against its PCIe link, peer copies per GPU pair against the NVLink or PCIe path, and a
multi-host run's bus bandwidth against the NICs (cost model). Alone it spawns one rank per local
GPU (or N CPU ranks with --procs N); under torchrun it uses the given world. --check turns each
figure below --min-fraction of its expectation into a doctor-style finding and exits 1.
With --published OUTPUT it measures nothing: a saved nccl-tests stdout is held, size by size,
against the cost model on the host file of --topology."""

from __future__ import annotations

import argparse
import json
import os

from torch_topo.bench import (
    BENCH_SCHEMA,
    COLLECTIVES,
    DEFAULT_MIN_FRACTION,
    DTYPES,
    BenchOptions,
    SweepConfig,
    format_links,
    format_tables,
    parse_bytes,
    plot,
    run_bench,
)
from torch_topo.cli._bench_published import add_published_options, published_mode, run_published
from torch_topo.cli._options import int_at_least
from torch_topo.cluster import play_entries
from torch_topo.config import TopoConfig
from torch_topo.probe import resolve_pinned_file
from torch_topo.topology import read_topology
from torch_topo.validation import MAX_LOCAL_PROCESSES

__all__ = ["add_parser", "run"]


_SWEEP_DEFAULTS = {"--collectives": list(COLLECTIVES), "--min-bytes": 8, "--max-bytes": 16 << 20,
                   "--factor": 4, "--reps": 5, "--dtype": "float32",
                   "--min-fraction": DEFAULT_MIN_FRACTION}


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number in (0, 1]") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"got {value:g}, expected a number in (0, 1]")
    return value


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure collectives and links against the topology",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    # The sweep's options default to None so that --published, which runs no sweep, can tell
    # which were given; `run` fills in _SWEEP_DEFAULTS.
    p.add_argument("--collectives", nargs="+", choices=COLLECTIVES, default=None,
                   metavar="NAME", help=f"collectives to sweep ({', '.join(COLLECTIVES)}; default all)")
    p.add_argument("--min-bytes", type=parse_bytes, default=None,
                   help="smallest size, e.g. 8, 64K (8)")
    p.add_argument("--max-bytes", type=parse_bytes, default=None,
                   help="largest size (16M; use 1G on GPUs)")
    p.add_argument("--factor", type=int_at_least(2), default=None, help="size step factor (4)")
    p.add_argument("--reps", type=int_at_least(1), default=None,
                   help="interleaved repetitions per size, median reported (5)")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="element type (float32)")
    p.add_argument("--procs", type=int_at_least(1), default=None,
                   help="spawn N CPU ranks (default: one rank per local GPU; not under torchrun)")
    p.add_argument("--topology", metavar="FILE", default=None,
                   help="expectation source (default: TORCH_TOPO_FILE, NCCL_TOPO_FILE or the probe)")
    p.add_argument("--min-fraction", type=_fraction, default=None,
                   help=f"a figure below this fraction of its expectation is a finding "
                        f"({DEFAULT_MIN_FRACTION})")
    p.add_argument("--check", action="store_true",
                   help="print findings (code, severity, message, fix); exit 1 when any is a "
                        "warning or error")
    p.add_argument("--plot", metavar="FILE.png", default=None, help="write busbw against size here")
    p.add_argument("--json", action="store_true", help=f"print one JSON object ({BENCH_SCHEMA})")
    add_published_options(p)
    p.set_defaults(run=run)


def render_text(result: dict, check: bool) -> str:
    """The text report: tables, link checks and (with --check) the findings as doctor prints them."""
    out = [format_tables(result["collectives"], result["sweep"]["reps"]),
           format_links(result["links"], result["min_fraction"])]
    if check:
        findings = result["findings"]
        problems = [f for f in findings if f["severity"] != "info"]
        for f in findings:
            out.append(f"[{f['severity']}] {f['code']}: {f['message']}\n    fix: {f['fix']}")
        out.append(f"{len(problems)} problem(s), {len(findings) - len(problems)} note(s)")
    return "\n".join(out)


def _check_plot_path(path: str) -> None:
    """A figure that cannot be written failed after the whole sweep, whose tables were then
    lost: the folder, matplotlib and the file type are checked before any rank starts."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"--plot: {path!r} is a folder, expected a file name such as busbw.png")
    if not os.path.isdir(folder):
        raise ValueError(f"--plot: no folder {folder!r} to write {path!r} into")
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise ValueError("--plot: needs matplotlib, which is not installed "
                         "(pip install matplotlib)") from None
    kinds = FigureCanvasBase.get_supported_filetypes()
    kind = os.path.splitext(path)[1][1:].lower()
    if not kind:  # matplotlib wrote it as png under another name (with ".png" added)
        raise ValueError(f"--plot: {path!r} names no file type; expected a name ending in one "
                         f"of {', '.join(sorted(kinds))}, e.g. busbw.png")
    if kind not in kinds:
        raise ValueError(f"--plot: cannot write a {kind!r} file {path!r}; expected one of "
                         f"{', '.join(sorted(kinds))}, e.g. busbw.png")


def _write_plot(records: list[dict], path: str) -> None:
    try:
        plot(records, path)
    except OSError as exc:  # the OS's "[Errno 2] ..." names no option
        raise ValueError(f"--plot: cannot write {path!r}: {exc.strerror or exc}") from None


def run(args) -> int:
    sweep = {o: getattr(args, o[2:].replace("-", "_")) for o in _SWEEP_DEFAULTS}
    if published_mode(args):
        # They were taken and ignored, while --procs, --check and --plot were refused.
        given = [o for o, v in sweep.items() if v is not None]
        if given:
            raise ValueError(f"{given[0]}: measures this machine, not a saved output; leave it "
                             "out with --published")
        return run_published(args)
    for option, value in sweep.items():
        if value is None:
            setattr(args, option[2:].replace("-", "_"), _SWEEP_DEFAULTS[option])
    if args.min_bytes > args.max_bytes:  # SweepConfig would name its fields, not the options
        raise ValueError(f"--min-bytes/--max-bytes: got {args.min_bytes}/{args.max_bytes}, "
                         "expected --min-bytes <= --max-bytes")
    if args.procs is not None and args.procs > MAX_LOCAL_PROCESSES:
        raise ValueError(f"--procs: got {args.procs}, expected at most {MAX_LOCAL_PROCESSES} "
                         "(processes started at once on this machine)")
    config = TopoConfig.from_env()
    # A bad file, given or pinned, failed inside every rank, as a traceback each; --topology
    # is what the ranks get pinned when given.
    pinned = args.topology or resolve_pinned_file(config)
    if pinned:
        read_topology(pinned, "--topology" if args.topology else "pinned topology file")
    play = config.play
    if play and args.procs is not None:
        # A malformed entry failed inside every spawned rank, as a traceback each.
        play_entries(play, args.procs)
    if args.plot and os.environ.get("RANK", "0") == "0":  # rank 0 alone writes the figure
        _check_plot_path(args.plot)
    options = BenchOptions(
        sweep=SweepConfig(collectives=tuple(args.collectives), min_bytes=args.min_bytes,
                          max_bytes=args.max_bytes, factor=args.factor, reps=args.reps,
                          dtype=args.dtype),
        topology_file=args.topology, min_fraction=args.min_fraction)
    result = run_bench(options, args.procs)
    if result is None:  # a rank other than 0 under torchrun: rank 0 reports
        return 0
    # The report first: a figure that still cannot be written must not lose the tables.
    if args.json:
        print(json.dumps({**result, "check": args.check}, indent=2), flush=True)
    else:
        print(render_text(result, args.check), flush=True)
    if args.plot:
        _write_plot(result["collectives"], args.plot)
    problems = [f for f in result["findings"] if f["severity"] != "info"]
    return 1 if args.check and problems else 0
