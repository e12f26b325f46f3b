# SPDX-License-Identifier: Apache-2.0
"""The cluster topology file the emulator hands to its ranks through TORCH_TOPO_FILE.

It says what a user of a real cluster would write down: which host each rank runs on and how
fast the network between hosts is. The field names follow `ClusterTopology`, `HostTopology`,
`Nic` and `RankPlacement` of csrc/topo/graph.h, with their units (see docs/emulator.md):

    {"format": "torch-topo-cluster", "version": 1,
     "hosts": [{"hostname": "node0", "address": "10.213.0.1", "host_file": null,
                "nics": [{"name": "eth0", "speed_gbps": 1.0}]}, ...],
     "ranks": [{"host": 0, "local_rank": 0, "local_gpu": -1}, ...],
     "inter_host_bandwidth_gbps": 0.125,   # GB/s per direction
     "inter_host_latency_us": 1000.0}      # one way
"""

from __future__ import annotations

import json

from torch_topo.emulation.launcher import RankSpec
from torch_topo.emulation.netns import ClusterNetwork

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "build_cluster_file", "write_cluster_file"]

FORMAT_NAME = "torch-topo-cluster"
FORMAT_VERSION = 1


def build_cluster_file(net: ClusterNetwork, ranks: list[RankSpec],
                       host_file: str | None) -> dict:
    """With `host_file` every node plays that host topology and rank r of a node its GPU
    `local_rank`; without one the ranks are CPU-only (local_gpu -1)."""
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "source": "torch_topo.emulate",
        "hosts": [
            {
                "hostname": net.hostname(i),
                "address": net.address(i),
                "host_file": host_file,
                "nics": [{"name": net.ifname, "speed_gbps": net.link.rate_bps / 1e9}],
            }
            for i in range(net.nodes)
        ],
        "ranks": [
            {"host": r.node, "local_rank": r.local_rank,
             "local_gpu": r.local_rank if host_file else -1}
            for r in ranks
        ],
        "inter_host_bandwidth_gbps": net.link.rate_bps / 8e9,
        "inter_host_latency_us": net.link.delay_us,
    }


def write_cluster_file(path: str, content: dict) -> None:
    with open(path, "w") as f:
        json.dump(content, f, indent=1)
        f.write("\n")
