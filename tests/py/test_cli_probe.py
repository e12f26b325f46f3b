# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo probe`: the live host written as torch-topo JSON, and that file read
back by TORCH_TOPO_FILE, `show`, `plan` and `doctor`. Once on this machine's own probe, once on
a live probe played by a real 8-GPU file (the reference: the same verbs run on that file)."""

from __future__ import annotations

import json

import pytest
from planner_support import DATA

from torch_topo import _C, load_topology
from torch_topo.cli import build_parser, main
from torch_topo.cli.show import show_dict
from torch_topo.probe import live_probe

P4D = DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml"
# Everything a topology says; `source` and `format` name where it was read from.
_SAME = ("gpu_count", "gpus", "path_matrix", "nvlink_matrix", "bandwidth_matrix",
         "latency_matrix", "nics", "nic_path_matrix", "numa_nodes")


@pytest.fixture
def env(monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "CUDA_DEVICE_MAX_CONNECTIONS",
                "TORCH_TOPO_NCCL_HINTS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _json(capsys, *argv, rc: int | None = 0) -> dict:
    """The --json object of a verb; rc None: doctor, whose status depends on its findings."""
    code = main([*argv, "--json"])
    assert code == rc if rc is not None else code in (0, 1)
    return json.loads(capsys.readouterr().out)


def _facts(shown: dict) -> dict:
    return {k: shown[k] for k in _SAME}


def test_option_set_is_frozen():
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    assert {s for a in sub.choices["probe"]._actions for s in a.option_strings} == {
        "-h", "--help", "-o", "--output", "--json"}


def test_this_host_round_trips(env, tmp_path, capsys):
    out = tmp_path / "host.json"
    assert main(["probe", "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""  # the topology went to the file
    doc = json.loads(out.read_text())
    assert doc["schema"] == "torch-topo/1" and doc["kind"] == "host"
    live = show_dict(live_probe())
    assert _facts(show_dict(load_topology(out))) == _facts(live)
    assert _facts(_json(capsys, "show", str(out))) == _facts(live)
    # Pinned, it is what `show` without FILE reports: the file keeps the source it names (the
    # probe's), so a copy naming another one tells the file from a fresh probe.
    doc["source"] = "pinned copy"
    out.write_text(json.dumps(doc))
    env.setenv("TORCH_TOPO_FILE", str(out))
    pinned = _json(capsys, "show")
    assert pinned["source"] == "pinned copy" and _facts(pinned) == _facts(live)
    assert _json(capsys, "doctor", rc=None)["file"] == str(out)


def test_stdout_and_summary(env, capsys):
    assert main(["probe"]) == 0
    text = capsys.readouterr().out
    # The live probe's topology, its format "probe" rather than a live probe's "" (a file).
    assert json.loads(text) == {**json.loads(live_probe().to_json()), "format": "probe"}
    summary = _json(capsys, "probe")
    assert summary["output"] is None and summary["content"] == json.loads(text)
    assert summary["gpu_count"] == live_probe().gpu_count


def test_played_gpu_host_round_trips(env, tmp_path, capsys):
    # The live probe answers as a p4d: the file `probe` writes must plan, show and doctor as the
    # p4d's own file does.
    env.setattr(_C, "probe_host", lambda: load_topology(P4D).native)
    out = tmp_path / "p4d.json"
    summary = _json(capsys, "probe", "-o", str(out))
    assert summary["gpu_count"] == 8 and summary["output"] == str(out)
    assert _facts(_json(capsys, "show", str(out))) == _facts(_json(capsys, "show", str(P4D)))
    mesh = ["--mesh", "dp=2,tp=4"]
    want = _json(capsys, "plan", str(P4D), *mesh)
    got = _json(capsys, "plan", str(out), *mesh)
    assert got["mesh"] == want["mesh"] and got["cost"] == pytest.approx(want["cost"], rel=1e-12)
    want_findings = _json(capsys, "doctor", str(P4D), *mesh, rc=None)["findings"]
    assert _json(capsys, "doctor", str(out), *mesh, rc=None)["findings"] == want_findings
    # Pinned and compared with the (same) live host: no mismatch finding, same plan.
    env.setenv("TORCH_TOPO_FILE", str(out))
    pinned = _json(capsys, "doctor", *mesh, rc=None)
    assert pinned["file"] == str(out)
    assert not [f for f in pinned["findings"] if f["code"].startswith("pinned-")]
    assert _json(capsys, "plan", *mesh)["mesh"] == want["mesh"]


def test_show_json_is_a_report_not_a_topology(env, tmp_path, capsys):
    report = tmp_path / "shown.json"
    report.write_text(json.dumps(_json(capsys, "show", str(P4D))))
    assert json.loads(report.read_text())["schema"] == "torch-topo-show/1"
    with pytest.raises(ValueError, match=r"shown.json:1:1: this is the report of `python -m "
                                         r"torch_topo show --json`.*probe -o FILE"):
        load_topology(report)
    env.setenv("TORCH_TOPO_FILE", str(report))
    assert main(["show"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a topology" in err
