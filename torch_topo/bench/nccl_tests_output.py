# SPDX-License-Identifier: Apache-2.0
"""A saved nccl-tests stdout read back (layer: Python package): its table of sizes, and what its
header says about the run (collective, hosts and ranks per host from the rank lines, GPU model,
NCCL version, a forced NCCL_ALGO), so that `bench --published` can price a run that is not in
tests/data. Errors name the file and line."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from statistics import median

from torch_topo.nccl_hints import version_code

__all__ = ["PERF_OPS", "Published", "RunHeader", "Sweeps", "algorithm_from_nccl", "decoded",
           "one_group", "op_in_name", "read_header", "read_table", "uniform_hosts", "unlabelled"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Published:
    """One published measurement."""

    size: int
    """Bytes as nccl-tests counts them."""
    time_us: float
    busbw: float
    op: str = "all_reduce"
    algorithm: str | None = None
    """NCCL algorithm the run forced, when it did (else NCCL's own choice)."""
    cycles: int = 1
    """Rows of this size in the output (nccl-tests -N prints its sweep of sizes once per cycle);
    time_us and busbw are each their median."""
    wrong_at: tuple[str, ...] = ()
    """Where a row of this size reports elements NCCL got wrong (#wrong above 0, or before
    nccl-tests 2.13 an error above the run's bound), as 'FILE:LINE' or 'FILE: results[I]'."""


PERF_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather",
            "reduce_scatter": "reduce_scatter", "alltoall": "all_to_all",
            "sendrecv": "send_recv", "broadcast": "broadcast", "reduce": "reduce"}
"""nccl-tests binaries (`<name>_perf`) the cost model prices, and the op it prices each as;
gather, scatter, alltoallv and hypercube it does not."""

# NCCL_ALGO's names (NCCL's src/graph/tuning.cc, case-insensitive) as the model's algorithms;
# NCCL's two CollNet variants are one algorithm in the model.
_NCCL_ALGOS = {"ring": "ring", "tree": "tree", "nvls": "nvls", "nvlstree": "nvls_tree",
               "pat": "pat", "collnet": "collnet", "collnetdirect": "collnet",
               "collnetchain": "collnet"}

# Every nccl-tests binary (its Makefile's list), longest first so that reduce_scatter is not read
# as scatter; builds may append a suffix (all_reduce_perf_mpi), so only letters may not follow.
_BINARIES = ("reduce_scatter", "all_reduce", "all_gather", "alltoallv", "hypercube", "broadcast",
             "sendrecv", "alltoall", "scatter", "gather", "reduce")
_NAMED_BINARY = re.compile(rf"(?<![a-z])({'|'.join(_BINARIES)})_perf(?![a-z])")
# Labels that launchers put before every line a rank prints: Open MPI's --tag-output
# ("[1,0]<stdout>:"), srun -l ("0: ", padded), MPICH's -prepend-rank ("[0] "). No nccl-tests line
# starts so, so stripping them cannot change an unlabelled output.
_LAUNCHER_LABEL = re.compile(r"(?:\[\d+,\d+\]<std(?:out|err)>:\s?|\s*\d+:\s|\[\d+\]\s)")
# A row starts with an integer for each counting column of the header (size and count, or the
# 'bytes N' of nccl-tests before 2.0); the cells of a row a debug message broke go on as numbers
# (N/A where -c 0 checked nothing).
_CELL = re.compile(r"[0-9][0-9_]*")
_COUNTING = ("size", "bytes", "count", "N")
_CONTINUED = re.compile(r"[0-9.e+-]+|N/A")
# NCCL's debug prefix "host:pid:tid [dev] NCCL INFO" ("... [dev] file.cc:123 NCCL WARN"), and
# the "rank=R #wrong=N" nccl-tests (from 2.13) prints mid-row for each GPU whose check failed,
# with the launcher label some launchers put before either where it breaks into a row.
_DEBUG = re.compile(r"(?:\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?\s*)?"
                    r"(?:\S+:\d+:\d+ \[\d+\] (?:\S+:\d+ )?NCCL [A-Z]+\b|rank=\d+ #wrong=\d+)")
# "#  Rank  3 Group  0 Pid 1221792 on cnode3-003 device  3 [0000:61:00] NVIDIA H100 80GB HBM3";
# nccl-tests before 2.13.4 printed no Group, before 2.0 (2019) no Pid either.
_RANK_LINE = re.compile(r"\s*#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?(?:Pid\s+\d+\s+)?on\s+"
                        r"(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(\S.*?)\s*$")
_RANK_START = re.compile(r"\s*#?\s*Rank\s+\d")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_NCCL_VERSION = re.compile(r"NCCL version (\d+)\.(\d+)\.(\d+)")
_NCCL_LIBRARY = re.compile(r"nccl-library=(\d+)")
_THREADS_GPUS = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_NCCL_ALGO = re.compile(r"NCCL_ALGO(?:=|\s+set by environment to\s+)(\S+)")
# nccl-tests before 2.13 printed a row's largest deviation from the expected result ('error',
# 'res' before 2.0; %.0e, N/A under -c 0) and counted the row out of bounds above a bound of its
# data type times (ranks - 1) (its common.cu's DeltaMaxValue and CheckData, from the first
# release to 2.11): below it, floating-point sums merely round in another order, as healthy
# runs' do (2e-07 to 2e-06 in tests/data). The integer types' bound (1e-200) is any deviation.
# The printed value, to one digit, is held against the bound.
_DEVIATION_COLS = ("error", "res")
_DEVIATION_BOUND = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}
# Columns whose value tells one sweep of sizes from another (nccl-tests' RunTest loops over
# data types, reduction ops and roots: 'op' is the reduction's column before 2.0), each as
# (what it sweeps, the option that sweeps it, that option's default).
_SWEPT = {"type": ("data type", "-d all", "-d float"),
          "redop": ("reduction op", "-o all", "-o sum"),
          "op": ("reduction op", "-o all", "-o sum"), "root": ("root", "-r -1", "-r 0")}


def algorithm_from_nccl(text: str, where: str) -> str:
    """The model's name of one NCCL algorithm as NCCL_ALGO spells it (Ring, NVLSTree, ...) or
    as the model does (nvls_tree)."""
    found = _NCCL_ALGOS.get(text.strip().strip("'\"").replace("_", "").lower())
    if found is None:
        raise ValueError(f"{where}: got {text!r}, expected one NCCL algorithm: "
                         "Ring, Tree, NVLS, NVLSTree, PAT, CollNetDirect or CollNetChain (a "
                         "list or an exclusion such as ^NVLS cannot be priced as one forced "
                         "algorithm; give --algo NAME, or --algo default for NCCL's own choice)")
    return found


def decoded(data: bytes) -> str:
    """A saved output's text. UTF-8 unless a byte order mark says otherwise: Windows PowerShell
    5.1 saves `>` redirections as UTF-16 with a mark (nccl-tests builds on Windows from 2.19.1),
    Notepad may put one before UTF-8."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


# Prefixes that tools put before every line they pass on, as parts of the text before the
# table header's '#': the launcher labels above; kubectl logs --timestamps (the kubelet's
# RFC 3339 time to the nanosecond, "2024-03-18T15:46:14.238135024Z ", before the line and after
# any --prefix); kubectl logs --prefix ("[pod/NAME/CONTAINER] ", kubernetes#76471); pdsh and
# clush ("HOST: ", clush's "node[1-2]: " for gathered nodes); docker compose logs and up
# ("SERVICE  | ": the name padded to one more than the longest name yet seen, so the padding
# grows where a container with a longer name starts; its timestamps, -t, come after). Labels and
# times change from line to line, so they are matched as such; a pod, host or service is the
# header's own, matched as written, so that lines of others are not taken for the table's. No
# nccl-tests line starts with a name and ' | ': it prints '|' only in its '# GPU memory usage'
# line, after the '#'.
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ")


def _as_such(m: re.Match) -> str:
    return m.re.pattern


def _as_written(m: re.Match) -> str:
    return re.escape(m.group())


def _service(m: re.Match) -> str:
    return re.escape(m.group(1)) + r" +\| "


# Each part and the pattern that matches it on every line, from its match on the header's.
_PREFIX_PARTS = ((_LAUNCHER_LABEL, _as_such), (_TIMESTAMP, _as_such),
                 (re.compile(r"\[[^\]\s]+\] "), _as_written),
                 (re.compile(r"[\w.\[\],-]+: "), _as_written),
                 (re.compile(r"([A-Za-z0-9_.-]+) +\| "), _service))
_HEADER_START = re.compile(r"#\s*(?:size|bytes)\s")


def _line_prefix(lines: list[str], path: str) -> re.Pattern | None:
    """The prefix before the table header's '#' as a pattern for every line, None where there
    is none; ValueError naming the header's line for text this reader cannot take apart."""
    number, line = next(((n, ln) for n, ln in enumerate(lines, 1) if _is_header(ln)), (0, ""))
    start = _HEADER_START.search(line)
    if start is None:
        return None  # no table, or a header without '#' (edited by hand): nothing to tell
    seen = line[:start.start()]
    pattern, at = "", 0
    while seen[at:].strip():
        if seen[at].isspace():  # padding between parts, as a launcher may leave it
            pattern += r"\s*"
            at = len(seen) - len(seen[at:].lstrip())
            continue
        found = next(((m, on_every_line) for part, on_every_line in _PREFIX_PARTS
                      if (m := part.match(seen, at))), None)
        if found is None:
            raise ValueError(f"{path}:{number}: the table's header comes after {seen!r}, which "
                             "is no line prefix this reader knows (kubectl logs --prefix or "
                             "--timestamps, pdsh or clush 'HOST: ', docker compose "
                             "'SERVICE  | ', srun -l, mpirun --tag-output, MPICH -prepend-rank); "
                             "remove it from every line")
        m, on_every_line = found
        pattern += on_every_line(m)
        at = m.end()
    return re.compile(pattern) if pattern else None


def unlabelled(lines: list[str], path: str = "<text>") -> list[str]:
    """The lines without what launchers and log tools put before each (MPI and Slurm rank
    labels, kubectl's pod and time, pdsh's host, docker compose's service), so that a table
    saved from `mpirun --tag-output`, `srun -l`, `kubectl logs --prefix --timestamps`, `pdsh`
    or `docker compose logs` reads as the plain output does. The prefix is the one before the
    table's header; ValueError (path:line) where that one is not known. Rank labels go from any
    line: no nccl-tests line starts so."""
    prefix = _line_prefix(lines, path)
    out = []
    for line in lines:
        if prefix is not None and (m := prefix.match(line)):
            line = line[m.end():]
        out.append(_LAUNCHER_LABEL.sub("", line, count=1) if _LAUNCHER_LABEL.match(line)
                   else line)
    return out


class Sweeps:
    """The rows of one table or report in the order nccl-tests prints them: a sweep of sizes,
    repeated once per cycle (-N; the last may stop short where the run was stopped, as -N 0
    runs until it is), read back as each size's median time and busbw. nccl-tests -d all, -o all
    and -r -1 print a sweep per data type, reduction op and root, which would be priced as one,
    and a size out of the first sweep's order means rows of several runs (outputs saved one
    after another): both raise ValueError, the first naming every option its rows show. A size
    of 0 (-b 0) is no collective (NCCL returns at once for an empty buffer) and is left out."""

    def __init__(self, holder: str, row: str = "") -> None:
        self._holder = holder  # what errors say holds the runs: "output", "report"
        self._row = row  # what errors call a row after its place: ": nccl-tests row"
        self._kind: tuple[dict[str, str], str] | None = None  # the first row's, where it is
        self._stray: tuple[dict[str, str], str] | None = None  # the first of another kind
        self._swept: set[str] = set()  # columns whose value changes between rows
        self._order: list[int] = []  # the first sweep's sizes
        self._first: dict[int, str] = {}
        self._period = 0  # rows of a sweep, once a second one has begun
        self._rows = 0
        self._times: dict[int, list[float]] = {}
        self._busbw: dict[int, list[float]] = {}
        self._wrong: dict[int, list[str]] = {}

    def add(self, size: int, kind: dict[str, str], time_us: float, busbw: float, *,
            wrong: bool, place: str, here: str) -> None:
        """One row: `kind` its cells that tell sweeps apart (type, redop or 'op', root) by
        column, `wrong` whether it reports wrong elements; `place` names it in errors
        ("out.txt:25", "out.json: results[0]"), `here` in later errors ("on line 25", "at
        results[0]"). Rows of another kind than the first are only noted: published() names
        them with every column that changed, so that -d all -o all is one error, not two."""
        if size == 0:  # no collective; several (all_gather -b 8 on 2 ranks) are no second run
            return
        if self._kind is None:
            self._kind = (kind, here)
        elif kind != self._kind[0]:
            self._swept.update(c for c in kind.keys() | self._kind[0].keys()
                               if kind.get(c) != self._kind[0].get(c))
            self._stray = self._stray or (kind, place)
            return
        if not self._period and size in self._first and size == self._order[0]:
            self._period = len(self._order)  # a second cycle (-N) begins
        expected = self._order[self._rows % self._period] if self._period else None
        if size != expected and (size in self._first or expected is not None):
            raise ValueError(f"{place}{self._row}: size {size}"
                             + (f" again (first {self._first[size]})" if size in self._first
                                else "")
                             + (f" where the cycles of sizes (nccl-tests -N) give {expected}"
                                if expected is not None else "")
                             + f": the {self._holder} holds several runs (outputs saved one "
                             "after another); keep one run's rows")
        if size not in self._first:
            self._first[size] = here
            self._order.append(size)
        self._rows += 1
        self._times.setdefault(size, []).append(time_us)
        self._busbw.setdefault(size, []).append(busbw)
        if wrong:
            self._wrong.setdefault(size, []).append(place)

    def _refuse_sweeps(self) -> None:
        """ValueError naming the first row of another kind than the first row's, and the
        options (-d all, -o all, -r -1) whose columns the rows change."""
        if self._stray is None or self._kind is None:
            return
        (kind, place), (first, here) = self._stray, self._kind
        swept = list(dict.fromkeys(_SWEPT[c] for c in _SWEPT if c in self._swept))
        what, given, default = (" and ".join(s[i] for s in swept) for i in range(3))
        rooted = "root" in self._swept
        raise ValueError(
            f"{place}{self._row}: {_shown(kind, rooted)}, but the first row, {here}, is "
            f"{_shown(first, rooted)}: the {self._holder} holds a sweep of sizes per data type"
            + (", reduction op or root (nccl-tests -d all, -o all or -r -1)" if rooted else
               " or reduction op (nccl-tests -d all or -o all)")
            + f", here per {what} ({given}), and bench --published prices one; rerun without "
            f"{given} ({default}, nccl-tests' default{'s' if len(swept) > 1 else ''}) or keep "
            f"the rows of one {what}")

    def published(self, op: str, algorithm: str | None) -> list[Published]:
        """Each size once, in the order of the first sweep."""
        self._refuse_sweeps()
        return [Published(size=size, time_us=median(self._times[size]),
                          busbw=median(self._busbw[size]), op=op, algorithm=algorithm,
                          cycles=len(self._times[size]),
                          wrong_at=tuple(self._wrong.get(size, ())))
                for size in self._order]


def _shown(kind: dict[str, str], rooted: bool) -> str:
    """A row's type and op as printed ('float sum'), with its root where roots differ."""
    return " ".join([*(v for c, v in kind.items() if c != "root"),
                     *((f"root {kind.get('root')}",) if rooted else ())])


def _is_header(line: str) -> bool:
    return "time" in line and "busbw" in line


def _row_lines(lines: list[str], start: int, names: list[str]) -> list[tuple[int, list[str]]]:
    """The table's rows below line `start` as (line number, cells). NCCL's debug messages
    (NCCL_DEBUG=INFO/WARN, on the same stdout) may land inside a row, which nccl-tests prints
    in pieces: the cells before the message start the row, and later lines of bare numbers
    carry on the row the message broke (NVIDIA/nccl#1453; a WARN's leading newline ends the
    row's line). Other lines (launcher and shell messages, the footer) are no rows."""
    counted = max(1, next(i for i, name in enumerate(names) if name not in _COUNTING))
    rows: list[tuple[int, list[str]]] = []
    for number, line in enumerate(lines[start:], start + 1):
        if m := _DEBUG.search(line):
            line = line[:m.start()]
        cells = line.split()
        if len(cells) >= counted and all(_CELL.fullmatch(c) for c in cells[:counted]):
            rows.append((number, cells))
        elif cells and rows and all(_CONTINUED.fullmatch(c) for c in cells):
            rows[-1][1].extend(cells)
    return rows


def read_table(lines: list[str], *, op: str, algorithm: str | None,
               path: str = "<text>") -> list[Published]:
    """nccl-tests tables: the out-of-place time and busbw of every size ('root' column or not,
    sizes with '_' separators as some authors print them; the milliseconds of nccl-tests
    before 2.0, whose header starts 'bytes N', read as microseconds), the median of its rows
    where -N printed the sweep several times (Sweeps), with the lines whose '#wrong' cells
    (out-of-place or in-place) are above 0. A row cut short or with a cell that is not a number
    raises ValueError naming path:line, as do a size out of the sweep's order, a second data
    type, reduction op or root, and a second table (the rows of several runs would be priced as
    one); only the last row may stop short, where a run that hung or failed left it."""
    at = next((i for i, ln in enumerate(lines) if _is_header(ln)), None)
    if at is None:
        raise ValueError(f"{path}: no nccl-tests table: expected a header line naming 'time' "
                         "and 'busbw' ('#  size  count  type  redop  root  time  algbw  busbw "
                         "...'); is this nccl-tests' stdout?")
    names = lines[at].lstrip("# ").split()
    if "time" not in names:
        raise ValueError(f"{path}:{at + 1}: the table times {names[names.index('cputime')]!r} "
                         "(nccl-tests -C 1): the CPU's time per call, not the collective's, "
                         "which the model prices; run without -C"
                         if "cputime" in names else
                         f"{path}:{at + 1}: nccl-tests header: got {lines[at].strip()!r}, "
                         "expected a 'time' column before 'algbw' and 'busbw'")
    again = next((i for i in range(at + 1, len(lines)) if _is_header(lines[i])), None)
    if again is not None:
        raise ValueError(f"{path}:{again + 1}: a second nccl-tests table (the first on line "
                         f"{at + 1}): the output holds several runs (outputs saved one after "
                         "another, or processes that each ran alone); keep one run's table")
    # nccl-tests before 2.0 printed 'bytes N type op time(ms)'; 2.0 renamed the columns and
    # timed in microseconds (its commit cbe7f65, 2019).
    scale = 1e3 if names[0] == "bytes" else 1.0
    # nccl-tests 2.9 to 2.11 (alltoall) and 2.13.0 to 2.13.3 (all_gather, alltoall, broadcast,
    # gather, scatter) printed an empty op name under 'redop' (its TimeTest's opName ""): such a
    # row has no cell there, and a number (the root, else the time) comes where the op's name
    # would. Its cells are read against the header without 'redop'.
    layout = _layout(names)
    unnamed = _layout([n for n in names if n != "redop"]) if "redop" in names else None
    ranks = _ranks_listed(lines[:at])
    rows = _row_lines(lines, at + 1, names)
    printed = []  # (line, size, time, algbw, busbw) of each row, to check them against each other
    sweeps = Sweeps("output", ": nccl-tests row")
    for k, (number, tok) in enumerate(rows):
        size = int(tok[0].replace("_", ""))
        t_col, kind_cols, wrong_cols, error_cols = \
            unnamed if unnamed and _is_number(tok, names.index("redop")) else layout
        if len(tok) <= t_col + 2:
            if k == len(rows) - 1:
                break  # the run stopped here: a hang, a failure or a time limit
            raise ValueError(f"{path}:{number}: nccl-tests row: got {len(tok)} columns, expected "
                             f"at least {t_col + 3} (size ... time algbw busbw as the header on "
                             f"line {at + 1} names them)")
        try:
            time_us, algbw, busbw = (float(c) for c in tok[t_col:t_col + 3])
        except ValueError:
            raise ValueError(f"{path}:{number}: nccl-tests row: got size {tok[0]!r}, time "
                             f"{tok[t_col]!r}, algbw {tok[t_col + 1]!r}, busbw {tok[t_col + 2]!r}, "
                             "expected an integer and three numbers") from None
        kind = {name: tok[i] for name, i in kind_cols}
        bound = _DEVIATION_BOUND.get(kind.get("type", ""), 0.0) * (ranks - 1)
        wrong = any(_above(tok[i], 0.0) for i in wrong_cols if i < len(tok)) or \
            any(_above(tok[i], bound) for i in error_cols if i < len(tok))
        sweeps.add(size, kind, time_us * scale, busbw, wrong=wrong,
                   place=f"{path}:{number}", here=f"on line {number}")
        if size:
            printed.append((number, size, time_us * scale, algbw, busbw))
    out = sweeps.published(op, algorithm)
    if not out:
        raise ValueError(f"{path}: the nccl-tests table (header on line {at + 1}) has no rows")
    if names[layout[0] + 1:layout[0] + 3] == ["algbw", "busbw"]:
        _check_rows_agree(printed, path, at)
    return out


def _layout(names: list[str]) -> tuple[int, list[tuple[str, int]], list[int], list[int]]:
    """Where a row's cells are under the header's `names`: the out-of-place 'time' (a row
    carries the out-of-place columns first), the columns that tell sweeps apart (_SWEPT), the
    '#wrong' columns (nccl-tests from 2.13) and the error columns before them."""
    return (names.index("time"), [(n, names.index(n)) for n in _SWEPT if n in names],
            [i for i, n in enumerate(names) if n.startswith("#wrong")],
            [i for i, n in enumerate(names) if n in _DEVIATION_COLS])


def _is_number(cells: list[str], at: int) -> bool:
    try:
        float(cells[at])
    except (IndexError, ValueError):
        return False
    return True


def _above(cell: str, bound: float) -> bool:
    """Whether a '#wrong' or error cell (nccl-tests prints them with %g and %.0e: 3, 1.2e+06,
    2e-03; N/A unchecked) is above `bound`."""
    try:
        return float(cell) > bound
    except ValueError:
        return False


def _ranks_listed(lines: list[str]) -> int:
    """The ranks of the run as its rank lines count them (the highest rank + 1, which lists cut
    short in a paste still tell), else 2: the fewest that reduce anything, whose bound is the
    tightest; rows pasted without rank lines may then be named where their larger run passed."""
    return max((int(m.group(1)) + 1 for line in lines if (m := _RANK_LINE.match(line))),
               default=2)


# Bandwidths are printed to two decimals (half the last digit off at most), times to at least
# three digits; a row agrees with the table where its ratio is within this share of the table's.
_HALF_DIGIT = 0.005
_AGREE = 0.03


def _check_rows_agree(rows: list[tuple[int, int, float, float, float]], path: str,
                      at: int) -> None:
    """ValueError naming the first row whose algbw x time / size or busbw / algbw strays from
    the table's. nccl-tests fixes both ratios for a run (algbw is size / time from 2.9 on and
    (n-1)/n of it for all_gather and reduce_scatter before; busbw is algbw times the
    collective's factor), so a stray row is garbled: output of other processes broke into it
    mid-number (mpirun without --tag-output), or its cells are not the header's columns."""
    ratios = {"algbw x time / size": [], "busbw / algbw": []}
    for number, size, time_us, algbw, busbw in rows:
        if algbw > 2 * _HALF_DIGIT:
            ratios["algbw x time / size"].append(
                (number, algbw * time_us * 1e3 / size, _HALF_DIGIT / algbw))
            busbw_err = _HALF_DIGIT / max(busbw, _HALF_DIGIT)
            ratios["busbw / algbw"].append((number, busbw / algbw, _HALF_DIGIT / algbw + busbw_err))
    for what, found in ratios.items():
        sure = sorted(r for _, r, err in found if err < _AGREE / 3)
        if len(sure) < 3:
            continue  # too few exact rows to tell the table's ratio from a stray one
        typical = sure[len(sure) // 2]
        for number, ratio, err in found:
            if abs(ratio - typical) > (err + _AGREE) * typical:
                raise ValueError(f"{path}:{number}: nccl-tests row: {what} is {ratio:.4g}, the "
                                 f"table's rows {typical:.4g} (header on line {at + 1}): the row "
                                 "is garbled (output of several processes mixed into it, as "
                                 "mpirun without --tag-output can) or not of this table")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunHeader:
    """What a saved nccl-tests stdout says about its run; None or 0 where it says nothing."""

    op: str | None
    """The model's op for the run's binary (all_to_all for alltoall_perf)."""
    hosts: tuple[str, ...]
    """Host names of the rank lines, in order of first appearance."""
    ranks_per_host: int
    """Rank lines (one per GPU, also for -g N) of each host; 0 without rank lines."""
    gpu_names: tuple[str, ...]
    """Distinct device names of the rank lines."""
    nccl_version: int
    """NCCL's version code (2.26.2 -> 22602) from 'NCCL version' or 'nccl-library='."""
    algorithm: str | None
    """The model's name of the NCCL_ALGO a command or environment line sets."""
    gpus_per_process: int
    """GPUs one process drove (nccl-tests -t x -g), 0 where the output does not say."""
    ranks_cut_short: int = 0
    """The run's rank count (its highest rank + 1) where its rank lines list fewer (a paste
    cut short: `hosts` and `ranks_per_host` are then empty); 0 where they list every rank."""


def _op_of(lines: list[str], path: str) -> str | None:
    """The binary: 'Collective test starting: X_perf' (nccl-tests from 2.13), else the first
    'X_perf' of a command line above the table."""
    for number, line in enumerate(lines, 1):
        if m := _STARTING.search(line):
            return op_in_name(m.group(1), f"{path}:{number}")
    for number, line in enumerate(lines, 1):
        if "time" in line and "busbw" in line:
            break
        if op := op_in_name(line, f"{path}:{number}"):
            return op
    return None


def op_in_name(text: str, where: str) -> str | None:
    """The model's op for the first nccl-tests binary named in `text` (a command line, a path,
    a file name such as '..._all_reduce_perf_8B-16G.txt'), None where none is; ValueError
    naming `where` for a binary the model does not price."""
    m = _NAMED_BINARY.search(text)
    if m is None:
        return None
    if m.group(1) not in PERF_OPS:
        raise ValueError(f"{where}: {m.group(1)}_perf: the cost model does not price this "
                         f"collective; it prices {', '.join(f'{n}_perf' for n in PERF_OPS)}")
    return PERF_OPS[m.group(1)]


def _ranks_of(lines: list[str], path: str) -> tuple[dict[str, int], tuple[str, ...]]:
    per_host: dict[str, int] = {}
    names: dict[str, None] = {}
    seen: dict[str, int] = {}
    first_group: tuple[str, str] | None = None  # (group, where its first rank is)
    for number, line in enumerate(lines, 1):
        if not _RANK_START.match(line):
            continue
        m = _RANK_LINE.match(line)
        if m is None:
            raise ValueError(f"{path}:{number}: rank line: got {line.strip()!r}, expected "
                             "'#  Rank N Group G Pid P on HOST device D [BUS] NAME'")
        # One run lists each rank once; a rank again is the header of another run, most often
        # of processes that each ran alone (nccl-tests built without MPI=1 under mpirun),
        # whose hosts are no one run's (NVIDIA/nccl-tests#107, #213).
        if m.group(1) in seen:
            raise ValueError(f"{path}:{number}: rank {m.group(1)} again (first on line "
                             f"{seen[m.group(1)]}): the output holds the headers of several "
                             "runs: processes that each ran alone (nccl-tests built without "
                             "MPI=1, or a launcher that did not join them) or outputs saved one "
                             "after another; keep one run")
        seen[m.group(1)] = number
        first_group = one_group(m.group(2) or "0", f"{path}:{number}: rank line", f"line {number}",
                                first_group)
        per_host[m.group(3)] = per_host.get(m.group(3), 0) + 1
        names[m.group(4)] = None
    return per_host, tuple(names)


def one_group(group: str, where: str, here: str,
              first: tuple[str, str] | None) -> tuple[str, str]:
    """The run's one rank group (a rank line's or device's 'Group'), as (group, `here`) of its
    first rank; ValueError naming `where` for a rank of another group. NCCL_TESTS_SPLIT (or
    _MASK, nccl-tests 2.11 on) splits the ranks into groups that run the collective at once,
    and the table is their average (NVIDIA/nccl-tests#234): not one collective over every
    rank, which the model prices."""
    if first is not None and group != first[0]:
        raise ValueError(f"{where}: group {group}, but the rank on {first[1]} is in group "
                         f"{first[0]}: the run split its ranks into groups (NCCL_TESTS_SPLIT or "
                         "NCCL_TESTS_SPLIT_MASK) that each ran the collective at once, and the "
                         "table averages them; the model prices one collective over every rank, "
                         "so run without the split")
    return first or (group, here)


def uniform_hosts(per_host: dict[str, int], where: str) -> tuple[tuple[str, ...], int]:
    """The hosts in order and the ranks of each; ValueError naming `where` where hosts differ
    (the model prices uniform hosts)."""
    counts = set(per_host.values())
    if len(counts) > 1:
        spread = ", ".join(f"{host} {n}" for host, n in per_host.items())
        raise ValueError(f"{where}: got {spread} ranks per host, expected the same number on "
                         "every host (the model prices uniform hosts)")
    return tuple(per_host), counts.pop() if counts else 0


def read_header(lines: list[str], path: str = "<text>") -> RunHeader:
    """The run's settings as its output prints them; ValueError (path:line) for a collective the
    model cannot price, a malformed rank line, uneven hosts or an NCCL_ALGO it cannot force."""
    op = _op_of(lines, path)
    per_host, gpu_names = _ranks_of(lines, path)
    # "Rank 71" alone (a paste of the last line) was priced as one host of one rank.
    listed, ranks = sum(per_host.values()), _ranks_listed(lines)
    cut_short = ranks if listed and ranks > listed else 0
    hosts, ranks_per_host = ((), 0) if cut_short else \
        uniform_hosts(per_host, f"{path}: rank lines")
    version = gpus_per_process = 0
    algorithm = None
    for number, line in enumerate(lines, 1):
        if not gpus_per_process and (m := _THREADS_GPUS.search(line)):
            gpus_per_process = int(m.group(1)) * int(m.group(2))
        if not version and (m := _NCCL_VERSION.search(line)):
            version = version_code(*(int(g) for g in m.groups()))
        elif not version and (m := _NCCL_LIBRARY.search(line)):
            version = int(m.group(1))
        if algorithm is None and (m := _NCCL_ALGO.search(line)):
            algorithm = algorithm_from_nccl(m.group(1), f"{path}:{number}: NCCL_ALGO")
    return RunHeader(op=op, hosts=hosts, ranks_per_host=ranks_per_host, gpu_names=gpu_names,
                     nccl_version=version, algorithm=algorithm,
                     gpus_per_process=gpus_per_process, ranks_cut_short=cut_short)
