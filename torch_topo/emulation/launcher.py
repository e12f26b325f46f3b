# SPDX-License-Identifier: Apache-2.0
"""Rank placement and the rank processes of an emulated cluster: spawn every rank (in its node's
namespace under its node's host name, or as a plain local process for the one-GPU rehearsal),
watch them, and bound how long survivors may linger."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["RankSpec", "place_ranks", "RankProcesses", "TIMEOUT_EXIT_CODE", "die_with_parent",
           "node_wrapper"]

TIMEOUT_EXIT_CODE = 124  # as timeout(1): the run was stopped, no rank failed on its own
_POLL_S = 0.05
_TERM_GRACE_S = 3.0  # SIGTERM -> SIGKILL when we stop ranks ourselves
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> None:
    # Runs in the child before exec: should the emulator itself be SIGKILLed, the kernel kills
    # the ranks too instead of leaving them running in deleted namespaces. Kept across the
    # exec chain ip -> unshare -> sh -> COMMAND (none of them is set-uid).
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def node_wrapper(namespace: str, hostname: str) -> list[str]:
    """The command prefix that runs a rank in its node's namespace. A private UTS namespace per
    rank carries its node's name: every rank of a node sees the same host name, as on a real
    host."""
    return ["ip", "netns", "exec", namespace, "unshare", "--uts", "--",
            "sh", "-c", 'hostname "$1" && shift && exec "$@"', "sh", hostname]


@dataclass(frozen=True, kw_only=True, slots=True)
class RankSpec:
    rank: int
    node: int
    local_rank: int
    local_world_size: int


def place_ranks(nodes: int, procs_per_node: int,
                placement: Literal["contiguous", "interleaved"]) -> list[RankSpec]:
    """Contiguous: ranks node-major as torchrun numbers them; interleaved: rank i on node
    i mod N, as a cyclic (round-robin) launcher places them."""
    world = nodes * procs_per_node
    specs = []
    for rank in range(world):
        if placement == "contiguous":
            node, local = divmod(rank, procs_per_node)
        elif placement == "interleaved":
            local, node = divmod(rank, nodes)
        else:
            raise ValueError(
                f"--placement: got {placement!r}, expected 'contiguous' or 'interleaved'"
            )
        specs.append(RankSpec(rank=rank, node=node, local_rank=local,
                              local_world_size=procs_per_node))
    return specs


def exit_code(returncode: int) -> int:
    """Shell convention: a rank killed by signal S exits 128 + S."""
    return 128 - returncode if returncode < 0 else returncode


class RankProcesses:
    """The rank processes of one run, each its own session so a signal reaches its whole tree."""

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen] = {}

    def spawn(self, spec: RankSpec, command: list[str], env: dict[str, str],
              wrapper: list[str] | None = None) -> None:
        """Starts rank `spec.rank` as `wrapper + command` (no wrapper: a plain local process)."""
        self.procs[spec.rank] = subprocess.Popen((wrapper or []) + command, env=env,
                                                 start_new_session=True,
                                                 preexec_fn=die_with_parent)

    def _signal_all(self, sig: int) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass

    def stop(self) -> None:
        """SIGTERM every live rank's process group, SIGKILL what remains after a grace."""
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + _TERM_GRACE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs.values()):
            time.sleep(_POLL_S)
        self._signal_all(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait()

    def watch(self, grace_s: float, timeout_s: float | None,
              check: Callable[[], None] = lambda: None) -> int:
        """Waits for the ranks; returns the first failing rank's exit code, 0 if all succeed.
        `check` is called every poll and may raise to abandon the wait (the caller stops the
        ranks).

        Once any rank has exited the others get `grace_s` seconds to follow; after that, or
        after `timeout_s` in total, survivors are killed and the run fails with 124 (unless a
        rank already failed, whose code wins).
        """
        start = time.monotonic()
        first_exit: float | None = None
        failure: tuple[int, int] | None = None  # (rank, code)
        live = set(self.procs)
        while live:
            check()
            for rank in sorted(live):
                rc = self.procs[rank].poll()
                if rc is None:
                    continue
                live.discard(rank)
                first_exit = first_exit or time.monotonic()
                if rc != 0 and failure is None:
                    failure = (rank, exit_code(rc))
                    print(f"torch_topo.emulate: rank {rank} failed with exit code "
                          f"{exit_code(rc)}", file=sys.stderr, flush=True)
            if not live:
                break
            now = time.monotonic()
            over_grace = first_exit is not None and now - first_exit > grace_s
            over_total = timeout_s is not None and now - start > timeout_s
            if over_grace or over_total:
                why = (f"{grace_s:g} s after the first rank exited" if over_grace
                       else f"after the --timeout-s of {timeout_s:g} s")
                print(f"torch_topo.emulate: killing ranks {sorted(live)} still running {why}",
                      file=sys.stderr, flush=True)
                self.stop()
                return failure[1] if failure else TIMEOUT_EXIT_CODE
            time.sleep(_POLL_S)
        return failure[1] if failure else 0
