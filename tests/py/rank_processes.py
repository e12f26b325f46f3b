# SPDX-License-Identifier: Apache-2.0
"""How the tests start rank processes: forked from a server that has imported torch once, not
a fresh interpreter per rank ("spawn"), whose imports cost 3-5 s of CPU per rank on a 2-core
machine (a 3-rank test spent more time importing than testing).

The server has run no torch op, started no thread pool and made no group, so each rank still
starts clean; it gets the parent's working folder and sys.path as with spawn (multiprocessing
sends them) and, through `in_parent_env`, the parent's environment at the time of the start,
which a forked rank would otherwise take from the server (the environment it started in).
"""

from __future__ import annotations

import functools
import os

import torch.multiprocessing as mp

START_METHOD = "forkserver"
# Not torch_topo (0.1 s): the server ignores the parent's sys.path (Python 3.11) and would import
# the checkout's, not the build scripts/test_torch.sh puts first for another torch.
mp.get_context(START_METHOD).set_forkserver_preload(["torch", "torch.distributed"])


def _call_in_env(env: dict[str, str], fn, *args):
    os.environ.clear()
    os.environ.update(env)
    return fn(*args)


def in_parent_env(fn):
    """`fn`, to run in a rank with the environment this process has now (monkeypatched
    TORCH_TOPO_* variables included)."""
    return functools.partial(_call_in_env, dict(os.environ), fn)


def context():
    """The multiprocessing context of rank processes, for their queues."""
    return mp.get_context(START_METHOD)


def process(target, args=(), **kwargs):
    """A rank process (not started) running `target(*args)` in the parent's environment."""
    return context().Process(target=in_parent_env(target), args=args, **kwargs)


def start_processes(fn, **kwargs):
    """torch.multiprocessing.start_processes of `fn` in the parent's environment."""
    return mp.start_processes(in_parent_env(fn), start_method=START_METHOD, **kwargs)
