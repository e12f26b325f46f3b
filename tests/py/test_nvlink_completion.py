# SPDX-License-Identifier: Apache-2.0
"""NCCL XML files without NVLink (issue 22, item 3): the cloud files of tests/data read as
written, and completed as for a run (`load_topology(..., nvlink="complete")`): from a live probe
of the same host (faked here: this machine has no NVML), else from the GPU model, else a
warning. After completion the model's 1 GiB all_reduce on those hosts is held against the
published nccl-tests figure of the same GPUs (torch_topo.bench.nccl_tests reads them)."""

from __future__ import annotations

import json

import pytest

from torch_topo import _C
from torch_topo.bench.nccl_tests import BUSBW_GOAL, DATA, SYSTEMS, parse_published
from torch_topo.cli import main
from torch_topo.config import TopoConfig
from torch_topo.plan import resolve_cluster
from torch_topo.probe import probe
from torch_topo.topology import NO_NVLINK_WARNING, Topology, load_topology

XML = DATA / "nccl_topo_xml"
NDV4 = XML / "azure_ndv4_8xA100_topo.xml"
NDV5 = XML / "azure_ndv5_8xH100_topo.xml"
NEBIUS = XML / "nebius_h100_vm_8xH100_8xIB_topo_v1.xml"
# nvidia-smi views of the same boards (NVSwitch: NV12 for A100, NV18 for H100), what NVML
# reports on those hosts.
A100_LIVE = DATA / "nvidia_smi_topo" / "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt"
H100_LIVE = DATA / "nvidia_smi_topo" / "h100_8xSXM_NV18_2socket_mlengineering.txt"
# Published single-host runs of the same GPUs on NVSwitch: DGX A100 / ND A100 v4 class, and
# a DGX H100 class host (NVLS).
A100_RUN = "a100_8xSXM_single_node_all_reduce_perf_mlengineering_massaged.txt"
H100_RUN = "dgxH100class_1node_8xH100_all_reduce_perf_256M-2G.txt"


def _fake_live(path, nvsmi, sm: int, *, reverse: bool = True) -> Topology:
    """The live probe of the host `path` describes: `nvsmi`'s paths under the file's GPU bus
    ids, reversed unless told (so that pairing by position would be wrong), with the GPUs' sm."""
    file = load_topology(path)
    doc = json.loads(load_topology(nvsmi).to_json())
    ids = [g.bus_id for g in file.gpus]
    for gpu, bus in zip(doc["gpus"], reversed(ids) if reverse else ids, strict=True):
        gpu["bus_id"], gpu["sm"] = bus, sm
    doc["source"] = "probe:fake"
    return Topology.from_json(json.dumps(doc), "probe:fake")


def _published_busbw(results: str, size: int = 1 << 30) -> float:
    system = next(s for s in SYSTEMS if s.results == results)
    return next(p.busbw for p in parse_published(system)
                if p.size == size and p.op == "all_reduce" and p.algorithm is None)


def _model_busbw(topology: Topology, size: int = 1 << 30) -> float:
    cluster = resolve_cluster(topology)
    return cluster.estimate("all_reduce", size, [list(range(cluster.world_size))])["bus_bandwidth_gbps"]


def _our_warnings(topology: Topology) -> list[str]:
    return [w for w in topology.warnings if w.startswith(NO_NVLINK_WARNING)]


@pytest.mark.parametrize("path", [NDV4, NDV5, NEBIUS], ids=lambda p: p.name)
def test_read_as_written_by_default(path):
    raw = load_topology(path)
    assert raw.nvlink_origin == "none" and not _our_warnings(raw)
    assert {raw.path(i, j) for i in range(8) for j in range(8) if i != j} <= {"PIX", "PXB", "PHB", "NODE", "SYS"}
    # The defect the issue measured stays visible in the raw reading: PCIe-bound rates.
    assert _model_busbw(raw) < 30


@pytest.mark.parametrize("path, nvsmi, sm, lanes, run", [
    (NDV4, A100_LIVE, 80, 12, A100_RUN),
    (NDV5, H100_LIVE, 90, 18, H100_RUN),
], ids=["ndv4", "ndv5"])
def test_azure_takes_nvlink_from_the_live_probe_of_its_host(path, nvsmi, sm, lanes, run):
    live = _fake_live(path, nvsmi, sm)
    raw = load_topology(path)
    done = load_topology(path, nvlink="complete", live=live)
    assert done.nvlink_origin == "live-probe"
    assert all(done.cell(i, j) == f"NV{lanes}" for i in range(8) for j in range(8) if i != j)
    assert done.bandwidth(0, 1) == live.bandwidth(7, 6)
    # The file's NIC tree stays: GPU-NIC paths as written.
    assert [[done.nic_path(i, k) for k in range(len(raw.nics))] for i in range(8)] == \
        [[raw.nic_path(i, k) for k in range(len(raw.nics))] for i in range(8)]
    (said,) = _our_warnings(done)
    assert path.name in said and "probe:fake" in said
    ratio = _model_busbw(done) / _published_busbw(run)
    assert BUSBW_GOAL[0] <= ratio <= BUSBW_GOAL[1], ratio


def test_nebius_infers_nv18_from_its_gpu_model():
    done = load_topology(NEBIUS, nvlink="complete")
    assert done.nvlink_origin == "inferred"
    assert all(done.cell(i, j) == "NV18" for i in range(8) for j in range(8) if i != j)
    assert {g.sm for g in done.gpus} == {90}
    (said,) = _our_warnings(done)
    assert NEBIUS.name in said and "H100 SXM5" in said and "0x2330" in said
    ratio = _model_busbw(done) / _published_busbw(H100_RUN)
    assert BUSBW_GOAL[0] <= ratio <= BUSBW_GOAL[1], ratio


@pytest.mark.parametrize("path", [NDV4, NDV5], ids=lambda p: p.name)
def test_azure_without_its_live_probe_is_unknown(path):
    # Azure's files name GPUs by PCI class only: no model to infer from; another host's probe
    # (Nebius's bus ids) is not merged.
    other = _fake_live(NEBIUS, H100_LIVE, 90)
    done = load_topology(path, nvlink="complete", live=other)
    assert done.nvlink_origin == "unknown"
    (said,) = _our_warnings(done)
    assert path.name in said and "NVLink unknown" in said
    assert [done.cell(0, j) for j in range(8)] == [load_topology(path).cell(0, j) for j in range(8)]


def test_pcie_cards_are_left_alone():
    done = load_topology(XML / "azure_ncv4_4xA100pcie_topo.xml", nvlink="complete")
    assert done.nvlink_origin == "none" and not _our_warnings(done)


def test_bad_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="nvlink: got 'yes', expected 'file' or 'complete'"):
        load_topology(NEBIUS, nvlink="yes")
    with pytest.raises(ValueError, match="nvlink: got 'no', expected 'file' or 'complete'"):
        resolve_cluster(str(NEBIUS), nvlink="no")


def test_origin_survives_json():
    done = load_topology(NEBIUS, nvlink="complete")
    assert Topology.from_json(done.to_json()).nvlink_origin == "inferred"


def test_pinned_file_is_completed_by_probe():
    cpu_host = Topology(_C.probe_host())  # this machine: no GPU, nothing to merge
    assert probe(TopoConfig(topology_file=str(NEBIUS)), live=cpu_host).nvlink_origin == "inferred"
    live = _fake_live(NDV5, H100_LIVE, 90, reverse=False)
    assert probe(TopoConfig(topology_file=str(NDV5)), live=live).nvlink_origin == "live-probe"


def test_resolve_cluster_completes_on_request():
    raw = resolve_cluster(str(NEBIUS))
    done = resolve_cluster(str(NEBIUS), nvlink="complete")
    assert raw.pair_path(0, 1)[0] != "NV"
    assert done.pair_path(0, 1) == ("NV", 18)


@pytest.fixture
def env(monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "CUDA_DEVICE_MAX_CONNECTIONS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _doctor(capsys) -> tuple[int, dict]:
    rc = main(["doctor", "--json"])
    return rc, json.loads(capsys.readouterr().out)


def _nvlink_finding(out: dict) -> dict:
    (found,) = [f for f in out["findings"] if f["code"] == "pinned-no-nvlink"]
    return found


def test_doctor_reports_inferred_nvlink(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(NEBIUS))
    f = _nvlink_finding(_doctor(capsys)[1])
    assert f["severity"] == "warning"
    assert NEBIUS.name in f["message"] and "NV18" in f["message"] and "H100 SXM5" in f["message"]
    assert "live probe" in f["fix"] and "NCCL_TOPO_DUMP_FILE" in f["fix"]


def test_doctor_reports_unknown_nvlink(env, capsys):
    env.setenv("NCCL_TOPO_FILE", str(NDV4))
    f = _nvlink_finding(_doctor(capsys)[1])
    assert f["severity"] == "warning" and "NVLink unknown" in f["message"]


def test_doctor_notes_nvlink_from_the_live_probe(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(NDV5))
    live = _fake_live(NDV5, H100_LIVE, 90, reverse=False)
    env.setattr(_C, "probe_host", lambda: live.native)
    rc, out = _doctor(capsys)
    f = _nvlink_finding(out)
    assert f["severity"] == "info" and "probe:fake" in f["message"]
    # Completed from this very host, the file agrees with it.
    assert not [x for x in out["findings"] if x["code"] in ("pinned-mismatch", "pinned-paths-differ")]


def test_doctor_on_a_file_with_nvlink_says_nothing_of_it(env, capsys):
    env.setenv("TORCH_TOPO_FILE", str(XML / "PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml"))
    assert not [f for f in _doctor(capsys)[1]["findings"] if f["code"] == "pinned-no-nvlink"]


def test_show_and_plan_say_where_nvlink_came_from(env, capsys):
    assert main(["show", str(NEBIUS)]) == 0
    assert "NVLink: none" in capsys.readouterr().out
    assert main(["show", str(NEBIUS), "--nvlink", "complete", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nvlink_origin"] == "inferred"
    env.setenv("TORCH_TOPO_FILE", str(NEBIUS))
    assert main(["plan", "--mesh", "dp=2,tp=4"]) == 0
    text = capsys.readouterr().out
    assert "NVLink: inferred (" + NO_NVLINK_WARNING in text and "tp: " in text
    assert main(["plan", str(NEBIUS), "--mesh", "dp=2,tp=4", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["nvlink"].startswith("NVLink: none")
    # The bare origin, as show's (plan's JSON had only the line).
    assert planned["nvlink_origin"] == "none"
    assert main(["plan", str(NEBIUS), "--nvlink", "complete", "--mesh", "dp=2,tp=4",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nvlink_origin"] == "inferred"


@pytest.mark.parametrize("path, likely", [(NEBIUS, "probably"), (NDV4, "possibly"),
                                          (NDV5, "possibly")], ids=lambda p: getattr(p, "name", p))
def test_note_of_a_file_read_as_written_says_nvlink_may_be_left_out(path, likely):
    """Read as written, a cloud file's SXM GPUs show no NVLink: the note says it is probably (a
    model the tables name) or possibly (no model) left out, and how to read it completed,
    where 'none between the GPUs' would state a fact the file does not hold."""
    raw = load_topology(path)
    assert raw.nvlink_note() == (f"NVLink: none in the file, {likely} left out as clouds do; "
                                 "--nvlink complete reads the file as NCCL will at run time")
    origin = load_topology(path, nvlink="complete").nvlink_origin
    assert raw.nvlink_left_out()[0] == {"probably": "inferred", "possibly": "unknown"}[likely]
    assert origin == raw.nvlink_left_out()[0]


def test_note_of_pcie_cards_and_switched_files_is_unchanged():
    assert load_topology(XML / "azure_ncv4_4xA100pcie_topo.xml").nvlink_note() == \
        "NVLink: none (none between the GPUs)"
    assert load_topology(H100_LIVE).nvlink_note() == "NVLink: file (as the source gives it)"


def test_nvlink_file_reads_the_pinned_file_as_written_in_show_as_in_plan(env, capsys):
    # Nebius's file lists no <nvlink> element (counted in its text): as written, every GPU
    # pair has 0 NVLink lanes; completed (the default for the pinned file) it has them.
    assert "<nvlink" not in NEBIUS.read_text().lower()
    env.setenv("TORCH_TOPO_FILE", str(NEBIUS))
    assert main(["show", "--nvlink", "file", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["nvlink_origin"] == "none"
    assert all(lanes == 0 for row in shown["nvlink_matrix"] for lanes in row)
    assert main(["plan", "--nvlink", "file", "--mesh", "dp=2,tp=4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nvlink"].startswith("NVLink: none")
    assert main(["show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nvlink_origin"] == "inferred"
