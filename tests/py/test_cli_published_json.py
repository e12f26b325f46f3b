# SPDX-License-Identifier: Apache-2.0
"""`bench --published REPORT.json`: nccl-tests' own JSON report (-J, nccl-tests from 2.17.3) gives
the settings and rows its stdout gives. Reports are written here as nccl-tests' util.cu writes
them (one `devices` entry per process, holding its first GPU; config, args, env, results with
out_of_place and in_place) from two real stdouts of tests/data, whose plain reading is the
reference; and the report's own faults are one error line, exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from torch_topo.bench.nccl_tests import DATA
from torch_topo.cli import main

NCCL_TESTS = DATA / "nccl_tests"
H100 = DATA / "nvidia_smi_topo" / "h100_8xSXM_NV18_2socket_mlengineering.txt"
A100 = DATA / "nvidia_smi_topo" / "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt"
ALLTOALL_2X8 = NCCL_TESTS / "xxrjunNcclTestsCluster_H100_N2_G8_nccl22902_alltoall_perf_4G-16G.txt"
G8_ALLREDUCE = NCCL_TESTS / "dkh_1node_8xA100-SXM4-80GB_nccl2193_all_reduce_perf_8B-128M.txt"
NET = ["--nic-gbit", "400", "--nics", "8"]
_RANK = re.compile(r"#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[([^\]]*)\]\s+(.*\S)")


def _report(stdout: Path, binary: str, *, env=(), per_process=1) -> dict:
    """The -J report of the run `stdout` prints: its processes' first rank lines as devices, its
    rows' out-of-place and in-place columns as results."""
    text = stdout.read_text()
    version = int(re.search(r"nccl-library=(\d+)", text).group(1))
    devices, seen = [], set()
    for line in text.splitlines():
        m = _RANK.match(line.strip())
        if m and m.group(1) not in seen:  # one entry per process (Pid)
            seen.add(m.group(1))
            devices.append({"rank": len(devices), "group": 0, "pid": int(m.group(1)),
                            "hostname": m.group(2), "device": int(m.group(3)),
                            "device_hex": m.group(4), "device_info": m.group(5)})
    results = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) == 13 and tok[0].isdigit():
            results.append({
                "size": int(tok[0]), "count": int(tok[1]), "type": tok[2], "redop": tok[3],
                "root": tok[4],
                "out_of_place": {"time": float(tok[5]), "alg_bw": float(tok[6]),
                                 "bus_bw": float(tok[7]), "nwrong": 0.0},
                "in_place": {"time": float(tok[9]), "alg_bw": float(tok[10]),
                             "bus_bw": float(tok[11]), "nwrong": None},
                "actual_iterations": 20, "experiment_name": ""})
    assert devices and results
    return {"version": 1, "start_time": "2026-12-06 10:00:00",
            "args": [f"./build/{binary}", "-b", "8", "-e", "16G", "-f", "2"],
            "env": ["PATH=/usr/bin", *env], "nccl_version": version,
            "config": {"nthreads": 1, "ngpus": per_process, "minimum_bytes": 8,
                       "maximum_bytes": 1 << 34, "step_factor": 2, "warmup_iters": 5,
                       "iterations": 20, "aggregated_iterations": 1, "validation": 1,
                       "graph": 0, "blocking_collectives": "false", "per_iter_timing": "false",
                       "per_iter_skip": 0, "parallel_init": "false"},
            "devices": devices, "results": results,
            "out_of_bounds": {"count": 0, "okay": "true"},
            "average_bus_bandwidth": {"bandwidth": 1.0, "okay": "unchecked"},
            "end_time": "2026-12-06 10:01:00"}


def _run(path: Path, topology: Path, *options: str) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["bench", "--published", str(path), "--topology", str(topology), "--json",
                     *options]) == 0
    return json.loads(buf.getvalue())


def _write(tmp_path: Path, doc, name="report.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1) if not isinstance(doc, str) else doc)
    return path


def _error(capsys, path: Path, topology: Path, *options: str) -> str:
    assert main(["bench", "--published", str(path), "--topology", str(topology),
                 *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("torch_topo bench: error: ") and err.count("\n") == 1, err
    return err


def _same_as_stdout(tmp_path, report: dict, stdout: Path, topology: Path, *options) -> dict:
    plain = _run(stdout, topology, *options)
    got = _run(_write(tmp_path, report), topology, *options)
    for key in ("settings", "sources", "rows", "misses", "caveat", "gpus_per_process"):
        assert got[key] == plain[key], key
    return got


def test_report_of_two_hosts_reads_as_its_stdout(tmp_path):
    """16 processes of one GPU on two hosts; the binary built with NAME_SUFFIX=_mpi."""
    _same_as_stdout(tmp_path, _report(ALLTOALL_2X8, "alltoall_perf_mpi"), ALLTOALL_2X8, H100,
                    *NET)


def test_report_of_one_process_driving_eight_gpus(tmp_path):
    """-g 8: one devices entry (the process's first GPU) stands for eight ranks; the caveat of
    several GPUs per process follows."""
    report = _report(G8_ALLREDUCE, "all_reduce_perf", per_process=8)
    assert len(report["devices"]) == 1
    got = _same_as_stdout(tmp_path, report, G8_ALLREDUCE, A100)
    assert "one process drove 8 GPUs" in got["caveat"]


def test_nccl_algo_from_the_environment(tmp_path):
    report = _report(G8_ALLREDUCE, "all_reduce_perf", per_process=8, env=["NCCL_ALGO=Tree"])
    out = _run(_write(tmp_path, report), A100)
    assert (out["settings"]["algorithm"], out["sources"]["algorithm"]) == \
        ("tree", "output (NCCL_ALGO)")
    assert {r["algorithm"] for r in out["rows"]} == {"tree"}


def test_only_in_place_results(tmp_path):
    """Trace replay writes out_of_place null: the in-place times are the run's."""
    report = _report(G8_ALLREDUCE, "all_reduce_perf", per_process=8)
    for entry in report["results"]:
        entry["out_of_place"] = None
    out = _run(_write(tmp_path, report), A100)
    assert [r["published_us"] for r in out["rows"]] == \
        [e["in_place"]["time"] for e in report["results"]]


def test_report_faults(tmp_path, capsys):
    good = _report(G8_ALLREDUCE, "all_reduce_perf", per_process=8)
    cut = _write(tmp_path, json.dumps(good, indent=1)[:400], "cut.json")
    line = json.dumps(good, indent=1)[:400].count("\n") + 1
    assert f"cut.json:{line}: not valid JSON" in _error(capsys, cut, A100)

    cpu = json.loads(json.dumps(good))
    cpu["results"][3]["out_of_place"]["cpu_time"] = cpu["results"][3]["out_of_place"].pop("time")
    err = _error(capsys, _write(tmp_path, cpu, "cpu.json"), A100)
    assert "cpu.json: results[3]: cpu_time (nccl-tests -C 1)" in err

    nan = json.loads(json.dumps(good))
    nan["results"][2]["out_of_place"]["time"] = "nan"
    err = _error(capsys, _write(tmp_path, nan, "nan.json"), A100)
    assert "nan.json: results[2].out_of_place: time: got 'nan', expected a finite number" in err

    twice = json.loads(json.dumps(good))
    twice["results"] += [dict(e, type="half") for e in twice["results"]]
    n = len(good["results"])
    err = _error(capsys, _write(tmp_path, twice, "twice.json"), A100)
    assert f"twice.json: results[{n}]: half sum, but the first row, at results[0], is float " \
           "sum: the report holds a sweep of sizes per data type or reduction op" in err

    unpriced = json.loads(json.dumps(good))
    unpriced["args"][0] = "/opt/nccl-tests/alltoallv_perf_mpi"
    err = _error(capsys, _write(tmp_path, unpriced, "v.json"), A100)
    assert "alltoallv_perf: the cost model does not price this collective" in err

    uneven = json.loads(json.dumps(_report(ALLTOALL_2X8, "alltoall_perf")))
    uneven["devices"].pop()
    err = _error(capsys, _write(tmp_path, uneven, "uneven.json"), H100, *NET)
    assert "uneven.json: devices: got cnode3-003 8, cnode3-010 7 ranks per host" in err

    err = _error(capsys, _write(tmp_path, {"version": 1}, "empty.json"), A100)
    assert "empty.json: no 'results' list" in err

    # NCCL_TESTS_SPLIT_MASK=0x7 over 2 x 8 processes: eight groups of one GPU per host, each
    # device carrying its group (util.cu's jsonRankInfo), the table their average.
    split = json.loads(json.dumps(_report(ALLTOALL_2X8, "alltoall_perf")))
    for i, device in enumerate(split["devices"]):
        device["group"] = i & 7
    err = _error(capsys, _write(tmp_path, split, "split.json"), H100, *NET)
    assert "split.json: devices[1]: group 1, but the rank on devices[0] is in group 0: the run " \
           "split its ranks into groups (NCCL_TESTS_SPLIT or NCCL_TESTS_SPLIT_MASK)" in err


@pytest.mark.parametrize("starting, op", [("all_reduce_perf_mpi", "all_reduce"),
                                          ("/opt/tests/reduce_scatter_perf", "reduce_scatter")])
def test_stdout_of_suffixed_binaries(tmp_path, starting, op):
    """Builds with NAME_SUFFIX (all_reduce_perf_mpi) print that name on the starting line."""
    text = G8_ALLREDUCE.read_text().replace("starting: all_reduce_perf", f"starting: {starting}")
    out = _run(_write(tmp_path, text, "suffixed.txt"), A100)
    assert (out["settings"]["op"], out["sources"]["op"]) == (op, "output")
