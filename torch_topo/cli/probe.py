# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo probe [-o FILE] [--json]`: the live probe of this host (hwloc or /sys,
NVML) as torch-topo JSON, the file format that TORCH_TOPO_FILE, `show`, `plan` and `doctor`
read. Pinned files (TORCH_TOPO_FILE, NCCL_TOPO_FILE) are ignored: this is how to make one. A
source that failed is logged on stderr and kept in the file's warnings (docs/probe.md); the file's
format is "probe"."""

from __future__ import annotations

import argparse
import json
import sys

from torch_topo.cli._options import output_name, write_output
from torch_topo.probe import live_probe

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("probe", help="write this host's live topology as a pinnable file",
                              description=__doc__)
    p.add_argument("-o", "--output", metavar="FILE", type=output_name,
                   help="write the torch-topo JSON here instead of stdout")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary (schema, source, output, gpu_count, nic_count, "
                        "warnings; the topology as `content` when no -o is given)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topo = live_probe()
    doc = json.loads(topo.to_json())
    # A live probe has no file format (""); its file says "probe", so that a Topology read back
    # from it is told from a fresh probe (doctor's file checks) and keeps the probe's source.
    doc["format"] = doc["format"] or "probe"
    text = json.dumps(doc, indent=2) + "\n"
    if args.output:
        write_output(args.output, text)
    if args.json:
        # The schema lets a loader name this report if it is given as a topology.
        summary = {"schema": "torch-topo-probe/1", "source": topo.source, "output": args.output,
                   "gpu_count": topo.gpu_count, "nic_count": len(topo.nics),
                   "warnings": topo.warnings}
        if not args.output:
            summary["content"] = json.loads(text)
        print(json.dumps(summary, indent=2))
    elif not args.output:
        sys.stdout.write(text)
    return 0
