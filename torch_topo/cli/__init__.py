# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo <verb>`: one module per verb in this package, each exposing
`add_parser(subparsers)` and `run(args) -> int`. Exit codes: 0 OK, 1 doctor findings,
2 usage or parse error, reported as one line on stderr."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import signal
import sys

from torch_topo.config import TopoConfig

__all__ = ["OneLineErrorParser", "main", "build_parser"]


def _verb_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{__name__}.{info.name}")


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse with usage errors as one line (`torch_topo VERB: error: ...`), exit 2, like
    every other error of the CLI; --help still prints the usage. `python -m
    torch_topo.emulate` uses it too."""

    def error(self, message: str):
        name = self.prog.removeprefix("python -m ")
        self.exit(2, f"{name}: error: {message}; see `{self.prog} --help`\n")


# The native core ends its messages with where it raised them; a CLI user needs the what.
_SOURCE_LOCATION = re.compile(r" \[csrc/[^\]]+:\d+\]$")


def _one_line(exc: BaseException) -> str:
    # Messages are written as one line; a multi-line one (a library's) must not break that.
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return _SOURCE_LOCATION.sub("", text)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m torch_topo", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in _verb_modules():
        module.add_parser(sub)
    for verb_parser in sub.choices.values():
        # An option the verb does not know reaches the top parser, which would name no verb.
        verb_parser.set_defaults(verb_parser=verb_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # One given before the verb is the top parser's: `--json show` would otherwise be
            # refused by show, whose help lists --json.
            given = sys.argv[1:] if argv is None else list(argv)
            before = set(given[:given.index(args.verb)])
            owner = parser if before.intersection(unknown) else args.verb_parser
            owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        # Every verb, even one that reads no option, refuses a misspelt TORCH_TOPO_* variable:
        # the user set it expecting an effect.
        TopoConfig.from_env()
        status = int(args.run(args))
        # Output to a pipe is buffered unless PYTHONUNBUFFERED is set: flushed here, a reader
        # that has gone shows up below rather than as "Exception ignored" at interpreter exit.
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # The reader went away (`show FILE | head`): nothing is wrong with the input, so no
        # error line; stdout now points at /dev/null so the exit flush cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE  # what a shell reports for a writer stopped by SIGPIPE
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"torch_topo {args.verb}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
