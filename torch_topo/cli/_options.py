# SPDX-License-Identifier: Apache-2.0
"""Options that several verbs take, defined and checked once (the CLI layer; `_` keeps this
module out of the verb list)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os

from torch_topo import _C
from torch_topo.nccl_hints import version_code
from torch_topo.plan import check_hosts_per_domain

__all__ = ["add_nvlink", "add_nvlink_domain_hosts", "int_at_least", "nvlink_domain_hosts", "nvlink_mode",
           "named_as_options", "output_file_problem", "output_name", "parse_nccl_version",
           "positive_number", "write_output"]

_NVLINK_DOMAIN_HOSTS = "--nvlink-domain-hosts"


def add_nvlink(parser) -> None:
    parser.add_argument("--nvlink", choices=("file", "complete"), default=None,
                        help="NVLink an NCCL XML leaves out (clouds ship it without; NCCL adds it "
                        "from NVML at run time): 'file' reads FILE as written (default for FILE), "
                        "'complete' fills it from this host's live probe or the GPU model, as the "
                        "run does (default for the pinned file)")


def nvlink_mode(args) -> str:
    """"file" or "complete": --nvlink as given, else FILE as written and the pinned file as the
    run reads it (`torch_topo.probe` completes it)."""
    return args.nvlink or ("file" if args.file is not None else "complete")


def add_nvlink_domain_hosts(parser) -> None:
    parser.add_argument(_NVLINK_DOMAIN_HOSTS, type=int, default=None, metavar="K",
                        help="every K consecutive hosts share one multi-node NVLink domain "
                        "(GB200 NVL72: 18 trays); the live probe reads domains from NVML")


def nvlink_domain_hosts(args) -> int | None:
    """K of --nvlink-domain-hosts (None without it), checked before any source is read so a
    bad K is reported by name whatever else is wrong; `with_nvlink_domains` applies it."""
    if args.nvlink_domain_hosts is None:
        return None
    return check_hosts_per_domain(args.nvlink_domain_hosts, _NVLINK_DOMAIN_HOSTS)


def parse_nccl_version(text: str | None) -> int:
    """--nccl-version X.Y.Z as NCCL's version code (2.26.2 -> 22602); 0 without the option."""
    if text is None:
        return 0
    parts = text.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[0]) != 2 \
            or not (int(parts[1]) < 100 and int(parts[2]) < 100):
        raise ValueError(f"--nccl-version: got {text!r}, expected an NCCL 2.x release as "
                         "X.Y.Z, e.g. 2.26.2")
    return version_code(*(int(p) for p in parts))


def output_name(text: str) -> str:
    """An argparse type for -o: a file name (an empty one was taken as no -o: stdout)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a file name")
    return text


def positive_number(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a positive number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"got {text}, expected > 0")
    return value


def int_at_least(low: int, most: int | None = None, why: str = ""):
    """An argparse type: an integer >= low (and <= most, `why` saying where that bound comes
    from)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}, expected an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"got {value}, expected >= {low}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"got {value}, expected at most {most}{why}")
        return value
    return parse


def output_file_problem(option: str, path: str) -> str | None:
    """Why a run could not write its result to `path` (`option`'s value) once it is over, or
    None. Checked before the run: a missing folder, or a folder given as the file, ended a
    long run in a traceback."""
    if os.path.isdir(path):
        return f"{option}: {path!r} is a folder, expected a file name"
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return f"{option}: no folder to write {path!r} into"
    return None


def write_output(path: str, text: str) -> None:
    """Write `text` to `path`, the -o of a verb; the OS's "[Errno 2] ..." names no option, so a
    failure is reported as -o, the path and the OS's reason."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise ValueError(f"-o: cannot write {path!r}: {exc.strerror or exc}") from None


def named_as_options(run):
    """A verb's `run(args)` (FILE optional, --mesh, --traffic) whose planner errors name the
    verb's FILE and options instead of the Python API's arguments."""
    @functools.wraps(run)
    def named(args) -> int:
        names = {"mesh": "--mesh", "traffic": "--traffic"}
        if args.file is not None:
            names["topology"] = "FILE"
        with _options_named(names):
            return run(args)
    return named


@contextlib.contextmanager
def _options_named(names: dict[str, str]):
    """The Python API names its arguments in its errors (`topology: ...`, `mesh: ...`), a verb
    its options and FILE: a ValueError in the block that starts with a key of `names` and ": "
    starts with its option instead. A TopoParseError, whose `path:line:col:` names the file,
    passes as it is."""
    try:
        yield
    except _C.TopoParseError:
        raise
    except ValueError as e:
        text = str(e)
        for api, option in names.items():
            if text.startswith(f"{api}: "):
                raise ValueError(option + text[len(api):]) from None
        raise
