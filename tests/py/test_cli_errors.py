# SPDX-License-Identifier: Apache-2.0
"""Every error a user can cause through `python -m torch_topo`: exit status 2 and one line on
stderr that names the problem (no usage block, no traceback, nothing on stdout)."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import signal
import subprocess
import sys

import pytest
import torch
from json_position import position
from planner_support import DATA, DGX1

from torch_topo import _C
from torch_topo.cli import main
from torch_topo.config import TopoConfig

P4D = DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml"


@pytest.fixture
def env(monkeypatch, tmp_path):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    # A host without GPUs whatever machine runs the tests: NVML fails, the rest is live.
    monkeypatch.setattr(_C, "probe_host", lambda: _C._test_probe_host(["nvml"]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    report = tmp_path / "shown.json"
    report.write_text(json.dumps({"schema": "torch-topo-show/1", "gpu_count": 0}))
    (tmp_path / "cluster.json").write_text(_C.planner_cluster_json(path=str(DGX1), hosts=2))
    # The verbs' own --json summaries, as a user would save them by mistake.
    for name, argv in (("probed", ["probe", "--json"]),
                       ("converted", ["convert", str(DGX1), "--to", "json", "--json"])):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        (tmp_path / f"{name}.json").write_text(out.getvalue())
    return monkeypatch, tmp_path


CASES = [
    # (argv, environment, fragment of the message)
    ([], {}, "the following arguments are required: VERB"),
    (["nope"], {}, "invalid choice: 'nope'"),
    (["show", "--bogus"], {}, "unrecognized arguments: --bogus"),
    # The argument or option at fault (was: the core's function, loadTopologyFile or writeNcclXml).
    (["show", "{tmp}/missing.xml"], {},
     "error: FILE: cannot open '{tmp}/missing.xml', expected a readable topology file"),
    # The OS's own words for reading a directory (was: "unknown topology format" at 1:1).
    (["show", "{tmp}"], {}, f"error: FILE: cannot read '{{tmp}}': {os.strerror(errno.EISDIR)}"),
    # Named FILE, as show names it (was: the Python API's argument, "topology: ...").
    (["plan", "{tmp}", "--mesh", "tp=2"], {},
     f"error: FILE: cannot read '{{tmp}}': {os.strerror(errno.EISDIR)}"),
    (["doctor", "{tmp}"], {}, f"error: FILE: cannot read '{{tmp}}': {os.strerror(errno.EISDIR)}"),
    (["plan", "{tmp}/missing.xml", "--mesh", "tp=2"], {},
     "error: FILE: {tmp}/missing.xml: no such file"),
    (["plan", str(DGX1), "--mesh", "dp=4,tp=4"], {}, "error: --mesh: product of sizes"),
    (["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--traffic", "tp=1e9"], {},
     "error: --traffic: "),
    # An endless device stops at the size limit (was: MemoryError after exhausting memory).
    (["show", "/dev/zero"], {}, "bytes, expected at most"),
    (["show", "{tmp}/shown.json"], {}, "this is the report of `python -m torch_topo show --json`"),
    # The probe's and convert's summaries had no schema: "field schema: got '', expected".
    (["show", "{tmp}/probed.json"], {}, "this is the report of `python -m torch_topo probe --json`"),
    (["plan", "{tmp}/converted.json", "--mesh", "tp=2"], {},
     "this is the report of `python -m torch_topo convert --json`"),
    (["show"], {"TORCH_TOPO_FILE": "{tmp}/shown.json"}, "not a topology"),
    # A cluster file names the verbs that read one (plan and doctor do: below).
    (["show", "{tmp}/cluster.json"], {}, "plan, doctor and torch_topo.plan read cluster files"),
    (["convert", "{tmp}/cluster.json", "--to", "json"], {}, "expected one host; plan, doctor"),
    (["convert", str(DGX1)], {}, "the following arguments are required: --to"),
    (["convert", str(DGX1), "--to", "yaml"], {}, "argument --to: invalid choice: 'yaml'"),
    (["convert", str(DGX1), "--to", "nccl-xml"], {},
     f"error: --to nccl-xml: topology '{DGX1}' has no physical graph"),
    # The option, the path and the OS's reason (was: "[Errno 2] No such file ...", no option).
    (["convert", str(P4D), "--to", "json", "-o", "{tmp}/no/such/dir.json"], {},
     f"error: -o: cannot write '{{tmp}}/no/such/dir.json': {os.strerror(errno.ENOENT)}\n"),
    (["probe", "-o", "{tmp}/no/such/dir.json"], {},
     f"error: -o: cannot write '{{tmp}}/no/such/dir.json': {os.strerror(errno.ENOENT)}\n"),
    (["probe", "-o", "{tmp}"], {}, f"error: -o: cannot write '{{tmp}}': {os.strerror(errno.EISDIR)}\n"),
    # Taken as no -o: the topology went to stdout.
    (["probe", "-o", ""], {}, "error: argument -o/--output: got '', expected a file name"),
    (["convert", str(DGX1), "--to", "json", "-o", " "], {},
     "error: argument -o/--output: got ' ', expected a file name"),
    (["plan", str(DGX1)], {}, "the following arguments are required: --mesh"),
    (["plan", str(DGX1), "--mesh", "dp=3,tp=2"], {}, "mesh: product of sizes dp=3 x tp=2 = 6"),
    (["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--hosts", "x"], {},
     "argument --hosts: invalid int value: 'x'"),
    (["plan", str(DGX1), "--mesh", "dp=4,tp=2", "--traffic", "tp=1"], {},
     "traffic: dimension 'dp': got no bytes"),
    (["plan", "--mesh", "tp=2"], {}, "--mesh: the live probe of this host (probe:"),
    (["plan", "--mesh", "tp=2"], {"TORCH_TOPO_NOPE": "1"}, "unknown variable TORCH_TOPO_NOPE"),
    (["plan", "--mesh", "tp=2"], {"TORCH_TOPO_NCCL_HINTS": "maybe"},
     "TORCH_TOPO_NCCL_HINTS: got 'maybe'"),
    (["doctor", "--hosts", "0"], {}, "--hosts: got 0, expected >= 1"),
    (["doctor", str(DGX1), "--kv-heads", "0"], {}, "--kv-heads: got 0, expected >= 1"),
    (["doctor", "--mesh", "tp=2"], {}, "found no GPU to place a mesh on"),
    (["doctor", str(DGX1), "--mesh", "tp"], {}, "--mesh: got 'tp', expected NAME=SIZE"),
    # Checked before the source is read, so without FILE too (the live probe has no GPU here).
    (["doctor", "--nvlink-domain-hosts", "0"], {},
     "--nvlink-domain-hosts: got 0, expected an int >= 1 and <= 16384 (hosts per NVLink domain)"),
    (["plan", "--mesh", "tp=2", "--nvlink-domain-hosts", "0"], {},
     "--nvlink-domain-hosts: got 0, expected an int >= 1 and <= 16384 (hosts per NVLink domain)"),
    (["doctor", str(DGX1), "--hosts", "2", "--nvlink-domain-hosts", "x"], {},
     "argument --nvlink-domain-hosts: invalid int value: 'x'"),
    (["plan", str(DGX1), "--mesh", "tp=2", "--nvlink-domain-hosts", "1.5"], {},
     "argument --nvlink-domain-hosts: invalid int value: '1.5'"),
    (["bench"], {}, "no CUDA device here: pass --procs N"),
    (["bench", "--procs", "0"], {}, "argument --procs: got 0, expected >= 1"),
    (["bench", "--min-bytes", "lots"], {}, "argument --min-bytes: got 'lots'"),
    (["bench", "--min-fraction", "2"], {}, "argument --min-fraction: got 2, expected a number"),
    (["bench", "--collectives", "gossip"], {}, "invalid choice: 'gossip'"),
    (["bench", "--topology", "{tmp}/missing.xml", "--procs", "2"], {},
     "error: --topology: cannot open '{tmp}/missing.xml'"),
    (["bench", "--procs", "2"], {"RANK": "0", "WORLD_SIZE": "2"}, "drop --procs under torchrun"),
]


@pytest.mark.parametrize("argv, environ, fragment", CASES,
                         ids=[" ".join(c[0])[:60] or "(no verb)" for c in CASES])
def test_user_error_is_one_line_and_exit_2(env, capsys, argv, environ, fragment):
    monkeypatch, tmp = env
    for key, value in environ.items():
        monkeypatch.setenv(key, value.format(tmp=tmp))
    assert main([a.format(tmp=tmp) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("torch_topo") and ": error: " in err, err
    assert fragment.format(tmp=tmp) in err, err
    # The native core's "[csrc/FILE:LINE]" is for the Python API's tracebacks, not the CLI.
    assert "[csrc/" not in err and not err.rstrip().endswith("]"), err


@pytest.mark.parametrize("verb", ["bench", "convert", "doctor", "plan", "probe", "show"])
def test_an_unknown_option_is_named_with_its_verb(env, capsys, verb):
    # The README promises `torch_topo VERB: error: ...`; an option the verb does not know
    # reached the top parser, which printed `torch_topo: error:` and pointed at the top help.
    required = {"convert": [str(DGX1), "--to", "json"], "plan": [str(DGX1), "--mesh", "tp=2"]}
    assert main([verb, *required.get(verb, []), "--bogus"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"torch_topo {verb}: error: unrecognized arguments: --bogus; "
                   f"see `python -m torch_topo {verb} --help`\n")


def test_an_unknown_option_before_the_verb_is_the_top_parsers(env, capsys):
    # `--json show FILE` was refused by show ("unrecognized arguments: --json; see ... show
    # --help"), whose help lists --json: the option was given to the top parser, not to show.
    assert main(["--json", "show", str(DGX1)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("torch_topo: error: unrecognized arguments: --json; "
                   "see `python -m torch_topo --help`\n")


def test_a_misspelt_build_variable_is_told_the_variables_accepted(env, capsys):
    # The list named the config's variables only, so TORCH_TOPO_BUILD_CUD=0 read as if no
    # build switch existed; every name from_env accepts is now listed.
    monkeypatch, _ = env
    monkeypatch.setenv("TORCH_TOPO_BUILD_CUD", "0")
    assert main(["show", str(DGX1)]) == 2
    err = capsys.readouterr().err
    listed = set(re.findall(r"TORCH_TOPO_[A-Z_]+", err.split("expected one of", 1)[1]))
    assert "TORCH_TOPO_BUILD_CUDA" in listed
    for var in listed:  # each name offered is one the config takes
        TopoConfig.from_env({var: ""})
    with pytest.raises(ValueError, match="unknown variable"):
        TopoConfig.from_env({"TORCH_TOPO_BUILD_CUD": ""})


@pytest.mark.parametrize("argv", [["convert", str(P4D), "--to", "json", "--json"],
                                  ["doctor", str(P4D), "--json"]], ids=lambda a: a[0])
def test_json_help_names_every_key_the_verb_prints(env, capsys, argv):
    # convert's help named a key it does not print ("format") and left out three; doctor's
    # left out two.
    assert main(argv) in (0, 1)
    printed = json.loads(capsys.readouterr().out)
    assert main([argv[0], "--help"]) == 0
    json_help = capsys.readouterr().out.split("  --json", 1)[1]  # the last option listed
    named = set(re.findall(r"[a-z_]+", json_help))
    keys = set(printed)
    if "findings" in printed:
        keys |= set(printed["findings"][0])
    assert keys <= named, sorted(keys - named)
    assert "format" not in named or "format" in keys


def test_the_verbs_a_cluster_file_error_names_read_it(env, capsys):
    _, tmp = env
    cluster = str(tmp / "cluster.json")
    assert main(["plan", cluster, "--mesh", "dp=2,tp=8"]) == 0
    assert main(["doctor", cluster]) in (0, 1)  # findings, not a refusal
    assert "error" not in capsys.readouterr().err


def test_native_errors_name_their_source_inside_csrc():
    # Whatever path the build compiled from (a ccache'd CI clone compiles through ../..).
    from torch_topo.topology import load_topology

    with pytest.raises(ValueError, match=r"^load_topology: path: cannot open '/nonexistent/x', "
                                         r".* \[csrc/topo/loader\.cpp:\d+\]$"):
        load_topology("/nonexistent/x")


def test_help_still_prints_usage_and_exits_0(capsys):
    assert main(["plan", "--help"]) == 0
    assert "--mesh" in capsys.readouterr().out


def test_module_entry_point_usage_error_is_one_line(tmp_path):
    # cwd outside the checkout, as in test_cli_topology's entry-point test.
    proc = subprocess.run([sys.executable, "-m", "torch_topo", "plan"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "required: --mesh" in proc.stderr and "Traceback" not in proc.stderr


def _edit(*keys, value=None, copy_from=None):
    def apply(doc):
        target = doc
        for key in keys[:-1]:
            target = target[key]
        if copy_from is not None:
            source = doc
            for key in copy_from:
                source = source[key]
            value_ = source
        else:
            value_ = value
        target[keys[-1]] = value_
    return apply


# Hand edits of a file `convert --to json` wrote from a real NCCL XML: each breaks what every
# reader guarantees (distinct GPUs and NUMA ids, cpulists, X on the diagonal only, the same
# path both ways, bus ids of PCI form, NUMA nodes that are listed) and was read without a word;
# now exit 2 naming the field.
JSON_EDITS = [
    ("gpus[1].index", _edit("gpus", 1, "index", copy_from=("gpus", 0, "index"))),
    ("gpus[1].bus_id", _edit("gpus", 1, "bus_id", copy_from=("gpus", 0, "bus_id"))),
    ("numa_nodes[1].id", _edit("numa_nodes", 1, "id", copy_from=("numa_nodes", 0, "id"))),
    ("numa_nodes[0].cpus", _edit("numa_nodes", 0, "cpus", value="0-")),
    ("gpus[0].cpu_affinity", _edit("gpus", 0, "cpu_affinity", value="twelve")),
    ("gpu_paths[0][1]", _edit("gpu_paths", 0, 1, "cls", value="X")),
    ("gpu_paths[2][2]", _edit("gpu_paths", 2, 2, "cls", value="SYS")),
    ("gpu_paths[0][1]", _edit("gpu_paths", 0, 1, value="NV12")),
    ("graph.links[0].lanes", _edit("graph", "links", 0, "lanes", value=2**64 - 1)),
    ("gpus[2].bus_id", _edit("gpus", 2, "bus_id", value="GPU2")),
    # Written as "GPU\u00b2": the escape makes the text longer than the value.
    ("gpus[2].bus_id", _edit("gpus", 2, "bus_id", value="GPU\u00b2")),
    ("nics[0].bus_id", _edit("nics", 0, "bus_id", value="0000:10:1C.0")),
    ("gpus[3].numa_node", _edit("gpus", 3, "numa_node", value=5)),
    ("gpu_paths[1][2]", _edit("gpu_paths", 2, 1, "latency_us", value=3.5)),
]


@pytest.mark.parametrize("field, edit", JSON_EDITS, ids=[f"{i}-{f}" for i, (f, _) in
                                                        enumerate(JSON_EDITS)])
def test_inconsistent_json_edit_names_the_field(env, capsys, field, edit):
    _, tmp = env
    written = tmp / "host.json"
    assert main(["convert", str(P4D), "--to", "json", "-o", str(written)]) == 0
    capsys.readouterr()
    doc = json.loads(written.read_text())
    assert main(["show", str(written)]) == 0  # the unedited file is fine
    capsys.readouterr()
    edit(doc)
    edited = tmp / "edited.json"
    edited.write_text(json.dumps(doc, indent=1))
    assert main(["show", str(edited)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    # One value a line: the error points at the value of the field it names.
    assert f"{edited}:{position(doc, field, indent=1)}: field (root).{field}: got " in err, err
    # A value past 64-bit signed is quoted as the file has it, not wrapped negative.
    if field.endswith("lanes"):
        assert str(2**64 - 1) in err, err


@pytest.mark.parametrize("unbuffered", ["1", None])
def test_closed_stdout_is_not_an_error(tmp_path, unbuffered):
    # `show FILE | head` closes the pipe early; the read end is closed before the child writes,
    # so every write fails with EPIPE whatever the timing. Without PYTHONUNBUFFERED (a user's
    # shell) the short output is still in the buffer when the verb returns.
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    try:
        proc = subprocess.run([sys.executable, "-m", "torch_topo", "show", str(DGX1)],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
                              cwd=tmp_path, env=env)
    finally:
        os.close(write_end)
    assert proc.stderr == ""
    assert proc.returncode == 128 + signal.SIGPIPE
