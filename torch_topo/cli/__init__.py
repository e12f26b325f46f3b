# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo <verb>`: one module per verb in this package, each exposing
`add_parser(subparsers)` and `run(args) -> int`. Exit codes: 0 OK, 1 doctor findings,
2 usage or parse error."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

__all__ = ["main", "build_parser"]


def _verb_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m torch_topo", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in _verb_modules():
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return int(args.run(args))
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"torch_topo {args.verb}: error: {exc}", file=sys.stderr)
        return 2
