# SPDX-License-Identifier: Apache-2.0
"""Bad input and failure handling of "topo": clear errors naming the problem (TopoArgumentError:
ValueError and RuntimeError), config errors, and a dead or stalled rank turning into an error
within the configured timeout."""

from __future__ import annotations

import os
import signal
import tempfile
import time

import error_cases
import pytest
import torch
import torch.distributed as dist
from rank_processes import context, process

TIMEOUT_S = 4.0
SLACK_S = 6.0  # process scheduling on a loaded 2-core machine


@pytest.mark.timeout(120)
@pytest.mark.parametrize("world", [2, 3])
def test_bad_inputs_raise_argument_errors(pool_factory, world):
    results = pool_factory(world).run(error_cases.bad_inputs)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", [error_cases.wait_timeout_then_wait,
                                  error_cases.p2p_future_refused,
                                  error_cases.refused_batch_leaves_the_group_usable,
                                  error_cases.batch_refused_after_posting_completes_its_ops],
                         ids=lambda c: c.__name__)
@pytest.mark.parametrize("world", [2, 3])
def test_work_edges_match_gloo(pool_factory, world, case):
    results = pool_factory(world).run(case)
    problems = [f"rank {r}: {m}" for r, bad in enumerate(results) for m in bad]
    assert not problems, "\n".join(problems)


def test_unknown_config_field_is_refused():
    from torch_topo.backend import resolve_config

    with pytest.raises(ValueError, match="unknown config field 'timeout'"):
        resolve_config({"timeout": 3})
    with pytest.raises(ValueError, match="expected a torch_topo.TopoConfig"):
        resolve_config(42)


def test_registered_with_list_of_devices():
    import torch_topo  # noqa: F401

    assert "TOPO" in dist.Backend._plugins
    assert dist.Backend.default_device_backend_map.get("cpu") != "topo"  # we do not hijack cpu
    assert dist.Backend("topo") == "topo"


def _failing_rank(rank, size, store_path, mode, results):
    import torch_topo

    store = dist.FileStore(store_path, size)
    dist.init_process_group("topo", store=store, rank=rank, world_size=size,
                            pg_options=torch_topo.TopoConfig(timeout_s=TIMEOUT_S))
    t = torch.ones(1 << 16)
    dist.all_reduce(t)  # every connection is up before the failure
    if rank == size - 1:
        if mode == "killed":
            dist.all_reduce(t, async_op=True)  # dies with a collective in flight
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # stalled: never joins the next collective
        return
    start = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(t)
        results.put((rank, "no error", time.monotonic() - start))
    except Exception as e:  # noqa: BLE001  (the type and text are what the test checks)
        results.put((rank, f"{type(e).__name__}: {e}", time.monotonic() - start))
    # put() hands the item to a feeder thread; flush it before the hard exit below.
    results.close()
    results.join_thread()
    os._exit(0)  # the group cannot be torn down cleanly with a peer gone


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["killed", "stalled"])
def test_failed_rank_gives_error_within_timeout(mode):
    size = 3
    results = context().Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [process(_failing_rank, (r, size, os.path.join(tmp, "store"), mode, results),
                         daemon=True) for r in range(size)]
        for p in procs:
            p.start()
        got = []
        try:
            for _ in range(size - 1):
                got.append(results.get(timeout=60))
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(timeout=10)
    for rank, message, elapsed in got:
        assert message != "no error", f"rank {rank} finished although a peer was {mode}"
        assert elapsed < TIMEOUT_S + SLACK_S, f"rank {rank} took {elapsed:.1f}s: {message}"
        if mode == "stalled":
            assert "imed out" in message or "imeout" in message, message


def test_topo_backend_is_a_c10d_backend():
    from torch_topo import _C

    assert issubclass(_C.TopoBackend, torch._C._distributed_c10d.Backend)
    with pytest.raises(ValueError, match="no inner backend given"):
        store = dist.HashStore()
        _C.TopoBackend(store, 0, 1, _C.TopoBackend.Options(), {})
