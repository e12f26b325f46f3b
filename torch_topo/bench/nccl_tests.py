# SPDX-License-Identifier: Apache-2.0
"""Published nccl-tests results beside the cost model's predictions (layer: Python package).

`SYSTEMS` (published_systems.py) names, for every nccl-tests output in tests/data/nccl_tests,
the topology file of the machine it ran on and what the output's header says that the topology
file does not (GPU generation, NIC line rate, hosts). `compare` prices each published size with
`PlannerCluster.estimate` (NCCL's algorithms on GPU groups) and returns both side by side, and
`format_table` prints them; `benchmarks/model_vs_nccl_tests.py` prints every system's table,
`python -m torch_topo bench --published` a user's own output (nccl_tests_output reads it), and
tests/py/test_nccl_model.py pins a few ratios.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from torch_topo.bench.nccl_tests_output import Published, read_table
from torch_topo.bench.published_systems import SYSTEMS, System
from torch_topo.size_ranges import size_text

__all__ = ["BUSBW_GOAL", "Published", "Row", "SYSTEMS", "System", "TIME_GOAL", "cluster_doc",
           "compare", "format_table", "goal_misses", "parse_published", "size_label",
           "table_json"]

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"

BUSBW_GOAL = (0.75, 1.25)
"""Model / published bus bandwidth allowed from 1 MiB up."""
TIME_GOAL = (0.5, 2.0)
"""Model / published time allowed from 8 B to 64 KiB."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    published: Published
    model_us: float
    model_busbw: float
    algorithm: str
    protocol: str

    @property
    def time_ratio(self) -> float:
        return self.model_us / self.published.time_us

    @property
    def busbw_ratio(self) -> float:
        return self.model_busbw / self.published.busbw if self.published.busbw > 0 else float("nan")



_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _markdown_rows(lines: list[str]) -> list[Published]:
    """ml-engineering's tables: '| 32KiB | 1.44GBps | 0.82GBps |' (payload, busbw, algbw), or
    its 16 GiB summary '| all-reduce, `NCCL_NVLS_ENABLE=1` | NVLS | 480.0GBps | 107% |'."""
    out = []
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"([0-9]+)(KiB|MiB|GiB)", cells[0]) if cells else None
        if m and len(cells) >= 3:
            size = int(m.group(1)) * _UNITS[m.group(2)]
            algbw = float(cells[2].removesuffix("GBps"))
            out.append(Published(size=size, time_us=size / (algbw * 1e3),
                                 busbw=float(cells[1].removesuffix("GBps"))))
        elif len(cells) >= 3 and cells[2].endswith("GBps") and cells[1] in ("NVLS", "Ring"):
            op = cells[0].split(",")[0].replace("-", "_")
            forced = "ring" if "NVLS_ENABLE=0" in cells[0] else None
            # The summary's runs are -g 8.
            out.append(_from_busbw(op, forced, 8, 16 << 30, float(cells[2].removesuffix("GBps"))))
    return out


def _from_busbw(op: str, algorithm: str | None, ranks: int, size: int, busbw: float) -> Published:
    """A measurement published as bus bandwidth alone: its time follows from nccl-tests' factor."""
    from torch_topo import _C

    factor = _C.bus_bandwidth_factor(op, ranks)
    return Published(size=size, time_us=size * factor / (busbw * 1e3), busbw=busbw, op=op,
                     algorithm=algorithm)


def _busbw_rows(lines: list[str]) -> list[Published]:
    """Peak-bus-bandwidth summaries, a line per value: 'op algorithm ranks bytes busbw'
    ('-': NCCL's own choice)."""
    out = []
    for line in lines:
        tok = line.split()
        if len(tok) == 5 and not tok[0].startswith("#"):
            out.append(_from_busbw(tok[0], None if tok[1] == "-" else tok[1], int(tok[2]),
                                   int(tok[3]), float(tok[4])))
    return out


def _partition_rows(lines: list[str], label: str) -> list[Published]:
    """NVIDIA/nccl #1801's summary: 'NVL4  12  ring, default  17179869184  107.30  196.72  0
    159983  107.39  196.87  0' (partition, GPUs, algorithm, size, out-of-place algbw and busbw,
    #wrong, then the in-place columns, the only time). "ring, default" was NCCL's choice with
    NVLS off, so it is priced as ring."""
    out = []
    for line in lines:
        tok = line.replace(",", " ").split()
        if not tok or tok[0] != label:
            continue
        size, busbw, time_us = int(tok[-8]), float(tok[-6]), float(tok[-4])
        out.append(Published(size=size, time_us=time_us, busbw=busbw, algorithm=tok[2]))
    return out


def parse_published(system: System) -> list[Published]:
    """The measurements of `system.results`, smallest size first."""
    path = DATA / "nccl_tests" / system.results
    lines = path.read_text().splitlines()
    if system.label:
        return _partition_rows(lines, system.label)
    if "_busbw_" in system.results:
        return _busbw_rows(lines)
    if system.results.endswith(".md") or any(ln.lstrip().startswith("| payload") for ln in lines):
        return _markdown_rows(lines)
    return read_table(lines, op=system.op, algorithm=system.algorithm, path=str(path))


def cluster_doc(topology: str | Path, *, hosts: int, sm: int, nic_gbit: float = 0.0,
                nics: int = 0, nic_latency_us: float = 0.0, domain_hosts: int = 0) -> dict:
    """Cluster JSON of `hosts` copies of a host file (relative: under tests/data), completed with what published
    runs say and the file does not: the GPUs' compute capability (and the NVLink rate that
    goes with it), every NIC's line rate (Gbit/s) and the latency its net plugin reports, the
    host's bandwidth over the `nics` NICs the run used (and those NICs themselves where the
    file lists none), and the multi-node NVLink domains of `domain_hosts` consecutive hosts."""
    from torch_topo import _C
    from torch_topo.plan import with_nvlink_domains

    path = str(DATA / topology)
    doc = with_nvlink_domains(path, hosts, domain_hosts) if domain_hosts else \
        json.loads(_C.planner_cluster_json(path=path, hosts=hosts))
    for host in doc["hosts"]:
        if sm and not any(gpu["sm"] for gpu in host["gpus"]):
            # A file without GPU models had its NVLink lanes rated at sm80's rate.
            for row in host["gpu_paths"]:
                for cell in row:
                    if cell["cls"] == "NV" and cell["nvlinks"] and cell["bandwidth_gbps"] == \
                            cell["nvlinks"] * _C.nvlink_lane_gbps(0):
                        cell["bandwidth_gbps"] = cell["nvlinks"] * _C.nvlink_lane_gbps(sm)
        for gpu in host["gpus"]:
            gpu["sm"] = gpu["sm"] or sm
        for nic in host["nics"]:
            nic["speed_gbps"] = nic["speed_gbps"] or nic_gbit
            nic["latency_us"] = nic.get("latency_us") or nic_latency_us
    if nics and nic_gbit:
        doc["inter_host_bandwidth_gbps"] = nics * nic_gbit / 8
        for host in doc["hosts"]:
            # A file without NICs (nvidia-smi's matrix of GPUs): the run's NICs, in GPU order,
            # so that NCCL's channels are counted over them.
            if not host["nics"]:
                host["nics"] = [{"name": f"nic{k}", "bus_id": "", "numa_node": -1,
                                 "speed_gbps": nic_gbit, "latency_us": nic_latency_us}
                                for k in range(nics)]
                host.pop("gpu_nic_paths", None)
    return doc


def _cluster(system: System):
    from torch_topo import _C

    return _C.PlannerCluster(json.dumps(cluster_doc(
        system.topology, hosts=system.hosts, sm=system.sm, nic_gbit=system.nic_gbit,
        nics=system.nics, nic_latency_us=system.nic_latency_us, domain_hosts=system.domain_hosts)),
        nccl_version=system.nccl_version)


def compare(system: System, published: list[Published] | None = None) -> list[Row]:
    """Every published size of `system` (or `published`, rows read elsewhere) with the model's
    time and bus bandwidth."""
    cluster = _cluster(system)
    per_host = len(system.ranks) if system.ranks else cluster.world_size // max(system.hosts, 1)
    local = system.ranks or tuple(range(per_host))
    ranks = [h * (cluster.world_size // system.hosts) + r for h in range(system.hosts) for r in local]
    rows = []
    for pub in parse_published(system) if published is None else published:
        # nccl-tests times NCCL's own choice: the flat algorithms, never topo's hierarchy.
        est = cluster.estimate(pub.op, pub.size, [ranks], pub.algorithm) if pub.algorithm \
            else cluster.compare_hierarchical(pub.op, pub.size, [ranks])["flat"]
        rows.append(Row(published=pub, model_us=est["seconds"] * 1e6,
                        model_busbw=est["bus_bandwidth_gbps"], algorithm=est["algorithm"],
                        protocol=est["protocol"]))
    return rows


def goal_misses(rows: list[Row]) -> list[Row]:
    """Rows outside the goals: busbw from 1 MiB up, time from 8 B to 64 KiB."""
    out = []
    for row in rows:
        size = row.published.size
        if size >= 1 << 20 and not BUSBW_GOAL[0] <= row.busbw_ratio <= BUSBW_GOAL[1]:
            out.append(row)
        elif size <= 64 << 10 and not TIME_GOAL[0] <= row.time_ratio <= TIME_GOAL[1]:
            out.append(row)
    return out


def size_label(n: int) -> str:
    """Bytes as the tables print them: 16M, 4K, 8 (whole units only)."""
    return size_text(n, short=True)


def format_table(rows: list[Row], note: str = "") -> str:
    """Published beside model per size, ratios model / published, '!' on rows outside the
    goals, the model's algorithm/protocol (and the op where the rows mix ops), then the count
    of rows outside the goals and `note`."""
    misses = {id(r) for r in goal_misses(rows)}
    several_ops = len({r.published.op for r in rows}) > 1
    out = [f"{'size':>7} {'pub us':>10} {'model us':>10} {'t ratio':>8} {'pub busbw':>10} "
           f"{'model busbw':>11} {'bw ratio':>8}  model algorithm"]
    for r in rows:
        p = r.published
        mark = "!" if id(r) in misses else " "
        # A busbw printed as 0.00 (a few bytes) gives no ratio.
        bw_ratio = f"{r.busbw_ratio:>8.2f}" if p.busbw > 0 else f"{'-':>8}"
        out.append(f"{size_label(p.size):>7} {p.time_us:>10.1f} {r.model_us:>10.1f} "
                   f"{r.time_ratio:>8.2f} {p.busbw:>10.2f} {r.model_busbw:>11.2f} "
                   f"{bw_ratio}{mark} {r.algorithm}/{r.protocol}"
                   + (f" (forced {p.algorithm})" if p.algorithm else "")
                   + (f" {p.op}" if several_ops else ""))
    out.append(f"   {len(misses)} of {len(rows)} rows outside the goals"
               + (f"; note: {note}" if note else ""))
    return "\n".join(out)


def table_json(rows: list[Row]) -> list[dict]:
    """The rows of `format_table` as JSON objects (bytes, us, GB/s)."""
    return [{"size": r.published.size, "op": r.published.op,
             "published_us": r.published.time_us, "model_us": r.model_us,
             "published_busbw": r.published.busbw, "model_busbw": r.model_busbw,
             "algorithm": r.algorithm, "protocol": r.protocol} for r in rows]
