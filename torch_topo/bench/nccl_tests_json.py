# SPDX-License-Identifier: Apache-2.0
"""nccl-tests' own JSON report (`-J FILE.json`, nccl-tests from 2.17.3) read back as the stdout
reader reads the text (layer: Python package): the same RunHeader and rows, so `bench
--published` takes either. Errors name the file and the JSON line or result."""

from __future__ import annotations

import json
import math

from torch_topo.bench.nccl_tests_output import (
    Published,
    RunHeader,
    Sweeps,
    algorithm_from_nccl,
    one_group,
    op_in_name,
    uniform_hosts,
)

__all__ = ["looks_like_json", "read_json_report"]

def looks_like_json(text: str) -> bool:
    """A JSON report starts with an object; nccl-tests' stdout never does."""
    return text.lstrip().startswith("{")


def _object(value, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: got {type(value).__name__}, expected an object")
    return value


def _number(entry: dict, key: str, where: str) -> float:
    value = entry.get(key)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{where}: {key}: got {value!r}, expected a finite number")
    return number


def _op(doc: dict, path: str) -> str | None:
    args = doc.get("args") or []
    return op_in_name(str(args[0]), f"{path}: args[0] {args[0]!r}") if args else None


def _check_device_implementation(doc: dict, path: str) -> None:
    """nccl-tests 2.28's -D N (N > 0) times its own kernels over NCCL's device API in place of
    NCCL's collective, which the model prices; stdout does not show it, the report's args do.
    getopt_long reads -D N, -DN, --device_implementation N or =N, and long names cut short to
    any unique start (--device_i ...)."""
    args = [str(a) for a in doc.get("args") or []][1:]
    for i, arg in enumerate(args):
        name, eq, inline = arg.partition("=")
        if arg.startswith("--") and len(name) >= len("--device_i") and \
                "--device_implementation".startswith(name):
            value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
        elif arg.startswith("-D") and not arg.startswith("--"):
            value = arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
        else:
            continue
        try:
            chosen = int(value.strip(), 0)
        except ValueError:
            chosen = 1  # strtol's garbage: refuse rather than guess
        if chosen != 0:
            raise ValueError(f"{path}: args {arg!r}: nccl-tests' device implementation (-D "
                             f"{value.strip()}) times its own kernels over NCCL's device API, "
                             "not the NCCL collective the model prices; rerun without -D (or -D 0)")


def _algorithm(doc: dict, path: str) -> str | None:
    for entry in doc.get("env") or []:
        name, _, value = str(entry).partition("=")
        if name == "NCCL_ALGO":
            return algorithm_from_nccl(value, f"{path}: env NCCL_ALGO")
    return None


def _rows(doc: dict, op: str, path: str) -> list[Published]:
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise ValueError(f"{path}: no 'results' list: is this nccl-tests' -J report of a run "
                         "that finished?")
    sweeps = Sweeps("report")
    for i, raw in enumerate(results):
        where = f"{path}: results[{i}]"
        entry = _object(raw, where)
        size = int(_number(entry, "size", where))
        # Trace replay reports only in-place results (out_of_place null).
        timed = entry.get("out_of_place") or entry.get("in_place")
        timed = _object(timed, f"{where}: out_of_place")
        if "cpu_time" in timed:
            raise ValueError(f"{where}: cpu_time (nccl-tests -C 1): the CPU's time per call, "
                             "not the collective's, which the model prices; run without -C")
        # nwrong: elements NCCL got wrong, null where nothing was checked (-c 0).
        wrong = any(isinstance(part, dict) and isinstance(n := part.get("nwrong"), int | float)
                    and n > 0 for part in (entry.get("out_of_place"), entry.get("in_place")))
        # root: the '%6i' the table prints, as a string.
        kind = {c: str(entry.get(c, "")).strip() for c in ("type", "redop", "root")}
        sweeps.add(size, kind,
                   _number(timed, "time", f"{where}.out_of_place"),
                   _number(timed, "bus_bw", f"{where}.out_of_place"),
                   wrong=wrong, place=where, here=f"at results[{i}]")
    published = sweeps.published(op, None)
    if not published:  # Sweeps leaves out every result of 0 bytes
        raise ValueError(f"{path}: the nccl-tests report has no rows: its {len(results)} "
                         "result(s) are all of 0 bytes (-b 0), which NCCL returns at once for")
    return published


def read_json_report(text: str, path: str) -> tuple[RunHeader, list[Published]]:
    """The header and out-of-place rows of one -J report. Devices list one entry per process
    (its first GPU), each process driving `config.nthreads x config.ngpus` GPUs."""
    try:
        doc = _object(json.loads(text), path)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); "
                         "a report cut short by a failed run cannot be read") from None
    config = _object(doc.get("config") or {}, f"{path}: config")
    per_process = int(config.get("nthreads") or 1) * int(config.get("ngpus") or 1)
    per_host: dict[str, int] = {}
    names: dict[str, None] = {}
    first_group = None
    for i, raw in enumerate(doc.get("devices") or []):
        device = _object(raw, f"{path}: devices[{i}]")
        host = str(device.get("hostname") or "").strip()
        if not host:
            raise ValueError(f"{path}: devices[{i}]: no hostname")
        first_group = one_group(str(device.get("group") or 0), f"{path}: devices[{i}]",
                                f"devices[{i}]", first_group)
        per_host[host] = per_host.get(host, 0) + per_process
        if device.get("device_info"):
            names[str(device["device_info"]).strip()] = None
    hosts, ranks_per_host = uniform_hosts(per_host, f"{path}: devices")
    _check_device_implementation(doc, path)
    op = _op(doc, path)
    header = RunHeader(op=op, hosts=hosts, ranks_per_host=ranks_per_host,
                       gpu_names=tuple(names), nccl_version=int(doc.get("nccl_version") or 0),
                       algorithm=_algorithm(doc, path),
                       gpus_per_process=per_process if config else 0)
    return header, _rows(doc, op or "", path)
