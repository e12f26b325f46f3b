# SPDX-License-Identifier: Apache-2.0
"""Every file of tests/data/{nvidia_smi_topo,nccl_topo_xml,hwloc} is read and checked against
values read from the file by hand (below), never computed by the code under test; then XML and
JSON round trips. Missing pairs of PARTIAL_ files are expected as SYS, as the reader documents."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

import torch_topo
from torch_topo import Topology, TopoParseError, load_topology

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


@dataclass(frozen=True)
class Expect:
    gpus: int
    rows: list[str]  # path matrix as the file prints it ("X NV12 SYS ..."), one per GPU
    numa: list[int | None]  # NUMA node per GPU
    nics: int


def full(n: int, cell: str) -> list[str]:
    """An n-GPU matrix with `cell` between every pair (read off a uniform file)."""
    return [" ".join("X" if i == j else cell for j in range(n)) for i in range(n)]


def known_rows(n: int, known: int, cell: str) -> list[str]:
    """PARTIAL files: rows 0..known-1 print `cell` to every GPU; pairs of two missing rows
    are SYS."""
    return [" ".join("X" if i == j else (cell if min(i, j) < known else "SYS") for j in range(n))
            for i in range(n)]


def pcie_groups(groups: list[list[int]], numa_of: list[int], same_switch: str, same_numa: str) -> list[str]:
    """Matrix for PCI-only XML files: `same_switch` inside a switch group, `same_numa` inside a
    NUMA node, SYS across (groups and NUMA ids read from the file)."""
    n = len(numa_of)
    group_of = {g: k for k, members in enumerate(groups) for g in members}
    def cell(i, j):
        if i == j:
            return "X"
        if group_of.get(i) is not None and group_of.get(i) == group_of.get(j):
            return same_switch
        return same_numa if numa_of[i] == numa_of[j] else "SYS"
    return [" ".join(cell(i, j) for j in range(n)) for i in range(n)]


N = None
SMI: dict[str, Expect] = {
    "2xgpu_NV2_bridge_mlengineering.txt": Expect(2, ["X NV2", "NV2 X"], [N, N], 0),
    "2xgpu_PHB_noNVLink_mlengineering.txt": Expect(2, ["X PHB", "PHB X"], [N, N], 0),
    "PARTIAL_deepep128_8xGPU_noNVLink_allSYS_10xNIC_PIX.txt": Expect(
        8, full(8, "SYS"), [0, 0, 0, 0, 1, 1, N, N], 10),
    "PARTIAL_nccl1453_8xH100_NV18_9xNIC.tsv.txt": Expect(8, full(8, "NV18"), [0] * 4 + [1] * 4, 9),
    "PARTIAL_nccl1505_DGX-A100-40GB_NV12_12xNIC_NPS4.txt": Expect(
        8, known_rows(8, 4, "NV12"), [3, 3, 1, 1, N, N, N, N], 12),
    "PARTIAL_ncclTests78_DGX-2_16xV100_NV6_10xmlx5.txt": Expect(
        16, known_rows(16, 4, "NV6"), [0] * 4 + [N] * 12, 10),
    "PARTIAL_sglang11208_GB200_4xGPU_NV18_6xNIC_gpuNUMAid.txt": Expect(
        4, full(4, "NV18"), [0, 0, 1, N], 6),
    "PARTIAL_sglang13973_8xH100class_NV18_9xNIC_3numa.txt": Expect(
        8, known_rows(8, 6, "NV18"),
        [0, 0, 0, 1, 2, 2, N, N], 9),
    "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt": Expect(
        8, full(8, "NV12"), [0] * 4 + [1] * 4, 0),
    # GPU0-3 print no CPU Affinity, so their NUMA id stands alone between two columns.
    "nchcSlurmGuide_8xH200_NV18_10xNIC_emptyCpuAffinity.txt": Expect(
        8, full(8, "NV18"), [0] * 4 + [1] * 4, 10),
    # `topo -mp`: PCIe paths only; the reader says NVLink is not shown (test_cli_topology.py).
    "numaK8sNotes_3xGPU_topo-mp_PCIeOnly_SYS_NODE_2numa.txt": Expect(
        3, ["X SYS SYS", "SYS X NODE", "SYS NODE X"], [0, 1, 1], 0),
    "llmSetupGuide_8xGPU_NV8_4xmlx5_2numa.txt": Expect(8, full(8, "NV8"), [0] * 4 + [1] * 4, 4),
    "club3090_1229_2xRTX5090_PHB.tsv.txt": Expect(2, ["X PHB", "PHB X"], [0, 0], 0),
    "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt": Expect(8, [
        "X NV1 NV1 NV2 NV2 SYS SYS SYS",
        "NV1 X NV2 NV1 SYS NV2 SYS SYS",
        "NV1 NV2 X NV2 SYS SYS NV1 SYS",
        "NV2 NV1 NV2 X SYS SYS SYS NV1",
        "NV2 SYS SYS SYS X NV1 NV1 NV2",
        "SYS NV2 SYS SYS NV1 X NV2 NV1",
        "SYS SYS NV1 SYS NV1 NV2 X NV2",
        "SYS SYS SYS NV1 NV2 NV1 NV2 X",
    ], [0] * 4 + [1] * 4, 1),  # NUMA numbered by the two distinct CPU Affinity sets
    "goGpuallocator17_8xRTX4090_allSYS_2xNIC.tsv.txt": Expect(8, full(8, "SYS"), [0] * 4 + [1] * 4, 2),
    "h100_8xSXM_NV18_2socket_mlengineering.txt": Expect(8, full(8, "NV18"), [0] * 4 + [1] * 4, 0),
    "h200_1xGPU_firecracker-vm_driver580.tsv.txt": Expect(1, ["X"], [0], 0),
    # NPS4 on two sockets: NUMA Affinity 3, 2, 1, 0, 7, 6, 5, 4 as printed
    "chlcBlog_8xRTX4090_2xEPYC7542-NPS4_allSYS_4xNIC.txt": Expect(
        8, full(8, "SYS"), [3, 2, 1, 0, 7, 6, 5, 4], 4),
    "schmaustechNvidiaTools_R760xa_1xL40S-pod_NODE_10xmlx5.tsv.txt": Expect(1, ["X"], [0], 10),
    "hwPlatformNotes_sm02_4xA100-PCIE-40GB_allSYS_2numa.txt": Expect(
        4, full(4, "SYS"), [0, 0, 1, 1], 0),
    # header between ESC[4m and ESC[0m, as nvidia-smi underlines it
    "gpuexporter_1xH100-MIG_driver590_underlinedHeader.tsv.txt": Expect(1, ["X"], [0], 0),
    "gpuexporter_1xRTX2080S_windows_driver610_underlinedHeader_emptyAffinity.tsv.txt": Expect(
        1, ["X"], [N], 0),
    "nccl557_2xGPU_NV3_bridge.tsv.txt": Expect(2, ["X NV3", "NV3 X"], [N, N], 0),
    "ncclTests178_8xA100-PCIe_NV12pairs_NODE_SYS.txt": Expect(8, [
        "X NV12 NODE NODE SYS SYS SYS SYS",
        "NV12 X NODE NODE SYS SYS SYS SYS",
        "NODE NODE X NV12 SYS SYS SYS SYS",
        "NODE NODE NV12 X SYS SYS SYS SYS",
        "SYS SYS SYS SYS X NV12 NODE NODE",
        "SYS SYS SYS SYS NV12 X NODE NODE",
        "SYS SYS SYS SYS NODE NODE X NV12",
        "SYS SYS SYS SYS NODE NODE NV12 X",
    ], [0] * 4 + [1] * 4, 0),
    "ncclTests331_leonardo_4xA100-64GB_NV4mesh_4xNIC.txt": Expect(4, full(4, "NV4"), [0] * 4, 4),
    "sheffield_sharc_DGX-1_8xP100_NV1_4xmlx5_SOCformat.tsv.txt": Expect(8, [
        "X NV1 NV1 NV1 NV1 SYS SYS SYS",
        "NV1 X NV1 NV1 SYS NV1 SYS SYS",
        "NV1 NV1 X NV1 SYS SYS NV1 SYS",
        "NV1 NV1 NV1 X SYS SYS SYS NV1",
        "NV1 SYS SYS SYS X NV1 NV1 NV1",
        "SYS NV1 SYS SYS NV1 X NV1 NV1",
        "SYS SYS NV1 SYS NV1 NV1 X NV1",
        "SYS SYS SYS NV1 NV1 NV1 NV1 X",
    ], [N] * 8, 4),  # every GPU has CPU Affinity 1-1 across SOC pairs: a cpuset, not NUMA
    "vllm19607_2xGPU_NV12_8xNIC_emptyAffinity.txt": Expect(2, ["X NV12", "NV12 X"], [N, N], 8),
}

# PCI-only XML: GPUs found by class, ordered by bus id; classes follow NCCL (PIX under one
# switch, PHB through the CPU, SYS across CPUs).
_P4 = pcie_groups([[0, 1], [2, 3], [4, 5], [6, 7]], [0] * 4 + [1] * 4, "PIX", "PHB")
XML: dict[str, Expect] = {
    "PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml": Expect(3, full(3, "NV18"), [0, 0, 0], 4),
    "PARTIAL_ncclTests256_H200_VM_topo_dump_fragment.xml": Expect(1, ["X"], [N], 1),
    "aws_g5.48xlarge_8xA10G_topo.xml": Expect(0, [], [], 0),
    "aws_p4d.24xlarge_8xA100_topo.xml": Expect(8, _P4, [0] * 4 + [1] * 4, 4),
    "aws_p4de.24xlarge_8xA100-80G_topo.xml": Expect(8, _P4, [0] * 4 + [1] * 4, 4),
    "aws_p5.48xlarge_8xH100_topo_2023.xml": Expect(0, [], [], 0),
    "aws_p5.48xlarge_8xH100_topo_2026pr.xml": Expect(8, full(8, "PHB"), [0] * 8, 32),
    "azure_ncv4_4xA100pcie_topo.xml": Expect(4, full(4, "SYS"), [0, 1, 2, 3], 1),
    "azure_ndv2_8xV100_topo.xml": Expect(
        8, pcie_groups([], [0] * 4 + [1] * 4, "PIX", "PHB"), [0] * 4 + [1] * 4, 1),
    # bus order 0001 0002 (numa 1) 0003 0004 (numa 0) 000b 000c (numa 3) 000d 000e (numa 2)
    "azure_ndv4_8xA100_topo.xml": Expect(
        8, pcie_groups([[0, 1], [2, 3], [4, 5], [6, 7]], [1, 1, 0, 0, 3, 3, 2, 2], "PIX", "SYS"),
        [1, 1, 0, 0, 3, 3, 2, 2], 8),
    "h200_1xGPU_firecracker-vm_nccl2.28.9_topo_dump.xml": Expect(1, ["X"], [N], 1),  # numaid="-1"
    "nccl2202_DGX-Spark_GB10_1xGPU_c2c_wifi_topo_dump.xml": Expect(1, ["X"], [N], 2),  # <c2c>
    "azure_ndv5_8xH100_topo.xml": Expect(
        8, pcie_groups([], [0] * 4 + [1] * 4, "PIX", "PHB"), [0] * 4 + [1] * 4, 8),
    "nebius_h100_vm_8xH100_8xIB_topo_v1.xml": Expect(
        8, pcie_groups([], [0] * 4 + [1] * 4, "PIX", "PHB"), [0] * 4 + [1] * 4, 8),
}
NCCL_GRAPH_FILES = {"azure_ncv4_4xA100pcie_graph.xml"}
# nvidia-smi output other than `topo -m`, kept to check that it is refused by name
NVSMI_OTHER_OUTPUT = {"p2pMatrix_8xH100_mlengineering_notTopoM.txt"}

HWLOC: dict[str, Expect] = {
    # 16 V100, each with 6 NVLinks of 25000 MB/s into the 12 NVSwitches (NVLinkBandwidth)
    "hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml": Expect(16, full(16, "NV6"), [], 0),
    # NVLinkBandwidth: GPU0-GPU1 and GPU2-GPU3 40000 MB/s (2 P100 links), GPUs 0,1 on package 0
    "hwloc_power8_gpu_nvlink_distances.xml": Expect(
        4, ["X NV2 SYS SYS", "NV2 X SYS SYS", "SYS SYS X NV2", "SYS SYS NV2 X"], [0, 0, 1, 1], 0),
    # DGX Spark: no PCI GPU or network OS device in the export, one NUMA node
    "hwloc_nvidia_DGX-GB10.xml": Expect(0, [], [], 0),
    # H200 Firecracker VM: GPU, eth0 and two virtio disks under one host bridge, one NUMA node
    "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml": Expect(1, ["X"], [0], 1),
    # HP SL390s G7: 3 Tesla M2070 on two I/O hubs; two Intel eth ports and a ConnectX-2 HCA of
    # class 0c06 (mlx4_0)
    "hwloc_HP-SL390sG7_3xTeslaM2070_ConnectX2-IB-class0c06.xml": Expect(
        3, ["X SYS SYS", "SYS X PHB", "SYS PHB X"], [0, 1, 1], 3),
}
HWLOC_NUMA_IDS = {"hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml": {0, 1},
                  "hwloc_power8_gpu_nvlink_distances.xml": {0, 1},
                  "hwloc_nvidia_DGX-GB10.xml": {0},
                  "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml": {0},
                  "hwloc_HP-SL390sG7_3xTeslaM2070_ConnectX2-IB-class0c06.xml": {0, 1}}
HWLOC_TEXT_FILES = {"lstopo_power9_AC922_gpu_numanodes.console.txt"}


def _cells(rows: list[str]) -> list[list[tuple[str, int]]]:
    out = []
    for row in rows:
        out.append([("NV", int(c[2:])) if c.startswith("NV") else (c, 0) for c in row.split()])
    return out


def check(topo: Topology, e: Expect, check_numa: bool = True) -> None:
    assert topo.gpu_count == e.gpus
    assert len(topo.nics) == e.nics
    expected = _cells(e.rows)
    got = [[(topo.path(i, j), topo.nvlinks(i, j)) for j in range(e.gpus)] for i in range(e.gpus)]
    assert got == expected
    if check_numa:
        assert [topo.numa_node(i) for i in range(e.gpus)] == e.numa


def _listing(sub: str) -> set[str]:
    return set(os.listdir(os.path.join(DATA, sub)))


def test_tables_cover_every_file():
    assert _listing("nvidia_smi_topo") == set(SMI) | NVSMI_OTHER_OUTPUT
    assert _listing("nccl_topo_xml") == set(XML) | NCCL_GRAPH_FILES
    assert _listing("hwloc") == set(HWLOC) | HWLOC_TEXT_FILES


@pytest.mark.parametrize("name", sorted(SMI))
def test_nvidia_smi_file(name):
    topo = load_topology(os.path.join(DATA, "nvidia_smi_topo", name))
    check(topo, SMI[name])
    assert topo.format == "nvidia-smi"
    assert any("rows missing" in w for w in topo.warnings) == name.startswith("PARTIAL_")


@pytest.mark.parametrize("name", sorted(XML))
def test_nccl_xml_file(name):
    path = os.path.join(DATA, "nccl_topo_xml", name)
    topo = load_topology(path)
    check(topo, XML[name])
    again = Topology(torch_topo._C.load_topology_text(topo.to_nccl_xml(), "written.xml"))
    check(again, XML[name])
    assert again.to_nccl_xml() == topo.to_nccl_xml()


@pytest.mark.parametrize("name", sorted(NVSMI_OTHER_OUTPUT))
def test_nvidia_smi_p2p_matrix_is_refused(name):
    path = os.path.join(DATA, "nvidia_smi_topo", name)
    with pytest.raises(TopoParseError, match=r":2:17: .*this is `nvidia-smi topo -p2p` output"):
        load_topology(path)


@pytest.mark.parametrize("name", sorted(NCCL_GRAPH_FILES))
def test_nccl_graph_file_is_refused(name):
    path = os.path.join(DATA, "nccl_topo_xml", name)
    with pytest.raises(TopoParseError, match=r"NCCL graph file \(NCCL_GRAPH_FILE") as info:
        load_topology(path)
    assert info.value.path == path and info.value.line == 1


@pytest.mark.parametrize("name", sorted(HWLOC))
def test_hwloc_file(name):
    topo = load_topology(os.path.join(DATA, "hwloc", name))
    e = HWLOC[name]
    check(topo, e, check_numa=bool(e.numa))
    assert set(topo.numa_nodes) == HWLOC_NUMA_IDS[name]
    again = Topology(torch_topo._C.load_topology_text(topo.to_nccl_xml(), "written.xml"))
    check(again, e, check_numa=bool(e.numa))


@pytest.mark.parametrize("name", sorted(HWLOC_TEXT_FILES))
def test_lstopo_console_text_is_refused(name):
    path = os.path.join(DATA, "hwloc", name)
    with pytest.raises(TopoParseError, match=r":1:1: unknown topology format: expected"):
        load_topology(path)


ALL_READABLE = ([("nvidia_smi_topo", n) for n in sorted(SMI)]
                + [("nccl_topo_xml", n) for n in sorted(XML)])


@pytest.mark.parametrize("sub,name", ALL_READABLE)
def test_json_round_trip(sub, name):
    topo = load_topology(os.path.join(DATA, sub, name))
    text = topo.to_json()
    back = Topology.from_json(text)
    assert back.to_json() == text
    n = topo.gpu_count
    for i in range(n):
        for j in range(n):
            assert back.bandwidth(i, j) == topo.bandwidth(i, j)  # exact, not approximate
            assert back.latency(i, j) == topo.latency(i, j)
    assert back.warnings == topo.warnings


@pytest.mark.parametrize("sub,name,bus_id,nic,nic_path", [
    # Bus ids and NICs as the files give them: hwloc pci_busid of "0302 [10de:2335]" and eth0's
    # PCI function; NCCL's <pci busid> and a <nic> without PCI parent; nvidia-smi names neither.
    ("hwloc", "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml", "0000:00:06.0", "eth0", "PHB"),
    ("nccl_topo_xml", "h200_1xGPU_firecracker-vm_nccl2.28.9_topo_dump.xml", "0000:00:06.0", "eth0",
     "PHB"),
    ("nvidia_smi_topo", "h200_1xGPU_firecracker-vm_driver580.tsv.txt", None, None, None),
])
def test_h200_firecracker_vm_files(sub, name, bus_id, nic, nic_path):
    topo = load_topology(os.path.join(DATA, sub, name))
    assert [g.bus_id for g in topo.gpus] == [bus_id]
    assert [n.name for n in topo.nics] == ([nic] if nic else [])
    if nic:
        # One NUMA node, one host bridge: GPU and NIC meet at the CPU.
        assert topo.nic_path(0, 0) == nic_path


def test_nvidia_smi_text_cannot_become_nccl_xml():
    topo = load_topology(os.path.join(DATA, "nvidia_smi_topo", "2xgpu_NV2_bridge_mlengineering.txt"))
    with pytest.raises(ValueError, match="no physical graph"):
        topo.to_nccl_xml()


def test_bandwidths_follow_the_link_tables():
    # Hand-computed from NCCL's constants: H200 NV18 at 20.6 GB/s per lane; p4d "8 GT/s" x16.
    h200 = load_topology(os.path.join(DATA, "nccl_topo_xml",
                                      "PARTIAL_ncclTests256_H200-HGX_baremetal_topo_dump_numa0.xml"))
    assert h200.bandwidth(0, 1) == pytest.approx(18 * 20.6)
    p4d = load_topology(os.path.join(DATA, "nccl_topo_xml", "aws_p4d.24xlarge_8xA100_topo.xml"))
    assert p4d.bandwidth(0, 1) == pytest.approx(12.0)
    assert p4d.bandwidth(0, 4) == pytest.approx(10.0)  # Skylake UPI (SKL_QPI_BW)
    with pytest.raises(IndexError):
        p4d.path(0, 8)


@pytest.mark.parametrize("call,match", [
    # A float, string or None index was pybind11's "incompatible function arguments" (or a
    # list's TypeError), and True read as GPU 1.
    (lambda t: t.path(0.0, 1), r"Topology.path: i: got 0.0, expected the int index of one of "
                               r"the 8 GPUs"),
    (lambda t: t.bandwidth(0, "1"), r"Topology.bandwidth: j: got '1'"),
    (lambda t: t.cell(True, 0), r"Topology.cell: i: got True"),
    (lambda t: t.numa_node(1.0), r"Topology.numa_node: i: got 1.0"),
    (lambda t: t.gpu_label(None), r"Topology.gpu_label: i: got None"),
    (lambda t: t.nic_path(0, "efa0"), r"Topology.nic_path: k: got 'efa0', expected the int "
                                      r"index of one of the 4 NICs"),
    # -3 wrote one line as None does; 2.0 was pybind11's message.
    (lambda t: t.to_json(indent=-3), r"Topology.to_json: indent: got -3, expected None or an "
                                     r"int >= 0"),
    (lambda t: t.to_json(indent=2.0), r"Topology.to_json: indent: got 2.0"),
    (lambda t: Topology.from_json(None), r"Topology.from_json: text: got NoneType, expected a "
                                         r"str"),
])
def test_index_and_option_types(call, match):
    p4d = load_topology(os.path.join(DATA, "nccl_topo_xml", "aws_p4d.24xlarge_8xA100_topo.xml"))
    assert (p4d.gpu_count, len(p4d.nics)) == (8, 4)
    with pytest.raises(ValueError, match=match):
        call(p4d)


def test_hwloc_pcie_rates_survive_nccl_xml():
    # hwloc gives a PCIe link as one raw rate (pci_link_speed, GB/s after line encoding), which
    # NCCL XML writes as generation and width. The Firecracker VM's GPU link reads 63.015385
    # (32 GT/s x 16 x 128/130 / 8: Gen5 x16, 3.0 GB/s x 16 = 48 usable); its eth0 reads 0
    # (virtio), here set to 31.507692 (16 GT/s x 16 x 128/130 / 8: Gen4 x16 = 24 usable).
    with open(os.path.join(DATA, "hwloc", "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml")) as f:
        text = f.read()
    eth0 = 'pci_busid="0000:00:03.0" pci_type="0200 [1af4:1041] [1af4:1041] 01" pci_link_speed='
    text = text.replace(eth0 + '"0.000000"', eth0 + '"31.507692"', 1)
    topo = Topology(torch_topo._C.read_hwloc_xml(text, "vm.xml"))
    xml = topo.to_nccl_xml()
    assert 'busid="0000:00:06.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16"' in xml
    assert 'busid="0000:00:03.0" class="0x020000" link_speed="16.0 GT/s PCIe" link_width="16"' in xml
    back = Topology(torch_topo._C.load_topology_text(xml, "written.xml"))
    for t in (topo, back):
        assert t.native.nic_path(0, 0).bandwidth_gbps == pytest.approx(24.0, rel=1e-6)
    # Gen1/2 rates carry 8b/10b encoding, Gen3's 128b/130b: the SL390's GPU links
    # (pci_link_speed 4.0: 5 GT/s x 8 x 8/10 / 8, Gen2 x8) are read, and come back, at the
    # table's rate for that link, 0.375 x 8 = 3.0 GB/s.
    sl390 = load_topology(os.path.join(DATA, "hwloc",
                                       "hwloc_HP-SL390sG7_3xTeslaM2070_ConnectX2-IB-class0c06.xml"))
    back = Topology(torch_topo._C.load_topology_text(sl390.to_nccl_xml(), "written.xml"))
    assert [back.path(0, j) for j in range(3)] == [sl390.path(0, j) for j in range(3)]
    assert back.bandwidth(0, 1) == pytest.approx(3.0, rel=1e-9)
    assert sl390.bandwidth(0, 1) == pytest.approx(3.0, rel=1e-9)


def test_a_json_without_source_or_format_is_named_after_its_file(tmp_path):
    # Hand-written JSON may leave both out; loaded from a file it came back with the live
    # probe's marks (no source, no format), so doctor took it for the probe and checked nothing.
    import json

    from torch_topo.doctor import diagnose

    doc = json.loads(load_topology(os.path.join(
        DATA, "nvidia_smi_topo", "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt")).to_json())
    del doc["source"], doc["format"]
    path = tmp_path / "hand.json"
    path.write_text(json.dumps(doc))
    topo = load_topology(str(path))
    assert (topo.source, topo.format) == (str(path), "torch-topo-json")
    by_object = [(f.code, f.severity) for f in diagnose(topo)]
    assert by_object == [(f.code, f.severity) for f in diagnose(str(path))]
    assert by_object  # the file's findings (an EDR NIC of assumed speed among them)
    # Text is no file: Topology.from_json keeps what it records.
    assert Topology.from_json(json.dumps(doc)).format == ""
