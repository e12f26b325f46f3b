# SPDX-License-Identifier: Apache-2.0
"""Tests of `doctor` on the live host (no FILE) and of a pinned file checked against the live
probe: this CPU machine's own probe (no GPU), injected source failures, and live probes played by
real files from tests/data (path classes read off the files by hand)."""

from __future__ import annotations

import json

import pytest
from planner_support import DATA, DGX1

from torch_topo import _C, load_topology
from torch_topo.cli import main
from torch_topo.doctor import diagnose

P4D = DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml"
DGX2 = DATA / "hwloc" / "hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml"
# 8x A100 PCIe: NV12 pairs (0,1), (2,3), (4,5), (6,7); NODE inside a socket, SYS across.
PCIE = DATA / "nvidia_smi_topo" / "ncclTests178_8xA100-PCIe_NV12pairs_NODE_SYS.txt"
# 8x A100 SXM: NV12 between every pair (NVSwitch).
SXM = DATA / "nvidia_smi_topo" / "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt"


@pytest.fixture
def env(monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "CUDA_DEVICE_MAX_CONNECTIONS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _play_live(monkeypatch, path) -> None:
    """The live probe answers as the host described by `path`."""
    monkeypatch.setattr(_C, "probe_host", lambda: load_topology(str(path)).native)


def _doctor(capsys, *argv) -> tuple[int, dict]:
    rc = main(["doctor", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _codes(out: dict) -> list[str]:
    return [f["code"] for f in out["findings"]]


def test_without_file_lints_this_cpu_host(env, capsys):
    rc, out = _doctor(capsys)
    assert rc == 0
    assert out["file"] is None
    assert out["source"].startswith("this host (probe:")
    assert _codes(out) == ["live-no-gpus"]  # no NVML here: a note, not a failure
    env.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")  # the environment is still checked
    assert main(["doctor"]) == 1
    text = capsys.readouterr().out
    assert "cuda-device-max-connections" in text
    assert "1 problem(s), 1 note(s) for this host (probe:" in text


def test_without_file_a_failed_probe_source_is_a_finding(env, capsys):
    env.setattr(_C, "probe_host", lambda: _C._test_probe_host(["nvml"]))
    rc, out = _doctor(capsys)
    assert rc == 1
    failed = [f for f in out["findings"] if f["code"] == "probe-source-failed"]
    assert len(failed) == 1 and failed[0]["severity"] == "warning"
    assert failed[0]["message"].startswith("probe:nvml failed: NVML_ERROR_UNKNOWN (injected)")


def test_without_file_a_gpu_host_gets_the_layout_checks_of_its_file(env, capsys):
    _play_live(env, DGX1)
    rc, live = _doctor(capsys, "--mesh", "dp=4,tp=2")
    rc_file, from_file = _doctor(capsys, str(DGX1), "--mesh", "dp=4,tp=2")
    assert rc == rc_file == 1
    assert "tp-weaker-links" in _codes(live)
    assert live["findings"] == from_file["findings"]


def test_without_file_a_mesh_on_a_host_without_gpus_is_a_usage_error(env, capsys):
    assert main(["doctor", "--mesh", "tp=2"]) == 2
    assert "--mesh: the live probe of this host" in capsys.readouterr().err


def _pinned_finding(out: dict) -> dict:
    # pinned-no-nvlink (where the file's NVLink came from) is tested in test_nvlink_completion.
    found = [f for f in out["findings"] if f["code"].startswith("pinned-") and f["code"] != "pinned-no-nvlink"]
    assert len(found) == 1, out["findings"]
    return found[0]


def test_pinned_file_with_another_gpu_count_than_the_live_probe(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(P4D))
    _play_live(env, DGX2)
    rc, out = _doctor(capsys)
    assert rc == 1 and out["file"] == str(P4D)
    f = _pinned_finding(out)
    assert (f["code"], f["severity"]) == ("pinned-mismatch", "error")
    assert "has 8 GPUs but the live probe of this host found 16" in f["message"]


def test_pinned_file_with_other_bus_ids_than_the_live_probe(env, capsys, tmp_path):
    moved = tmp_path / "p4d_moved.xml"
    moved.write_text(P4D.read_text().replace('busid="0000:a0:1c.0"', 'busid="0000:a0:1a.0"'))
    env.setenv("NCCL_TOPO_FILE", str(moved))
    _play_live(env, P4D)
    f = _pinned_finding(_doctor(capsys)[1])
    assert (f["code"], f["severity"]) == ("pinned-mismatch", "error")
    assert "GPU 6: 0000:a0:1a.0 vs 0000:a0:1c.0" in f["message"]


def test_pinned_file_with_other_path_classes_than_the_live_probe(env, capsys):
    # A pinned PCIe box on a host that probes as an NVSwitch box: 24 of 28 pairs differ; neither
    # nvidia-smi file has bus ids to compare.
    env.setenv("TORCH_TOPO_FILE", str(PCIE))
    _play_live(env, SXM)
    rc, out = _doctor(capsys, "--mesh", "dp=4,tp=2")
    f = _pinned_finding(out)
    assert (f["code"], f["severity"]) == ("pinned-paths-differ", "warning")
    assert rc == 1
    assert "GPUs 0-2: NODE vs NV12; GPUs 0-3: NODE vs NV12; GPUs 0-4: SYS vs NV12" in f["message"]
    assert "and 18 more" in f["message"]  # 6 shown of 24


def test_pinned_file_agreeing_with_the_live_probe(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(P4D))
    _play_live(env, P4D)
    assert not [c for c in _codes(_doctor(capsys)[1]) if c.startswith("pinned-")]


def test_pinned_file_on_this_cpu_host_is_unverified(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(P4D))
    f = _pinned_finding(_doctor(capsys)[1])
    assert (f["code"], f["severity"]) == ("pinned-unverified", "info")


def test_unreadable_file_is_a_parse_error(env, capsys):
    assert main(["doctor", str(DATA / "no-such-topology.xml")]) == 2


def test_pinned_file_gets_nvlink_domains_after_its_nvlink_is_completed(env, capsys):
    # Nebius's XML leaves NVLink out; pinned, doctor checks it with NV18 inferred from the GPU
    # model, and the domains of --nvlink-domain-hosts go on that completed topology. Read as
    # written (FILE), its GPU pairs are PCIe and the same mesh fails on link classes instead.
    nebius = DATA / "nccl_topo_xml" / "nebius_h100_vm_8xH100_8xIB_topo_v1.xml"
    argv = ("--hosts", "2", "--nvlink-domain-hosts", "2", "--mesh", "tp=4,dp=4")
    expected = diagnose(load_topology(nebius, nvlink="complete"), {"tp": 4, "dp": 4}, hosts=2,
                        nvlink_domain_hosts=2, environ={})
    assert [f.code for f in expected] == ["tp-crosses-numa"]
    assert "span NUMA nodes" in expected[0].message  # NV18 everywhere: only the NUMA check
    env.setenv("TORCH_TOPO_FILE", str(nebius))
    rc, out = _doctor(capsys, *argv)
    assert rc == 1
    assert [f for f in out["findings"] if f["code"].startswith("tp-")] == [expected[0].to_dict()]
    env.delenv("TORCH_TOPO_FILE")
    _, as_written = _doctor(capsys, str(nebius), *argv)
    (raw,) = [f for f in as_written["findings"] if f["code"].startswith("tp-")]
    assert "slowest pair SYS" in raw["message"]
