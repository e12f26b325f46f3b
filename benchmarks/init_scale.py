# SPDX-License-Identifier: Apache-2.0
"""What `init_process_group("topo")` costs each rank as the world grows: the cluster exchange
(torch_topo.cluster.exchange_records, the code every "topo" group runs) and the creator's check
of the shared settings (torch_topo.group_settings), for simulated worlds of 64, 256 and 1024 ranks against one real TCPStore.

Ranks are threads in a few processes, each with its own TCPStore client; they connect in waves
of 64, then all start together. Hosts are 8-GPU machines read from real topology files in
tests/data (a uniform cluster of one file, and a mixed one alternating two files). Per world
size it prints the bytes and store operations each rank sends and reads (mean, and the most
any rank did: group rank 0 reads every placement), the store's total and the wall time, the
growth exponent between sizes, and what the exchange of f8f051a (every rank reads every rank's
whole record) would read per rank, computed from the record size; then one rank's pricing of a
group's flat/hierarchical sizes at each size and at 16384 ranks, built from the assembled
cluster beside the JSON route it replaced; then planning time at 1024 GPUs and above from
benchmarks/planner_quality.py. No GPU is used.

Usage: python benchmarks/init_scale.py [--sizes 64,256,1024] [--processes 4] [--switch-interval 0.2]
       [--no-planner] [--json FILE]
Last line: `init_scale: 1024 ranks, K KB read per rank, S s`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import multiprocessing as mp
import pathlib
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
A100 = DATA / "nccl_topo_xml" / "azure_ndv4_8xA100_topo.xml"
H100 = DATA / "nccl_topo_xml" / "azure_ndv5_8xH100_topo.xml"
GPUS_PER_HOST = 8
WAVE = 64
TIMEOUT = timedelta(seconds=120)
# Real ranks are processes, each with its own interpreter; here hundreds share one, and at
# Python's default 5 ms switch interval every waiting thread asks the running one to drop the
# interpreter lock, so the machine spends itself on lock handoffs (HashStore, one process,
# 1024 ranks: 31 s at 5 ms, 8 s at 0.2 s; docs/backend.md). The ranks' processes use this one.
SWITCH_INTERVAL_S = 0.2
# Starting the processes and connecting hundreds of clients each takes minutes on a loaded
# 2-core machine; it is not part of what is measured.
SETUP_TIMEOUT_S = 1200.0
MAX_PRICED_RANKS = 16384  # _C.MAX_RANKS, the planner's largest cluster


class CountingStore:
    """Forwards to a c10d store and counts, per call, the bytes sent (keys and values) and read
    (values), and the operations (a multi-key wait or multi_get is one round trip)."""

    def __init__(self, store):
        self._store = store
        self.sent = self.read = self.ops = 0

    def _count(self, sent: int, read: int = 0) -> None:
        self.sent += sent
        self.read += read
        self.ops += 1

    def set(self, key: str, value) -> None:
        self._count(len(key) + len(value))
        self._store.set(key, value)

    def get(self, key: str) -> bytes:
        value = self._store.get(key)
        self._count(len(key), len(value))
        return value

    def add(self, key: str, amount: int) -> int:
        self._count(len(key) + 8, 8)
        return self._store.add(key, amount)

    def wait(self, keys: list[str], timeout: timedelta) -> None:
        self._count(sum(len(k) for k in keys))
        self._store.wait(keys, timeout)

    def check(self, keys: list[str]) -> bool:
        self._count(sum(len(k) for k in keys), 1)
        return self._store.check(keys)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        values = self._store.multi_get(keys)
        self._count(sum(len(k) for k in keys), sum(len(v) for v in values))
        return values


def own_records(world: int, mixed: bool) -> list[dict]:
    """Each simulated rank's own record (torch_topo.cluster.own_record's form): host r // 8,
    GPU r % 8, hosts alternating two machine types when `mixed`."""
    from torch_topo.topology import load_topology

    shapes = [load_topology(str(A100))] + ([load_topology(str(H100))] if mixed else [])
    return [{"hostname": f"node{r // GPUS_PER_HOST:04d}", "local_rank": r % GPUS_PER_HOST,
             "local_device": r % GPUS_PER_HOST,
             "topology": shapes[(r // GPUS_PER_HOST) % len(shapes)]} for r in range(world)]


def run_rank(store, rank: int, world: int, own: dict) -> int:
    """One rank's share of group creation: the check of the shared settings and the cluster
    exchange, with the layout the hierarchy derives from it. Returns the number of hosts."""
    from torch_topo import cluster
    from torch_topo.config import TopoConfig
    from torch_topo.group_settings import agree_on_settings
    from torch_topo.hierarchy import HostLayout

    # The creator's check against group rank 0 (default settings, no device bound here).
    agree_on_settings(store, rank, world, TopoConfig(), lazy_cpu=False, timeout=TIMEOUT)
    built, _, _ = cluster.exchange_records(store, rank, world, own, timeout=TIMEOUT)
    layout = HostLayout.from_cluster(built)
    return layout.host_count


def _ranks_in_process(address: tuple[str, int], prefix: str, world: int, ranks: list[int],
                      mixed: bool, switch_interval: float, ready, go, results) -> None:
    import torch.distributed as dist

    sys.setswitchinterval(switch_interval)
    owns = own_records(world, mixed)
    stores: dict[int, CountingStore] = {}

    def connect(r: int) -> None:
        client = dist.TCPStore(address[0], address[1], is_master=False, timeout=TIMEOUT)
        stores[r] = CountingStore(dist.PrefixStore(prefix, client))

    # A wave's clients connect at once: now and then one connect stalls for seconds in the
    # client's retry, and one after another those stalls made the setup take minutes.
    with ThreadPoolExecutor(WAVE) as pool:
        for start in range(0, len(ranks), WAVE):
            list(pool.map(connect, ranks[start:start + WAVE]))
    ready.put(len(ranks))
    go.wait()
    out: dict[int, dict] = {}

    def one(r: int) -> None:
        t0 = time.perf_counter()
        try:
            hosts = run_rank(stores[r], r, world, owns[r])
            error = None
        except Exception as exc:  # reported to the parent, which fails the run
            hosts, error = 0, f"{type(exc).__name__}: {exc}"
        s = stores[r]
        out[r] = {"sent": s.sent, "read": s.read, "ops": s.ops, "end": time.time(),
                  "seconds": time.perf_counter() - t0, "hosts": hosts, "error": error}

    threads = [threading.Thread(target=one, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(out)


def simulate(world: int, *, processes: int = 4, mixed: bool = False,
             store=None, switch_interval: float = SWITCH_INTERVAL_S) -> dict:
    """Runs `world` simulated ranks and returns per-rank counters and the wall time. Without
    `store` a TCPStore server is started here; `processes=0` runs the ranks as threads of this
    process against `store` (a c10d store every thread may share, e.g. HashStore).
    `switch_interval`: the ranks' interpreter switch interval (sys.setswitchinterval), put
    back afterwards in this process."""
    import torch.distributed as dist

    prefix = f"init_scale/{world}/{'mixed' if mixed else 'uniform'}/{time.monotonic_ns()}/"
    if processes == 0:
        owns = own_records(world, mixed)
        counters = [CountingStore(dist.PrefixStore(prefix, store)) for _ in range(world)]
        per_rank: dict[int, dict] = {}

        def one(r: int) -> None:
            hosts = run_rank(counters[r], r, world, owns[r])
            per_rank[r] = {"sent": counters[r].sent, "read": counters[r].read,
                           "ops": counters[r].ops, "hosts": hosts, "error": None}

        before = sys.getswitchinterval()
        sys.setswitchinterval(switch_interval)
        try:
            t0 = time.time()
            threads = [threading.Thread(target=one, args=(r,)) for r in range(world)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.time() - t0
        finally:
            sys.setswitchinterval(before)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                               timeout=TIMEOUT)
        ctx = mp.get_context("spawn")
        ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        shares = [list(range(world))[p::processes] for p in range(processes)]
        procs = [ctx.Process(target=_ranks_in_process,
                             args=(("127.0.0.1", port), prefix, world, share, mixed,
                                   switch_interval, ready, go, results)) for share in shares]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=SETUP_TIMEOUT_S)
        t0 = time.time()
        go.set()
        per_rank = {}
        for _ in procs:
            per_rank.update(results.get(timeout=SETUP_TIMEOUT_S))
        for p in procs:
            p.join()
        wall = max(v["end"] for v in per_rank.values()) - t0
        del server
    errors = sorted({v["error"] for v in per_rank.values() if v["error"]})
    if errors:
        raise RuntimeError(f"init_scale: {world} ranks: {errors[0]}")
    rows = [per_rank[r] for r in range(world)]
    return {
        "world": world,
        "hosts": rows[0]["hosts"],
        "read_mean": statistics.fmean(r["read"] for r in rows),
        "read_max": max(r["read"] for r in rows),
        "sent_mean": statistics.fmean(r["sent"] for r in rows),
        "sent_max": max(r["sent"] for r in rows),
        "ops_mean": statistics.fmean(r["ops"] for r in rows),
        "ops_max": max(r["ops"] for r in rows),
        "ops_per_rank": [r["ops"] for r in rows],
        "total": sum(r["read"] + r["sent"] for r in rows),
        "wall_s": wall,
    }


def old_read_per_rank(world: int, mixed: bool) -> int:
    """Bytes each rank read in the exchange of f8f051a: every rank's record, whose `host` field
    is the host's whole topology JSON (computed, not run: at 1024 ranks it is 16 GB in all)."""
    owns = own_records(GPUS_PER_HOST * (2 if mixed else 1), mixed)
    sizes = [len(json.dumps({"rank": 0, "hostname": o["hostname"], "local_rank": 0,
                             "local_device": 0, "host": o["topology"].to_json()}))
             for o in owns]
    return round(world * statistics.fmean(sizes))


def exponent(a: float, b: float, n_a: int, n_b: int) -> float:
    return math.log(b / a) / math.log(n_b / n_a) if a > 0 and b > 0 else float("nan")


def planner_rows(max_gpus: int) -> list[dict]:
    spec = importlib.util.spec_from_file_location("planner_quality",
                                                  ROOT / "benchmarks" / "planner_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [row for row in module.planning_time(max_gpus // GPUS_PER_HOST)
            if row["gpus"] >= 1024]


def pricing_rows(sizes: list[int]) -> list[dict]:
    """One rank's pricing of a group's flat/hierarchical sizes (what every rank of a GPU group
    runs at creation, after the exchange): the cost model built from the assembled cluster, as
    the backend does, beside the same model built through the cluster's JSON, the route until
    2026-12-07 (which also kept an n x n pair table, not in this column). Both must give the
    same ranges."""
    import torch_topo
    from torch_topo import _C, hierarchy
    from torch_topo.config import TopoConfig

    host = torch_topo.load_topology(str(A100)).to_json()
    config = TopoConfig()
    rows = []
    for world in sizes:
        records = [_C.RankRecord(r, f"node{r // GPUS_PER_HOST:04d}", r % GPUS_PER_HOST,
                                 r % GPUS_PER_HOST, host_json=host) for r in range(world)]
        built = torch_topo.Cluster(_C.assemble_cluster(records), 0)
        layout = hierarchy.HostLayout.from_cluster(built)
        start = time.perf_counter()
        native = hierarchy.hierarchical_thresholds(layout, config, cluster=built,
                                                   device_type="cuda")
        native_s = time.perf_counter() - start
        start = time.perf_counter()
        planner = _C.PlannerCluster(json.dumps(built.planner_doc()), config.pipeline_chunk_bytes,
                                    "auto", hierarchy.nccl_version_code())
        through_json = hierarchy.planner_ranges(planner, list(range(world)))
        json_s = time.perf_counter() - start
        if through_json != native:
            raise SystemExit(f"pricing at {world} ranks: {native} != {through_json} (JSON)")
        rows.append({"world": world, "hosts": layout.host_count, "native_s": native_s,
                     "json_s": json_s})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,256,1024", help="world sizes, ascending")
    parser.add_argument("--processes", type=int, default=4, help="processes holding the ranks")
    parser.add_argument("--switch-interval", type=float, default=SWITCH_INTERVAL_S,
                        help="the ranks' sys.setswitchinterval, seconds (Python's default: 0.005)")
    parser.add_argument("--no-planner", action="store_true", help="skip the planning times")
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    results = []
    for mixed in (False, True):
        for world in sizes:
            results.append(simulate(world, processes=args.processes, mixed=mixed,
                                    switch_interval=args.switch_interval))
            results[-1]["cluster"] = "mixed A100/H100" if mixed else "uniform A100"
            results[-1]["old_read"] = old_read_per_rank(world, mixed)

    print("# cluster exchange + settings check per rank (KB = 1000 bytes; 'max' is the "
          "busiest rank, group rank 0)")
    print(f"{'cluster':<16} {'ranks':>5} {'hosts':>5} {'read KB':>8} {'max':>8} {'sent KB':>8} "
          f"{'max':>7} {'ops':>5} {'max':>5} {'store MB':>9} {'wall s':>7} "
          f"{'f8f051a read KB':>16} {'ratio':>7}")
    for r in results:
        print(f"{r['cluster']:<16} {r['world']:>5} {r['hosts']:>5} {r['read_mean'] / 1e3:>8.2f} "
              f"{r['read_max'] / 1e3:>8.1f} {r['sent_mean'] / 1e3:>8.2f} "
              f"{r['sent_max'] / 1e3:>7.1f} {r['ops_mean']:>5.1f} {r['ops_max']:>5} "
              f"{r['total'] / 1e6:>9.3f} {r['wall_s']:>7.2f} {r['old_read'] / 1e3:>16.0f} "
              f"{r['old_read'] / r['read_mean']:>6.0f}x")
    print("\n# growth exponent between sizes (0 = flat, 1 = linear, 2 = quadratic)")
    print(f"{'cluster':<16} {'ranks':>11} {'read/rank':>10} {'ops/rank':>9} {'store':>7} "
          f"{'wall':>7}")
    for a, b in zip(results, results[1:], strict=False):
        if a["cluster"] != b["cluster"]:
            continue
        print(f"{a['cluster']:<16} {a['world']:>5}-{b['world']:<5} "
              f"{exponent(a['read_mean'], b['read_mean'], a['world'], b['world']):>10.2f} "
              f"{exponent(a['ops_mean'], b['ops_mean'], a['world'], b['world']):>9.2f} "
              f"{exponent(a['total'], b['total'], a['world'], b['world']):>7.2f} "
              f"{exponent(a['wall_s'], b['wall_s'], a['world'], b['world']):>7.2f}")
    priced = pricing_rows(sorted({*sizes, MAX_PRICED_RANKS}))
    print("\n# pricing the group's sizes per rank (hierarchy.hierarchical_thresholds, uniform "
          "A100, cuda): from the assembled cluster, and through its JSON as before, seconds")
    print(f"{'ranks':>6} {'hosts':>5} {'assembled':>10} {'JSON':>8} {'ratio':>7}")
    for p in priced:
        print(f"{p['world']:>6} {p['hosts']:>5} {p['native_s']:>10.3f} {p['json_s']:>8.3f} "
              f"{p['json_s'] / p['native_s']:>6.1f}x")
    planned = [] if args.no_planner else planner_rows(max(sizes))
    if planned:
        print("\n# planning time at 1024 GPUs and above (benchmarks/planner_quality.py), seconds")
        for p in planned:
            print(f"{p['gpus']:>6} GPUs {p['hosts']:>5} hosts  {p['mesh']:<22} {p['plan_s']:>8.3f}")
    if args.json:
        for r in results:
            r.pop("ops_per_rank")
        pathlib.Path(args.json).write_text(json.dumps({"exchange": results, "pricing": priced,
                                                       "planner": planned}, indent=1))
    last = [r for r in results if r["world"] == max(sizes) and r["cluster"] == "uniform A100"][0]
    print(f"init_scale: {last['world']} ranks, {last['read_mean'] / 1e3:.1f} KB read per rank, "
          f"{last['wall_s']:.1f} s")


if __name__ == "__main__":
    main()
