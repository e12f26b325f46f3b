# SPDX-License-Identifier: Apache-2.0
"""A long-lived pool of Gloo ranks for the ops tests: spawning a process group per case costs
seconds on 2 cores, so each world size starts once and runs many named cases from ops_cases.py."""

from __future__ import annotations

import datetime
import os
import queue
import tempfile
import traceback

from rank_processes import context, process

_CASE_TIMEOUT_S = 120
# Starting ranks imports torch in each; on a loaded 2-core host that alone can take minutes.
_START_TIMEOUT_S = 600


def _worker(rank: int, world: int, backend: str, store_path: str, tasks, results) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # 2 cores shared by all ranks
    if backend == "topo":
        import torch_topo  # noqa: F401  (registers the backend)
    dist.init_process_group(backend, init_method=f"file://{store_path}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    import importlib

    results.put((rank, True, "ready"))
    while True:
        task = tasks.get()
        if task is None:
            break
        name, kwargs = task
        module, _, func = name.rpartition(".")
        try:
            case = getattr(importlib.import_module(module or "ops_cases"), func)
            results.put((rank, True, case(rank, world, **kwargs)))
        except BaseException:  # reported to the parent, which fails the test
            results.put((rank, False, traceback.format_exc()))
    dist.barrier()  # no rank tears down while a peer still reads from it
    dist.destroy_process_group()


class RankPool:
    """`world` spawned ranks on one process group; `run(case, **kw)` runs `ops_cases.<case>`
    (or `<module>.<case>` from this folder) on every rank and returns the per-rank results, raising with the tracebacks on failure."""

    def __init__(self, world: int, backend: str = "gloo") -> None:
        ctx = context()
        self.world = world
        self._dir = tempfile.TemporaryDirectory()
        store = os.path.join(self._dir.name, "store")
        self._results = ctx.Queue()
        self._tasks = [ctx.Queue() for _ in range(world)]
        self._procs = [process(_worker, (r, world, backend, store, self._tasks[r], self._results),
                               daemon=True)
                       for r in range(world)]
        for p in self._procs:
            p.start()
        self.broken = False
        self._collect("start", _START_TIMEOUT_S)

    def run(self, case: str, **kwargs) -> list:
        if self.broken:
            raise RuntimeError("rank pool is broken by an earlier failure")
        for q in self._tasks:
            q.put((case, kwargs))
        return self._collect(case, _CASE_TIMEOUT_S)

    def _collect(self, case: str, timeout_s: float) -> list:
        out, errors = [None] * self.world, []
        for _ in range(self.world):
            try:
                rank, ok, value = self._results.get(timeout=timeout_s)
            except queue.Empty:
                self.broken = True
                raise TimeoutError(f"{case}: no answer from every rank in {timeout_s} s") from None
            if ok:
                out[rank] = value
            else:
                errors.append(f"rank {rank}:\n{value}")
        if errors:
            # A rank that failed may have left the others inside a collective: restart.
            self.broken = True
            raise AssertionError(f"{case} failed:\n" + "\n".join(errors))
        return out

    def close(self) -> None:
        if not self.broken:
            for q in self._tasks:
                q.put(None)
        for p in self._procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        self._dir.cleanup()


_current: dict[tuple[int, str], RankPool] = {}


def backends() -> list[str]:
    """gloo always; the project's own "topo" backend once importing torch_topo registers it."""
    import torch.distributed as dist

    import torch_topo  # noqa: F401

    return ["gloo"] + (["topo"] if "topo" in dist.Backend.backend_list else [])


def get_pool(world: int, backend: str = "gloo") -> RankPool:
    """The pool for (world, backend), started on first use and kept for the session (so test
    order never restarts ranks); a pool broken by a failure is replaced."""
    key = (world, backend)
    if key in _current and _current[key].broken:
        _current.pop(key).close()
    if key not in _current:
        _current[key] = RankPool(world, backend)
    return _current[key]


def close_pools() -> None:
    for p in _current.values():
        p.close()
    _current.clear()
