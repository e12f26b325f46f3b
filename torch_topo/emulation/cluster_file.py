# SPDX-License-Identifier: Apache-2.0
"""The topology files the emulator writes for its ranks, in torch-topo JSON (schema
"torch-topo/1", csrc/topo/topology_json.h), as a user of a real cluster would pin them:

- one host file per node (`"kind": "host"`), named by TORCH_TOPO_FILE in that node's ranks: the
  host topology (--topology FILE, or a CPU-only host) whose only NIC is the emulated `eth0` at
  the configured line rate. The backend's cluster stage derives the inter-host bandwidth from
  the NIC speeds of the hosts, so it learns the emulated link speed from this file alone;
- one cluster file (`"kind": "cluster"`), named by EMULATED_CLUSTER_FILE, with every host, the
  rank placements and the emulated link's bandwidth (GB/s per direction) and one-way latency
  (us; absent in the one-GPU rehearsal, which emulates no link), for tools such as
  `python -m torch_topo plan`.
"""

from __future__ import annotations

import json

from torch_topo.emulation.launcher import RankSpec
from torch_topo.emulation.netns import ClusterNetwork
from torch_topo.emulation.shaping import LinkSpec

__all__ = ["SCHEMA", "base_host", "node_host", "cluster_document", "write_json"]

SCHEMA = "torch-topo/1"


def base_host(topology_file: str | None) -> dict:
    """The host every node plays: the given file as torch-topo JSON, or a CPU-only host."""
    if topology_file is None:
        return {"schema": SCHEMA, "kind": "host", "source": "torch_topo.emulate", "gpus": []}
    from torch_topo import _C  # the readers live in the extension

    cluster = json.loads(_C.planner_cluster_json(path=topology_file, hosts=1))
    return {"schema": SCHEMA, "kind": "host", **cluster["hosts"][0]}


def node_host(base: dict, net: ClusterNetwork, node: int) -> dict:
    """`base` as node `node`: its host name and the emulated NIC in place of the file's NICs
    (their speeds describe a machine this emulation is not). The file's GPU-to-NIC paths go
    with its NICs: a table of another NIC count was refused by the readers (every rank's
    init failed unless the file had exactly one NIC), and the emulated NIC's place in the
    host is unknown."""
    host = dict(base)
    host["hostname"] = net.hostname(node)
    host["nics"] = [{"name": net.ifname, "bus_id": "", "numa_node": -1,
                     "speed_gbps": net.link.rate_bps / 1e9}]  # Gbit/s line rate
    host.pop("gpu_nic_paths", None)
    return host


def cluster_document(hosts: list[dict], ranks: list[RankSpec], link: LinkSpec | None = None
                     ) -> dict:
    """The cluster of `hosts` with `ranks` placed on them; `link`, the emulated inter-host link,
    is left out where there is none (one-GPU rehearsal: the hosts' NIC speeds then set it)."""
    gpus = min(len(h.get("gpus", [])) for h in hosts)
    doc = {
        "schema": SCHEMA,
        "kind": "cluster",
        "hosts": [{k: v for k, v in h.items() if k not in ("schema", "kind")} for h in hosts],
        # With a host file, rank r of a node plays that host's GPU local_rank where it has one.
        "ranks": [{"host": r.node, "local_gpu": r.local_rank if r.local_rank < gpus else -1,
                   "local_rank": r.local_rank} for r in ranks],
    }
    if link is not None:
        doc["inter_host_bandwidth_gbps"] = link.rate_bps / 8e9  # GB/s per direction
        doc["inter_host_latency_us"] = link.delay_us
    return doc


def write_json(path: str, content: dict) -> None:
    with open(path, "w") as f:
        json.dump(content, f, indent=1)
        f.write("\n")
