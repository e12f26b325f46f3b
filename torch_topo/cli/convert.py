# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo convert FILE --to nccl-xml|json [-o OUT] [--json]`: rewrite a topology
file of any accepted format as NCCL topology XML (NCCL_TOPO_FILE) or torch-topo JSON."""

from __future__ import annotations

import argparse
import json
import sys

from torch_topo.cli._options import output_name, write_output
from torch_topo.topology import read_topology

__all__ = ["add_parser", "run", "TARGETS"]

TARGETS = ("nccl-xml", "json")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("convert", help="convert a topology file to NCCL XML or JSON",
                              description=__doc__)
    p.add_argument("file", metavar="FILE", help="any file `show` accepts")
    p.add_argument("--to", required=True, choices=TARGETS, help="output format")
    p.add_argument("-o", "--output", metavar="OUT", type=output_name,
                   help="write here instead of stdout")
    p.add_argument("--json", action="store_true",
                   help="print a JSON summary (schema, input, from, to, output, gpu_count, "
                        "warnings; the converted text as `content` when no -o is given)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topo = read_topology(args.file, "FILE")
    try:
        text = topo.to_nccl_xml() if args.to == "nccl-xml" else topo.to_json(indent=2) + "\n"
    except ValueError as e:  # a host without a PCI tree has no NCCL XML
        raise ValueError(f"--to {args.to}: {e}") from None
    if args.output:
        write_output(args.output, text)
    if args.json:
        summary = {"schema": "torch-topo-convert/1", "input": args.file,
                   "from": topo.format or None, "to": args.to, "output": args.output,
                   "gpu_count": topo.gpu_count, "warnings": topo.warnings}
        if not args.output:
            summary["content"] = text
        print(json.dumps(summary, indent=2))
    elif not args.output:
        sys.stdout.write(text)
    for w in topo.warnings:
        print(f"torch_topo convert: warning: {w}", file=sys.stderr)
    return 0
