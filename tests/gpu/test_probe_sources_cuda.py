# SPDX-License-Identifier: Apache-2.0
"""The live probe on a GPU host against the host's own hwloc export and sysfs (issue 16, items 3
and 4): no source fails, GPU -> NIC path classes equal those of the export read as a file (the
H200 VM gave SYS live and PHB from its lstopo XML), and no virtual interface is a NIC."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.gpu


def test_no_probe_source_fails_on_a_gpu_host():
    from torch_topo import _C
    from torch_topo.probe import probe_failed

    live = _C.probe_host(require_gpus=True)
    assert [w for w in live.warnings if probe_failed(w)] == []
    assert "nvml" in live.source and "hwloc" in live.source, live.source


def test_gpu_to_nic_paths_equal_those_of_the_hosts_hwloc_export():
    from torch_topo import _C

    live = _C.probe_host(require_gpus=True)
    exported = _C.read_hwloc_xml(_C.export_hwloc_xml(), "this-host.xml")
    gpu_at = {g.bus_id: i for i, g in enumerate(exported.gpus)}
    nic_at = {n.bus_id: k for k, n in enumerate(exported.nics)}
    assert sorted(nic_at) == sorted(n.bus_id for n in live.nics)
    pairs = [
        (live.nic_path(i, k).cls, exported.nic_path(gpu_at[g.bus_id], nic_at[n.bus_id]).cls, g, n)
        for i, g in enumerate(live.gpus)
        for k, n in enumerate(live.nics)
    ]
    differ = [(g.bus_id, n.name, a, b) for a, b, g, n in pairs if a != b]
    assert differ == [], differ


def test_every_nic_is_a_pci_function_of_this_host():
    from torch_topo import _C

    for nic in _C.probe_host().nics:
        links = [f"/sys/class/{c}/{nic.name}/device" for c in ("net", "infiniband")]
        assert any(os.path.exists(p) for p in links), nic.name
        assert any(nic.bus_id in os.path.realpath(p) for p in links if os.path.exists(p)), nic
