# SPDX-License-Identifier: Apache-2.0
"""`plan`'s flat/hierarchical side for groups of GPU ranks is the one the backend takes: inside
the size ranges its cost model scans for the group, or where TORCH_TOPO_HIERARCHICAL fixes it.
Reference: the backend's own `hierarchical_thresholds` over the Cluster its exchange would
assemble from the same file (device type cuda), not the plan's code."""

from __future__ import annotations

import json
import re

import pytest
from planner_support import DGX1, in_ranges

from torch_topo import _C
from torch_topo.cli import main
from torch_topo.hierarchical_choice import CHOICE_SIZES
from torch_topo.plan import SIZE_CLASSES

_CELL = re.compile(r"(\d+) (KiB|MiB|GiB): flat [^;]* -> (\w+)")


def _four_dgx1(tmp_path):
    """Four DGX-1 hosts of eight GPU ranks; one NIC each at 100 Gbit/s (assumed: the file names
    no speed)."""
    doc = json.loads(_C.planner_cluster_json(path=str(DGX1), hosts=4))
    for i, host in enumerate(doc["hosts"]):
        host["hostname"] = f"node{i}"
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(doc))
    return path


def _backend_ranges(path) -> dict:
    import torch_topo.hierarchy as hierarchy
    from torch_topo.cluster import Cluster
    from torch_topo.config import TopoConfig

    cluster = Cluster(_C.load_cluster_file(str(path)), 0)
    return hierarchy.hierarchical_thresholds(hierarchy.HostLayout.from_cluster(cluster),
                                             TopoConfig.from_env(), cluster=cluster,
                                             device_type="cuda")


@pytest.mark.parametrize("mode", ["auto", "always", "never"])
def test_gpu_groups_take_the_backends_side(mode, tmp_path, capsys, monkeypatch):
    import torch_topo.hierarchy as hierarchy

    for var in ("TORCH_TOPO_INTER_HOST_GBPS", "TORCH_TOPO_INTER_HOST_LATENCY_US",
                "TORCH_TOPO_AWARE", "TORCH_TOPO_FILE", "TORCH_TOPO_PLAY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TORCH_TOPO_HIERARCHICAL", mode)
    # plan prices with the newest NCCL the model knows unless --nccl-version says otherwise;
    # the backend with the installed one: the same here.
    monkeypatch.setattr(hierarchy, "nccl_version_code", lambda: 0)
    path = _four_dgx1(tmp_path)
    ranges = _backend_ranges(path).get("all_reduce", ())
    step = 3 << 20
    sizes = {"step": step, **SIZE_CLASSES}
    assert main(["plan", str(path), "--mesh", "dp=32", "--traffic", f"dp={step}", "--json"]) == 0
    algorithms = json.loads(capsys.readouterr().out)["algorithms"]["dp"]
    taken = {label: algorithms[label] == "hierarchical" for label in sizes}
    assert taken == {label: in_ranges(ranges, n) for label, n in sizes.items()}
    assert main(["plan", str(path), "--mesh", "dp=32"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "predicted all_reduce" in x]
    cells = _CELL.findall(line)
    assert [int(n) << {"KiB": 10, "MiB": 20, "GiB": 30}[u] for n, u, _ in cells] == list(
        CHOICE_SIZES)
    assert [side == "hierarchical" for *_, side in cells] == [in_ranges(ranges, n)
                                                              for n in CHOICE_SIZES]
    # The cases tell the modes apart: auto's band holds the step but not 64 KiB or 256 MiB.
    want = {"auto": {"step": True, "small": False, "large": False},
            "always": dict.fromkeys(("step", "small", "large"), True),
            "never": dict.fromkeys(("step", "small", "large"), False)}[mode]
    assert {k: taken[k] for k in want} == want
