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
from torch_topo.topology import PCIE_ONLY_MATRIX_WARNING

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
    # NV18 everywhere: only the NUMA check, and the NVLink the file left out (inferred)
    assert [f.code for f in expected] == ["tp-crosses-numa", "file-no-nvlink"]
    assert "span NUMA nodes" in expected[0].message
    env.setenv("TORCH_TOPO_FILE", str(nebius))
    rc, out = _doctor(capsys, *argv)
    assert rc == 1
    assert [f for f in out["findings"] if f["code"].startswith("tp-")] == [expected[0].to_dict()]
    env.delenv("TORCH_TOPO_FILE")
    _, as_written = _doctor(capsys, str(nebius), *argv)
    (raw,) = [f for f in as_written["findings"] if f["code"].startswith("tp-")]
    assert "slowest pair SYS" in raw["message"]


# `nvidia-smi topo -mp` of 3 GPUs: PCIe paths only, its legend without an NV# line.
TOPO_MP = DATA / "nvidia_smi_topo" / "numaK8sNotes_3xGPU_topo-mp_PCIeOnly_SYS_NODE_2numa.txt"
# Files that hold no GPU: a cloud's NCCL XML skeleton (CPUs and PCI bridges only) and a DGX Spark
# hwloc export without a PCI GPU.
NO_GPU_XML = DATA / "nccl_topo_xml" / "aws_g5.48xlarge_8xA10G_topo.xml"
NO_GPU_HWLOC = DATA / "hwloc" / "hwloc_nvidia_DGX-GB10.xml"


def _show_warnings(capsys, path) -> list[str]:
    """The reader's warnings on `path` as `show` surfaces them."""
    assert main(["show", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["warnings"]


def test_file_with_pcie_only_matrix_warns_that_nvlink_is_unknown(env, capsys):
    warnings = _show_warnings(capsys, TOPO_MP)
    rc, out = _doctor(capsys, str(TOPO_MP))
    assert rc == 1
    (nvlink,) = [f for f in out["findings"] if f["code"] == "file-no-nvlink"]
    assert nvlink["severity"] == "warning"
    assert nvlink["message"].startswith(PCIE_ONLY_MATRIX_WARNING) and nvlink["message"] in warnings
    assert "nvidia-smi topo -m" in nvlink["fix"]
    # Every reader warning once: the NVLink one above, the estimated rates as a note.
    assert sorted(f["message"] for f in out["findings"]) == sorted(warnings)
    assert [f["severity"] for f in out["findings"] if f is not nvlink] == ["info"]
    assert main(["doctor", str(TOPO_MP)]) == 1
    assert f"1 problem(s), 1 note(s) for {TOPO_MP}" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "severities"), [
    # Rows of GPU6, GPU7 and every NIC cut off (pairs assumed SYS); rates estimated.
    ("nvidia_smi_topo/PARTIAL_deepep128_8xGPU_noNVLink_allSYS_10xNIC_PIX.txt",
     ["warning", "info"]),
    # Each of the 4 GPUs lists an NVLink to itself, which the reader drops.
    ("nccl_topo_xml/azure_ncv4_4xA100pcie_topo.xml", ["warning"] * 4),
    # Whole nvidia-smi matrix: only the rates estimated from path classes, as in every such file.
    ("nvidia_smi_topo/a100_8xSXM_NV12_2numa_mlengineering_realigned.txt", ["info"]),
    # No NUMA Affinity column (NUMA nodes told apart by CPU affinity); rates estimated.
    ("nvidia_smi_topo/sheffield_sharc_DGX-1_8xP100_NV1_4xmlx5_SOCformat.tsv.txt", ["info"] * 2),
    # hwloc export without an NVLinkBandwidth matrix (Tesla M2070s have no NVLink).
    ("hwloc/hwloc_HP-SL390sG7_3xTeslaM2070_ConnectX2-IB-class0c06.xml", ["info"]),
])
def test_every_reader_warning_of_a_file_is_a_finding(env, capsys, name, severities):
    warnings = _show_warnings(capsys, DATA / name)
    rc, out = _doctor(capsys, str(DATA / name))
    reader = [f for f in out["findings"] if f["code"] == "reader-warning"]
    assert [f["message"] for f in reader] == warnings
    assert [f["severity"] for f in reader] == severities
    # No layout finding on these files (mesh checks: tp=2 and tp=4): the reader's decide.
    assert rc == (1 if "warning" in severities else 0)


@pytest.mark.parametrize("path", [NO_GPU_XML, NO_GPU_HWLOC], ids=lambda p: p.name)
def test_file_without_gpus_is_an_error(env, capsys, path):
    rc, out = _doctor(capsys, str(path))
    assert rc == 1
    (f,) = [f for f in out["findings"] if f["code"] == "file-no-gpus"]
    assert f["severity"] == "error" and "holds no GPU" in f["message"]
    assert main(["doctor", str(path)]) == 1
    assert "[error] file-no-gpus: the file holds no GPU" in capsys.readouterr().out
    # A mesh has nothing to go on: bad input, named as such.
    assert main(["doctor", str(path), "--mesh", "tp=2"]) == 2
    assert f"mesh: {path} holds no GPU to place a mesh on" in capsys.readouterr().err


def test_nccl_xml_without_gpus_keeps_the_readers_word_for_it(env, capsys):
    assert "<gpu" not in NO_GPU_XML.read_text()  # the file by hand: CPUs and PCI bridges only
    rc, out = _doctor(capsys, str(NO_GPU_XML))
    assert [(f["code"], f["severity"]) for f in out["findings"]] == [
        ("reader-warning", "warning"), ("file-no-gpus", "error")]
    assert [out["findings"][0]["message"]] == _show_warnings(capsys, NO_GPU_XML)


def test_pinned_file_without_gpus_is_an_error_and_its_nvlink_said_once(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(NO_GPU_XML))
    codes = _codes(_doctor(capsys)[1])
    assert "file-no-gpus" in codes and "pinned-unverified" in codes  # this CPU host
    # A pinned -mp matrix: its NVLink warning is pinned-no-nvlink's, not a second finding.
    env.setenv("TORCH_TOPO_FILE", str(TOPO_MP))
    findings = _doctor(capsys)[1]["findings"]
    said = [f["code"] for f in findings if f["message"].startswith(PCIE_ONLY_MATRIX_WARNING)]
    assert said == ["pinned-no-nvlink"]
