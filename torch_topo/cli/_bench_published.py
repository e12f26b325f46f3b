# SPDX-License-Identifier: Apache-2.0
"""`bench --published OUTPUT`: a saved nccl-tests stdout held against the cost model (the CLI
layer; `_` keeps this module out of the verb list). Nothing runs on a GPU: the run's settings
come from the output's header unless an option gives them, and the table is the one
benchmarks/model_vs_nccl_tests.py prints for tests/data/nccl_tests."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from torch_topo.bench.nccl_tests import (
    BUSBW_GOAL,
    TIME_GOAL,
    System,
    compare,
    format_table,
    goal_misses,
    table_json,
)
from torch_topo.bench.nccl_tests_json import looks_like_json, read_json_report
from torch_topo.bench.nccl_tests_output import (
    PERF_OPS,
    Published,
    RunHeader,
    algorithm_from_nccl,
    decoded,
    op_in_name,
    read_header,
    read_table,
    unlabelled,
)
from torch_topo.cli._options import (
    add_nvlink_domain_hosts,
    int_at_least,
    nvlink_domain_hosts,
    parse_nccl_version,
    positive_number,
)
from torch_topo.topology import file_named, load_topology

__all__ = ["PUBLISHED_SCHEMA", "add_published_options", "published_mode", "run_published"]

PUBLISHED_SCHEMA = "torch-topo-bench-published/1"
_OPS = tuple(PERF_OPS.values())
_P2P = ("all_to_all", "send_recv")  # NCCL's p2p: NCCL_ALGO does not apply
_PUBLISHED_ONLY = ("--op", "--hosts", "--ranks-per-host", "--sm", "--nic-gbit", "--nics",
                   "--nccl-version", "--algo", "--nvlink-domain-hosts", "--nvlink")


# Compute capabilities x 10 of the GPUs the model knows by name (smFromGpuName in
# csrc/topo/hwloc_reader.cpp, NVIDIA's CUDA GPUs list), P100 to GB10; the NVLink, PCIe and NCCL
# generation tables cover every value between. Outside, a value is no GPU (1000 for 100).
_KNOWN_SM = "60 P100, 70 V100, 75 T4, 80 A100, 86 A10, 89 L40, 90 H100/H200, 100 B200, " \
    "103 B300, 120 RTX 50, 121 GB10"
_SM_LOW, _SM_HIGH = 60, 121


def _compute_capability(text: str) -> int:
    try:
        value = int_at_least(_SM_LOW)(text)
    except argparse.ArgumentTypeError:
        value = None
    if value is None or value > _SM_HIGH:
        raise argparse.ArgumentTypeError(
            f"got {text!r}, expected a compute capability x 10 the model knows, {_SM_LOW} to "
            f"{_SM_HIGH} ({_KNOWN_SM})")
    return value


def add_published_options(p) -> None:
    g = p.add_argument_group("a saved nccl-tests output against the cost model (no GPU needed)")
    g.add_argument("--published", metavar="OUTPUT", default=None,
                   help="nccl-tests stdout saved to a file: print each size's published time "
                        "and busbw beside the model's for the host file of --topology; the "
                        "options below override what the output's header says (--json: "
                        f"{PUBLISHED_SCHEMA})")
    g.add_argument("--op", choices=_OPS, default=None,
                   help="collective (default: the output's 'Collective test starting: X_perf' "
                        "or X_perf command line)")
    g.add_argument("--hosts", type=int_at_least(1), default=None,
                   help="hosts of the run (default: the hosts of its rank lines, else 1)")
    g.add_argument("--ranks-per-host", type=int_at_least(1), default=None, metavar="N",
                   help="GPUs each host ran, the first N of --topology (default: the rank lines "
                        "of each host, also for -g N; else every GPU of the file)")
    g.add_argument("--sm", type=_compute_capability, default=None,
                   help=f"GPU compute capability x 10, {_SM_LOW} to {_SM_HIGH}, e.g. 90 "
                        "(default: from the rank lines' GPU name)")
    g.add_argument("--nic-gbit", type=positive_number, default=None, metavar="G",
                   help="line rate of each NIC, Gbit/s (needed across hosts where the host file "
                        "gives none)")
    g.add_argument("--nics", type=int_at_least(1), default=None, metavar="K",
                   help="NICs per host that carry the run (caps the host's network at K x G)")
    g.add_argument("--nccl-version", default=None, metavar="X.Y.Z",
                   help="NCCL release whose tuning the model follows (default: the output's "
                        "'NCCL version' or 'nccl-library=', else the newest the model knows)")
    g.add_argument("--algo", default=None, metavar="ALGO",
                   help="NCCL algorithm the run forced (Ring, Tree, NVLS, NVLSTree, PAT, "
                        "CollNetDirect, CollNetChain), or 'default' for NCCL's own choice "
                        "(default: NCCL_ALGO where the output shows it)")
    add_nvlink_domain_hosts(g)
    g.add_argument("--nvlink", choices=("file", "complete"), default=None,
                   help="NVLink an NCCL XML --topology leaves out (clouds ship it without; NCCL "
                        "adds it from NVML at run time): 'file' (default) prices the file as "
                        "written, with a warning where NVLink looks left out; 'complete' fills "
                        "it from the GPU model the file names, as the run had it")


def published_mode(args) -> bool:
    """Whether bench reads a saved output; ValueError for an option of that mode without it."""
    if args.published is None:
        given = [o for o in _PUBLISHED_ONLY if getattr(args, o[2:].replace("-", "_")) is not None]
        if given:
            raise ValueError(f"{given[0]}: applies to --published OUTPUT only")
    return args.published is not None


def _check_options(args) -> None:
    """The live bench's options do not mix with --published, which needs a host file."""
    live = [o for o, v in (("--procs", args.procs), ("--check", args.check or None),
                           ("--plot", args.plot)) if v is not None]
    if live:
        raise ValueError(f"{live[0]}: measures this machine, not a saved output; leave it out "
                         "with --published")
    if args.topology is None:
        raise ValueError("--published: needs --topology HOSTFILE, the topology file of one host "
                         "the run ran on (nvidia-smi topo -m text, NCCL XML, hwloc XML or "
                         "torch-topo JSON)")


def _op(args, header: RunHeader, output: str) -> tuple[str, str]:
    """The run's collective and where it came from."""
    op = args.op or header.op or op_in_name(Path(output).name, f"{output}: file name")
    if op is None:
        raise ValueError(f"{output}: no 'Collective test starting: X_perf' line, X_perf "
                         "command line or X_perf in the file name names the collective; give "
                         f"--op ({', '.join(_OPS)})")
    return op, "--op" if args.op else "output" if header.op else "file name"


def _nvlink(args, system: System, scratch: Path) -> tuple[System, str | None]:
    """`system` priced on --topology as the run's NCCL saw it, and the warning to print. An
    NCCL XML without NVLink between its GPUs (clouds ship it so) read as written prices them
    over PCIe, 0.03-0.06x of a published SXM run: --nvlink complete fills it (in a JSON copy
    under `scratch`), and without it a warning says so."""
    with file_named("--topology"):
        if args.nvlink == "complete":
            done = load_topology(args.topology, nvlink="complete")
            completed = scratch / "topology.json"
            completed.write_text(done.to_json())
            return replace(system, topology=str(completed)), done.nvlink_warning or None
        left_out = load_topology(args.topology).nvlink_left_out()
    if left_out is None:
        return system, None
    return system, (f"--topology {args.topology}: no NVLink between its GPUs, "
                    f"{'probably' if left_out[0] == 'inferred' else 'possibly'} left out as "
                    "clouds do (NCCL adds it from NVML at run time), so they are priced over "
                    "PCIe; --nvlink complete reads the file as NCCL will"
                    + ("" if left_out[0] == "inferred" else
                       ", where the file names the GPU model (this one does not: give the "
                       "nvidia-smi topo -m text of the same board instead)"))


def _resolve(args, header: RunHeader, output: str) -> tuple[System, dict, dict]:
    """The System to price, its settings and where each came from."""
    from torch_topo import _C

    where: dict[str, str] = {}
    op, where["op"] = _op(args, header, output)
    rank_hosts = len(header.hosts)
    if args.hosts is not None and rank_hosts and args.hosts != rank_hosts:
        raise ValueError(f"--hosts: got {args.hosts}, but the rank lines of {output} name "
                         f"{rank_hosts} host(s) ({', '.join(header.hosts[:4])}"
                         f"{', ...' if rank_hosts > 4 else ''}); leave --hosts out")
    hosts = args.hosts or rank_hosts or 1
    where["hosts"] = "--hosts" if args.hosts else "rank lines" if rank_hosts else "default"
    if args.ranks_per_host is not None and header.ranks_per_host and \
            args.ranks_per_host != header.ranks_per_host:
        raise ValueError(f"--ranks-per-host: got {args.ranks_per_host}, but the rank lines of "
                         f"{output} give {header.ranks_per_host} per host; leave it out")
    with file_named("--topology"):
        host = _C.load_cluster_file(args.topology).hosts[0]
    gpus = len(host.gpus)
    per_host = args.ranks_per_host or header.ranks_per_host or gpus
    if per_host > gpus:
        raise ValueError(f"--topology {args.topology}: has {gpus} GPU(s) per host, but the run "
                         f"has {per_host} ranks per host")
    where["ranks_per_host"] = "--ranks-per-host" if args.ranks_per_host else \
        "rank lines" if header.ranks_per_host else "every GPU of --topology"
    sm, where["sm"] = _sm(args, header, output)
    nccl_version = parse_nccl_version(args.nccl_version) or header.nccl_version
    where["nccl_version"] = "--nccl-version" if args.nccl_version else \
        "output" if header.nccl_version else "default"
    algorithm, where["algorithm"] = _algorithm(args, header, op)
    if args.nics and not args.nic_gbit:
        raise ValueError("--nics: needs --nic-gbit G, the line rate of each NIC")
    if hosts > 1 and not host.nics and not (args.nics and args.nic_gbit):
        raise ValueError(f"--topology {args.topology}: lists no NICs and the run spans {hosts} "
                         "hosts; give --nics K and --nic-gbit G (the NICs per host the run used "
                         "and their line rate)")
    if hosts > 1 and not args.nic_gbit and any(not n.speed_gbps for n in host.nics):
        raise ValueError(f"--topology {args.topology}: its NICs carry no line rate and the run "
                         f"spans {hosts} hosts; give --nic-gbit G (and --nics K, the NICs per "
                         "host the run used)")
    domain_hosts = nvlink_domain_hosts(args) or 0
    where["nic_gbit"] = "--nic-gbit" if args.nic_gbit else "topology file"
    where["nics"] = "--nics" if args.nics else "topology file"
    where["nvlink_domain_hosts"] = "--nvlink-domain-hosts" if domain_hosts else "default"
    system = System(results=str(Path(output).resolve()),
                    topology=str(Path(args.topology).resolve()), hosts=hosts,
                    ranks=tuple(range(per_host)) if per_host < gpus else None, op=op,
                    algorithm=algorithm, sm=sm, nic_gbit=args.nic_gbit or 0.0,
                    nics=args.nics or 0, domain_hosts=domain_hosts, nccl_version=nccl_version)
    settings = {"op": op, "hosts": hosts, "ranks_per_host": per_host, "sm": sm,
                "nccl_version": nccl_version, "algorithm": algorithm,
                "nic_gbit": system.nic_gbit, "nics": system.nics,
                "nvlink_domain_hosts": domain_hosts}
    return system, settings, where


def _sm(args, header: RunHeader, output: str) -> tuple[int, str]:
    from torch_topo import _C

    if args.sm:
        return args.sm, "--sm"
    if not header.gpu_names:
        raise ValueError(f"{output}: no rank lines name the GPU; give --sm (compute capability "
                         "x 10, e.g. 90 for H100/H200, 80 for A100, 100 for B200)")
    found = {name: _C.sm_from_gpu_name(name) for name in header.gpu_names}
    unknown = [name for name, sm in found.items() if not sm]
    if unknown:
        raise ValueError(f"{output}: GPU {unknown[0]!r}: its compute capability is unknown; "
                         "give --sm (x 10, e.g. 90 for H100/H200, 80 for A100, 100 for B200)")
    if len(set(found.values())) > 1:
        raise ValueError(f"{output}: rank lines name GPUs of several compute capabilities "
                         f"({', '.join(f'{n} sm{s}' for n, s in found.items())}); the model "
                         "prices one kind; give --sm")
    return found[header.gpu_names[0]], f"rank lines: {header.gpu_names[0]}"


def _algorithm(args, header: RunHeader, op: str) -> tuple[str | None, str]:
    if args.algo is not None:
        if args.algo.lower() == "default":
            return None, "--algo"
        if op in _P2P:
            raise ValueError(f"--algo: got {args.algo!r}, but {op} is NCCL point-to-point "
                             "traffic, which NCCL_ALGO does not steer; leave --algo out")
        return algorithm_from_nccl(args.algo, "--algo"), "--algo"
    if header.algorithm and op not in _P2P:
        return header.algorithm, "output (NCCL_ALGO)"
    return None, "default"


def _version_text(code: int) -> str:
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}" if code else "newest"


def _process_caveat(gpus_per_process: int) -> str | None:
    """What the model does not price about a run whose processes drove several GPUs each."""
    if gpus_per_process <= 1:
        return None
    # Measured on one 8 x A100 host both ways (tests/data/nccl_tests/thanosNotes_*).
    return (f"one process drove {gpus_per_process} GPUs (nccl-tests -t/-g); the model prices one "
            "process per GPU, as torch runs them. On one 8 x A100 host such a run took 9-22 us "
            "more per call to 1 MiB and 1.08-1.27x the time from 4 to 512 MiB")


def _cycles_note(published: list[Published]) -> str | None:
    """How the times of an output that printed its sweep several times (nccl-tests -N) are read."""
    counts = sorted({p.cycles for p in published}) or [1]
    if counts[-1] <= 1:
        return None
    span = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    return (f"the output prints its sizes in {span} cycles (nccl-tests -N); each size's time "
            "and busbw are the median of its rows")


def _wrong_warning(at: list[str]) -> str | None:
    """What to tell of rows whose run got elements wrong. Their time is suspect (the collective
    did not deliver what it was timed for), yet refusing the file would hide the rest of the
    table too, so they are priced as printed and the user is told where they are."""
    if not at:
        return None
    shown = ", ".join(at[:6]) + (f" and {len(at) - 6} more" if len(at) > 6 else "")
    return (f"{shown}: {len(at)} row(s) report elements NCCL got wrong (#wrong "
            "above 0, or before nccl-tests 2.13 an error above its bound): that run corrupted "
            "data, so its times are suspect; they are priced as printed, but rerun before "
            "trusting them")


# Bus bandwidth over algorithm bandwidth in nccl-tests, by the run's rank count n, for the ops
# where it tells n (broadcast, reduce and sendrecv print the same figure twice).
_BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
               "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}
# Printed with two decimals and four or more digits, the ratio is within 0.6% on every output
# in tests/data (3% on a short partial one); 1 and 2 hosts of 8 differ by 7%.
_BUS_FACTOR_TOLERANCE = 0.05


def _factor_against(published: list[Published], op: str | None, n: int):
    """(busbw / algbw of the largest size's row, that row) where it contradicts a run of `n`
    ranks, else None (also for an op whose factor does not tell n)."""
    factor = _BUS_FACTOR.get(op or "")
    rows = [p for p in published if p.size > 0 and p.time_us > 0 and p.busbw > 0]
    if factor is None or not rows or n < 1:
        return None
    row = max(rows, key=lambda p: p.size)  # the most digits
    seen = row.busbw / (row.size / row.time_us / 1e3)
    # At or above the factor's limit no rank count gives it: a table of another collective
    # (given --op), which says nothing of the ranks.
    if seen >= _bus_factor_limit(op) * 1.005:  # beyond rounding
        return None
    return (seen, row) if abs(seen - factor(n)) > _BUS_FACTOR_TOLERANCE * factor(max(n, 2)) \
        else None


def _bus_factor_limit(op: str) -> float:
    return 2.0 if op == "all_reduce" else 1.0


def _implied_ranks(op: str, seen: float) -> str:
    limit = _bus_factor_limit(op)  # c (n - 1) / n = f  =>  n = c / (c - f)
    return f"about {round(limit / (limit - seen))}" if seen < limit else "very many"


def _rank_lines_checked(header: RunHeader, published: list[Published], op: str | None,
                        output: str) -> tuple[RunHeader, str | None]:
    """`header`, with its rank lines' hosts dropped where the table's busbw / algbw says the
    run had other ranks than they list (a paste of the first lines: 5 of 128), so that --hosts
    and --ranks-per-host may give the run's; and the warning that says so."""
    listed = len(header.hosts) * header.ranks_per_host
    found = _factor_against(published, op, listed) if listed else None
    if found is None:
        return header, None
    return replace(header, hosts=(), ranks_per_host=0), (
        f"{output}: its rank lines list {listed} rank(s), but busbw / algbw is {found[0]:.4f}, "
        f"which {op} gives at {_implied_ranks(op, found[0])} ranks: the listing is taken as "
        "cut short")


def _check_rank_count(header: RunHeader, published: list[Published], op: str, settings: dict,
                      where: dict, output: str) -> None:
    """Refuses a rank count the output contradicts: the highest rank of a listing cut short
    ("Rank 71" alone was priced as 1 rank), or the table's own busbw / algbw (a run of 128
    ranks whose rank lines show 5 was priced as 5)."""
    n = settings["hosts"] * settings["ranks_per_host"]
    priced = (f"{settings['hosts']} host(s) ({where['hosts']}) x {settings['ranks_per_host']} "
              f"ranks per host ({where['ranks_per_host']})")
    if header.ranks_cut_short and n != header.ranks_cut_short:
        raise ValueError(f"{output}: its rank lines list fewer ranks than the run's "
                         f"{header.ranks_cut_short} (up to rank {header.ranks_cut_short - 1}: a "
                         f"listing cut short), but {priced} make {n}; give --hosts and "
                         f"--ranks-per-host whose product is {header.ranks_cut_short}")
    found = _factor_against(published, op, n)
    if found is not None:
        seen, row = found
        raise ValueError(f"{output}: busbw / algbw is {seen:.4f} at {row.size} bytes, which "
                         f"{op} gives at {_implied_ranks(op, seen)} ranks, but the run is priced "
                         f"at {n}: {priced}; give --hosts and --ranks-per-host of the run")


def run_published(args) -> int:
    _check_options(args)
    output = args.published
    try:
        text = decoded(Path(output).read_bytes())
    except OSError as exc:
        raise ValueError(f"--published: cannot read {output!r}: {exc.strerror or exc}") from None
    # The file's own faults first, then what the options must add; the rows get their op and
    # algorithm once those are settled.
    if looks_like_json(text):
        header, published = read_json_report(text, output)
    else:
        lines = unlabelled(text.splitlines(), output)
        header = read_header(lines, output)
        published = read_table(lines, op=header.op or "", algorithm=None, path=output)
    header, cut_short = _rank_lines_checked(header, published, _op(args, header, output)[0],
                                            output)
    system, settings, where = _resolve(args, header, output)
    _check_rank_count(header, published, system.op, settings, where, output)
    if cut_short:
        print(f"warning: {cut_short}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="torch_topo_published_") as scratch:
        system, nvlink_warning = _nvlink(args, system, Path(scratch))
        settings["nvlink"] = args.nvlink or "file"
        where["nvlink"] = "--nvlink" if args.nvlink else "default"
        if nvlink_warning:
            print(f"warning: {nvlink_warning}", file=sys.stderr)
        rows = compare(system, [replace(p, op=system.op, algorithm=system.algorithm)
                                for p in published])
    misses = goal_misses(rows)
    caveat = _process_caveat(header.gpus_per_process)
    cycles = _cycles_note(published)
    wrong_at = [at for p in published for at in p.wrong_at]
    if warning := _wrong_warning(wrong_at):
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        missed = {id(r) for r in misses}
        print(json.dumps({
            "schema": PUBLISHED_SCHEMA, "published": output, "topology": args.topology,
            "settings": settings, "sources": where,
            "goals": {"busbw_from_1MiB": list(BUSBW_GOAL), "time_to_64KiB": list(TIME_GOAL)},
            "misses": len(misses), "gpus_per_process": header.gpus_per_process or None,
            "caveat": caveat, "cycles": max((p.cycles for p in published), default=1),
            "cycles_note": cycles, "wrong_results": wrong_at, "wrong_warning": warning,
            "nvlink_warning": nvlink_warning,
            "rows": [{**row, "outside_goals": id(r) in missed}
                     for r, row in zip(rows, table_json(rows), strict=True)]}, indent=2))
        return 0
    print(f"== {output}  ({system.hosts} x {Path(args.topology).name}, {system.op}, "
          f"sm{system.sm})")
    shown = {**settings, "nccl_version": _version_text(system.nccl_version),
             "algorithm": system.algorithm or "NCCL's own choice",
             "nic_gbit": f"{system.nic_gbit:g}" if system.nic_gbit else "-",
             "nics": system.nics or "-", "nvlink_domain_hosts": system.domain_hosts or "-"}
    print("settings: " + ", ".join(f"{k} {shown[k]} ({where[k]})" for k in settings))
    print(format_table(rows))
    for note in (cycles, caveat):
        if note:
            print(f"note: {note}")
    return 0
