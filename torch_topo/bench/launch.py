# SPDX-License-Identifier: Apache-2.0
"""The bench program every rank runs, and how the ranks come to be (layer: Python package).

Under a launcher (torchrun: RANK and WORLD_SIZE set) the given world runs it, each rank on
cuda:LOCAL_RANK when CUDA is usable. Alone, it spawns one rank per local GPU, or `procs` CPU
ranks, over a FileStore. Rank 0 returns the result: the sweep records, the link checks and their
findings (schema torch-topo-bench/1, keys documented in docs/bench.md).
"""

from __future__ import annotations

import os
import queue
import tempfile
from dataclasses import dataclass, field, replace
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch_topo.bench.copies import COPY_BYTES, host_device_gbps, peer_gbps
from torch_topo.bench.links import (
    DEFAULT_MIN_FRACTION,
    LinkCheck,
    check_host_copy,
    check_inter_host,
    check_peer_copy,
    link_findings,
)
from torch_topo.bench.report import Progress
from torch_topo.bench.sweep import SweepConfig, sweep_collectives

__all__ = ["BENCH_SCHEMA", "BenchOptions", "run_bench", "bench_rank"]

BENCH_SCHEMA = "torch-topo-bench/1"
_TIMEOUT = timedelta(seconds=300)


@dataclass(kw_only=True, frozen=True, slots=True)
class BenchOptions:
    """What a bench run measures and checks."""

    sweep: SweepConfig = field(default_factory=SweepConfig)
    """The collective sweep."""
    links: bool = True
    """Measure the links (host/device and peer copies, inter-host busbw) and check them."""
    topology_file: str | None = None
    """Expectation source, pinned as TORCH_TOPO_FILE in each rank before init_process_group (so
    "topo" plans with it too); None: TORCH_TOPO_FILE, NCCL_TOPO_FILE or the live probe."""
    min_fraction: float = DEFAULT_MIN_FRACTION
    """A figure below this fraction of its expectation is a finding."""
    copy_bytes: int = COPY_BYTES
    """Size of each host/device and peer copy."""
    progress: bool = True
    """Show a progress line on rank 0 (on a terminal only)."""


def _planner(cluster):
    """The cost model of the run's cluster, each NIC at its own speed unless
    TORCH_TOPO_INTER_HOST_GBPS pins the network (`Cluster.planner_doc`). The checks hold
    measurements against what the links carry, so the model is the alpha-beta one (links and
    their sharing), not NCCL's algorithm choice (issue 22), whatever backend ran the
    collective."""
    from torch_topo.plan import resolve_cluster

    return resolve_cluster(cluster.planner_doc(), model="alpha_beta")


def _measure_host(cluster, rank: int, nbytes: int) -> list[tuple]:
    """On the lowest rank of each host with CUDA: its GPUs' copy rates, one link at a time, as
    (kind, host, gpu index[, gpu index], GB/s); other ranks return []."""
    from torch_topo.cluster import _local_gpu  # CUDA device -> topology GPU by PCI bus id

    host = cluster.host_of(rank)
    if not torch.cuda.is_available() or cluster.ranks_on_host(host)[0] != rank:
        return []
    topology = cluster.hosts[host]
    devices = [torch.device("cuda", d) for d in range(torch.cuda.device_count())]
    index = {}
    for d in devices:
        with torch.cuda.device(d):
            index[d] = _local_gpu(topology)
    out = []
    for d in devices:
        h2d, d2h = host_device_gbps(d, nbytes)
        out += [("h2d", host, index[d], h2d), ("d2h", host, index[d], d2h)]
    for i, a in enumerate(devices):
        for b in devices[i + 1:]:
            out.append(("p2p", host, index[a], index[b], peer_gbps(a, b, nbytes)))
    return out


def _checks(cluster, planner, measured: list[tuple], records: list[dict]) -> list[LinkCheck]:
    checks = []
    for kind, host, *gpus, gbps in measured:
        topology = cluster.hosts[host]
        positions = [g.index for g in topology.gpus]
        if kind in ("h2d", "d2h"):
            checks.append(check_host_copy(planner, host, gpus[0], kind, gbps))
        elif all(g in positions for g in gpus):
            a, b = (positions.index(g) for g in gpus)
            checks.append(check_peer_copy(topology, a, b, gbps, host))
        else:
            checks.append(LinkCheck("p2p", f"host{host} GPU{gpus[0]}-GPU{gpus[1]}", gbps, None,
                                    f"a GPU is not in {topology.source}"))
    if len(cluster.hosts) > 1 and records:
        swept = [r["collective"] for r in records]
        op = "all_reduce" if "all_reduce" in swept else swept[0]
        last = max((r for r in records if r["collective"] == op), key=lambda r: r["size"])
        busbw = max(last["topo_busbw_GBps"], last["inner_busbw_GBps"])
        check = check_inter_host(planner, cluster.hosts, op, last["size"], busbw,
                                 cluster.configured_inter_host_gbps)
        if op != "all_reduce":  # the figure a reader expects (docs/bench.md, nccl-tests)
            check = replace(check, basis=f"{check.basis}; {op} in place of all_reduce, which "
                                         "was not swept")
        checks.append(check)
    return checks


def bench_rank(options: BenchOptions, device: torch.device) -> dict | None:
    """Runs the bench on this rank of an initialised "topo" world; rank 0 returns the result."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ctl = dist.new_group(backend="gloo")
    inner_name = "nccl" if device.type == "cuda" else "gloo"
    inner = dist.new_group(backend="nccl") if device.type == "cuda" else ctl
    progress = Progress(options.sweep.steps) if rank == 0 and options.progress else None
    records = sweep_collectives(options.sweep, topo=dist.group.WORLD, inner=inner, ctl=ctl,
                                inner_name=inner_name, device=device, progress=progress)
    if progress is not None:
        progress.close()
    cluster, measured = None, []
    if options.links:
        from torch_topo.cluster import world_cluster

        cluster = world_cluster()  # what "topo" exchanged at init (None: played hosts, no file)
    if cluster is not None:
        gathered = [None] * world
        dist.all_gather_object(gathered, _measure_host(cluster, rank, options.copy_bytes),
                               group=ctl)
        measured = [m for part in gathered for m in part]
    if rank != 0:
        return None
    checks = _checks(cluster, _planner(cluster), measured, records) if cluster else []
    sweep = options.sweep
    return {
        "schema": BENCH_SCHEMA, "world_size": world, "device": device.type,
        "inner_backend": inner_name,
        "sweep": {"collectives": list(sweep.collectives), "sizes": list(sweep.sizes),
                  "dtype": sweep.dtype, "reps": sweep.reps},
        "hosts": [{"hostname": t.hostname, "source": t.source, "gpu_count": t.gpu_count,
                   "ranks": cluster.ranks_on_host(h)} for h, t in enumerate(cluster.hosts)]
        if cluster else [],
        "collectives": records,
        "min_fraction": options.min_fraction,
        "links": [c.to_dict() for c in checks],
        "findings": [f.to_dict() for f in link_findings(checks, options.min_fraction)],
    }


def _under_launcher() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _pin(options: BenchOptions) -> None:
    if options.topology_file:
        os.environ["TORCH_TOPO_FILE"] = os.path.abspath(options.topology_file)


def _run_in_world(options: BenchOptions) -> dict | None:
    import torch_topo  # noqa: F401  (registers "topo")

    _pin(options)
    device = torch.device("cpu")
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group("topo", timeout=_TIMEOUT)
    try:
        return bench_rank(options, device)
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, world: int, store_path: str, options: BenchOptions, kind: str,
             results) -> None:
    import torch_topo  # noqa: F401  (registers "topo" in this spawned process)

    _pin(options)
    device = torch.device("cuda", rank) if kind == "cuda" else torch.device("cpu")
    if kind == "cuda":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)  # ranks share the machine's cores
    dist.init_process_group("topo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world, timeout=_TIMEOUT)
    result = bench_rank(options, device)
    if rank == 0:
        results.put(result)
    dist.destroy_process_group()


def _spawn(options: BenchOptions, world: int, kind: str) -> dict:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_spawned, args=(r, world, os.path.join(tmp, "store"), options,
                                                    kind, results)) for r in range(world)]
        for p in procs:
            p.start()
        result = None
        while result is None:  # a rank that dies must not leave the others waiting
            try:
                result = results.get(timeout=2)
            except queue.Empty:
                failed = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if failed:
                    for p in procs:
                        p.kill()
                    raise RuntimeError(f"rank {failed[0][0]} failed (exit code {failed[0][1]}; "
                                       "its traceback is above)") from None
        for p in procs:
            p.join(timeout=60)
    return result


def run_bench(options: BenchOptions, procs: int | None = None) -> dict | None:
    """Runs the bench as launched: the launcher's world, else spawned ranks (one per local GPU,
    or `procs` CPU ranks). Returns the result on rank 0 (the caller, when spawning), else None.

    Raises:
        ValueError: `procs` under a launcher, `procs` < 1, or no GPU and no `procs`.
    """
    if _under_launcher():
        if procs is not None:
            raise ValueError(f"--procs: the launcher already gave WORLD_SIZE="
                             f"{os.environ['WORLD_SIZE']}; drop --procs under torchrun")
        return _run_in_world(options)
    if procs is not None:
        if procs < 1:
            raise ValueError(f"--procs: got {procs}, expected >= 1")
        return _spawn(options, procs, "cpu")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0:
        raise ValueError("no CUDA device here: pass --procs N to bench N CPU ranks, or launch "
                         "under torchrun")
    return _spawn(options, gpus, "cuda")
