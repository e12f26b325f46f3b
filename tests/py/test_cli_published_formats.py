# SPDX-License-Identifier: Apache-2.0
"""`bench --published`: outputs as users save them beyond the plain stdout. Rows whose run got
elements wrong (#wrong above 0, nccl-tests' 'rank=R #wrong=N' inside them) are priced with a
warning naming them; lines prefixed by kubectl logs (--prefix, --timestamps), pdsh, clush or
docker compose read as the plain output does; nccl-tests -N cycles give each size's median,
and -d all / -o all sweeps are refused naming the first row of the second type or op.
References are the plain outputs of tests/data and medians worked out here from the rows
written."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from test_cli_published import (
    A100,
    ALLTOALL_2X8,
    G8_ALLREDUCE,
    H100,
    HEADER,
    NCCL_TESTS,
    NET,
    _error,
    _published_path,
)

from torch_topo.bench.nccl_tests_output import read_table, unlabelled
from torch_topo.cli import main


def _run(path: Path, topology: Path, *options: str) -> tuple[dict, str]:
    """The --json object and what went to stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["bench", "--published", str(path), "--topology", str(topology), "--json",
                     *options]) == 0
    return json.loads(out.getvalue()), err.getvalue()


def _row_lines(text: str) -> list[int]:
    """Indexes of the table's rows (a line opening with a size) in `text`'s lines."""
    return [i for i, ln in enumerate(text.splitlines())
            if ln.split() and ln.split()[0].isdigit() and len(ln.split()) == 13]


# --- #wrong ---

def test_rows_with_wrong_elements_are_priced_with_a_warning(tmp_path):
    """Two rows of the 8 x A100 run made to report wrong elements, one out of place (3) and
    one in place (1.2e+06, as %g prints a large count): both are named by line on stderr and in
    the JSON, and priced as the plain rows are."""
    text = G8_ALLREDUCE.read_text()
    lines = text.splitlines()
    rows = _row_lines(text)
    a, b = rows[2], rows[5]
    for i, cell in ((a, 8), (b, 12)):
        cells = lines[i].split()
        assert cells[cell] == "0", lines[i]
        cells[cell] = "3" if i == a else "1.2e+06"
        lines[i] = "  ".join(cells)
    path = tmp_path / "wrong.txt"
    path.write_text("\n".join(lines) + "\n")
    out, err = _run(path, A100)
    plain, plain_err = _run(G8_ALLREDUCE, A100)
    assert out["rows"] == plain["rows"] and plain_err == "" and plain["wrong_results"] == []
    assert out["wrong_results"] == [f"{path}:{a + 1}", f"{path}:{b + 1}"]
    assert err == (f"warning: {path}:{a + 1}, {path}:{b + 1}: 2 row(s) report elements NCCL "
                   "got wrong (#wrong above 0, or before nccl-tests 2.13 an error above its "
                   "bound): that run corrupted data, so its times are suspect; they are priced "
                   "as printed, but rerun before trusting them\n")
    assert out["wrong_warning"] == err.removeprefix("warning: ").rstrip("\n")


def test_wrong_element_messages_inside_a_row():
    """nccl-tests (2.13 on) prints 'rank=R #wrong=N' for each GPU whose check failed, between
    a row's cells; the row reads as its cells say and counts as wrong. N/A (-c 0) is no count."""
    text = HEADER + (
        "     1048576        262144     float     sum      -1rank=0 #wrong=12\n"
        "    27.76   37.77   66.10      12rank=0 #wrong=5\n"
        "    27.49   38.14   66.75       5\n"
        "     2097152        524288     float     sum      -1    40.66   51.58   90.26     N/A"
        "    40.36   51.96   90.93     N/A\n")
    rows = read_table(unlabelled(text.splitlines()), op="all_reduce", algorithm=None)
    assert [(p.size, p.time_us, p.busbw, p.wrong_at) for p in rows] == \
        [(1048576, 27.76, 66.10, ("<text>:2",)), (2097152, 40.66, 90.26, ())]


# --- the error column of nccl-tests before 2.13 ---
# Outputs as nccl-tests 2.0 to 2.11 printed them (its src/common.cu and src/all_reduce.cu): the
# header's cells right-aligned to 10, 12, 8, 6 and per placement 7, 6, 6, 5 characters under an
# out-of-place / in-place line, then a units line; rank lines with rank, Pid, host (10 wide),
# device and bus; rows of size and count (12 wide), type (8), redop (6) and per placement the
# time (7 wide; 2 decimals below 100 us, 1 below 10 ms, none from there), algbw and busbw (6
# wide, 2 decimals) and the error to one digit in %e notation (5 wide; N/A under -c 0). A row
# was out of bounds where its error is above a bound of its type (half and bfloat16 1e-2, float
# 1e-5, double 1e-12, integers any deviation) times (ranks - 1): DeltaMaxValue and CheckData
# there.
def _columns(*cells: str, widths=(10, 12, 8, 6, 7, 6, 6, 5, 7, 6, 6, 5)) -> str:
    """A header line, each cell right-aligned to its width, two spaces apart."""
    return "# " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)) + "\n"


OLD_HEADER = (
    f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}            out-of-place                       "
    "in-place          \n"
    + _columns("size", "count", "type", "redop", "time", "algbw", "busbw", "error", "time",
               "algbw", "busbw", "error")
    + _columns("(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
               "(GB/s)", ""))
_WIDTH = {"half": 2, "bfloat16": 2, "float": 4, "double": 8, "int32": 4, "uint8": 1}


def _old_output(ranks: int, rows: list[tuple[int, float, str, str]], kind="float") -> str:
    """An all_reduce's stdout as 2.11 printed it: `ranks` rank lines on one host (none for 0)
    and a row per (size, time, out-of-place error, in-place error)."""
    text = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8388608 step: 2(factor) warmup " \
        "iters: 5 iters: 20 validation: 1 \n#\n# Using devices\n" + "".join(
            f"#   Rank {r:2d} Pid {4100 + r:6d} on {'dgx-a100':>10} device {r:2d} "
            f"[0x{0x07 + 8 * r:02x}] NVIDIA A100-SXM4-80GB\n" for r in range(ranks)) + \
        "#\n" + OLD_HEADER
    for size, t, out_err, in_err in rows:
        algbw = size / t / 1e3
        busbw = algbw * 2 * (max(ranks, 2) - 1) / max(ranks, 2)
        shown = f"{t:7.{2 if t < 100 else 1 if t < 1e4 else 0}f}"
        text += f"{size:12d}  {size // _WIDTH[kind]:12d}  {kind:>8}  {'sum':>6}" + "".join(
            f"  {shown:>7}  {algbw:6.2f}  {busbw:6.2f}  {err:>5}" for err in (out_err, in_err))
        text += "\n"
    return text


def test_error_column_above_its_bound_warns_as_wrong_elements(tmp_path):
    """8 ranks of float: the bound is 7 x 1e-5 = 7e-05. Rows printing 0e+00, 5e-07 and 7e-05 (at
    the bound) pass; 8e-05 out of place and 1e+00 in place are named as #wrong above 0 is, on
    stderr and in the JSON, and every row is priced as the same output without errors is."""
    rows = [(1 << 20, 27.76, "0e+00", "0e+00"), (2 << 20, 40.66, "5e-07", "7e-07"),
            (4 << 20, 53.24, "7e-05", "6e-05"), (8 << 20, 90.02, "8e-05", "0e+00"),
            (16 << 20, 160.3, "2e-07", "1e+00")]
    path = tmp_path / "old_all_reduce_perf.txt"
    path.write_text(_old_output(8, rows))
    clean = tmp_path / "clean_all_reduce_perf.txt"
    clean.write_text(_old_output(8, [(*row[:2], "0e+00", "0e+00") for row in rows]))
    out, err = _run(path, A100)
    plain, plain_err = _run(clean, A100)
    assert out["rows"] == plain["rows"] and plain_err == "" and plain["wrong_results"] == []
    lines = path.read_text().splitlines()
    at = [next(n for n, ln in enumerate(lines, 1) if ln.lstrip().startswith(str(size) + " "))
          for size in (8 << 20, 16 << 20)]
    assert out["wrong_results"] == [f"{path}:{at[0]}", f"{path}:{at[1]}"]
    assert err == f"warning: {path}:{at[0]}, {path}:{at[1]}: 2 row(s) report elements NCCL " \
        "got wrong (#wrong above 0, or before nccl-tests 2.13 an error above its bound): that " \
        "run corrupted data, so its times are suspect; they are priced as printed, but rerun " \
        "before trusting them\n"


@pytest.mark.parametrize("kind, ranks, error, wrong", [
    ("float", 8, "7e-05", False), ("float", 8, "8e-05", True),
    ("half", 2, "1e-02", False), ("half", 2, "2e-02", True),
    ("bfloat16", 16, "1e-01", False), ("bfloat16", 16, "2e-01", True),  # 15 x 1e-2
    ("double", 8, "7e-12", False), ("double", 8, "8e-12", True),
    ("int32", 8, "1e+00", True), ("uint8", 8, "0e+00", False), ("float", 8, "N/A", False),
    # without rank lines (a pasted table) the bound of 2 ranks, the tightest
    ("float", 0, "1e-05", False), ("float", 0, "2e-05", True)])
def test_error_column_bounds(kind, ranks, error, wrong):
    text = _old_output(ranks, [(1 << 20, 27.76, error, "0e+00")], kind)
    rows = read_table(text.splitlines(), op="all_reduce", algorithm=None)
    assert [(p.size, p.time_us, bool(p.wrong_at)) for p in rows] == [(1 << 20, 27.76, wrong)]


def test_res_column_before_2_0():
    """nccl-tests before 2.0 named the column 'res' (7 wide, after times in ms; rank lines
    without Pid): 4 ranks of float, bound 3e-05."""
    text = "# Using devices\n" + "".join(
        f"#   Rank {r:2d} on {'dgx1':>10} device {r:2d} [0x{0x06 + r:02x}] Tesla V100-SXM2-16GB\n"
        for r in range(4))
    text += _columns("bytes", "N", "type", "op", "time", "algbw", "busbw", "res", "time",
                     "algbw", "busbw", "res", widths=(10, 12, 6, 6, 7, 5, 5, 7, 7, 5, 5, 7))
    for size, ms, res in ((1 << 20, 0.041, "3e-05"), (2 << 20, 0.066, "4e-05")):
        bw = size / ms / 1e6
        text += f"{size:12d}  {size // 4:12d}  {'float':>6}  {'sum':>6}" + \
            f"  {ms:7.3f}  {bw:5.2f}  {bw * 1.5:5.2f}  {res:>7}" * 2 + "\n"
    rows = read_table(text.splitlines(), op="all_reduce", algorithm=None)
    assert [(p.size, p.time_us, p.wrong_at) for p in rows] == \
        [(1 << 20, 41.0, ()), (2 << 20, 66.0, ("<text>:8",))]


def test_error_columns_of_healthy_runs_are_no_wrong_elements():
    """Real outputs of nccl-tests before 2.13 (float all_reduce over 16 to 128 GPUs) print the
    rounding of float sums (up to 2e-06) as errors; no row is named, as nccl-tests' own footer
    ('Out of bounds values : 0 OK', where the output kept it) named none."""
    files = ("coreweaveNcclTests2022_A100_16node_128GPU_all_reduce_perf_4B-2G.txt",
             "coreweaveNcclTests2022_A100_4node_32GPU_SHARP_nccl2120_all_reduce_perf_8B-8G.txt",
             "PARTIAL_nccl1244_H20_2node_16GPU_NVLSTree_all_reduce_perf.txt")
    for name in files:
        lines = (NCCL_TESTS / name).read_text().splitlines()
        assert not name.startswith("coreweave") or "# Out of bounds values : 0 OK" in lines
        errors = [float(ln.split()[i]) for ln in lines if ln.split() and ln.split()[0].isdigit()
                  for i in (7, 11)]  # size count type redop, time algbw busbw error twice
        assert errors and max(errors) > 0, name
        rows = read_table(unlabelled(lines), op="all_reduce", algorithm=None)
        assert rows and all(p.wrong_at == () for p in rows), name


# --- per-line prefixes ---

def _stamp(k: int) -> str:
    # kubelet's RFC 3339 times to the nanosecond, one per line as the lines were written
    return f"2026-12-06T10:{k // 3600 % 60:02d}:{k // 60 % 60:02d}.{k * 7919 % 10 ** 9:09d}Z "


PREFIXES = {
    "kubectl --prefix": lambda k: "[pod/nccl-test-launcher-7x2kq/launcher] ",
    "kubectl --timestamps": _stamp,
    "kubectl --prefix --timestamps": lambda k: "[pod/nccl-launcher/mpi] " + _stamp(k),
    "pdsh": lambda k: "gpu-node-017: ",
    "clush gathered": lambda k: "node[1-2]: ",
    "srun -l": lambda k: " 0: ",
    # docker compose pads the service to one more than the longest name it has seen (its
    # formatter's '%-*s | '), so the padding grows once a container with a longer name starts
    "docker compose": lambda k: "nccl-1" + " " * (2 if k < 9 else 9) + "| ",
    "docker compose -t": lambda k: "bench_nccl.v2-launcher-1  | " + _stamp(k),
}
# The line of another pod, host or service, prefixed as `tool` prefixes it.
OTHERS = {"kubectl": "[pod/worker-3/worker] ", "docker": "nccl-10  | "}
# nccl-tests' last line under -M 1 (its util.cu's writeMemInfo), the one it prints with '|'
MEMORY = "# GPU memory usage     : Initialization 1.02 GB | User-Allocated 48.0 GB | " \
    "Collective 1.50 GB | Total  50.5 GB"


@pytest.mark.parametrize("tool", PREFIXES)
def test_prefixed_lines_read_as_the_plain_output(tmp_path, tool):
    """Every line prefixed as the tool prefixes it (kubectl: kubernetes#76471's
    '[pod/NAME/CONTAINER] ', the kubelet's RFC 3339 time after it; pdsh's and clush's 'HOST: ';
    docker compose's 'SERVICE  | ') reads as the plain two-host all-to-all: the same settings
    and rows. A line of another pod, host or service keeps its prefix and is no row, though it
    would read as one without it; the '|'s of nccl-tests' memory usage line are not a prefix."""
    lines = [*ALLTOALL_2X8.read_text().splitlines(), MEMORY]
    other = OTHERS.get(tool.split()[0], "gpu-node-018: ") + \
        "        1024           128    double    none      -1     9.00    0.11    0.11       0\n"
    row = next(k for k, line in enumerate(lines) if line.lstrip().startswith("8589934592"))
    text = "".join(PREFIXES[tool](k) + line + "\n" + (other if k == row else "")
                   for k, line in enumerate(lines))
    path = tmp_path / "prefixed.txt"
    path.write_text(text)
    plain = _published_path(ALLTOALL_2X8, *NET)
    got = _published_path(path, *NET)
    assert (got["settings"], got["sources"], got["rows"]) == \
        (plain["settings"], plain["sources"], plain["rows"])


def test_unknown_prefix_is_named_with_the_header_line(tmp_path, capsys):
    """A prefix of no known tool (the syslog time, host and tag of journalctl) is named with the
    header's line and the text seen. An output whose own lines hold '|' (the memory usage
    line) but no prefix reads as the plain one."""
    lines = ALLTOALL_2X8.read_text().splitlines()
    path = tmp_path / "journal.txt"
    path.write_text("".join(f"Dec 06 10:00:00 gpu-node-017 mpirun[4242]: {line}\n"
                            for line in lines))
    header = next(i for i, ln in enumerate(lines) if "busbw" in ln and "time" in ln) + 1
    err = _error(capsys, "--published", path, "--topology", H100, *NET)
    assert f"journal.txt:{header}: the table's header comes after 'Dec 06 10:00:00 " \
           "gpu-node-017 mpirun[4242]: ', which is no line prefix this reader knows" in err
    memory = tmp_path / "memory.txt"
    memory.write_text("\n".join([*lines, MEMORY]) + "\n")
    assert _published_path(memory, *NET)["rows"] == _published_path(ALLTOALL_2X8, *NET)["rows"]


# --- -N cycles, -d all, -o all ---

def _row(size: int, time_us: float, kind: str = "float     sum") -> str:
    """A row of an 8-rank all_reduce as nccl-tests prints it: algbw = size / time, busbw =
    2 x 7/8 of it (the out-of-place columns repeated in place)."""
    algbw = size / time_us / 1e3
    cells = f"{time_us:8.2f}  {algbw:6.2f}  {algbw * 1.75:6.2f}       0"
    return f"{size:12d}  {size // 4:12d}  {kind}      -1  {cells}  {cells}\n"


SIZES = (1 << 20, 2 << 20, 4 << 20)
# Each cycle's time per size (us); the medians by hand: 1 MiB 27.76 (of 27.76, 30.10, 26.50),
# 2 MiB 40.66 (of 42.00, 40.66, 39.90), 4 MiB 53.24 (of 53.24, 55.00, 52.00).
CYCLES = ((27.76, 42.00, 53.24), (30.10, 40.66, 55.00), (26.50, 39.90, 52.00))


def _cycles(times=CYCLES) -> str:
    return HEADER + "".join(_row(size, t) for cycle in times
                            for size, t in zip(SIZES, cycle, strict=False))


def test_cycles_give_each_size_its_median():
    rows = read_table(_cycles().splitlines(), op="all_reduce", algorithm=None)
    assert [(p.size, p.time_us, p.cycles) for p in rows] == \
        [(1 << 20, 27.76, 3), (2 << 20, 40.66, 3), (4 << 20, 53.24, 3)]
    # busbw: the median of the rows' printed busbw, 1 MiB: 1048576 / 27.76 us x 1.75
    assert rows[0].busbw == round(round(1048576 / 27.76e3, 2) * 1.75, 2)
    # Two cycles: the mean of the two; a run stopped in its third cycle (-N 0 runs until it is
    # stopped) has three rows of 1 MiB only.
    two = read_table(_cycles(CYCLES[:2]).splitlines(), op="all_reduce", algorithm=None)
    assert [p.time_us for p in two] == pytest.approx([(27.76 + 30.10) / 2, (42.00 + 40.66) / 2,
                                                      (53.24 + 55.00) / 2], abs=1e-12)
    cut = read_table(_cycles((*CYCLES[:2], CYCLES[2][:1])).splitlines(), op="all_reduce",
                     algorithm=None)
    assert [(p.time_us, p.cycles) for p in cut] == \
        [(27.76, 3), (pytest.approx((42.00 + 40.66) / 2), 2), (pytest.approx(54.12), 2)]


def test_cycles_are_noted_in_the_output(tmp_path):
    path = tmp_path / "cycles_all_reduce_perf.txt"
    path.write_text(_cycles())
    out, err = _run(path, A100, "--sm", "80")
    assert [r["published_us"] for r in out["rows"]] == [27.76, 40.66, 53.24]
    assert out["cycles"] == 3 and err == ""
    assert out["cycles_note"] == "the output prints its sizes in 3 cycles (nccl-tests -N); " \
        "each size's time and busbw are the median of its rows"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "--published", str(path), "--topology", str(A100), "--sm",
                     "80"]) == 0
    assert f"note: {out['cycles_note']}" in buf.getvalue().splitlines()


def test_sweeps_of_several_types_or_ops_are_refused():
    """-d all prints a sweep per data type, -o all per reduction op, one after another under
    one header (nccl-tests' TimeTest per type and op): the first row of the second is named."""
    half = _cycles(CYCLES[:1]) + "".join(_row(s, t, "half     sum") for s, t in
                                        zip(SIZES, CYCLES[1], strict=True))
    with pytest.raises(ValueError, match=r"<text>:5: nccl-tests row: half sum, but the first row, "
                                         r"on line 2, is float sum: the output holds a sweep of "
                                         r"sizes per data type or reduction op \(nccl-tests -d "
                                         r"all or -o all\)"):
        read_table(half.splitlines(), op="all_reduce", algorithm=None)
    prod = _cycles(CYCLES[:1]) + _row(SIZES[0], 30.0, "float    prod")
    with pytest.raises(ValueError, match=r"<text>:5: nccl-tests row: float prod, but the first "
                                         "row, on line 2, is float sum"):
        read_table(prod.splitlines(), op="all_reduce", algorithm=None)


def test_sizes_out_of_the_cycles_order_are_refused():
    """A size again that does not restart the sweep, or a second sweep that strays from the
    first's order, is no -N cycle: rows of several runs."""
    stray = _cycles(CYCLES[:1]) + _row(SIZES[1], 40.0)
    with pytest.raises(ValueError, match=r"<text>:5: nccl-tests row: size 2097152 again \(first "
                                         r"on line 3\): the output holds several runs"):
        read_table(stray.splitlines(), op="all_reduce", algorithm=None)
    skipped = _cycles(CYCLES[:1]) + _row(SIZES[0], 28.0) + _row(SIZES[2], 53.0)
    with pytest.raises(ValueError, match=r"<text>:6: nccl-tests row: size 4194304 again \(first "
                                         r"on line 4\) where the cycles of sizes \(nccl-tests -N\) "
                                         r"give 2097152"):
        read_table(skipped.splitlines(), op="all_reduce", algorithm=None)
    grown = _cycles(CYCLES[:1]) + _row(SIZES[0], 28.0) + _row(8 << 20, 90.0)
    with pytest.raises(ValueError, match=r"<text>:6: nccl-tests row: size 8388608 where the "
                                         r"cycles of sizes \(nccl-tests -N\) give 2097152: the "
                                         "output holds several runs"):
        read_table(grown.splitlines(), op="all_reduce", algorithm=None)


def _result(size: int, t: float, nwrong=0.0) -> dict:
    """One result of an 8-rank all_reduce's -J report, as the rows of _row."""
    algbw = size / t / 1e3
    part = {"time": t, "alg_bw": algbw, "bus_bw": algbw * 1.75, "nwrong": nwrong}
    return {"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": "-1",
            "out_of_place": part, "in_place": dict(part, nwrong=None)}


def _json_report(tmp_path: Path, results: list[dict], *args: str) -> Path:
    doc = {"args": ["./build/all_reduce_perf", *args], "nccl_version": 22602,
           "config": {"nthreads": 1, "ngpus": 8}, "results": results,
           "devices": [{"hostname": "dgx", "group": 0, "device_info": "NVIDIA A100-SXM4-80GB"}]}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    return path


def test_json_report_cycles_and_wrong_elements(tmp_path):
    """A -J report of -N 2 repeats its results (nccl-tests writes one per row printed); each
    size is the median of its two, and an nwrong above 0 is named by its result."""
    results = [_result(s, t) for cycle in CYCLES[:2] for s, t in zip(SIZES, cycle, strict=True)]
    results[4] = _result(SIZES[1], CYCLES[1][1], nwrong=7.0)
    path = _json_report(tmp_path, results, "-N", "2")
    out, err = _run(path, A100)
    assert [r["published_us"] for r in out["rows"]] == \
        pytest.approx([(27.76 + 30.10) / 2, (42.00 + 40.66) / 2, (53.24 + 55.00) / 2])
    assert out["cycles"] == 2 and out["wrong_results"] == [f"{path}: results[4]"]
    assert err.startswith(f"warning: {path}: results[4]: 1 row(s) report elements NCCL got "
                          "wrong")


def test_reports_of_empty_buffers_only_are_refused(tmp_path, capsys):
    """-b 0 -e 0 times only empty buffers, which NCCL returns from at once and the reader leaves
    out: the -J report then has no rows, as its stdout has (an empty table was priced before)."""
    path = _json_report(tmp_path, [_result(0, 5.12), _result(0, 5.06)], "-b", "0", "-e", "0")
    err = _error(capsys, "--published", path, "--topology", A100)
    assert err == f"torch_topo bench: error: {path}: the nccl-tests report has no rows: its 2 " \
        "result(s) are all of 0 bytes (-b 0), which NCCL returns at once for\n"
    text = tmp_path / "empty_all_reduce_perf.txt"
    text.write_text(HEADER + "           0             0     float     sum      -1     5.12"
                    "    0.00    0.00       0     5.06    0.00    0.00       0\n")
    err = _error(capsys, "--published", text, "--topology", A100)
    assert err == f"torch_topo bench: error: {text}: the nccl-tests table (header on line 1) " \
        "has no rows\n"
