# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo doctor [FILE] [--mesh ...]`: lint a topology and a mesh; each finding
says what to do. Exit 0 when clean, 1 with warnings or errors, 2 on bad input. Without FILE the
pinned topology (TORCH_TOPO_FILE, NCCL_TOPO_FILE) is checked and compared with the live probe of
this host; with neither, this host's live probe is checked, its failed sources included. `--nvlink
complete` checks an NCCL XML FILE with the NVLink it leaves out filled in, as the pinned file is.
`--hosts N --nvlink-domain-hosts K` checks N copies of a one-tray FILE as multi-node NVLink
domains of K hosts (GB200 NVL72: 18), so groups across trays of one domain are NVLink pairs."""

from __future__ import annotations

import argparse
import json

from torch_topo.cli._options import (
    add_nvlink,
    add_nvlink_domain_hosts,
    named_as_options,
    nvlink_domain_hosts,
    nvlink_mode,
)
from torch_topo.config import TopoConfig
from torch_topo.doctor import diagnose, live_probe_findings
from torch_topo.plan import check_hosts, completed_source, network_pins, parse_mesh
from torch_topo.probe import live_probe, resolve_pinned_file

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="lint a topology, mesh and environment", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", nargs="?", default=None,
                   help="topology file (default: TORCH_TOPO_FILE or NCCL_TOPO_FILE, else probe this "
                   "host)")
    add_nvlink(p)
    p.add_argument("--mesh", default=None, help="mesh to check, e.g. dp=4,tp=2 (default: tp=2 and tp=4)")
    p.add_argument("--hosts", type=int, default=1, help="copies of a one-host FILE (default 1)")
    add_nvlink_domain_hosts(p)
    p.add_argument("--kv-heads", type=int, default=None, help="K/V heads of the model (checks the sp degree)")
    p.add_argument("--json", action="store_true", help="print {schema, file, source, findings: [{code, severity, message, "
                   "fix}]}")
    p.set_defaults(run=run)


@named_as_options
def run(args) -> int:
    check_hosts(args.hosts, "--hosts")
    domain_hosts = nvlink_domain_hosts(args)
    if args.kv_heads is not None and args.kv_heads < 1:
        raise ValueError(f"--kv-heads: got {args.kv_heads}, expected >= 1")
    # Resolved as show and plan do, so a missing pinned file is reported by its variable.
    pinned = resolve_pinned_file(TopoConfig.from_env()) if args.file is None else None
    path = args.file or pinned
    mesh = parse_mesh(args.mesh, "--mesh") if args.mesh else None
    nvlink = nvlink_mode(args)
    if args.file is None and pinned and nvlink == "file":
        raise ValueError(f"--nvlink file: {pinned} is pinned, and is checked as the run reads it "
                         "(its NVLink completed); give it as FILE to check it as written")
    if path is None:
        findings, source = _diagnose_live(args, mesh, domain_hosts)
    else:
        topology = completed_source(path) if args.file is not None and nvlink == "complete" else path
        findings, source = diagnose(topology, mesh, hosts=args.hosts, kv_heads=args.kv_heads,
                                    pinned_path=path if args.file is None else None,
                                    **network_pins(TopoConfig.from_env()),
                                    nvlink_domain_hosts=domain_hosts), path
    problems = [f for f in findings if f.severity != "info"]
    if args.json:
        print(json.dumps({"schema": "torch-topo-doctor/1", "file": path, "source": source,
                          "findings": [f.to_dict() for f in findings]}, indent=2))
    else:
        for f in findings:
            print(f"[{f.severity}] {f.code}: {f.message}\n    fix: {f.fix}")
        print(f"{len(problems)} problem(s), {len(findings) - len(problems)} note(s) for {source}")
    return 1 if problems else 0


def _diagnose_live(args, mesh, domain_hosts):
    """Findings for this host's live probe: its layout and environment, and its failed sources."""
    live = live_probe()
    if mesh and live.gpu_count == 0:
        raise ValueError(f"--mesh: the live probe of this host ({live.source}) found no GPU to "
                         "place a mesh on; give a topology FILE")
    findings = diagnose(live, mesh, hosts=args.hosts, kv_heads=args.kv_heads,
                        **network_pins(TopoConfig.from_env()),
                        nvlink_domain_hosts=domain_hosts)
    return findings + live_probe_findings(live), f"this host ({live.source})"
