# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo doctor [FILE] [--mesh ...]`: lint a topology and a mesh; each finding
says what to do. Exit 0 when clean, 1 with warnings or errors, 2 on bad input. Without FILE the
pinned topology (TORCH_TOPO_FILE, NCCL_TOPO_FILE) is checked."""

from __future__ import annotations

import argparse
import json
import os

from torch_topo.doctor import diagnose
from torch_topo.plan import parse_mesh

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="lint a topology, mesh and environment", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", nargs="?", default=None,
                   help="topology file (default: TORCH_TOPO_FILE or NCCL_TOPO_FILE)")
    p.add_argument("--mesh", default=None, help="mesh to check, e.g. dp=4,tp=2 (default: tp=2 and tp=4)")
    p.add_argument("--hosts", type=int, default=1, help="copies of a one-host FILE (default 1)")
    p.add_argument("--kv-heads", type=int, default=None, help="K/V heads of the model (checks the sp degree)")
    p.add_argument("--json", action="store_true", help="print {schema, findings: [{code, severity, message, fix}]}")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.hosts < 1:
        raise ValueError(f"--hosts: got {args.hosts}, expected >= 1")
    if args.kv_heads is not None and args.kv_heads < 1:
        raise ValueError(f"--kv-heads: got {args.kv_heads}, expected >= 1")
    pinned = os.environ.get("TORCH_TOPO_FILE") or os.environ.get("NCCL_TOPO_FILE")
    path = args.file or pinned
    if path is None:
        raise ValueError("FILE: none given and neither TORCH_TOPO_FILE nor NCCL_TOPO_FILE is set")
    mesh = parse_mesh(args.mesh, "--mesh") if args.mesh else None
    findings = diagnose(path, mesh, hosts=args.hosts, kv_heads=args.kv_heads,
                        pinned_path=path if args.file is None else None)
    problems = [f for f in findings if f.severity != "info"]
    if args.json:
        print(json.dumps({"schema": "torch-topo-doctor/1", "file": path,
                          "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        for f in findings:
            print(f"[{f.severity}] {f.code}: {f.message}\n    fix: {f.fix}")
        print(f"{len(problems)} problem(s), {len(findings) - len(problems)} note(s) for {path}")
    return 1 if problems else 0
