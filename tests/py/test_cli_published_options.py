# SPDX-License-Identifier: Apache-2.0
"""`bench --published`: the nccl-tests options that change what a run prints. The outputs are
written here as nccl-tests' own source prints them (src/util.cu and src/common.cu of 2.19.6 for
the startup lines, the header, the rows and the footer; the tags named where older layouts
differ), with numbers of our own; the reference is the sizes, times and busbw written. Options
that only add lines around the table, or change the values and not the layout, read as a plain
run; per-iteration (-I), timestamp (-S) and unchecked (-c 0) columns read as printed; a table
of several sweeps (-d all, -o all, -r -1) is refused naming the options that made it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_published import A100, _error
from test_cli_published_formats import _run

from torch_topo.bench.nccl_tests_output import read_header, read_table

SIZES = (1 << 20, 4 << 20, 16 << 20)
TIMES = (31.5, 62.25, 180.0)
# busbw / algbw of nccl-tests' getBw for 8 ranks (all_reduce 2(n-1)/n, the gathers (n-1)/n)
FACTOR = {"all_reduce_perf": 1.75, "all_gather_perf": 0.875, "alltoall_perf": 0.875,
          "reduce_scatter_perf": 0.875, "broadcast_perf": 1.0, "reduce_perf": 1.0,
          "sendrecv_perf": 1.0}
STAMP = "2026-07-09 16:03:21"


def _float(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals, else fewer, else an exponent, within `width`."""
    for digits in (2, 1, 0):
        if len(shown := f"{value:{width}.{digits}f}") <= width:
            return shown
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def _row(size: int, t: float, binary: str, kind: tuple[str, str, str], *, check=True,
         per_iter=False, stamp=False) -> str:
    """One row: writeBenchmarkLinePreamble, then the out-of-place and in-place bodies (with
    their per-iteration min, max, p99 and cv% under -I 1), then the time under -S 1."""
    algbw = size / t / 1e3
    body = f"  {_float(t, 7)}  {_float(algbw, 6)}  {_float(algbw * FACTOR[binary], 6)}  " + \
        (f"{0:6g}" if check else "   N/A")
    if per_iter:
        body += "".join(f"  {_float(v, 7)}" for v in (t * 0.97, t * 1.08, t * 1.06, 2.41))
    type_, redop, root = kind
    return f"{size:12d}  {size // 4:12d}  {type_:>8}  {redop:>6}  {root:>6}{body}{body}" + \
        (f"{STAMP:>21}" if stamp else "") + "\n"


def _header(*, per_iter=False, stamp=False, timed="time") -> str:
    """writeResultHeader: the three lines above the rows."""
    pad, label, fmt = (19, "timestamp", "%Y-%m-%d %H:%M:%S") if stamp else (0, "", "")
    if per_iter:
        part = "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s"
        names = (timed, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
        units = ("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)")
        top = "out-of-place (+ per-iteration)"
    else:
        part = "  %7s  %6s  %6s  %6s"
        names, units, top = (timed, "algbw", "busbw", "#wrong"), ("(us)", "(GB/s)", "(GB/s)", ""), \
            "out-of-place"
    line = "# %10s  %12s  %8s  %6s  %6s" + part + part + " %*s\n"
    return "#\n" + f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           {top}" \
        "                       in-place\n" + \
        line % ("size", "count", "type", "redop", "root", *names, *names, pad, label) + \
        line % ("(B)", "(elements)", "", "", "", *units, *units, pad, fmt)


def _output(binary="all_reduce_perf", kinds=(("float", "sum", "-1"),), *, sizes=SIZES,
            times=TIMES, hosts=("dgx-a", ), threads=1, gpus=1, ranks=8, before="", after="",
            config="", check=True, per_iter=False, stamp=False, timed="time") -> str:
    """A 2.19.6 stdout: writeDeviceReport's lines (`config` overrides fields of the nThread
    line, `before` comes before the '#' that ends them), the table with a sweep per kind (type,
    redop, root) as RunTest loops, writeResultFooter's lines, then `after`."""
    per_host = ranks // len(hosts)
    fields = {"nThread": threads, "nGpus": gpus, "minBytes": sizes[0], "maxBytes": sizes[-1],
              "step:": "4(factor)", "warmup iters:": 1, "iters:": 20, "agg iters:": 1,
              "validation:": int(check), "graph:": 0, "unalign:": 0}
    for item in config.split(","):
        if item:
            key, value = item.rsplit(" ", 1)
            fields[key.strip()] = value
    text = "# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703\n" \
        f"# Collective test starting: {binary}\n" \
        "# " + " ".join(f"{k} {v}" for k, v in fields.items()) + "\n" + before + \
        "#\n# Using devices\n" + "".join(
            f"#  Rank {r:2d} Group  0 Pid {4100 + r // (threads * gpus):6d} on "
            f"{hosts[r // per_host]:>10} device {r % per_host:2d} "
            f"[0000:{0x07 + 8 * (r % per_host):02x}:00] NVIDIA A100-SXM4-80GB\n"
            for r in range(ranks))
    text += _header(per_iter=per_iter, stamp=stamp, timed=timed)
    for kind in kinds:
        text += "".join(_row(s, t, binary, kind, check=check, per_iter=per_iter, stamp=stamp)
                        for s, t in zip(sizes, times, strict=True))
    return text + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 58.2061 \n#\n" \
        f"# Collective test concluded: {binary}\n" + after + "#\n\n"


def _written(binary="all_reduce_perf", sizes=SIZES, times=TIMES) -> list[tuple]:
    """The (size, time, busbw) of the rows _output wrote, busbw as printed."""
    return [(s, t, float(_float(s / t / 1e3 * FACTOR[binary], 6)))
            for s, t in zip(sizes, times, strict=True)]


def _read(text: str, op="all_reduce") -> list[tuple]:
    return [(p.size, p.time_us, p.busbw)
            for p in read_table(text.splitlines(), op=op, algorithm=None)]


def _refused(text: str, op: str = "all_reduce") -> str:
    with pytest.raises(ValueError) as info:
        read_table(text.splitlines(), op=op, algorithm=None)
    return str(info.value)



# --- options that leave the table as it is ---

# Each option as the lines it adds (writeDeviceReport, the option parser's notes, the footer's
# memory report) or the nThread fields it changes; the table is the plain run's.
AROUND = {
    "plain": {},
    "-z 1": {"before": "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n"},
    "-z 2": {"before": "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n"},
    "-z 3": {"before": "# Blocking Enabled: wait and barrier after each outer iteration (-n); "
                       "time excludes barrier \n"},
    "-G 10": {"config": "graph: 10"},
    "-m 4 -w 5 -n 50": {"config": "agg iters: 4,warmup iters: 5,iters: 50"},
    "-u 1": {"config": "unalign: 1"},
    "-p 1": {"before": "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n"},
    "-a 2": {},  # min over ranks instead of the average: the same lines
    "-R 1": {},
    "-R 2 before NCCL 2.27": {"before": "Option -R 2 (symmetric) is not supported before NCCL "
                                        "2.27. Defaulting to local registration\n"},
    "-x 1 before NCCL 2.27": {"before": "Option -x (cta_policy) is not supported before NCCL "
                                        "2.27. Ignoring\n"},
    "-M 1": {"after": "# GPU memory usage     : Initialization 1.02 GB | User-Allocated "
                      "48.0 MB | Collective 1.50 GB | Total  2.57 GB\n"},
    "-J out.json": {"before": "# Writing JSON output to out.json\n"},
    "memory limit": {"before": "#\n# Reducing maxBytes to 16777216 due to memory limitation\n"},
}


@pytest.mark.parametrize("option", AROUND)
def test_options_that_add_lines_around_the_table(option):
    text = _output(**AROUND[option])
    header = read_header(text.splitlines())
    assert (header.op, header.hosts, header.ranks_per_host, header.nccl_version,
            header.gpus_per_process) == ("all_reduce", ("dgx-a",), 8, 22703, 1)
    assert _read(text) == _written()


@pytest.mark.parametrize("layout", [
    {"check": False},  # -c 0: N/A under #wrong
    {"stamp": True},  # -S 1: the time after the in-place cells
    {"per_iter": True, "config": "iters: 50",  # -I 1 -K 5: i_min i_max i_p99 i_cv% per part
     "before": "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; "
               "summary skips first 5 iterations \n"},
    {"per_iter": True, "stamp": True},  # -I 1 -S 1
], ids=["-c 0", "-S 1", "-I 1 -K 5", "-I 1 -S 1"])
def test_columns_that_options_add(layout):
    text = _output(**layout)
    assert _read(text) == _written()
    rows = read_table(text.splitlines(), op="all_reduce", algorithm=None)
    assert all(p.wrong_at == () for p in rows)


def test_one_size():
    """-b 8 -e 8: one row, too few for the rows-agree check; it reads as written."""
    text = _output(sizes=(8,), times=(17.32,), config="minBytes 8,maxBytes 8")
    assert _read(text) == _written(sizes=(8,), times=(17.32,))


def test_threads_and_gpus_per_process():
    """-t 2 -g 2 on two hosts: a rank line per GPU, four per process sharing its Pid."""
    text = _output(hosts=("node-a", "node-b"), threads=2, gpus=2,
                   config="nThread 2,nGpus 2")
    pids = {line.split()[6] for line in text.splitlines() if line.startswith("#  Rank")}
    assert len(pids) == 2
    header = read_header(text.splitlines())
    assert (header.hosts, header.ranks_per_host, header.gpus_per_process) == \
        (("node-a", "node-b"), 4, 4)
    assert _read(text) == _written()


@pytest.mark.parametrize("binary, kind", [
    ("broadcast_perf", ("float", "none", "3")),  # -r 3: one root, printed
    ("reduce_perf", ("half", "max", "0")),  # -d half -o max: one type and op
    ("sendrecv_perf", ("int8", "sum", "-1")),
    ("alltoall_perf", ("bfloat16", "none", "-1")),
])
def test_one_type_op_and_root(binary, kind):
    op = {"broadcast_perf": "broadcast", "reduce_perf": "reduce", "sendrecv_perf": "send_recv",
          "alltoall_perf": "all_to_all"}[binary]
    text = _output(binary, (kind,))
    assert read_header(text.splitlines()).op == op
    assert _read(text, op) == _written(binary)


def test_cputime_tables_are_refused():
    """-C 1 heads both time columns 'cputime' (also with -I 1's columns)."""
    for layout in ({}, {"per_iter": True}):
        err = _refused(_output(timed="cputime", **layout))
        assert err == ("<text>:16: the table times 'cputime' (nccl-tests -C 1): the CPU's time "
                       "per call, not the collective's, which the model prices; run without -C")


def test_latest_output_end_to_end(tmp_path):
    """The CLI on a 2.19.6 output with -M 1's memory line: the header's settings and the rows
    as written."""
    path = tmp_path / "out.txt"
    path.write_text(_output(**AROUND["-M 1"]))
    out, err = _run(path, A100)
    assert err == "" and out["sources"]["op"] == "output"
    assert (out["settings"]["op"], out["settings"]["hosts"], out["settings"]["ranks_per_host"],
            out["settings"]["sm"], out["settings"]["nccl_version"]) == \
        ("all_reduce", 1, 8, 80, 22703)
    assert [(r["size"], r["published_us"], r["published_busbw"]) for r in out["rows"]] == \
        _written()


# --- a sweep per data type, reduction op or root: refused, naming the options ---

TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
         "bfloat16")  # test_typenames of 2.19.6 (NCCL 2.24+, without the fp8 types)
OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
FIRST_ROW = 18  # the table's first row in _output's text of 8 ranks


@pytest.mark.parametrize("binary, kinds, second, shown, what, options, defaults", [
    # -d all: RunTest's outer loop, a sweep per type
    ("all_reduce_perf", [(t, "sum", "-1") for t in TYPES], "uint8 sum", "int8 sum",
     "data type", "-d all", "-d float, nccl-tests' default"),
    # -o all: a sweep per op
    ("all_reduce_perf", [("float", o, "-1") for o in OPS], "float prod", "float sum",
     "reduction op", "-o all", "-o sum, nccl-tests' default"),
    # -d all -o all: ops inside types; the first change is the op's, the error names both
    ("reduce_scatter_perf", [(t, o, "-1") for t in TYPES[:2] for o in OPS], "int8 prod",
     "int8 sum", "data type and reduction op", "-d all and -o all",
     "-d float and -o sum, nccl-tests' defaults"),
    # sendrecv loops over ops too (the op changes nothing it sends)
    ("sendrecv_perf", [("float", o, "-1") for o in OPS[:2]], "float prod", "float sum",
     "reduction op", "-o all", "-o sum, nccl-tests' default"),
    ("alltoall_perf", [(t, "none", "-1") for t in TYPES[6:8]], "float none", "half none",
     "data type", "-d all", "-d float, nccl-tests' default"),
])
def test_sweeps_per_type_and_op_name_the_options(binary, kinds, second, shown, what, options,
                                                 defaults):
    err = _refused(_output(binary, kinds))
    assert err == (f"<text>:{FIRST_ROW + len(SIZES)}: nccl-tests row: {second}, but the first "
                   f"row, on line {FIRST_ROW}, is {shown}: the output holds a sweep of sizes "
                   "per data type or reduction op (nccl-tests -d all or -o all), here per "
                   f"{what} ({options}), and bench --published prices one; rerun without "
                   f"{options} ({defaults}) or keep the rows of one {what}")


@pytest.mark.parametrize("binary, kinds, options, what", [
    # -r -1: broadcast and reduce time each root in turn, the same sizes again; priced as
    # -N cycles before, each size the median over the roots
    ("broadcast_perf", [("float", "none", str(r)) for r in range(8)], "-r -1", "root"),
    ("reduce_perf", [(t, "sum", str(r)) for t in TYPES[6:8] for r in range(8)],
     "-d all and -r -1", "data type and root"),
])
def test_a_sweep_per_root_is_refused(binary, kinds, options, what):
    text = _output(binary, kinds)
    op = binary.removesuffix("_perf")
    err = _refused(text, op)
    first = kinds[0]
    assert err == (f"<text>:{FIRST_ROW + len(SIZES)}: nccl-tests row: {first[0]} {first[1]} "
                   f"root 1, but the first row, on line {FIRST_ROW}, is {first[0]} {first[1]} "
                   "root 0: the output holds a sweep of sizes per data type, reduction op or "
                   f"root (nccl-tests -d all, -o all or -r -1), here per {what} ({options}), "
                   f"and bench --published prices one; rerun without {options} (" +
                   ("-d float and -r 0, nccl-tests' defaults" if "-d" in options else
                    "-r 0, nccl-tests' default") + f") or keep the rows of one {what}")


def test_cli_names_the_option_of_a_sweep_per_root(tmp_path, capsys):
    path = tmp_path / "bcast.txt"
    path.write_text(_output("broadcast_perf", [("float", "none", str(r)) for r in range(2)]))
    err = _error(capsys, "--published", path, "--topology", A100)
    assert err.startswith(f"torch_topo bench: error: {path}:{FIRST_ROW + len(SIZES)}: "
                          "nccl-tests row: float none root 1, but the first row")
    assert "here per root (-r -1)" in err


def _report(tmp_path: Path, binary: str, kinds, args=("-r", "-1")) -> Path:
    """A -J report of _output's run: a result per row, root as '%6i' prints it."""
    results = []
    for type_, redop, root in kinds:
        for size, t in zip(SIZES, TIMES, strict=True):
            part = {"time": t, "alg_bw": size / t / 1e3,
                    "bus_bw": size / t / 1e3 * FACTOR[binary], "nwrong": 0}
            results.append({"size": size, "count": size // 4, "type": type_, "redop": redop,
                            "root": f"{int(root):6d}", "out_of_place": part, "in_place": part})
    doc = {"args": [f"./build/{binary}", *args], "nccl_version": 22703,
           "config": {"nthreads": 1, "ngpus": 1}, "results": results,
           "devices": [{"hostname": "dgx-a", "group": 0, "device_info": "NVIDIA A100"}]}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    return path


def test_report_of_a_sweep_per_root_is_refused(tmp_path, capsys):
    path = _report(tmp_path, "broadcast_perf", [("float", "none", r) for r in ("0", "1")])
    err = _error(capsys, "--published", path, "--topology", A100, "--sm", "80")
    assert err == (f"torch_topo bench: error: {path}: results[3]: float none root 1, but the "
                   "first row, at results[0], is float none root 0: the report holds a sweep of "
                   "sizes per data type, reduction op or root (nccl-tests -d all, -o all or "
                   "-r -1), here per root (-r -1), and bench --published prices one; rerun "
                   "without -r -1 (-r 0, nccl-tests' default) or keep the rows of one root\n")
    one = _report(tmp_path, "broadcast_perf", [("float", "none", "5")])
    capsys.readouterr()
    out, _ = _run(one, A100, "--sm", "80")
    assert [(r["size"], r["published_us"]) for r in out["rows"]] == \
        list(zip(SIZES, TIMES, strict=True))


@pytest.mark.parametrize("args, shown", [
    (("-R", "2", "-D", "1"), "'-D': nccl-tests' device implementation (-D 1)"),
    (("-R2", "-D2"), "'-D2': nccl-tests' device implementation (-D 2)"),
    (("--device_implementation=0x1",), "'--device_implementation=0x1': nccl-tests' device "
                                       "implementation (-D 0x1)"),
    (("--device_i", "3", "-R", "2"), "'--device_i': nccl-tests' device implementation (-D 3)")])
def test_report_of_the_device_implementation_is_refused(tmp_path, capsys, args, shown):
    # nccl-tests 2.28's -D: its own kernels over NCCL's device API, visible in the report's args
    path = _report(tmp_path, "all_reduce_perf", [("float", "sum", "-1")], args)
    err = _error(capsys, "--published", path, "--topology", A100, "--sm", "80")
    assert err == (f"torch_topo bench: error: {path}: args {shown} times its own kernels over "
                   "NCCL's device API, not the NCCL collective the model prices; rerun without "
                   "-D (or -D 0)\n")


@pytest.mark.parametrize("args", [("-D", "0", "-R", "2"), ("--device_cta_count", "4"),
                                  ("-d", "float")])
def test_report_without_the_device_implementation_reads(tmp_path, args):
    path = _report(tmp_path, "all_reduce_perf", [("float", "sum", "-1")], args)
    out, _ = _run(path, A100, "--sm", "80")
    assert [(r["size"], r["published_us"]) for r in out["rows"]] == \
        list(zip(SIZES, TIMES, strict=True))


# --- an empty op name under 'redop' ---

def _old_time(t: float) -> str:
    """The time as nccl-tests printed it before getFloatStr (2.11 to 2.13)."""
    return f"{t:7.{0 if t >= 1e4 else 1 if t >= 100 else 2}f}"


def _blank_redop(version: str, binary: str, sizes=SIZES, times=TIMES) -> str:
    """Outputs of nccl-tests whose TimeTest got "" for the op of a collective without one:
    2.13.0 to 2.13.3 for all_gather, alltoall and broadcast (the header of common.cu, 'redop'
    and 'root'; %5g #wrong), 2.9 to 2.11 for alltoall (its own header, 'redop' without 'root';
    %5.0le error). The row leaves the op's cell empty."""
    ranks, count = 8, {"all_gather_perf": 32, "alltoall_perf": 4, "broadcast_perf": 4}[binary]
    text = f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 4(factor) " \
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n" + \
        "".join(f"#   Rank {r:2d} Pid {4100 + r:6d} on {'dgx-a':>10} device {r:2d} "
                f"[0x{0x07 + 8 * r:02x}] NVIDIA A100-SXM4-80GB\n" for r in range(ranks)) + "#\n"
    rooted = version == "2.13.0"
    names = ("size", "count", "type", "redop", *(("root",) if rooted else ()))
    wrong = "#wrong" if rooted else "error"
    units = ("(B)", "(elements)", "", "", "")[:len(names)]
    text += f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}" + ("  " + " " * 6 if rooted else "") + \
        "           out-of-place                       in-place          \n" + "".join(
            "# " + "  ".join(f"{n:>{w}}" for n, w in zip(first, (10, 12, 8, 6, 6), strict=False))
            + "".join(f"  {t:>7}  {a:>6}  {b:>6} {w:>6}" for _ in "oi") + "\n"
            for first, (t, a, b, w) in ((names, ("time", "algbw", "busbw", wrong)),
                                        (units, ("(us)", "(GB/s)", "(GB/s)", ""))))
    for size, t in zip(sizes, times, strict=True):
        algbw = size / t / 1e3
        part = f"  {_old_time(t)}  {algbw:6.2f}  {algbw * FACTOR[binary]:6.2f}  " + \
            (f"{0:5g}" if rooted else f"{0:5.0e}")
        root = f"  {0 if binary == 'broadcast_perf' else -1:6d}" if rooted else ""
        text += f"{size:12d}  {size // count:12d}  {'float':>8}  {'':>6}{root}{part}{part}\n"
    return text


def _old_written(binary: str, sizes=SIZES, times=TIMES) -> list[tuple]:
    return [(s, t, round(s / t / 1e3 * FACTOR[binary], 2))
            for s, t in zip(sizes, times, strict=True)]


@pytest.mark.parametrize("version, binary", [
    ("2.13.0", "all_gather_perf"), ("2.13.0", "alltoall_perf"), ("2.13.0", "broadcast_perf"),
    ("2.11", "alltoall_perf")])
def test_rows_without_an_op_name_read_as_printed(version, binary):
    """The cells after the empty one are read where they are: before, the time was read from
    algbw's cell (2.13.0; busbw's from the error's before 2.13), and the rows were called
    garbled; -b X -e X's one row, too few for that check, was priced at its algbw."""
    op = binary.removesuffix("_perf").replace("alltoall", "all_to_all")
    text = _blank_redop(version, binary)
    assert _read(text, op) == _old_written(binary)
    one = _blank_redop(version, binary, sizes=(1 << 30,), times=(9876.5,))
    assert _read(one, op) == _old_written(binary, sizes=(1 << 30,), times=(9876.5,))


def test_rows_without_an_op_name_keep_their_wrong_counts():
    """A 2.13.0 all_gather row (line 17) with #wrong 3 out of place (the cell after busbw) is
    named."""
    lines = _blank_redop("2.13.0", "all_gather_perf").splitlines()
    cells = lines[-2].split()
    assert cells[7] == "0"
    cells[7] = "3"
    lines[-2] = "  ".join(cells)
    rows = read_table(lines, op="all_gather", algorithm=None)
    assert [p.wrong_at for p in rows] == [(), ("<text>:17",), ()]
