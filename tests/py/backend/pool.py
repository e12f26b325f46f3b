# SPDX-License-Identifier: Apache-2.0
"""A long-lived pool of ranks for the backend tests: one process per rank, each with the "topo"
world group and a plain Gloo group over the same ranks, running many cases per spawn.

Spawning a process per case costs seconds on a 2-core machine; a pool per world size runs
hundreds of cases in the time of one spawn. Every case runs on all ranks and returns a value
per rank; exceptions come back as text, and every wait is bounded, so a test never hangs.
"""

from __future__ import annotations

import os
import queue
import tempfile
import traceback
from datetime import timedelta

from rank_processes import context, process

CASE_TIMEOUT_S = 120


def two_hosts_env(world: int, hierarchical: str) -> dict[str, str]:
    """The environment of a pool whose ranks play two hosts (the first half on h0) with
    `hierarchical`, and the smallest pipeline chunk: a few dozen elements already cross several
    chunks."""
    hosts = [f"h{2 * r // world}" for r in range(world)]
    return {"TORCH_TOPO_HIERARCHICAL": hierarchical,
            "TORCH_TOPO_PLAY": ",".join(f"{h}:{hosts[:r].count(h)}" for r, h in enumerate(hosts)),
            "TORCH_TOPO_CHUNK_BYTES": "1024"}


def _worker(rank: int, size: int, store_path: str, env: dict, tasks, results) -> None:
    os.environ.update(env)  # before the group reads its TORCH_TOPO_* config
    import torch.distributed as dist

    import torch_topo  # noqa: F401  (registers "topo")

    store = dist.FileStore(store_path, size)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            timeout=timedelta(seconds=60))
    ref = dist.new_group(backend="gloo")
    while True:
        task = tasks.get()
        if task is None:
            break
        fn, args = task
        try:
            results.put((rank, True, fn(rank, size, ref, *args)))
        except BaseException:  # noqa: BLE001  (reported to the test, which fails)
            results.put((rank, False, traceback.format_exc()))
    dist.barrier()  # no rank tears down while a peer still reads from it
    dist.destroy_process_group()


class RankPool:
    """`size` ranks running `fn(rank, size, gloo_group, *args)` on request; `env` adds
    environment variables (the group's TORCH_TOPO_* config) to every rank."""

    def __init__(self, size: int, env: dict[str, str] | None = None):
        self.size = size
        self.env = dict(env or {})
        ctx = context()
        self._dir = tempfile.TemporaryDirectory()
        store_path = os.path.join(self._dir.name, "store")
        self._tasks = [ctx.Queue() for _ in range(size)]
        self._results = ctx.Queue()
        self._procs = [
            process(_worker, (r, size, store_path, self.env, self._tasks[r], self._results),
                    daemon=True)
            for r in range(size)
        ]
        for p in self._procs:
            p.start()

    def run(self, fn, *args, timeout: float = CASE_TIMEOUT_S) -> list:
        """The per-rank return values of `fn`; raises AssertionError with every rank's error."""
        for q in self._tasks:
            q.put((fn, args))
        out: dict[int, object] = {}
        errors = []
        for _ in range(self.size):
            try:
                rank, ok, value = self._results.get(timeout=timeout)
            except queue.Empty:
                self.close()
                raise AssertionError(f"{fn.__name__}: no answer within {timeout}s") from None
            if ok:
                out[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
        if errors:
            raise AssertionError(f"{fn.__name__} failed on {len(errors)} ranks:\n" +
                                 "\n".join(errors))
        return [out[r] for r in range(self.size)]

    def close(self) -> None:
        for q in self._tasks:
            q.put(None)
        for p in self._procs:
            p.join(timeout=20)
            if p.is_alive():
                p.kill()
        self._dir.cleanup()
