# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C while `python -m torch_topo...` loads this package (torch takes seconds): exit 130
without a traceback, as the commands do on a later Ctrl-C. Only there: sys.argv[0] is "-m"
while runpy imports the parents of the module it runs; a program importing torch_topo keeps
its KeyboardInterrupt."""

import signal
import sys

_active = sys.argv[:1] == ["-m"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _exit_quietly(signum, _frame):
    raise SystemExit(128 + signum)


if _active:
    signal.signal(signal.SIGINT, _exit_quietly)


def done() -> None:
    """The package is loaded: Ctrl-C is the command's again."""
    if _active:
        signal.signal(signal.SIGINT, signal.default_int_handler)
