# SPDX-License-Identifier: Apache-2.0
"""probe(): the live probe against /sys, its isolation of failing sources (injected through
_C._test_probe_host) up to init_process_group("topo"), pinned-file precedence, the disagreement
warning, cpus_near_gpu, and the hwloc XML files (counts read from the files by hand)."""

import json
import logging
import os
import re
import socket
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import torch_topo
from torch_topo import _C, TopoConfig
from torch_topo.probe import (
    PinnedTopologyWarning,
    cpus_near_gpu,
    probe,
    probe_failed,
    resolve_pinned_file,
)

DATA = Path(__file__).resolve().parents[1] / "data"
DGX2 = str(DATA / "hwloc" / "hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml")
POWER8 = str(DATA / "hwloc" / "hwloc_power8_gpu_nvlink_distances.xml")
GB10 = str(DATA / "hwloc" / "hwloc_nvidia_DGX-GB10.xml")
H200 = str(DATA / "hwloc" / "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml")
CONSOLE = str(DATA / "hwloc" / "lstopo_power9_AC922_gpu_numanodes.console.txt")
P4D = str(DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml")


@pytest.fixture
def no_pins(monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY"):
        monkeypatch.delenv(var, raising=False)


def _sys_numa_nodes() -> int:
    names = (
        os.listdir("/sys/devices/system/node") if os.path.isdir("/sys/devices/system/node") else []
    )
    return max(1, sum(1 for n in names if n.startswith("node") and n[4:].isdigit()))


def _cpus(topology) -> set[int]:
    out: set[int] = set()
    for node in topology.native.numa_nodes:
        out |= set(_C.parse_cpulist(node.cpus))
    return out


def _physical_nics() -> dict[str, str]:
    """PCI function -> NIC name by the rule of issue 16: an interface or RDMA device is physical
    when it has a `device` link; its function is the deepest PCI address on the link's real path;
    an RDMA device names its function."""
    by_function: dict[str, str] = {}
    for cls in ("net", "infiniband"):
        base = f"/sys/class/{cls}"
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            device = os.path.join(base, name, "device")
            if not os.path.exists(device):
                continue
            parts = os.path.realpath(device).split("/")
            function = [p for p in parts if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", p)][-1]
            if cls == "infiniband" or function not in by_function:
                by_function[function] = name
    return by_function


def test_live_probe_agrees_with_sys(no_pins):
    topo = probe(TopoConfig())
    host = topo.native
    assert len(host.numa_nodes) == _sys_numa_nodes()
    with open("/sys/devices/system/node/node0/cpulist") as f:
        assert set(_C.parse_cpulist(host.numa_nodes[0].cpus)) == set(_C.parse_cpulist(f.read()))
    # The scheduler may restrict this process, never widen it past the host's CPUs.
    assert os.sched_getaffinity(0) <= _cpus(topo)
    assert {nic.bus_id: nic.name for nic in host.nics} == _physical_nics()
    virtual = set(os.listdir("/sys/devices/virtual/net"))  # lo here, plus ifb0/ifb1 on CI hosts
    assert not virtual & {nic.name for nic in host.nics}
    assert host.hostname == socket.gethostname()
    if not os.path.exists("/dev/nvidia0"):
        assert topo.gpu_count == 0
        assert any("zero GPUs" in w for w in host.warnings)


def test_live_nics_are_the_pci_functions_of_this_hosts_hwloc_export():
    # This CI VM, like the H200 VM of issue 16, has a virtio eth0 whose device link ends below its
    # PCI function: the live probe must name the function hwloc's own export names.
    exported = _C.read_hwloc_xml(_C.export_hwloc_xml(), "this-host.xml")
    live = _C.probe_host()
    assert sorted(n.bus_id for n in live.nics) == sorted(n.bus_id for n in exported.nics)
    assert [n.cpus for n in live.numa_nodes] == [n.cpus for n in exported.numa_nodes]


@pytest.mark.parametrize(
    "faults, sysfs, failed",
    [
        (["hwloc"], "/sys", ["hwloc"]),
        (["nvml"], "/sys", ["nvml"]),
        ([], "empty", ["sysfs"]),
        (["hwloc", "nvml"], "empty", ["hwloc", "sysfs", "nvml", "sysfs"]),
    ],
)
def test_each_failing_source_costs_only_its_own_facts(faults, sysfs, failed, tmp_path):
    root = str(tmp_path) if sysfs == "empty" else sysfs
    host = _C._test_probe_host(faults, root)
    warned = [w for w in host.warnings if probe_failed(w)]
    assert [re.match(r"probe:(\w+) failed: ", w).group(1) for w in warned] == failed
    for w in warned:
        assert "injected" in w or "cannot be listed" in w or "unreadable" in w, w
        assert "; " in w  # reason; what was done instead; fix
    # What the other sources know is there.
    if "hwloc" not in faults or sysfs == "/sys":
        assert len(host.numa_nodes) == _sys_numa_nodes()
    if sysfs == "/sys":
        assert {nic.bus_id for nic in host.nics} == set(_physical_nics())
    assert host.gpu_count == 0
    with pytest.raises(ValueError, match="faults: got 'sysfs', expected 'hwloc' or 'nvml'"):
        _C._test_probe_host(["sysfs"])


def test_probe_returns_a_topology_and_logs_failures_once(no_pins, monkeypatch, caplog):
    monkeypatch.setattr(_C, "probe_host", lambda: _C._test_probe_host(["hwloc", "nvml"]))
    monkeypatch.setattr(sys.modules["torch_topo.probe"], "_logged", set())
    caplog.set_level(logging.INFO, logger="torch_topo.probe")
    topo = probe(TopoConfig())
    probe(TopoConfig())
    assert len(topo.native.numa_nodes) == _sys_numa_nodes()  # from /sys instead of hwloc
    failures = [w for w in topo.warnings if " failed: " in w]
    assert [w.split(" ")[0] for w in failures] == ["probe:hwloc", "probe:nvml"]
    logged = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert sorted(logged) == sorted({(logging.WARNING, w) for w in failures}), logged


def test_init_process_group_topo_proceeds_when_sources_fail(no_pins, monkeypatch, tmp_path):
    import torch
    import torch.distributed as dist

    monkeypatch.setattr(_C, "probe_host", lambda: _C._test_probe_host(["hwloc", "nvml"]))
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("topo", store=store, rank=0, world_size=1)
    try:
        t = torch.arange(4.0)
        dist.all_reduce(t)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    finally:
        dist.destroy_process_group()


def test_a_gpu_the_failed_probe_does_not_know_is_placed_as_no_gpu(monkeypatch):
    # NVML failing on a GPU host: torch sees a GPU the probed topology lacks; init must go on.
    import torch

    from torch_topo.cluster import _local_gpu

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    h200_gpu = SimpleNamespace(pci_domain_id=0, pci_bus_id=0, pci_device_id=6)  # 0000:00:06.0
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: h200_gpu)
    assert _local_gpu(torch_topo.load_topology(H200)) == 0
    assert _local_gpu(torch_topo.Topology(_C._test_probe_host(["nvml"]))) == -1


def test_pinned_file_precedence(tmp_path):
    cfg, torch_xml, nccl = (str(tmp_path / n) for n in ("cfg.xml", "torch.xml", "nccl.xml"))
    for path in (cfg, torch_xml, nccl):
        Path(path).write_text("")
    env = {"TORCH_TOPO_FILE": torch_xml, "NCCL_TOPO_FILE": nccl}
    assert resolve_pinned_file(TopoConfig(topology_file=cfg), env) == cfg
    assert resolve_pinned_file(TopoConfig(), env) == torch_xml
    assert resolve_pinned_file(TopoConfig(), {"NCCL_TOPO_FILE": nccl}) == nccl
    assert resolve_pinned_file(TopoConfig(), {}) is None


@pytest.mark.parametrize("config, env, fragment", [
    ({"topology_file": "/no/such.xml"}, {}, "TopoConfig.topology_file (or TORCH_TOPO_FILE): got"),
    ({}, {"TORCH_TOPO_FILE": "/no/such.xml"}, "TORCH_TOPO_FILE: got '/no/such.xml', expected"),
    ({}, {"NCCL_TOPO_FILE": "/no/such.xml"}, "NCCL_TOPO_FILE: got '/no/such.xml', expected"),
])
def test_a_missing_pinned_file_names_its_setting(config, env, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        resolve_pinned_file(TopoConfig(**config), env)


def test_pinned_file_wins_over_live_probe(no_pins, monkeypatch):
    live = _C.read_hwloc_xml(Path(POWER8).read_text(), POWER8)  # played live host: 4 GPUs
    assert probe(TopoConfig(), live=live).gpu_count == 4
    monkeypatch.setenv("NCCL_TOPO_FILE", P4D)
    with pytest.warns(
        PinnedTopologyWarning, match="has 8 GPUs but the live probe of this host found 4"
    ):
        assert probe(TopoConfig(), live=live).gpu_count == 8
    monkeypatch.setenv("TORCH_TOPO_FILE", DGX2)
    with pytest.warns(PinnedTopologyWarning, match="has 16 GPUs"):
        assert probe(TopoConfig(), live=live).gpu_count == 16
    with pytest.warns(
        PinnedTopologyWarning, match="has 4 GPUs but the live probe of this host found 16"
    ):
        probe(
            TopoConfig(topology_file=POWER8), live=_C.read_hwloc_xml(Path(DGX2).read_text(), DGX2)
        )


def test_live_of_the_wrong_type_is_named(no_pins):
    # Topology's own TypeError ("Topology: got str, expected _C.HostTopology") named no argument.
    with pytest.raises(ValueError, match=r"probe: live: got str, expected None, a Topology or "
                                         r"a torch_topo._C.HostTopology"):
        probe(TopoConfig(), live=DGX2)


def test_bus_id_disagreement_warns_and_agreement_or_cpu_host_does_not(no_pins):
    text = Path(POWER8).read_text()
    moved = _C.read_hwloc_xml(text.replace("000b:01:00.0", "000c:01:00.0"), "moved.xml")
    with pytest.warns(PinnedTopologyWarning, match="GPU 3: 000b:01:00.0 vs 000c:01:00.0"):
        probe(TopoConfig(topology_file=POWER8), live=moved)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PinnedTopologyWarning)
        probe(TopoConfig(topology_file=POWER8), live=_C.read_hwloc_xml(text, POWER8))
        cpu_only = _C.read_hwloc_xml(Path(GB10).read_text(), GB10)  # 0 GPUs, like this CI host
        assert probe(TopoConfig(topology_file=DGX2), live=cpu_only).gpu_count == 16


def test_cpus_near_gpu_follow_the_numa_node():
    dgx2 = torch_topo.load_topology(DGX2)
    assert cpus_near_gpu(dgx2, 9) == {24, 25}  # NUMA node 1: cpuset 0x03000000
    assert cpus_near_gpu(dgx2, 0) == {0, 1}
    power8 = torch_topo.load_topology(POWER8)
    assert cpus_near_gpu(power8, 2) == {80, 81, 88, 89, 96, 97, 104, 105}
    with pytest.raises(ValueError, match="gpu: got 16, expected 0..15"):
        cpus_near_gpu(dgx2, 16)


@pytest.mark.parametrize(
    "path, gpus, numa, hostname",
    [(DGX2, 16, 2, ""), (POWER8, 4, 2, "drac-12.grenoble.grid5000.fr"), (GB10, 0, 1, "cfarm107")],
)
def test_hwloc_files(path, gpus, numa, hostname):
    topo = torch_topo.load_topology(path)
    assert topo.gpu_count == gpus
    assert len(topo.native.numa_nodes) == numa
    assert topo.hostname == hostname
    direct = _C.read_hwloc_xml(Path(path).read_text(), path)
    assert [g.bus_id for g in direct.gpus] == [g.bus_id for g in topo.native.gpus]


def test_hwloc_reader_refuses_console_text_and_bad_xml():
    with pytest.raises(ValueError, match="lstopo console output is not supported"):
        _C.read_hwloc_xml(Path(CONSOLE).read_text(), CONSOLE)
    with pytest.raises(ValueError, match=r"half\.xml:\d+:\d+: malformed XML"):
        _C.read_hwloc_xml(Path(POWER8).read_text()[:5000], "half.xml")


def test_cpus_near_gpu_and_probe_name_bad_arguments():
    # Before: "'<=' not supported between int and str", "'NoneType' object has no attribute
    # 'native'" and "'dict' object has no attribute 'topology_file'".
    dgx2 = torch_topo.load_topology(DGX2)
    with pytest.raises(ValueError, match=r"cpus_near_gpu: gpu: got '0', expected 0..15"):
        cpus_near_gpu(dgx2, "0")
    with pytest.raises(ValueError, match=r"cpus_near_gpu: topology: got NoneType, expected a "
                                         r"Topology"):
        cpus_near_gpu(None, 0)
    # A host without GPUs (this machine's probe) gave the range "0..-1".
    no_gpus = torch_topo.Topology.from_json(json.dumps(
        {"schema": "torch-topo/1", "kind": "host", "source": "probe:hwloc", "gpus": []}))
    with pytest.raises(ValueError, match=r"^cpus_near_gpu: gpu: got 0, but probe:hwloc has no "
                                         r"GPUs$"):
        cpus_near_gpu(no_gpus, 0)
    with pytest.raises(ValueError, match=r"probe: config: got dict, expected a "
                                         r"torch_topo.TopoConfig or None"):
        torch_topo.probe({"topology_file": DGX2})
