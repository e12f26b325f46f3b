# SPDX-License-Identifier: Apache-2.0
"""Real files of tests/data mangled as they get when copied around (trailing tabs, a byte order
mark, a cut-short end): each reads as the values written in the file (read by hand, below) or
says what it could not read, never a shorter value taken for the real one."""

from __future__ import annotations

import os

import torch_topo
from torch_topo import load_topology

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def data(*parts: str) -> bytes:
    with open(os.path.join(DATA, *parts), "rb") as f:
        return f.read()


def write(tmp_path, name: str, content: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


def test_space_aligned_rows_ending_in_a_tab_read_as_written(tmp_path):
    # Space-aligned `topo -m` whose lines each end in a tab (as some pastes leave them): the
    # tab is trailing whitespace, not a column separator. By hand: NV18 between all 8 GPUs,
    # GPU0-3 on CPUs 0-51,104-155 NUMA 0, GPU4-7 on 52-103,156-207 NUMA 1.
    raw = data("nvidia_smi_topo", "h100_8xSXM_NV18_2socket_mlengineering.txt")
    mangled = b"\n".join(line + b"\t" if line.strip() else line for line in raw.split(b"\n"))
    topo = load_topology(write(tmp_path, "h100_tabs.txt", mangled))
    assert [[topo.cell(i, j) for j in range(8)] for i in range(8)] == [
        ["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    assert [g.cpu_affinity for g in topo.gpus] == ["0-51,104-155"] * 4 + ["52-103,156-207"] * 4
    assert [g.numa_node for g in topo.gpus] == [0] * 4 + [1] * 4


def test_hwloc_xml_with_a_byte_order_mark(tmp_path):
    # By hand from the file: one NUMANode (os_index 0, cpuset 0x0000ffff = CPUs 0-15), the GPU
    # is PCIDev 0000:00:06.0 of class 0302 [10de:2335], the NIC 0000:00:03.0 (class 0200).
    raw = data("hwloc", "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml")
    topo = load_topology(write(tmp_path, "h200_bom.xml", b"\xef\xbb\xbf" + raw))
    assert topo.format == "hwloc-xml"
    assert [g.bus_id for g in topo.gpus] == ["0000:00:06.0"]
    assert topo.numa_nodes == {0: "0-15"}
    assert [n.bus_id for n in topo.nics] == ["0000:00:03.0"]
    host = torch_topo._C.read_hwloc_xml((b"\xef\xbb\xbf" + raw).decode(), "h200_bom.xml")
    assert [g.bus_id for g in host.gpus] == ["0000:00:06.0"]
