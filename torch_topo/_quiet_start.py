# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C while `python -m torch_topo...` loads this package (torch takes seconds): exit 130
without a traceback, as the commands do on a later Ctrl-C. Only there: sys.argv[0] is "-m"
while runpy imports the parents of the module it runs; a program importing torch_topo keeps
its KeyboardInterrupt."""

import signal
import sys

_active = sys.argv[:1] == ["-m"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


_got: list[int] = []


def _exit_quietly(signum, _frame):
    # Remembered too: an import that catches the exception (numpy's docstring set-up catches
    # broad ones) swallowed it, and the command ran on to its end.
    _got.append(signum)
    raise SystemExit(128 + signum)


if _active:
    signal.signal(signal.SIGINT, _exit_quietly)


def done() -> None:
    """The package is loaded: Ctrl-C is the command's again, and one that came while it loaded
    and was swallowed ends it now."""
    if _active:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if _got:
            raise SystemExit(128 + _got[0])
