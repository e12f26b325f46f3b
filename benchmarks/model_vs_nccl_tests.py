# SPDX-License-Identifier: Apache-2.0
"""The cost model against published nccl-tests results: for every output in
tests/data/nccl_tests, one table of the published time and bus bandwidth per size beside the
model's (PlannerCluster.estimate: NCCL's algorithms on GPU groups), with ratios model /
published and the algorithm and protocol the model expects NCCL to pick. Goals: bus bandwidth
within +-25% from 1 MiB up, time within 2x from 8 B to 64 KiB; rows outside are marked '!',
and a system's note says why it underperforms where the model cannot follow.

Then the cloud NCCL XML files that leave NVLink out (issue 22 item 3): their 1 GiB all_reduce
as read, and with the NVLink completed (load_topology(..., nvlink="complete")) from the GPU model
or, for Azure's files that name no model, from a stand-in live probe of the same host (the
nvidia-smi view of the same board under the file's bus ids), beside a published run of the same
GPUs.

Then the hierarchical thresholds (flat NCCL against the two-level schedule, 1.15x margin) on
the multi-host clusters of issue 22, beside those of the alpha-beta model alone.

The published figures are measurements by others (tests/data/ATTRIBUTION.md); the model's are
predictions on this machine's CPU, deterministic.

Usage: python benchmarks/model_vs_nccl_tests.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json

from torch_topo import _C
from torch_topo.bench.nccl_tests import (
    DATA,
    SYSTEMS,
    cluster_doc,
    compare,
    format_table,
    goal_misses,
    parse_published,
    table_json,
)
from torch_topo.plan import resolve_cluster
from torch_topo.size_ranges import describe
from torch_topo.topology import Topology, load_topology

# (label, host file, hosts, NIC Gbit/s set on every NIC the file lists, GPU sm)
THRESHOLD_CLUSTERS = (
    ("2 x 8 H100, 9 NICs at 400G", "nvidia_smi_topo/PARTIAL_nccl1453_8xH100_NV18_9xNIC.tsv.txt",
     2, 400, 90),
    ("4 x 8 H100, 9 NICs at 400G", "nvidia_smi_topo/PARTIAL_nccl1453_8xH100_NV18_9xNIC.tsv.txt",
     4, 400, 90),
    ("2 x 8 H100 3-NUMA, 9 NICs at 400G",
     "nvidia_smi_topo/PARTIAL_sglang13973_8xH100class_NV18_9xNIC_3numa.txt", 2, 400, 90),
    ("4 x 8 H100 3-NUMA, 9 NICs at 400G",
     "nvidia_smi_topo/PARTIAL_sglang13973_8xH100class_NV18_9xNIC_3numa.txt", 4, 400, 90),
    ("2 x 8 A100 DGX, 12 NICs at 200G",
     "nvidia_smi_topo/PARTIAL_nccl1505_DGX-A100-40GB_NV12_12xNIC_NPS4.txt", 2, 200, 80),
    ("4 x 8 V100 DGX-1, 1 EDR NIC",
     "nvidia_smi_topo/dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt", 4, 100, 70),
)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")

# (cloud file, nvidia-smi view of its board for the stand-in live probe or None, GPU sm,
# published run of the same GPUs)
CLOUD_FILES = (
    ("azure_ndv4_8xA100_topo.xml", "a100_8xSXM_NV12_2numa_mlengineering_realigned.txt", 80,
     "a100_8xSXM_single_node_all_reduce_perf_mlengineering_massaged.txt"),
    ("azure_ndv5_8xH100_topo.xml", "h100_8xSXM_NV18_2socket_mlengineering.txt", 90,
     "dgxH100class_1node_8xH100_all_reduce_perf_256M-2G.txt"),
    ("nebius_h100_vm_8xH100_8xIB_topo_v1.xml", None, 90,
     "dgxH100class_1node_8xH100_all_reduce_perf_256M-2G.txt"),
)


def print_system(system, rows) -> dict:
    ops = list(dict.fromkeys(r.published.op for r in rows)) or [system.op]
    print(f"\n== {system.results}  ({system.hosts} x {system.topology.split('/')[-1]}, "
          f"{', '.join(ops)}, sm{system.sm})")
    print(format_table(rows, system.note))
    return {"results": system.results, "misses": len(goal_misses(rows)), "rows": len(rows),
            "note": system.note, "table": table_json(rows)}


def thresholds(label, path, hosts, gbit, sm) -> dict:
    doc = cluster_doc(path, hosts=hosts, sm=sm, nic_gbit=gbit)
    ranks = list(range(len(doc["ranks"])))
    out = {}
    for model in ("auto", "alpha_beta"):
        found = _C.PlannerCluster(json.dumps(doc), 4 << 20, model).hierarchical_thresholds(ranks)
        out[model] = {op: found[op] for op in OPS}
    cells = "  ".join(f"{op} {describe(out['auto'][op])} (alpha-beta {describe(out['alpha_beta'][op])})"
                      for op in OPS)
    print(f"{label:<36} {cells}")
    return {"cluster": label, **out}


def _stand_in_live(path, nvsmi: str, sm: int) -> Topology:
    doc = json.loads(load_topology(DATA / "nvidia_smi_topo" / nvsmi).to_json())
    for gpu, file_gpu in zip(doc["gpus"], load_topology(path).gpus, strict=True):
        gpu["bus_id"], gpu["sm"] = file_gpu.bus_id, sm
    doc["source"] = "probe:stand-in"
    return Topology.from_json(json.dumps(doc))


def _busbw(topology: Topology, size: int) -> float:
    cluster = resolve_cluster(topology)
    return cluster.estimate("all_reduce", size, [list(range(cluster.world_size))])["bus_bandwidth_gbps"]


def cloud_file(name: str, nvsmi: str | None, sm: int, results: str, size: int = 1 << 30) -> dict:
    path = DATA / "nccl_topo_xml" / name
    live = _stand_in_live(path, nvsmi, sm) if nvsmi else None
    done = load_topology(path, nvlink="complete", live=live)
    system = next(s for s in SYSTEMS if s.results == results)
    published = next(p.busbw for p in parse_published(system)
                     if p.size == size and p.op == "all_reduce" and p.algorithm is None)
    raw, completed = _busbw(load_topology(path), size), _busbw(done, size)
    print(f"{name:<40} {raw:>8.1f} {completed:>10.1f} {done.nvlink_origin:<11} {published:>9.2f} "
          f"{completed / published:>6.2f}  {results}")
    return {"file": name, "as_read_busbw": raw, "completed_busbw": completed,
            "nvlink_origin": done.nvlink_origin, "published": results,
            "published_busbw": published}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write every table here")
    args = ap.parse_args()
    report = {"systems": [], "thresholds": []}
    for system in SYSTEMS:
        report["systems"].append(print_system(system, compare(system)))
    print("\n== cloud NCCL XML without NVLink, all_reduce 1 GiB busbw GB/s: as read, completed "
          "(origin), published, completed / published")
    print(f"{'file':<40} {'as read':>8} {'completed':>10} {'origin':<11} {'published':>9} "
          f"{'ratio':>6}  published run")
    report["cloud_files"] = [cloud_file(*entry) for entry in CLOUD_FILES]
    print("\n== hierarchical at (NCCL model, 1.15x margin; alpha-beta: that model alone)")
    for entry in THRESHOLD_CLUSTERS:
        report["thresholds"].append(thresholds(*entry))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
