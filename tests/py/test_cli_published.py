# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo bench --published OUTPUT`: a saved nccl-tests stdout against the cost
model. Run on files of tests/data/nccl_tests, the CLI gives the rows `compare(system)` gives
for their SYSTEMS entry; the header's collective, hosts, ranks per host (-g too), GPU, NCCL
version and NCCL_ALGO are read back from synthetic outputs cut from real ones; and every bad
input is one error line (file:line for the file's own faults), exit 2."""

from __future__ import annotations

import codecs
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_topo import _C
from torch_topo.bench.nccl_tests import (
    DATA,
    SYSTEMS,
    compare,
    format_table,
    goal_misses,
    parse_published,
    table_json,
)
from torch_topo.bench.nccl_tests_output import op_in_name, read_header, read_table, unlabelled
from torch_topo.cli import main

ROOT = Path(__file__).resolve().parents[2]
H100 = DATA / "nvidia_smi_topo" / "h100_8xSXM_NV18_2socket_mlengineering.txt"
A100 = DATA / "nvidia_smi_topo" / "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt"
NCCL_TESTS = DATA / "nccl_tests"
ALLTOALL_2X8 = NCCL_TESTS / "xxrjunNcclTestsCluster_H100_N2_G8_nccl22902_alltoall_perf_4G-16G.txt"
G8_ALLREDUCE = NCCL_TESTS / "dkh_1node_8xA100-SXM4-80GB_nccl2193_all_reduce_perf_8B-128M.txt"
NET = ["--nic-gbit", "400", "--nics", "8"]

# SYSTEMS entries and the options that say what their outputs' headers do not (the NICs, the
# collective of outputs without a 'Collective test starting' line, hosts of one without rank
# lines); everything else is read from the output.
CASES = {
    # one host, one process per GPU, all_reduce (no collective line: from the file name)
    "thanosNotes_1node_8xA100-SXM4-80GB_mpirun8proc_all_reduce_perf_8B-4G.txt": [],
    # one host, one process driving 8 GPUs (-g 8), NCCL 2.19.3 from 'nccl-library='
    "dkh_1node_8xA100-SXM4-80GB_nccl2193_all_reduce_perf_8B-128M.txt": [],
    # two hosts, all_to_all, 8 and 4 ranks per host
    "xxrjunNcclTestsCluster_H100_N2_G8_nccl22902_alltoall_perf_4G-16G.txt": NET,
    "xxrjunNcclTestsCluster_H100_N2_G4_nccl22902_alltoall_perf_4G-16G.txt": NET,
    # all_gather over two one-GPU hosts (GB10: sm121 from the device name)
    "gb10training_2xGB10_200G_all_gather_perf_16G.txt": ["--nic-gbit", "200", "--nics", "1"],
    # NCCL_ALGO=Tree on the command line, op from './all_reduce_perf', no rank lines
    "PARTIAL_ncclTests232_2node_1xH100_4NIC_tree_all_reduce_perf.txt":
        ["--hosts", "2", "--ranks-per-host", "1", "--sm", "90", "--nic-gbit", "400"],
}


def _system(results: str):
    return next(s for s in SYSTEMS if s.results == results and not s.label)


def _published(capsys, path, topology, *options) -> dict:
    assert main(["bench", "--published", str(path), "--topology", str(topology), "--json",
                 *options]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _error(capsys, *argv) -> str:
    assert main(["bench", *map(str, argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("torch_topo bench: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("results", CASES)
def test_rows_match_compare_of_the_system(capsys, results):
    system = _system(results)
    out = _published(capsys, NCCL_TESTS / results, DATA / system.topology,
                     *CASES[results])
    reference = compare(system)
    missed = {id(r) for r in goal_misses(reference)}
    assert out["rows"] == [{**row, "outside_goals": id(r) in missed}
                           for r, row in zip(reference, table_json(reference), strict=True)]
    assert out["misses"] == len(missed)
    settings = out["settings"]
    assert (settings["op"], settings["hosts"], settings["sm"], settings["algorithm"]) == \
        (system.op, system.hosts, system.sm, system.algorithm)
    assert settings["ranks_per_host"] == (len(system.ranks) if system.ranks else 8)


def test_text_table_end_to_end():
    """One real process: the same table the benchmark prints for this system."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "torch_topo", "bench", "--published",
                           str(ALLTOALL_2X8), "--topology", str(H100), *NET],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"== {ALLTOALL_2X8}  (2 x {H100.name}, all_to_all, sm90)"
    assert lines[1].startswith("settings: op all_to_all (output), hosts 2 (rank lines), "
                               "ranks_per_host 8 (rank lines), sm 90 (rank lines: NVIDIA H100")
    assert "\n".join(lines[2:]) == format_table(compare(_system(ALLTOALL_2X8.name)))


def test_runs_of_several_gpus_per_process_carry_the_caveat(capsys, tmp_path):
    """-g 8 gets the note, one GPU per process none; the note's figures are those of the same
    8 x A100 host run both ways (tests/data)."""
    system = _system(G8_ALLREDUCE.name)
    assert "one process drove 8 GPUs" in _published(capsys, G8_ALLREDUCE,
                                                     DATA / system.topology)["caveat"]
    assert _published(capsys, ALLTOALL_2X8, H100, *NET)["caveat"] is None
    threads = _derive(tmp_path, ALLTOALL_2X8, ("nThread 1 nGpus 1", "nThread 2 nGpus 4"))
    assert read_header(threads.read_text().splitlines()).gpus_per_process == 8
    times = {}
    for how in ("g8", "mpirun8proc"):
        name = f"thanosNotes_1node_8xA100-SXM4-80GB_{how}_all_reduce_perf_8B-4G.txt"
        times[how] = {p.size: p.time_us for p in parse_published(_system(name))}
    extra = [times["g8"][s] - times["mpirun8proc"][s] for s in times["g8"] if s <= 1 << 20]
    ratio = [times["g8"][s] / times["mpirun8proc"][s] for s in times["g8"]
             if 4 << 20 <= s <= 512 << 20]
    assert (round(min(extra)), round(max(extra))) == (9, 22)
    assert (round(min(ratio), 2), round(max(ratio), 2)) == (1.08, 1.27)


def _derive(tmp_path, source: Path, *edits: tuple[str, str], name="out.txt") -> Path:
    text = source.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_header_of_real_outputs():
    two = read_header(ALLTOALL_2X8.read_text().splitlines())
    assert (two.op, two.hosts, two.ranks_per_host, two.gpu_names, two.nccl_version,
            two.algorithm) == ("all_to_all", ("cnode3-003", "cnode3-010"), 8,
                               ("NVIDIA H100 80GB HBM3",), 22902, None)
    g8 = read_header(G8_ALLREDUCE.read_text().splitlines())  # -g 8: 8 rank lines, one Pid
    assert (g8.op, g8.hosts, g8.ranks_per_host, g8.nccl_version) == \
        ("all_reduce", ("dkh",), 8, 21903)


@pytest.mark.parametrize("binary, op", [("sendrecv", "send_recv"), ("all_gather", "all_gather"),
                                        ("reduce_scatter", "reduce_scatter"),
                                        ("broadcast", "broadcast")])
def test_header_collective_names(tmp_path, binary, op):
    path = _derive(tmp_path, ALLTOALL_2X8, ("alltoall_perf", f"{binary}_perf"))
    assert read_header(path.read_text().splitlines()).op == op


def test_header_command_line_version_and_algorithm(tmp_path):
    """Without a 'Collective test starting' line: the binary of the command, NCCL's version
    from 'NCCL version', NCCL_ALGO from an -x option; rank lines without 'Group' (before
    nccl-tests 2.11)."""
    path = _derive(tmp_path, G8_ALLREDUCE,
                   ("# nccl-tests version 2.19.4 nccl-headers=21903 nccl-library=21903\n"
                    "# Collective test starting: all_reduce_perf\n",
                    "$ mpirun -np 1 -x NCCL_ALGO=NVLSTree ./build/reduce_scatter_perf -g 8\n"
                    "# NCCL version 2.26.2+cuda12.8\n"),
                   *((f"Rank  {r} Group  0 Pid", f"Rank  {r} Pid") for r in range(8)))
    header = read_header(path.read_text().splitlines())
    assert (header.op, header.nccl_version, header.algorithm, header.ranks_per_host) == \
        ("reduce_scatter", 22602, "nvls_tree", 8)
    out = _published_path(path)
    assert out["settings"]["algorithm"] == "nvls_tree" and out["settings"]["nccl_version"] == 22602
    assert {r["op"] for r in out["rows"]} == {"reduce_scatter"}


def _published_path(path: Path, *options: str) -> dict:
    """In-process run on the A100 host file, stdout captured here: the JSON the verb prints."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["bench", "--published", str(path), "--topology", str(A100), "--json",
                     *options])
    assert code == 0
    return json.loads(buf.getvalue())


def test_flags_override_the_header(tmp_path):
    path = _derive(tmp_path, G8_ALLREDUCE, ("all_reduce_perf", "all_gather_perf"))
    assert _published_path(path)["settings"]["op"] == "all_gather"
    out = _published_path(path, "--op", "all_reduce", "--sm", "90", "--nccl-version", "2.26.2",
                          "--algo", "Ring")
    assert {k: out["settings"][k] for k in ("op", "sm", "nccl_version", "algorithm")} == \
        {"op": "all_reduce", "sm": 90, "nccl_version": 22602, "algorithm": "ring"}
    assert out["sources"]["sm"] == "--sm"


def test_nccl_algo_does_not_steer_point_to_point(tmp_path):
    path = _derive(tmp_path, ALLTOALL_2X8, ("# nccl-tests version", "# -x NCCL_ALGO=Ring\n# x"))
    out = _published_path(path, "--sm", "80", "--nic-gbit", "400", "--nics", "8")
    assert out["settings"]["algorithm"] is None


# NVIDIA's CUDA GPUs list (developer.nvidia.com/cuda-gpus), names as nvidia-smi prints them
GPU_SMS = [
    ("NVIDIA H100 80GB HBM3", 90), ("NVIDIA H200", 90), ("NVIDIA H20", 90),
    ("NVIDIA H800", 90), ("NVIDIA A100-SXM4-80GB", 80), ("NVIDIA A800-SXM4-80GB", 80),
    ("NVIDIA A30", 80), ("NVIDIA A10", 86), ("NVIDIA B200", 100), ("NVIDIA GB200", 100),
    ("NVIDIA B300 SXM6 AC", 103), ("NVIDIA GB300", 103), ("NVIDIA L40S", 89), ("NVIDIA L4", 89),
    ("NVIDIA GeForce RTX 4090", 89), ("NVIDIA RTX 6000 Ada Generation", 89),
    ("NVIDIA RTX 5000 Ada Generation", 89), ("NVIDIA GeForce RTX 5090", 120),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 120), ("Tesla V100-SXM2-32GB", 70),
    ("NVIDIA GB10", 121), ("NVIDIA Graphics Device", 0),
]


@pytest.mark.parametrize("name, sm", GPU_SMS)
def test_sm_from_gpu_name(name, sm):
    assert _C.sm_from_gpu_name(name) == sm


def test_sm_from_the_rank_lines(tmp_path):
    path = _derive(tmp_path, G8_ALLREDUCE, ("NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"))
    out = _published_path(path)
    assert out["settings"]["sm"] == 89
    assert out["sources"]["sm"] == "rank lines: NVIDIA GeForce RTX 4090"


# --- errors: one line, exit 2 ---

@pytest.mark.parametrize("binary", ["gather", "scatter", "alltoallv", "hypercube"])
def test_collective_the_model_cannot_price(tmp_path, capsys, binary):
    path = _derive(tmp_path, ALLTOALL_2X8, ("alltoall_perf", f"{binary}_perf"))
    line = path.read_text().splitlines().index(f"# Collective test starting: {binary}_perf") + 1
    err = _error(capsys, "--published", path, "--topology", H100, *NET)
    assert f"{path}:{line}: {binary}_perf: the cost model does not price" in err
    assert "all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf" in err


def test_unknown_gpu_needs_sm(tmp_path, capsys):
    path = _derive(tmp_path, ALLTOALL_2X8, ("NVIDIA H100 80GB HBM3", "NVIDIA Graphics Device"))
    err = _error(capsys, "--published", path, "--topology", H100, *NET)
    assert "GPU 'NVIDIA Graphics Device': its compute capability is unknown; give --sm" in err
    capsys.readouterr()
    assert _published(capsys, path, H100, *NET, "--sm", "90")["settings"]["sm"] == 90


def test_mixed_gpus_need_sm(tmp_path, capsys):
    text = ALLTOALL_2X8.read_text().replace("device  7 [0000:df:00] NVIDIA H100 80GB HBM3",
                                            "device  7 [0000:df:00] NVIDIA A100-SXM4-80GB", 1)
    (tmp_path / "mixed.txt").write_text(text)
    err = _error(capsys, "--published", tmp_path / "mixed.txt", "--topology", H100, *NET)
    assert "several compute capabilities" in err and "A100-SXM4-80GB sm80" in err


def test_sm_of_no_known_gpu_generation(capsys):
    # --sm is x 10: 1000 (for 100), 9 (for 90), or a value beyond NVIDIA's list was accepted
    # and priced as the nearest generation.
    for bad in ("1000", "9", "59", "122", "0", "9.0"):
        err = _error(capsys, "--published", G8_ALLREDUCE, "--topology", A100, "--sm", bad)
        assert (f"argument --sm: got {bad!r}, expected a compute capability x 10 the model "
                "knows, 60 to 121 (60 P100, 70 V100, ") in err, err
    # Every compute capability of GPU_SMS is accepted as given, and P100's 6.0, the oldest
    # NVLink GPU.
    for sm in sorted({sm for _, sm in GPU_SMS if sm} | {60}):
        assert _published(capsys, G8_ALLREDUCE, A100, "--sm", str(sm))["settings"]["sm"] == sm


def test_hosts_and_ranks_that_contradict_the_rank_lines(capsys):
    err = _error(capsys, "--published", ALLTOALL_2X8, "--topology", H100, *NET, "--hosts", "4")
    assert "--hosts: got 4, but the rank lines of" in err and "name 2 host(s) (cnode3-003" in err
    err = _error(capsys, "--published", ALLTOALL_2X8, "--topology", H100, *NET,
                 "--ranks-per-host", "4")
    assert "--ranks-per-host: got 4, but the rank lines" in err and "give 8 per host" in err


def test_uneven_hosts_and_too_few_gpus(tmp_path, capsys):
    last = "on cnode3-010 device  7 [0000:df:00] NVIDIA H100 80GB HBM3\n"
    uneven = _derive(tmp_path, ALLTOALL_2X8, (last, last + "#  Rank 16 Group  0 Pid 1 on "
                                              "cnode3-010 device  8 [0000:e0:00] NVIDIA H100\n"))
    err = _error(capsys, "--published", uneven, "--topology", H100, *NET)
    assert "got cnode3-003 8, cnode3-010 9 ranks per host" in err
    four = DATA / "nvidia_smi_topo" / "ncclTests331_leonardo_4xA100-64GB_NV4mesh_4xNIC.txt"
    err = _error(capsys, "--published", ALLTOALL_2X8, "--topology", four, *NET)
    assert "has 4 GPU(s) per host, but the run has 8 ranks per host" in err


def test_malformed_rows_name_file_and_line(tmp_path, capsys):
    lines = ALLTOALL_2X8.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("8589934592"))
    short = list(lines)
    short[at] = "  8589934592    2147483648     float    none      -1   87717"
    (tmp_path / "short.txt").write_text("\n".join(short) + "\n")
    err = _error(capsys, "--published", tmp_path / "short.txt", "--topology", H100, *NET)
    assert f"{tmp_path / 'short.txt'}:{at + 1}: nccl-tests row: got 6 columns, expected at " \
           "least 8" in err
    bad = list(lines)
    bad[at] = lines[at].replace("87717", "8x717", 1)
    (tmp_path / "bad.txt").write_text("\n".join(bad) + "\n")
    err = _error(capsys, "--published", tmp_path / "bad.txt", "--topology", H100, *NET)
    assert f"{tmp_path / 'bad.txt'}:{at + 1}: nccl-tests row: got size '8589934592', time " \
           "'8x717.7'" in err


def test_malformed_rank_line_and_algorithm_list(tmp_path, capsys):
    rank = _derive(tmp_path, ALLTOALL_2X8, ("#  Rank  3 Group  0 Pid 1221792 on cnode3-003 "
                                            "device  3", "#  Rank  3 Group  0 Pid 1221792 "
                                            "cnode3-003 device  3"), name="rank.txt")
    line = next(i for i, ln in enumerate(rank.read_text().splitlines(), 1) if "Rank  3" in ln)
    err = _error(capsys, "--published", rank, "--topology", H100, *NET)
    assert f"{rank}:{line}: rank line: got '#  Rank  3 Group  0 Pid 1221792 cnode3-003" in err
    algo = _derive(tmp_path, G8_ALLREDUCE, ("# nccl-tests version", "# -x NCCL_ALGO=Tree,Ring\n#"),
                   name="algo.txt")
    err = _error(capsys, "--published", algo, "--topology", A100)
    assert f"{algo}:1: NCCL_ALGO: got 'Tree,Ring', expected one NCCL algorithm" in err


def test_not_an_nccl_tests_output(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("# Collective test starting: all_reduce_perf\nhello\n")
    err = _error(capsys, "--published", tmp_path / "empty.txt", "--topology", A100)
    assert "empty.txt: no nccl-tests table: expected a header line naming 'time' and 'busbw'" in err
    err = _error(capsys, "--published", tmp_path / "missing.txt", "--topology", A100)
    assert "--published: cannot read" in err and "missing.txt" in err
    # Named the core's loadTopologyFile, not the option.
    err = _error(capsys, "--published", G8_ALLREDUCE, "--topology", tmp_path / "no.txt")
    assert f"error: --topology: cannot open '{tmp_path / 'no.txt'}'" in err, err
    (tmp_path / "bare.txt").write_text("#  size count type redop root time algbw busbw\n")
    err = _error(capsys, "--published", tmp_path / "bare.txt", "--topology", A100)
    assert "bare.txt: the nccl-tests table (header on line 1) has no rows" in err
    one_row = "#  size count type redop root time algbw busbw\n8 2 float sum -1 40.1 0.00 0.00\n"
    (tmp_path / "one_row.txt").write_text(one_row)
    err = _error(capsys, "--published", tmp_path / "one_row.txt", "--topology", A100, "--sm", "80")
    assert "no 'Collective test starting: X_perf' line" in err and "give --op" in err
    err = _error(capsys, "--published", tmp_path / "one_row.txt", "--topology", A100,
                 "--op", "all_reduce")
    assert "no rank lines name the GPU; give --sm" in err
    capsys.readouterr()
    out = _published(capsys, tmp_path / "one_row.txt", A100, "--op", "all_reduce", "--sm", "80")
    assert [r["size"] for r in out["rows"]] == [8] and out["rows"][0]["published_us"] == 40.1
    assert out["sources"]["ranks_per_host"] == "every GPU of --topology"


def test_option_misuse(capsys):
    assert "--hosts: applies to --published OUTPUT only" in _error(capsys, "--hosts", "2")
    assert "--published: needs --topology HOSTFILE" in _error(capsys, "--published", ALLTOALL_2X8)
    assert "--procs: measures this machine" in _error(capsys, "--published", ALLTOALL_2X8,
                                                      "--topology", H100, "--procs", "2")
    assert "--nics: needs --nic-gbit G" in _error(capsys, "--published", ALLTOALL_2X8,
                                                  "--topology", H100, "--nics", "8")
    # The H100 file lists no NICs: both options are missing, whichever one is given.
    for given in ([], ["--nic-gbit", "400"]):
        err = _error(capsys, "--published", ALLTOALL_2X8, "--topology", H100, *given)
        assert "lists no NICs and the run spans 2 hosts; give --nics K and --nic-gbit G" in err
    nine_nics = DATA / "nvidia_smi_topo" / "PARTIAL_nccl1453_8xH100_NV18_9xNIC.tsv.txt"
    err = _error(capsys, "--published", ALLTOALL_2X8, "--topology", nine_nics)
    assert "its NICs carry no line rate and the run spans 2 hosts; give --nic-gbit G" in err
    err = _error(capsys, "--published", ALLTOALL_2X8, "--topology", H100, *NET, "--algo", "ring")
    assert "--algo: got 'ring', but all_to_all is NCCL point-to-point traffic" in err
    err = _error(capsys, "--published", G8_ALLREDUCE, "--topology", A100, "--algo", "bogus")
    assert "--algo: got 'bogus', expected one NCCL algorithm" in err
    err = _error(capsys, "--published", G8_ALLREDUCE, "--topology", A100, "--nccl-version", "2.x")
    assert "--nccl-version: got '2.x'" in err


@pytest.mark.parametrize("label", ["[1,0]<stdout>:", "[1,12]<stdout>: ", "0: ", "  3: ", "[0] "])
def test_launcher_labels_read_as_the_plain_output(tmp_path, label):
    """Open MPI --tag-output, srun -l (padded) and MPICH -prepend-rank put a label before every
    line; the labelled output gives the plain output's settings and rows."""
    path = tmp_path / "labelled.txt"
    path.write_text("".join(label + line + "\n" for line in
                            ALLTOALL_2X8.read_text().splitlines()))
    plain = _published_path(ALLTOALL_2X8, *NET)
    labelled = _published_path(path, *NET)
    assert (labelled["settings"], labelled["sources"], labelled["rows"]) == \
        (plain["settings"], plain["sources"], plain["rows"])


def test_rows_of_several_runs_are_refused(tmp_path, capsys):
    """-d all repeats every size once per data type under one header: priced as one run, the
    rows would be wrong; the error names the first row of the second type and the first row."""
    lines = G8_ALLREDUCE.read_text().splitlines()
    rows = [i for i, ln in enumerate(lines) if ln.split() and ln.split()[0].isdigit()]
    doubled = lines[:rows[-1] + 1] + [lines[i].replace("float", " half", 1) for i in rows]
    (tmp_path / "dall.txt").write_text("\n".join(doubled) + "\n")
    err = _error(capsys, "--published", tmp_path / "dall.txt", "--topology", A100)
    assert f"dall.txt:{rows[-1] + 2}: nccl-tests row: half sum, but the first row, on line " \
           f"{rows[0] + 1}, is float sum: the output holds a sweep of sizes per data type" in err


@pytest.mark.parametrize("name, op", [
    ("ncclTests309_2node_baremetal_nccl2262_all_reduce_perf_8B-16G.txt", "all_reduce"),
    ("run_reduce_scatter_perf.log", "reduce_scatter"), ("scatter_perf.txt", None),
    ("alltoall_perf-16node.out", "all_to_all"), ("h100_sendrecv_perf", "send_recv"),
    ("all_gather_perf_1K-8G.txt", "all_gather"), ("broadcast_perf.txt", "broadcast"),
    ("nccl_run.txt", None), ("my_all_reduce_perfect.txt", None)])
def test_collective_from_the_file_name(name, op):
    if op is None and name.startswith("scatter"):
        with pytest.raises(ValueError, match="scatter_perf: the cost model does not price"):
            op_in_name(name, name)
    else:
        assert op_in_name(name, name) == op


def test_file_name_names_the_collective_where_the_output_does_not(tmp_path):
    """The thanosNotes output has no collective line; a copy named for reduce_scatter_perf is
    priced as reduce_scatter, and --op still wins."""
    source = NCCL_TESTS / "thanosNotes_1node_8xA100-SXM4-80GB_mpirun8proc_all_reduce_perf_8B-4G.txt"
    assert read_header(source.read_text().splitlines()).op is None
    path = tmp_path / "a100_reduce_scatter_perf.txt"
    path.write_text(source.read_text())
    out = _published_path(path)
    assert (out["settings"]["op"], out["sources"]["op"]) == ("reduce_scatter", "file name")
    out = _published_path(path, "--op", "all_gather")
    assert (out["settings"]["op"], out["sources"]["op"]) == ("all_gather", "--op")


def test_reduce_is_priced_as_its_broadcast(tmp_path):
    """NCCL tunes reduce and broadcast alike (rings only, one formula in src/graph/tuning.cc):
    the broadcast run's table renamed to reduce_perf gets the model's broadcast figures."""
    source = NCCL_TESTS / "h800_1node_8xH800_g8_nccl2183_broadcast_perf_4B-2G.txt"
    topology = DATA / "nvidia_smi_topo" / "llmSetupGuide_8xGPU_NV8_4xmlx5_2numa.txt"
    reduce = tmp_path / "h800_reduce_perf.txt"
    reduce.write_text(source.read_text().replace("float    none       0", "float     sum       0")
                      .replace("broadcast_perf", "reduce_perf"))
    buf = io.StringIO()
    outs = {}
    for name, path in (("broadcast", tmp_path / "h800_broadcast_perf.txt"), ("reduce", reduce)):
        if name == "broadcast":
            path.write_text(source.read_text())
        with contextlib.redirect_stdout(buf):
            assert main(["bench", "--published", str(path), "--topology", str(topology),
                         "--json", "--sm", "90"]) == 0
        outs[name] = json.loads(buf.getvalue())
        buf.seek(0)
        buf.truncate()
    assert outs["reduce"]["settings"]["op"] == "reduce"
    strip = [{k: v for k, v in r.items() if k != "op"} for r in outs["broadcast"]["rows"]]
    assert [{k: v for k, v in r.items() if k != "op"} for r in outs["reduce"]["rows"]] == strip
    assert {r["algorithm"] for r in outs["reduce"]["rows"]} == {"ring"}


@pytest.mark.parametrize("zeros", [1, 2])
def test_rows_of_zero_bytes_are_left_out(tmp_path, zeros):
    """-b 0 adds a row NCCL never launches a kernel for (0.1 us): not a collective to price.
    all_gather -b 8 on 2 ranks prints two (8 and 16 B round down to 0 per rank), which read as
    a second run's rows."""
    first = "           8             2     float     sum      -1    34.84"
    zero = ("           0             0     float     sum      -1     0.11    0.00    0.00       0"
            "     0.10    0.00    0.00       0\n")
    path = _derive(tmp_path, G8_ALLREDUCE, (first, zero * zeros + first))
    assert [r["size"] for r in _published_path(path)["rows"]] == \
        [r["size"] for r in _published_path(G8_ALLREDUCE)["rows"]]


# The table header nccl-tests prints from 2.13 on (NVIDIA/nccl-tests src/util.cu).
HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong"
          "     time   algbw   busbw #wrong\n")


def _rows(text: str) -> list[tuple[int, float, float]]:
    lines = unlabelled(text.splitlines())
    return [(p.size, p.time_us, p.busbw) for p in read_table(lines, op="all_reduce",
                                                             algorithm=None)]


def test_tables_before_nccl_tests_2_0_time_in_milliseconds():
    """nccl-tests before 2.0 (tag v1.0.0, src/common.cu: 'deltaSec * 1.0E3'; header 'bytes N
    type op'; rank lines without Pid) timed in ms. The rows are a 2 x RTX 2080 Ti run of that
    version kept in a public notes file; each row's algbw (size / time) says ms."""
    text = ("#   Rank  0 on       ncrh device  0 [0x05] GeForce RTX 2080 Ti\n"
            "#   Rank  1 on       ncrh device  1 [0x06] GeForce RTX 2080 Ti\n"
            "#      bytes             N    type      op     time  algbw  busbw      res     time"
            "  algbw  busbw      res\n"
            "      262144         65536   float     sum    0.092   2.85   2.85       N/A    0.092"
            "   2.85   2.85      N/A\n"
            "     1048576        262144   float     sum    0.293   3.58   3.58       N/A    0.294"
            "   3.57   3.57      N/A\n"
            " Out of bounds values : 0 OK\n")
    header = read_header(text.splitlines())
    assert (header.hosts, header.ranks_per_host, header.gpu_names) == \
        (("ncrh",), 2, ("GeForce RTX 2080 Ti",))
    assert _rows(text) == [(262144, 92.0, 2.85), (1048576, 293.0, 3.58)]
    for (size, time_us, _), algbw in zip(_rows(text), (2.85, 3.58), strict=True):
        assert size / time_us / 1e3 == pytest.approx(algbw, abs=0.005)


def test_rows_broken_by_nccl_debug_messages():
    """NVIDIA/nccl#1453 (NCCL_DEBUG_SUBSYS=TUNING under a '[0] ' launcher label): a message per
    call lands inside the row nccl-tests prints in pieces, so the out-of-place cells follow the
    size's line after the messages and the in-place cells end the row later; a WARN starts on a
    new line of its own (NCCL prints it after a newline), ending the row's line."""
    def info(size):
        return f"[0] h100clust-worker-1:497888:497888 [0] NCCL INFO {size} Bytes -> Algo 0 " \
               "proto 0 time 25.229528\n"
    text = HEADER + "".join(
        f"[0] {size:12d}  {size // 4:12d}     float     sum      -1{info(size)}{info(size)}"
        f"[0]     {oop}    0.00    {busbw}      0{info(size)}[0]     62.05    0.00    0.01"
        "      0\n" for size, oop, busbw in ((256, "61.90", "0.01"), (512, "62.40", "0.02")))
    text += ("        1024           256     float     sum      -1\n"
             "h100clust-worker-1:497888:497901 [0] misc/socket.cc:50 NCCL WARN socketProgress\n"
             "    63.10    0.02    0.03       0    62.90    0.02    0.03       0\n")
    assert _rows(text) == [(256, 61.9, 0.01), (512, 62.4, 0.02), (1024, 63.1, 0.03)]


def test_a_run_cut_short_keeps_its_finished_rows(tmp_path, capsys):
    """A run that hung at its last size (NVIDIA/nccl#1184: stuck at 1048576, then killed)
    leaves that row unfinished and the launcher's words after it; the rows before are priced.
    A row cut short before another stays an error."""
    done = "      524288        131072     float     sum      -1    663.1    0.79    0.79      0" \
           "    569.4    0.92    0.92      0\n"
    stuck = "     1048576        262144     float     sum      -1\n"
    killed = "slurmstepd: error: *** STEP 1.0 CANCELLED DUE TO TIME LIMIT ***\n" \
             "2 total processes killed (some possibly by mpirun during cleanup)\n"
    assert _rows(HEADER + done + stuck + killed) == [(524288, 663.1, 0.79)]
    with pytest.raises(ValueError, match=r"<text>:2: nccl-tests row: got 5 columns"):
        _rows(HEADER + stuck + done)


def test_several_runs_in_one_file_are_refused():
    """Processes that each ran alone (NVIDIA/nccl-tests#107, #213: binaries without MPI=1
    under mpirun) print a header each, rank 0 on every host; outputs saved one after another
    hold a table each, whose sizes need not repeat. Priced as one run, both would be wrong."""
    rank = "#  Rank  0 Group  0 Pid {} on {} device  0 [0x00] Tesla V100-SXM2-16GB\n"
    with pytest.raises(ValueError, match=r"<text>:2: rank 0 again \(first on line 1\): the "
                                         "output holds the headers of several runs"):
        read_header((rank.format(1320, "ip-a") + rank.format(2066, "ip-b")).splitlines())
    row = "{:12d}  {:12d}     float     sum      -1    35.15    0.23    0.23       0    30.33" \
          "    0.27    0.27       0\n"
    two = HEADER + row.format(8192, 2048) + "# Collective test starting: all_gather_perf\n" + \
        HEADER + row.format(16384, 4096)
    with pytest.raises(ValueError, match=r"<text>:4: a second nccl-tests table \(the first on "
                                         "line 1\\)"):
        _rows(two)


def test_a_row_garbled_by_other_processes_is_refused():
    """Without --tag-output, mpirun passes on each process's output in chunks, so another
    rank's NCCL INFO line can break into a row mid-number (awslabs/awsome-distributed-ai#408
    dropped srun -u for such mangled output): the row's time then reads 5.40, the rest of
    195.40, and its algbw 171.72. Its algbw x time / size (0.028) strays from the table's (1:
    nccl-tests' algbw is size / time), as does a row whose cells swapped columns. Rows of an
    8-GPU all_reduce in kvcache-ai/Mooncake#3484; each agrees: 1048576 B / 27.76 us = 37.77
    GB/s, busbw = 1.75 x."""
    good = ("     1048576        262144     float     sum      -1    27.76   37.78   66.11       0"
            "    27.49   38.15   66.76       0\n"
            "     2097152        524288     float     sum      -1    40.66   51.58   90.27       0"
            "    40.36   51.97   90.94       0\n"
            "     4194304       1048576     float     sum      -1    53.24   78.78  137.87       0"
            "    52.85   79.36  138.88       0\n")
    mangled = ("    33554432       8388608     float     sum      -1    19node-2:3456:3470 [5] NCCL"
               " INFO Channel 12/0 : 13[5] -> 5[5] [send] via NET/IB/3/GDRDMA\n"
               "5.40  171.72  300.51       0    195.40  171.73  300.52       0\n")
    assert [r[0] for r in _rows(HEADER + good)] == [1048576, 2097152, 4194304]
    with pytest.raises(ValueError, match=r"<text>:5: nccl-tests row: algbw x time / size is "
                                         r"0.02764, the table's rows 1 \(header on line 1\)"):
        _rows(HEADER + good + mangled)
    shifted = good.replace("   -1    40.66   51.58", "   -1    51.58   40.66")
    with pytest.raises(ValueError, match=r"<text>:3: nccl-tests row: busbw / algbw is 2.22, "):
        _rows(HEADER + shifted)


def test_ranks_split_into_groups_are_refused(tmp_path, capsys):
    """NCCL_TESTS_SPLIT_MASK=0x7 on 2 hosts x 8 processes (as AWS's and Google's nccl-tests
    recipes run it) gives eight groups of one GPU per host, each running the collective at once;
    the table is their average (NVIDIA/nccl-tests#234), not one collective over 16 ranks."""
    lines = ALLTOALL_2X8.read_text().splitlines()
    at = [i for i, ln in enumerate(lines) if "Group  0 Pid" in ln]
    for k, i in enumerate(at):
        lines[i] = lines[i].replace("Group  0", f"Group  {k & 7}")
    (tmp_path / "split.txt").write_text("\n".join(lines) + "\n")
    err = _error(capsys, "--published", tmp_path / "split.txt", "--topology", H100, *NET)
    assert f"split.txt:{at[1] + 1}: rank line: group 1, but the rank on line {at[0] + 1} is in " \
           "group 0: the run split its ranks into groups (NCCL_TESTS_SPLIT" in err


def test_outputs_saved_on_windows(tmp_path):
    """nccl-tests builds on Windows from 2.19.1 (NVIDIA/nccl-tests b7e251c): Windows
    PowerShell 5.1 saves a `>` redirection as UTF-16 with a byte order mark and CRLF line ends,
    and editors may put a mark before UTF-8; each reads as the plain file does."""
    plain = _published_path(G8_ALLREDUCE)
    text = G8_ALLREDUCE.read_text()
    for name, data in (("utf16.txt", text.replace("\n", "\r\n").encode("utf-16")),
                       ("bom.txt", codecs.BOM_UTF8 + text.encode())):
        (tmp_path / name).write_bytes(data)
        out = _published_path(tmp_path / name)
        assert (out["settings"], out["sources"], out["rows"]) == \
            (plain["settings"], plain["sources"], plain["rows"])


GB200 = DATA / "nvidia_smi_topo" / "PARTIAL_sglang11208_GB200_4xGPU_NV18_6xNIC_gpuNUMAid.txt"
GB200_72 = NCCL_TESTS / "coreweaveNcclTests_GB200-NVL72_1rack_72GPU_18x4_all_reduce_perf_512M-8G.txt"
A100_128 = NCCL_TESTS / "coreweaveNcclTests2022_A100_16node_128GPU_all_reduce_perf_4B-2G.txt"


def test_rank_listing_cut_short_needs_the_runs_hosts(capsys):
    # The output keeps one rank line, "Rank 71": it was priced as one host of one rank (every
    # model time 0.0 us), exit 0, and --hosts 18 was refused as contradicting the rank lines.
    gb200 = ["--topology", GB200, "--sm", "100", "--nvlink-domain-hosts", "18"]
    err = _error(capsys, "--published", GB200_72, *gb200)
    assert "its rank lines list fewer ranks than the run's 72 (up to rank 71: a listing cut " \
           "short), but 1 host(s) (default) x 4 ranks per host (every GPU of --topology) make 4" \
           in err
    out = _published(capsys, GB200_72, GB200, "--sm", "100", "--nvlink-domain-hosts", "18",
                     "--hosts", "18", "--nic-gbit", "400", "--nics", "4")
    assert (out["settings"]["hosts"], out["settings"]["ranks_per_host"]) == (18, 4)
    assert all(row["model_us"] > 0 for row in out["rows"])


def test_rank_lines_the_table_contradicts(capsys):
    # Five rank lines (ranks 0-4) of a 128-rank run: busbw / algbw (1.984) tells 128, not 5.
    err = _error(capsys, "--published", A100_128, "--topology", A100)
    assert "busbw / algbw is 1.9842 at 2147483648 bytes, which all_reduce gives at about 126 " \
           "ranks, but the run is priced at 8: 1 host(s) (default) x 8 ranks per host" in err
    out = _published(capsys, A100_128, A100, "--hosts", "16", "--ranks-per-host", "8",
                     "--nic-gbit", "200", "--nics", "8")
    assert (out["settings"]["hosts"], out["settings"]["ranks_per_host"]) == (16, 8)
    # The same table priced as 2 hosts of 8 contradicts it too.
    err = _error(capsys, "--published", A100_128, "--topology", A100, "--hosts", "2",
                 "--nic-gbit", "200", "--nics", "8")
    assert "but the run is priced at 16: 2 host(s) (--hosts)" in err


def test_text_table_gives_no_ratio_for_a_busbw_of_zero(capsys):
    thanos = NCCL_TESTS / "thanosNotes_1node_8xA100-SXM4-80GB_g8_all_reduce_perf_8B-4G.txt"
    assert main(["bench", "--published", str(thanos), "--topology", str(A100)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    eight = next(r for r in rows if r[:1] == ["8"])
    assert eight[4:7] == ["0.00", "0.00", "-"], eight


P4DE = DATA / "nccl_topo_xml" / "aws_p4de.24xlarge_8xA100-80G_topo.xml"
A100_RUN = DATA / "nccl_tests" / "a100_8xSXM_single_node_all_reduce_perf_mlengineering_massaged.txt"


def test_cloud_xml_without_nvlink_warns_and_completes(capsys):
    """AWS's p4de file leaves NVLink out, as clouds do: read as written it priced the 8 A100
    SXM over PCIe (7 GB/s against a published 229 at 1 GiB) without a word. The reference for
    the completed file is the nvidia-smi matrix of the same board."""
    as_read = _published(capsys, A100_RUN, P4DE, "--sm", "80")
    assert "left out as clouds do" in as_read["nvlink_warning"]
    assert "--nvlink complete" in as_read["nvlink_warning"]
    assert as_read["settings"]["nvlink"] == "file"
    completed = _published(capsys, A100_RUN, P4DE, "--sm", "80", "--nvlink", "complete")
    assert completed["settings"]["nvlink"] == "complete"
    assert completed["nvlink_warning"].startswith("NCCL XML without NVLink")
    board = _published(capsys, A100_RUN, A100, "--sm", "80")
    assert board["nvlink_warning"] is None
    big = {r["size"]: r["model_busbw"] for r in board["rows"] if r["size"] >= 256 << 20}
    assert big
    for row in completed["rows"]:
        if row["size"] in big:
            assert row["model_busbw"] == pytest.approx(big[row["size"]], rel=0.05), row
    for row in as_read["rows"]:
        if row["size"] in big:
            assert row["model_busbw"] < 0.1 * big[row["size"]], row


def test_nvlink_needs_published(capsys):
    assert "--nvlink: applies to --published OUTPUT only" in _error(capsys, "--nvlink", "complete")
