# SPDX-License-Identifier: Apache-2.0
"""Tests of `doctor` on the live host (no FILE) and of a pinned file checked against the live
probe: this CPU machine's own probe (no GPU), injected source failures, and live probes played by
real files from tests/data (path classes read off the files by hand)."""

from __future__ import annotations

import json

import pytest
from planner_support import DATA, DGX1

from torch_topo import _C, load_topology
from torch_topo.cli import build_parser, main
from torch_topo.doctor import diagnose
from torch_topo.probe import live_probe
from torch_topo.topology import NO_NVLINK_WARNING, PCIE_ONLY_MATRIX_WARNING

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


@pytest.mark.parametrize(("var", "named"), [
    ("TORCH_TOPO_FILE", "TopoConfig.topology_file (or TORCH_TOPO_FILE)"),
    ("NCCL_TOPO_FILE", "NCCL_TOPO_FILE"),
])
def test_missing_pinned_file_is_named_by_its_variable(env, capsys, var, named):
    missing = str(DATA / "no-such-topology.xml")
    env.setenv(var, missing)
    assert main(["doctor"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"torch_topo doctor: error: {named}: got {missing!r}, expected an "
                            "existing topology file\n")
    # A FILE given wins over the pin, which is then not read at all.
    assert main(["doctor", str(P4D)]) != 2


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


def _show_warnings(capsys, path, *argv) -> list[str]:
    """The reader's warnings on `path` as `show` surfaces them."""
    assert main(["show", str(path), *argv, "--json"]) == 0
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
    # No NUMA Affinity column, and every GPU's CPU affinity 1-1 across the sockets (a cpuset):
    # NUMA nodes unknown, which the checks rest on; rates estimated.
    ("nvidia_smi_topo/sheffield_sharc_DGX-1_8xP100_NV1_4xmlx5_SOCformat.tsv.txt",
     ["warning", "info"]),
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


# Cloud NCCL XMLs without any <nvlink> element: Nebius names its GPUs' PCI device 0x2330 (H100
# SXM5 80GB, NVSwitch board), AWS p4d 0x20b0 (A100 SXM4 40GB); Azure's name no device at all.
NEBIUS = DATA / "nccl_topo_xml" / "nebius_h100_vm_8xH100_8xIB_topo_v1.xml"
NDV4 = DATA / "nccl_topo_xml" / "azure_ndv4_8xA100_topo.xml"
NDV5 = DATA / "nccl_topo_xml" / "azure_ndv5_8xH100_topo.xml"


@pytest.mark.parametrize(("path", "device", "likely"), [
    (NEBIUS, 'device="0x2330"', "probably"), (P4D, 'device="0x20b0"', "probably"),
    (NDV4, None, "possibly"), (NDV5, None, "possibly")], ids=lambda v: getattr(v, "name", v))
def test_nccl_xml_without_nvlink_is_said_to_leave_it_out(env, capsys, path, device, likely):
    text = path.read_text()
    gpus = [line for line in text.splitlines() if 'class="0x030200"' in line]
    assert "<nvlink" not in text and len(gpus) == 8  # 8 GPUs, no NVLink
    assert all((device in g) if device else ('device="' not in g) for g in gpus)
    # What `show` says of it: NVLink none as written, and what completing it assumes.
    assert main(["show", str(path)]) == 0
    assert "NVLink: none" in capsys.readouterr().out
    completed = [w for w in _show_warnings(capsys, path, "--nvlink", "complete")
                 if w.startswith(NO_NVLINK_WARNING)]
    rc, out = _doctor(capsys, str(path))
    assert rc == 1
    (f,) = [f for f in out["findings"] if f["code"] == "file-nvlink-left-out"]
    assert f["severity"] == "warning"
    assert f["message"].startswith(f"NVLink {likely} left out: the checks ran on the file's PCI")
    assert f["message"].endswith(f"`--nvlink complete` reads it as: {completed[0]}")
    assert "--nvlink complete" in f["fix"]


def test_nvlink_complete_checks_a_file_as_the_pinned_file_is(env, capsys):
    argv = ("--mesh", "tp=4,dp=2")
    env.setenv("TORCH_TOPO_FILE", str(NEBIUS))
    _, pinned = _doctor(capsys, *argv)
    env.delenv("TORCH_TOPO_FILE")
    rc, completed = _doctor(capsys, str(NEBIUS), "--nvlink", "complete", *argv)
    assert rc == 1
    # Same layout checks (NV18 everywhere: only NUMA); the NVLink said as a FILE's.
    assert [f for f in completed["findings"] if f["code"] != "file-no-nvlink"] == [
        f for f in pinned["findings"] if not f["code"].startswith("pinned-")]
    (said,) = [f for f in pinned["findings"] if f["code"] == "pinned-no-nvlink"]
    assert [f["message"] for f in completed["findings"] if f["code"] == "file-no-nvlink"] == [
        said["message"]]
    assert "file-nvlink-left-out" not in _codes(completed)
    # As written, the same mesh is faulted on the PCI paths the file gives.
    assert {"file-nvlink-left-out", "tp-crosses-numa"} <= set(_codes(_doctor(capsys, str(NEBIUS), *argv)[1]))


@pytest.mark.parametrize("path", [
    DATA / "nccl_topo_xml" / "azure_ncv4_4xA100pcie_topo.xml",  # A100 PCIe cards (0x20b5)
    DATA / "nccl_topo_xml" / "PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml",
    NO_GPU_XML, SXM], ids=lambda p: p.name)
def test_files_that_leave_no_nvlink_out_are_not_said_to(env, capsys, path):
    assert "file-nvlink-left-out" not in _codes(_doctor(capsys, str(path))[1])


def test_nvlink_option_is_shared_with_show_and_plan(env, capsys):
    sub = next(a for a in build_parser()._actions if a.dest == "verb")
    options = [next((a.choices, a.default, a.help) for a in sub.choices[verb]._actions
                    if "--nvlink" in a.option_strings) for verb in ("show", "plan", "doctor")]
    assert options[0] == options[1] == options[2] and options[0][0] == ("file", "complete")
    # A pinned file is checked as the run reads it: completed; as written only as FILE.
    env.setenv("TORCH_TOPO_FILE", str(NEBIUS))
    assert main(["doctor", "--nvlink", "file"]) == 2
    assert f"--nvlink file: {NEBIUS} is pinned" in capsys.readouterr().err


def _cluster_file(tmp_path, host_json: str, hostnames: list[str]):
    """A cluster file of one host document repeated under `hostnames`."""
    doc = json.loads(_C.planner_cluster_json(text=host_json, hosts=len(hostnames)))
    for host, name in zip(doc["hosts"], hostnames, strict=True):
        host["hostname"] = name
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    return path


def test_cluster_file_of_hosts_without_gpus(env, capsys, tmp_path):
    # Two of this CPU machine's probes, exchanged as a cluster file.
    host = tmp_path / "host.json"
    assert main(["probe", "-o", str(host)]) == 0
    warnings = _show_warnings(capsys, host)
    path = _cluster_file(tmp_path, host.read_text(), ["node0", "node1"])
    rc, out = _doctor(capsys, str(path))
    assert rc == 1
    expected = []
    for name in ("host 0 (node0)", "host 1 (node1)"):
        expected += [("reader-warning", f"{name}: {w}") for w in warnings]
        expected.append(("file-no-gpus", f"{name} holds no GPU: the ranks placed on it have none to run on"))
    assert [(f["code"], f["message"]) for f in out["findings"]
            if f["code"] in ("reader-warning", "file-no-gpus")] == expected
    assert main(["doctor", str(path), "--mesh", "dp=2"]) == 2
    assert f"mesh: {path} holds no GPU to place a mesh on" in capsys.readouterr().err


def test_cluster_file_hosts_keep_their_readers_warnings(env, capsys, tmp_path):
    # `topo -mp` hosts: NVLink unknown and rates estimated, on each host; GPUs, so no error.
    warnings = _show_warnings(capsys, TOPO_MP)
    path = _cluster_file(tmp_path, load_topology(TOPO_MP).to_json(), ["a", ""])
    rc, out = _doctor(capsys, str(path))
    assert rc == 1
    said = sorted(f["message"] for f in out["findings"] if f["code"] in ("reader-warning", "file-no-nvlink"))
    assert said == sorted([f"host 0 (a): {w}" for w in warnings] + [f"host 1: {w}" for w in warnings])
    assert "file-no-gpus" not in _codes(out)


def test_cluster_file_of_unequal_hosts_gets_every_check_but_the_layout(env, capsys, tmp_path):
    # Two `topo -mp` hosts of 3 GPUs, the second playing two ranks: no device mesh fits 3 + 2
    # ranks, so only the layout checks are left out (doctor refused the whole file before).
    # Reference: the findings of the same hosts with every rank, which hold no layout to check
    # either (tp 2 and 4 do not divide 3), and the reader's warnings as show gives them.
    env.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    warnings = _show_warnings(capsys, TOPO_MP)
    equal = _cluster_file(tmp_path, load_topology(TOPO_MP).to_json(), ["a", "b"])
    rc, expected = _doctor(capsys, str(equal))
    doc = json.loads(equal.read_text())
    doc["ranks"] = [r for r in doc["ranks"] if r["host"] == 0 or r["local_gpu"] < 2]
    unequal = tmp_path / "unequal.json"
    unequal.write_text(json.dumps(doc))
    assert _doctor(capsys, str(unequal)) == (rc, {
        **expected, "file": str(unequal), "source": str(unequal),
        "findings": [{"code": "layout-unchecked", "severity": "info",
                      "message": "hosts hold different rank counts (2 and 3): no device mesh "
                                 "fits them, so the layout checks of tp groups did not run",
                      "fix": "give every host the same number of ranks to have the layout of "
                             "a mesh checked"}] + expected["findings"]})
    assert rc == 1
    codes = _codes(expected)
    assert "cuda-device-max-connections" in codes and "nic-speed-assumed" in codes
    said = sorted(f["message"] for f in expected["findings"]
                  if f["code"] in ("reader-warning", "file-no-nvlink"))
    assert said == sorted([f"host 0 (a): {w}" for w in warnings] +
                          [f"host 1 (b): {w}" for w in warnings])
    assert main(["doctor", str(unequal)]) == 1
    assert "[info] layout-unchecked: hosts hold different rank counts (2 and 3)" in \
        capsys.readouterr().out
    # A mesh on them is bad input, naming the option.
    assert main(["doctor", str(unequal), "--mesh", "dp=5"]) == 2
    err = capsys.readouterr().err
    assert ("mesh: got dp=5, but the hosts hold different rank counts (2 and 3); a device mesh "
            "needs the same count on every host (leave out mesh / --mesh") in err


def test_saved_probe_topology_gets_the_file_checks(env, tmp_path):
    # A probe of this CPU machine saved with `probe -o` and read back is a file without GPUs,
    # as its path is; the live probe it was written from keeps the live checks.
    path = tmp_path / "host.json"
    assert main(["probe", "-o", str(path)]) == 0
    saved = load_topology(path)
    assert saved.gpu_count == 0 and saved.format == "probe"
    by_path = diagnose(str(path), environ={})
    assert diagnose(saved, environ={}) == by_path
    assert [f.code for f in by_path] == ["reader-warning"] * len(saved.warnings) + ["file-no-gpus"]
    assert diagnose(live_probe(), environ={}) == []


@pytest.mark.parametrize("kv_heads, severity, says", [
    (2, "warning", "K/V heads are replicated 2x across the group"),  # 4 / 2
    (3, "error", "sp is not a multiple of kv_heads, so K/V heads cannot be replicated evenly"),
])
def test_kv_heads_below_ulysses_says_how_they_replicate(kv_heads, severity, says):
    (found,) = [f for f in diagnose(SXM, {"dp": 2, "sp": 4}, kv_heads=kv_heads, environ={})
                if f.code.startswith("kv-")]
    assert (found.code, found.severity) == ("kv-heads-below-ulysses", severity)
    assert found.message == f"kv_heads={kv_heads} < Ulysses degree sp=4: {says}"


@pytest.mark.parametrize("kv_heads", [0, -1, "2", 2.0, True])
def test_diagnose_refuses_kv_heads_that_are_no_count(kv_heads):
    # 0 divided by zero, -1 warned of "-4x" replication, "2" failed inside a comparison.
    with pytest.raises(ValueError, match=rf"^kv_heads: got {kv_heads!r}, expected an int >= 1$"):
        diagnose(SXM, {"dp": 2, "sp": 4}, kv_heads=kv_heads, environ={})


def test_diagnose_takes_the_mesh_forms_plan_takes():
    as_dict = diagnose(SXM, {"dp": 2, "sp": 4}, kv_heads=2, environ={})
    assert diagnose(SXM, "dp=2,sp=4", kv_heads=2, environ={}) == as_dict
    assert diagnose(SXM, [("dp", 2), ("sp", 4)], kv_heads=2, environ={}) == as_dict
    with pytest.raises(ValueError, match="mesh: got the name 1 in"):
        diagnose(SXM, {1: 8}, environ={})
