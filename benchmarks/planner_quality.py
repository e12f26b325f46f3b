# SPDX-License-Identifier: Apache-2.0
"""Planner quality and speed: predicted communication time per step of the contiguous,
random (median of 100) and planned layouts over every topology file of tests/data and
several meshes, with ratios; then planning time against cluster size up to 1024 GPUs.

All times are the cost model's predictions (csrc/topo/cost_model), not measurements: the
ratios say how much the layout alone changes what the model expects the links to carry.

Usage: python benchmarks/planner_quality.py [--random N] [--max-hosts 128] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import time

from torch_topo import _C
from torch_topo.plan import Plan, resolve_cluster

DATA = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data"
DGX1 = DATA / "nvidia_smi_topo" / "dgx1like_8xV100-SXM2_hybridcube_1xEDR_oneflow.txt"


def host_files() -> list[tuple[pathlib.Path, int]]:
    out = []
    for path in sorted(DATA.rglob("*")):
        if not path.is_file() or path.parent.name == "nccl_tests" or path.suffix not in (".txt", ".xml", ".json"):
            continue
        try:
            gpus = len(json.loads(_C.planner_cluster_json(path=str(path)))["hosts"][0]["gpus"])
        except (ValueError, RuntimeError):
            continue
        if gpus >= 2:
            out.append((path, gpus))
    return out


def meshes_for(gpus: int, hosts: int) -> list[dict[str, int]]:
    world = gpus * hosts
    out = []
    for tp in (2, 4, 8):
        if gpus % tp == 0 and tp < world:
            out.append({"dp": world // tp, "tp": tp})
    if gpus % 4 == 0:
        out.append({"dp": world // 4, "cp": 2, "tp": 2})
    if hosts > 1 and gpus >= 4:
        out.append({"tp": gpus, "dp": hosts})  # tp outermost: contiguous tp straddles hosts
    return out


def quality(samples: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for path, gpus in host_files():
        for hosts in (1, 2):
            cluster = resolve_cluster(path, hosts)
            for mesh in meshes_for(gpus, hosts):
                planned = Plan.build(cluster, mesh)
                naive = Plan.build(cluster, mesh, contiguous=True)
                spec = [(n, s, t["bytes"], t["op"]) for (n, s), t in
                        zip(mesh.items(), planned.to_dict()["traffic"].values(), strict=False)]
                ranks = list(range(cluster.world_size))
                costs = []
                for _ in range(samples):
                    rng.shuffle(ranks)
                    costs.append(sum(e["seconds"] for e in cluster.mesh_cost(spec, ranks)))
                rand = statistics.median(costs)
                rows.append({"file": path.name, "hosts": hosts,
                             "mesh": ",".join(f"{k}={v}" for k, v in mesh.items()),
                             "contiguous_ms": naive.cost() * 1e3, "random_ms": rand * 1e3,
                             "planned_ms": planned.cost() * 1e3,
                             "contiguous_over_planned": naive.cost() / planned.cost(),
                             "random_over_planned": rand / planned.cost()})
    return rows


def planning_time(max_hosts: int) -> list[dict]:
    rows = []
    hosts = 1
    while hosts <= max_hosts:
        cluster = resolve_cluster(DGX1, hosts)
        for mesh in ({"dp": 4 * hosts, "tp": 2}, {"pp": 1, "dp": hosts, "ep": 2, "tp": 4}):
            times = []
            for _ in range(3):
                start = time.perf_counter()
                cluster.plan_mesh(list(mesh.items()))
                times.append(time.perf_counter() - start)
            rows.append({"gpus": 8 * hosts, "hosts": hosts,
                         "mesh": ",".join(f"{k}={v}" for k, v in mesh.items()),
                         "plan_s": statistics.median(times)})
        hosts *= 2
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--random", type=int, default=100, help="random layouts per case (median)")
    parser.add_argument("--max-hosts", type=int, default=128, help="largest cluster (x8 GPUs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write both tables here")
    args = parser.parse_args()

    rows = quality(args.random, args.seed)
    print("# predicted communication time per step (ms), lower is better")
    print(f"{'file':<58} {'hosts':>5} {'mesh':<18} {'contig':>9} {'random':>9} {'planned':>9} "
          f"{'c/p':>6} {'r/p':>6}")
    for r in rows:
        print(f"{r['file'][:58]:<58} {r['hosts']:>5} {r['mesh']:<18} {r['contiguous_ms']:>9.2f} "
              f"{r['random_ms']:>9.2f} {r['planned_ms']:>9.2f} {r['contiguous_over_planned']:>6.2f} "
              f"{r['random_over_planned']:>6.2f}")
    cp = [r["contiguous_over_planned"] for r in rows]
    rp = [r["random_over_planned"] for r in rows]
    print(f"\ncases {len(rows)}: contiguous/planned median {statistics.median(cp):.2f} max {max(cp):.2f} "
          f"min {min(cp):.2f}; random/planned median {statistics.median(rp):.2f}; "
          f"planned strictly better than contiguous in {sum(c > 1 + 1e-9 for c in cp)} cases")

    timing = planning_time(args.max_hosts)
    print("\n# planning time (DGX-1 hosts, exact intra-host search + cost check), seconds")
    print(f"{'gpus':>6} {'hosts':>6} {'mesh':<22} {'plan_s':>8}")
    for t in timing:
        print(f"{t['gpus']:>6} {t['hosts']:>6} {t['mesh']:<22} {t['plan_s']:>8.3f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"quality": rows, "planning_time": timing}, indent=2))


if __name__ == "__main__":
    main()
