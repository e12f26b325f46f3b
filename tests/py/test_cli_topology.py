# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo show` and `convert`: output keys, exit codes, error messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from torch_topo.cli import main

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
DGX1 = os.path.join(DATA, "nvidia_smi_topo", "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt")
P4D = os.path.join(DATA, "nccl_topo_xml", "aws_p4d.24xlarge_8xA100_topo.xml")


def test_show_json_schema(capsys):
    assert main(["show", DGX1, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpu_count"] == 8
    assert out["gpus"][0] == {"index": 0, "bus_id": None, "numa_node": 0, "name": None,
                              "sm": None, "cpu_affinity": "0-11,24-35"}
    assert out["path_matrix"][0] == ["X", "NV", "NV", "NV", "NV", "SYS", "SYS", "SYS"]
    assert out["nvlink_matrix"][0] == [0, 1, 1, 2, 2, 0, 0, 0]
    assert len(out["bandwidth_matrix"]) == 8 and all(len(r) == 8 for r in out["bandwidth_matrix"])
    assert out["bandwidth_matrix"][0][3] > out["bandwidth_matrix"][0][1] > out["bandwidth_matrix"][0][5]
    assert out["nics"] == [{"name": "mlx5_0", "bus_id": None, "numa_node": None, "speed_gbps": None,
                            "latency_us": None}]
    assert out["nic_path_matrix"][2] == ["PIX"]
    assert isinstance(out["warnings"], list)


def test_show_reports_the_latency_a_net_plugin_gave_nccl(capsys, tmp_path):
    # aws-ofi-nccl reports 75 us on p5; NCCL's dump writes it on every <net>.
    text = open(os.path.join(DATA, "nccl_topo_xml", "aws_p5.48xlarge_8xH100_topo_2026pr.xml")).read()
    nets = text.count('latency="0.0"')
    path = tmp_path / "p5.xml"
    path.write_text(text.replace('latency="0.0"', 'latency="75.000000"'))
    assert main(["show", str(path), "--json"]) == 0
    nics = json.loads(capsys.readouterr().out)["nics"]
    assert nets > 0 and [n["latency_us"] for n in nics] == [75.0] * nets
    assert main(["show", str(path)]) == 0
    assert capsys.readouterr().out.count(", plugin latency 75 us, ") == nets


def test_show_text_is_an_aligned_matrix(capsys):
    assert main(["show", P4D]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("GPU0"))
    row0 = next(line for line in lines if line.startswith("GPU0 "))
    assert row0.index("PIX") == header.index("GPU1")  # cells sit under their column
    assert "Legend:" in text and "GPU-to-GPU bandwidth" in text and "NUMA nodes:" in text
    assert "0000:10:1b.0: NUMA 0" in text


def test_pcie_only_matrix_says_its_nvlink_is_unknown(tmp_path, capsys):
    # `nvidia-smi topo -mp` leaves NV# out of cells and legend: its SYS/NODE pairs may be
    # NVLinked, so show and plan must not call them NVLink-free, nor lose that in JSON.
    mp = os.path.join(DATA, "nvidia_smi_topo", "numaK8sNotes_3xGPU_topo-mp_PCIeOnly_SYS_NODE_2numa.txt")
    assert main(["show", mp]) == 0
    assert "NVLink: unknown (PCIe-only nvidia-smi matrix (" in capsys.readouterr().out
    out = tmp_path / "mp.json"
    assert main(["convert", mp, "--to", "json", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["plan", str(out), "--mesh", "tp=3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nvlink"].startswith(
        "NVLink: unknown (PCIe-only nvidia-smi matrix (")
    assert main(["show", DGX1]) == 0
    assert "NVLink: file (as the source gives it)" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["show"], ["convert"]])
def test_bad_file_exits_2_with_file_and_line(tmp_path, capsys, args):
    bad = tmp_path / "bad.txt"
    bad.write_text("\tGPU0\tGPU1\nGPU0\t X \tNVx\n")
    extra = ["--to", "json"] if args == ["convert"] else []
    assert main([*args, str(bad), *extra]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and "expected a path class" in err


def test_unknown_format_and_missing_file_exit_2(tmp_path, capsys):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01garbage")
    assert main(["show", str(junk)]) == 2
    assert f"{junk}:1:1: unknown topology format" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "missing.xml")]) == 2
    assert "cannot open" in capsys.readouterr().err


def test_convert_to_nccl_xml_and_back(tmp_path, capsys):
    out = tmp_path / "p4d.xml"
    assert main(["convert", P4D, "--to", "nccl-xml", "-o", str(out)]) == 0
    assert out.read_text().startswith('<system version="1">')
    assert main(["show", str(out), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["gpu_count"] == 8 and shown["path_matrix"][0][1] == "PIX"


def test_convert_json_summary(capsys):
    assert main(["convert", DGX1, "--to", "json", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["from"] == "nvidia-smi" and summary["to"] == "json"
    assert json.loads(summary["content"])["schema"] == "torch-topo/1"


def test_convert_nvidia_smi_to_xml_is_refused(capsys):
    assert main(["convert", DGX1, "--to", "nccl-xml"]) == 2
    assert "no physical graph" in capsys.readouterr().err


def test_module_entry_point_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<system>\n  <cpu numaid='x'/>\n</system>\n")
    # Outside the checkout: `-m` puts the working folder first on sys.path, which would shadow
    # an installed package with the checkout's unbuilt one.
    proc = subprocess.run([sys.executable, "-m", "torch_topo", "show", str(bad)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{bad}:2:3:" in proc.stderr and "Traceback" not in proc.stderr


def _broken_json(tmp_path) -> dict:
    """torch-topo JSON of DGX1 broken three ways, each with Python's json's (line, column)."""
    from torch_topo.topology import load_topology

    text = json.dumps(json.loads(load_topology(DGX1).to_json()), indent=2)
    lines = text.splitlines(True)
    comma = next(i for i in range(3, len(lines)) if lines[i].rstrip().endswith(","))
    lines[comma] = lines[comma].rstrip()[:-1] + "\n"
    # Cut after a comma rather than at a character count: the text holds the file's path, so
    # a count could land inside a string in another checkout and change the message.
    whole = text.splitlines(True)
    cut = next(i for i in range(len(whole) // 2, len(whole)) if whole[i].rstrip().endswith(","))
    truncated = "".join(whole[:cut + 1]).rstrip()
    doc = json.loads(text)
    del doc["kind"]
    out = {}
    for name, body in (("truncated", truncated), ("comma", "".join(lines)),
                       ("nokind", json.dumps(doc, indent=2))):
        path = tmp_path / f"{name}.json"
        path.write_text(body)
        try:
            json.loads(body)
            out[name] = (path, None)
        except json.JSONDecodeError as e:
            out[name] = (path, (e.lineno, e.colno))
    return out


@pytest.mark.parametrize("verb", [["show"], ["plan", "--mesh", "tp=8"], ["convert", "--to", "json"]])
def test_json_errors_name_line_column_or_field(verb, tmp_path, capsys):
    cases = _broken_json(tmp_path)
    path, (line, col) = cases["truncated"]
    assert main([verb[0], str(path), *verb[1:]]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}:{col}: malformed JSON" in err and "unexpected end of input" in err
    # nlohmann points past the string that follows the missing comma, Python at its start.
    path, (line, _) = cases["comma"]
    assert main([verb[0], str(path), *verb[1:]]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}:" in err and "malformed JSON" in err and "expected '}'" in err
    path, valid = cases["nokind"]
    assert valid is None
    assert main([verb[0], str(path), *verb[1:]]) == 2
    assert f"{path}:1:1: field kind: missing, expected 'host'" in capsys.readouterr().err


def test_json_error_quoting_a_broken_byte_stays_one_line(tmp_path, capsys):
    # Valid UTF-8, but nlohmann quotes the byte it stopped at: the first of the three of U+D55C,
    # written as \xNN.
    path = tmp_path / "broken.json"
    path.write_text('{"schema"\ud55c: 1}', encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1:10: malformed JSON" in err and "last read: '\"schema\"\\xed'" in err


NEBIUS = os.path.join(DATA, "nccl_topo_xml", "nebius_h100_vm_8xH100_8xIB_topo_v1.xml")


@pytest.mark.parametrize("verb", [["show"], ["show", "--json"], ["plan", "--mesh", "tp=8"],
                                  ["convert", "--to", "json"]])
def test_bytes_that_are_not_utf8_are_refused_at_their_line(verb, tmp_path, capsys):
    from torch_topo import TopoParseError
    from torch_topo.topology import load_topology

    raw = open(NEBIUS, "rb").read()
    assert raw.count(b'name="mlx5_4"') == 1
    bad = raw.replace(b'name="mlx5_4"', b'name="mlx5_\xff4"')
    offset = bad.index(b"\xff")
    line = bad[:offset].count(b"\n") + 1
    col = offset - (bad.rfind(b"\n", 0, offset) + 1) + 1
    path = tmp_path / "bad.xml"
    path.write_bytes(bad)
    with pytest.raises(TopoParseError) as info:
        load_topology(str(path))
    assert (info.value.path, info.value.line, info.value.column) == (str(path), line, col)
    assert main([verb[0], str(path), *verb[1:]]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}:{col}: byte \\xff is not UTF-8, expected UTF-8 text" in err
    assert "Traceback" not in err
    # Well-formed multi-byte UTF-8 in a name still loads and serialises.
    path.write_bytes(raw.replace(b'name="mlx5_4"', 'name="mlx5_é4"'.encode()))
    assert "mlx5_é4" in load_topology(str(path)).to_json()


def test_utf16_file_is_named_as_such(tmp_path, capsys):
    # Windows PowerShell 5.1 saves `nvidia-smi topo -m > file` as UTF-16 with a byte order mark.
    path = tmp_path / "topo.txt"
    path.write_bytes(open(DGX1).read().encode("utf-16"))
    assert main(["show", str(path)]) == 2
    assert (f"{path}:1:1: byte \\xff is not UTF-8, expected UTF-8 text; the file is UTF-16 (its "
            "byte order mark): save it as UTF-8, e.g. iconv -f UTF-16 -t UTF-8") in \
        capsys.readouterr().err
