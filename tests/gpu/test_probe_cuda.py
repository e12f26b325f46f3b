# SPDX-License-Identifier: Apache-2.0
"""The live probe on a GPU host, checked against what torch and NCCL themselves report.

NCCL reads NCCL_TOPO_FILE and NCCL_TOPO_DUMP_FILE when a process creates its first communicator,
so the NCCL check runs in a fresh interpreter."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
import torch

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _torch_bus_ids() -> list[str]:
    ids = []
    for dev in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(dev)
        ids.append(f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0")
    return ids


def _normal(bus_id: str) -> str:
    """NCCL writes 16-bit or 32-bit domains ("0000:a1:00.0", "00000000:a1:00.0")."""
    domain, rest = bus_id.lower().split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def _xml_gpu_bus_ids(text: str) -> list[str]:
    root = ET.fromstring(text)
    return sorted(_normal(pci.get("busid")) for pci in root.iter("pci")
                  if pci.find("gpu") is not None)


def test_live_probe_finds_each_gpu_by_torchs_bus_id():
    import torch_topo

    topology = torch_topo.probe()
    probed = sorted(_normal(g.bus_id) for g in topology.gpus if g.bus_id)
    assert probed == sorted(_torch_bus_ids()), (probed, topology.warnings)


def _smi_fabric_domains() -> dict[str, str]:
    """{bus id: the domain nvidia-smi -q's Fabric section implies ("" for none)}."""
    out = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    domains = {}
    for section in re.split(r"\n(?=GPU [0-9A-Fa-f]+:)", out)[1:]:
        bus = _normal(section.split()[1])
        fabric = section.split("Fabric", 1)[1] if "Fabric" in section else ""
        state = re.search(r"State\s*:\s*(\S+)", fabric)
        status = re.search(r"Status\s*:\s*(\S+)", fabric)
        uuid = re.search(r"ClusterUUID\s*:\s*([0-9A-Fa-f-]+)", fabric)
        clique = re.search(r"CliqueId\s*:\s*(\d+)", fabric)
        hex_uuid = uuid.group(1).replace("-", "").lower() if uuid else ""
        complete = (state and state.group(1) == "Completed" and status
                    and status.group(1) == "Success" and clique and hex_uuid.strip("0"))
        domains[bus] = f"{hex_uuid}/{int(clique.group(1))}" if complete else ""
    return domains


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs nvidia-smi")
def test_nvlink_domain_agrees_with_nvidia_smi_fabric():
    # The probe's NVML fabric query against nvidia-smi's own report of it (on a host without
    # multi-node NVLink: no domain and no fabric warning).
    import torch_topo

    topology = torch_topo.probe()
    expected = _smi_fabric_domains()
    got = {_normal(g.bus_id): g.nvlink_domain for g in topology.native.gpus}
    assert got == {bus: expected[bus] for bus in got}, (got, expected)
    assert not [w for w in topology.warnings if "fabric" in w], topology.warnings


@pytest.mark.timeout(120)
def test_nccl_accepts_our_xml_and_dumps_the_same_gpus(tmp_path):
    import torch_topo

    ours = tmp_path / "ours.xml"
    ours.write_text(torch_topo.probe().to_nccl_xml())
    dump = tmp_path / "nccl_dump.xml"
    code = textwrap.dedent(f"""
        import os, torch, torch.distributed as dist
        dist.init_process_group("nccl", store=dist.FileStore({str(tmp_path / 's')!r}, 1),
                                rank=0, world_size=1, device_id=torch.device("cuda", 0))
        x = torch.ones(1024, device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        assert x.sum().item() == 1024
        dist.destroy_process_group()
        print("OK")
    """)
    env = dict(os.environ, NCCL_TOPO_FILE=str(ours), NCCL_TOPO_DUMP_FILE=str(dump),
               NCCL_DEBUG="WARN", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=100)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    assert dump.exists(), "NCCL wrote no topology dump"
    # The live probe knows each GPU's SM version (NVML), so our XML writes every <gpu>.
    assert _xml_gpu_bus_ids(ours.read_text()) == sorted(_torch_bus_ids())
    assert _xml_gpu_bus_ids(dump.read_text()) == sorted(_torch_bus_ids())
