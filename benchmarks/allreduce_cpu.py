# SPDX-License-Identifier: Apache-2.0
"""One large all_reduce over "topo" and over plain Gloo in the same processes: wall time of the
slowest rank and CPU time of all ranks together (user + system, every thread of each process:
the schedule worker, Gloo's threads, the TCP stack's work charged to the process), per call.

    python -m torch_topo.emulate --nodes 2 --procs-per-node 4 -- \\
        python benchmarks/allreduce_cpu.py --mbytes 64 --reps 5

The CPU figure says how much of the machine a schedule needs, which wall time on a shared or
oversubscribed machine does not: with 8 ranks and the link relay on 2 cores, a schedule whose
ranks need more CPU seconds than the link takes cannot reach the link bound. It does not count
the emulator's relay process.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch
import torch.distributed as dist

import torch_topo  # noqa: F401  (registers "topo")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mbytes", type=int, default=64, help="float32 tensor size in MiB")
    p.add_argument("--reps", type=int, default=5, help="interleaved calls per backend")
    args = p.parse_args(argv)
    if args.mbytes < 1 or args.reps < 1:
        p.error(f"--mbytes {args.mbytes}, --reps {args.reps}: expected both >= 1")
    dist.init_process_group("topo")
    gloo = dist.new_group(backend="gloo")
    tensor = torch.randn(args.mbytes * (1 << 20) // 4)
    groups = {"topo": None, "gloo": gloo}

    def call(group) -> tuple[float, float]:
        dist.barrier(group=gloo)
        cpu, start = _cpu_seconds(), time.perf_counter()
        dist.all_reduce(tensor, group=group)
        return time.perf_counter() - start, _cpu_seconds() - cpu

    for group in groups.values():  # warm-up: connections, allocations
        call(group)
    samples = {name: [] for name in groups}
    for _ in range(args.reps):
        for name, group in groups.items():
            samples[name].append(call(group))
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, samples)
    if dist.get_rank() == 0:
        print(f"all_reduce {args.mbytes} MiB float32, {dist.get_world_size()} ranks, median of "
              f"{args.reps} (wall: slowest rank; CPU: all ranks together)")
        for name in groups:
            walls = [max(s[name][i][0] for s in everyone) for i in range(args.reps)]
            cpus = [sum(s[name][i][1] for s in everyone) for i in range(args.reps)]
            print(f"  {name:5} wall {statistics.median(walls):.3f} s (min {min(walls):.3f}), "
                  f"CPU {statistics.median(cpus):.2f} s")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
