# SPDX-License-Identifier: Apache-2.0
"""Real files of tests/data mangled as they get when copied around (trailing tabs, a byte order
mark, a cut-short end): each reads as the values written in the file (read by hand, below) or
says what it could not read, never a shorter value taken for the real one."""

from __future__ import annotations

import os

import pytest

import torch_topo
from torch_topo import TopoParseError, load_topology

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


def cut_after(raw: bytes, line_start: bytes, keep: bytes) -> bytes:
    """`raw` cut right after `keep` on the first line starting with `line_start`."""
    at = raw.index(b"\n" + line_start) + 1
    return raw[:raw.index(keep, at) + len(keep)]


def test_output_pasted_without_its_last_newline_keeps_its_last_value(tmp_path):
    # The whole matrix, GPU7's row ending `... 52-103,156-207  1`, without the final newline:
    # read as the file with it (NUMA 1 kept), with a warning that the cell may be cut.
    raw = data("nvidia_smi_topo", "h100_8xSXM_NV18_2socket_mlengineering.txt")
    assert raw.endswith(b"  1\n")
    path = write(tmp_path, "h100_no_newline.txt", raw[:-1])
    whole = load_topology(os.path.join(DATA, "nvidia_smi_topo",
                                       "h100_8xSXM_NV18_2socket_mlengineering.txt"))
    pasted = load_topology(path)
    assert [g.numa_node for g in pasted.gpus] == [g.numa_node for g in whole.gpus]
    assert [g.numa_node for g in whole.gpus] == [0] * 4 + [1] * 4
    assert [w for w in pasted.warnings if "ends the file" in w] == [
        f"{path}:9: row GPU7 ends the file without a newline (cut short?): its last cell '1' is "
        "read as written but may be incomplete"]


def test_last_row_cut_mid_value_is_named_in_a_warning(tmp_path):
    # GPU1's row of this tab file reads `GPU1<TAB>PHB<TAB> X <TAB>0-63<TAB>0...`; cut after
    # its first character of CPU Affinity: '0' is what the file says, the warning that it may
    # be cut (as '5' of GPU5's `56-111,168-223` in a space-aligned file).
    raw = data("nvidia_smi_topo", "club3090_1229_2xRTX5090_PHB.tsv.txt")
    path = write(tmp_path, "club_cut.txt", cut_after(raw, b"GPU1", b"\t X \t0"))
    topo = load_topology(path)
    assert [g.cpu_affinity for g in topo.gpus] == ["0-63", "0"]
    assert [w for w in topo.warnings if "cut short" in w] == [
        f"{path}:3: row GPU1 ends the file without a newline (cut short?): its last cell '0' is "
        "read as written but may be incomplete"]
    raw = data("nvidia_smi_topo", "PARTIAL_deepep128_8xGPU_noNVLink_allSYS_10xNIC_PIX.txt")
    path = write(tmp_path, "deepep_cut.txt", cut_after(raw, b"GPU5", b"SYS     5"))
    topo = load_topology(path)
    assert [g.cpu_affinity for g in topo.gpus][4:6] == ["56-111,168-223", "5"]
    assert any(w.startswith(f"{path}:7: row GPU5 ends the file") for w in topo.warnings)


def test_complete_last_row_without_newline_loses_nothing_after_a_blank(tmp_path):
    # Cut after the blank that follows GPU1's CPU Affinity: '0-63' is whole and kept.
    raw = data("nvidia_smi_topo", "club3090_1229_2xRTX5090_PHB.tsv.txt")
    topo = load_topology(write(tmp_path, "club_cut2.txt", cut_after(raw, b"GPU1", b"0-63\t")))
    assert [g.cpu_affinity for g in topo.gpus] == ["0-63", "0-63"]
    assert not [w for w in topo.warnings if "ends the file" in w]
    # A Windows file cut between the \r and \n that end GPU7's row `... 24-47  1`: the row is
    # whole, NUMA 1 included.
    raw = data("nvidia_smi_topo", "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt")
    row_end = raw.index(b"\n", raw.index(b"\nGPU7") + 1)
    crlf = raw[:row_end].replace(b"\n", b"\r\n") + b"\r"
    topo = load_topology(write(tmp_path, "a100_cr.txt", crlf))
    assert [g.numa_node for g in topo.gpus] == [0] * 4 + [1] * 4
    assert not [w for w in topo.warnings if "ends the file" in w]


def test_nic_legend_cut_mid_name_is_named_in_a_warning(tmp_path):
    # The legend lists NIC0: mlx5_0 .. NIC9: mlx5_9; cut after 'NIC2: ml'. The lines after the
    # cut are gone, so NIC3.. keep their column names.
    raw = data("nvidia_smi_topo", "schmaustechNvidiaTools_R760xa_1xL40S-pod_NODE_10xmlx5.tsv.txt")
    path = write(tmp_path, "legend_cut.txt", cut_after(raw, b"  NIC2", b"NIC2: ml"))
    topo = load_topology(path)
    assert [n.name for n in topo.nics] == ["mlx5_0", "mlx5_1", "ml"] + [f"NIC{k}" for k in
                                                                       range(3, 10)]
    assert any("NIC Legend line NIC2 ends the file without a newline" in w and "'ml'" in w
               for w in topo.warnings)


@pytest.mark.parametrize("attribute, shown", [('pci_busid="xyz"', "xyz"), ("", ""),
                                              ('pci_busid="0000:00:06"', "0000:00:06")])
def test_hwloc_gpu_with_a_bad_or_missing_bus_id_names_file_and_line(tmp_path, attribute, shown):
    # The GPU is the PCIDev on line 241 of the file (by hand); without a usable bus id it
    # could not be matched to NVML or a live probe, and used to be read without a word.
    raw = data("hwloc", "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml").decode()
    assert raw.splitlines()[240].lstrip().startswith('<object type="PCIDev" gp_index="88" '
                                                     'pci_busid="0000:00:06.0"')
    path = write(tmp_path, "h200_busid.xml",
                 raw.replace('pci_busid="0000:00:06.0"', attribute, 1).encode())
    with pytest.raises(TopoParseError) as err:
        load_topology(path)
    assert str(err.value).startswith(f"{path}:241:")
    assert f"pci_busid: got '{shown}', expected a PCI bus id such as 0000:07:00.0" in str(err.value)


def test_hwloc_bus_ids_are_lower_case_with_any_domain_width(tmp_path):
    # Intel VMD puts devices in domain 10000 (five digits); upper-case hex is the same id.
    raw = data("hwloc", "hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml").decode()
    path = write(tmp_path, "h200_vmd.xml",
                 raw.replace('pci_busid="0000:00:06.0"', 'pci_busid="10000:E1:00.0"', 1).encode())
    assert [g.bus_id for g in load_topology(path).gpus] == ["10000:e1:00.0"]


def test_no_break_space_in_an_xml_tag_is_shown_where_it_is(tmp_path):
    # Pasted from a web page, `<system version="1">` (line 1 of the file) may carry a no-break
    # space: the element is then named `system\xc2\xa0version="1"`, which the file's last line,
    # </system>, does not close. The message used to print both names alike.
    raw = data("nccl_topo_xml", "aws_p5.48xlarge_8xH100_topo_2026pr.xml")
    assert raw.startswith(b'<system version="1">')
    path = write(tmp_path, "p5_nbsp.xml", raw.replace(b"<system ", b"<system\xc2\xa0", 1))
    last_line = raw.rstrip(b"\n").count(b"\n") + 1
    with pytest.raises(TopoParseError) as err:
        load_topology(path)
    assert str(err.value) == (f"{path}:{last_line}:1: malformed XML: </system> closes "
                              '<system\\xc2\\xa0version="1"> (line 1, column 1)')


def test_nvidia_smi_file_with_lone_cr_line_ends_reads_as_with_newlines(tmp_path):
    # Saved by an old Mac editor, every line ends in a lone \r: the file was one line, refused
    # at its first \r ("got '\rGPU0'"). By hand, as in the tab test above.
    raw = data("nvidia_smi_topo", "h100_8xSXM_NV18_2socket_mlengineering.txt")
    topo = load_topology(write(tmp_path, "h100_cr.txt", raw.replace(b"\n", b"\r")))
    assert [[topo.cell(i, j) for j in range(8)] for i in range(8)] == [
        ["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    assert [g.cpu_affinity for g in topo.gpus] == ["0-51,104-155"] * 4 + ["52-103,156-207"] * 4
    assert [g.numa_node for g in topo.gpus] == [0] * 4 + [1] * 4


@pytest.mark.parametrize("name", sorted(os.listdir(os.path.join(DATA, "nvidia_smi_topo"))))
def test_every_nvidia_smi_file_reads_alike_with_lf_crlf_and_cr_line_ends(tmp_path, name):
    lf = data("nvidia_smi_topo", name).replace(b"\r\n", b"\n")
    read = {}
    for ending in (b"\n", b"\r\n", b"\r"):
        path = write(tmp_path, f"{len(ending)}{ending[-1]}.txt", lf.replace(b"\n", ending))
        try:
            topo = load_topology(path)
            read[ending] = (topo.to_json().replace(path, "F"),
                            [w.replace(path, "F") for w in topo.warnings])
        except TopoParseError as e:
            read[ending] = str(e).replace(path, "F")
    assert read[b"\r\n"] == read[b"\n"] and read[b"\r"] == read[b"\n"]
