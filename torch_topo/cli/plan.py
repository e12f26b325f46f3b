# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo plan [FILE] --mesh dp=4,tp=2`: topology-aware layout of a device mesh,
its groups and predicted communication time per step; `--compare naive` adds the contiguous
layout (what plain `init_device_mesh` gives) and the ratio; `--attention SHAPE` splits the
mesh's sp dimension into ring (cp) x Ulysses (sp) as the cost model predicts fastest for that
attention shape, listing every split with its predicted time. Without FILE: the pinned file
(TORCH_TOPO_FILE / NCCL_TOPO_FILE), else the live cluster of the running world when
torch.distributed is initialised in this process, else the live probe of this host (which must
have GPUs). The NCCL_ALGO hint of each dimension is shown, with whether TORCH_TOPO_NCCL_HINTS
has init_device_mesh apply it."""

from __future__ import annotations

import argparse
import json
import os

from torch_topo.cli._options import (
    add_nvlink,
    add_nvlink_domain_hosts,
    named_as_options,
    nvlink_domain_hosts,
    nvlink_mode,
    parse_nccl_version,
)
from torch_topo.config import TopoConfig
from torch_topo.doctor import rank_counts, reader_warnings
from torch_topo.ops.sequence_split import (
    AttentionShape,
    choose_sequence_split,
    describe_candidates,
    sequence_split_candidates,
    split_mesh,
)
from torch_topo.plan import (
    Plan,
    assignments,
    check_hosts,
    check_traffic_bytes,
    completed_source,
    network_pins,
    parse_mesh,
    priced_as_the_backend,
    with_nvlink_domains,
)
from torch_topo.topology import Topology, load_topology

__all__ = ["add_parser", "run", "parse_traffic"]

# Sequence-parallel dimension names and how they are shown (docs/design.md §5: Ulysses inside
# the NVLink clique, ring attention across).
_SEQUENCE_DIMS = {"sp": "ulysses", "cp": "ring", "ring": "ring"}


def parse_traffic(text: str | None) -> dict[str, float] | None:
    """ "tp=1e9,dp=2.5e8" -> {"tp": 1e9, "dp": 2.5e8} bytes per step (--traffic)."""
    if text is None:
        return None
    out = {}
    for name, value in assignments(text, "--traffic", "NAME=BYTES (e.g. tp=1e9)"):
        try:
            nbytes = float(value)
        except ValueError:
            raise ValueError(f"--traffic: got {f'{name}={value}'!r}, expected NAME=BYTES "
                             "(e.g. tp=1e9)") from None
        out[name] = check_traffic_bytes("--traffic", name, nbytes)
    return out


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("plan", help="lay a device mesh out on a topology", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", nargs="?", default=None,
                   help="topology file (nvidia-smi, NCCL XML, torch-topo JSON, cluster JSON); "
                        "default: pinned file, else the live cluster or probe")
    add_nvlink(p)
    p.add_argument("--mesh", required=True, help="dimensions outermost first, e.g. dp=4,tp=2 or dp=2,cp=2,sp=2")
    p.add_argument("--hosts", type=int, default=1, help="copies of a one-host FILE (default 1)")
    add_nvlink_domain_hosts(p)
    p.add_argument("--traffic", default=None,
                   help="bytes per step per dimension, e.g. tp=1e9,dp=2e8 (must name every dimension)")
    p.add_argument("--compare", choices=["naive"], default=None, help="also cost the contiguous layout")
    p.add_argument("--attention", default=None, metavar="SHAPE",
                   help="heads=H,kv_heads=K,head_dim=D,seq_len=S[,batch=B][,dtype=bf16]: split "
                        "the mesh's sp dimension into cp (ring) x sp (Ulysses) as the cost "
                        "model predicts fastest, listing every split's predicted time")
    p.add_argument("--nccl-version", default=None, metavar="X.Y.Z",
                   help="NCCL release whose tuning the cost model follows where releases differ "
                        "(e.g. 2.26.2; default: the newest it knows, 2.28.9 and later)")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema torch-topo-plan/1)")
    p.set_defaults(run=run)


def _sequence_groups(plan: Plan) -> dict:
    return {kind: {"dim": dim, "groups": plan.groups(dim)}
            for dim, kind in _SEQUENCE_DIMS.items() if dim in plan.mesh_dim_names}


def _split_dict(shape: AttentionShape, candidates, best) -> dict:
    return {
        "attention": {"heads": shape.heads, "kv_heads": shape.kv_heads,
                      "head_dim": shape.head_dim, "seq_len": shape.seq_len,
                      "batch": shape.batch, "dtype": str(shape.dtype).removeprefix("torch.")},
        "candidates": [{"ulysses": c.ulysses, "ring": c.ring,
                        "seconds": c.seconds if c.valid else None,
                        "all_to_all_s": c.all_to_all_s, "ring_s": c.ring_s,
                        "problem": c.problem} for c in candidates],
        "chosen": {"ulysses": best.ulysses, "ring": best.ring},
    }


def _live_source():
    """What to plan on without FILE (see the module docstring)."""
    import torch.distributed as dist

    from torch_topo.cluster import world_cluster
    from torch_topo.probe import probe, resolve_pinned_file

    config = TopoConfig.from_env()
    pinned = resolve_pinned_file(config)
    if pinned is not None:
        return pinned
    if dist.is_available() and dist.is_initialized():
        live = world_cluster(config)
        if live is not None:
            return live.planner_doc()
    return probe(config)


def _one_host(source) -> Topology | None:
    """The source as one host's `Topology`, read once for the checks below; None for a cluster
    and for a file the loaders refuse (a cluster file, a bad or missing one: the planner
    reports on it)."""
    if isinstance(source, Topology):
        return source
    if isinstance(source, (str, os.PathLike)):
        try:
            return load_topology(source)
        except ValueError:
            return None
    return None


def _require_gpus(topo: Topology, source) -> None:
    """A one-host source without GPUs (a CPU machine's probe, or a file written there) has no
    rank to place; say so rather than let the planner count its one CPU rank."""
    if topo.gpu_count > 0:
        return
    if source is not topo:
        what = str(source)
    elif topo.format:  # the pinned file completed
        what = topo.source
    else:
        what = f"the live probe of this host ({topo.source})"
    raise ValueError(f"--mesh: {what} has no GPU to place a mesh on; give the topology "
                     "FILE of a GPU host (`python -m torch_topo probe -o FILE` writes one "
                     "there) or pin one with TORCH_TOPO_FILE")


def _source_name(args, source) -> str:
    """How a refusal of its hosts names what is planned on: FILE, the live cluster or the
    pinned file."""
    if args.file is not None:
        return f"FILE {args.file}"
    if isinstance(source, dict):
        return "the live cluster of the running world"
    # One host, copied or probed, is never uneven: what is left is a pinned cluster file.
    return f"{getattr(source, 'source', source)} (pinned by TORCH_TOPO_FILE / NCCL_TOPO_FILE)"


def _require_equal_hosts(cluster, named: str) -> None:
    """A cluster file or live cluster whose hosts hold different rank counts holds no device
    mesh (the planner lays a mesh out in equal blocks per host): refused naming the source,
    rather than with the planner's own message, which names no input."""
    counts = rank_counts(cluster)
    if len(counts) > 1:
        raise ValueError(f"{named}: its hosts hold different rank counts ({counts[0]} and "
                         f"{counts[-1]}), expected the same count on every host: a device mesh "
                         "is laid out in equal blocks per host; give a cluster whose hosts each "
                         "hold the same number of ranks (`python -m torch_topo doctor` runs "
                         "the checks that need no mesh on this one)")


@named_as_options
def run(args) -> int:
    check_hosts(args.hosts, "--hosts")
    domain_hosts = nvlink_domain_hosts(args)
    nccl_version = parse_nccl_version(args.nccl_version)
    mesh = parse_mesh(args.mesh, "--mesh")
    traffic = parse_traffic(args.traffic)
    source = args.file if args.file is not None else _live_source()
    if nvlink_mode(args) == "complete" and isinstance(source, (str, os.PathLike)):
        source = completed_source(os.fspath(source))
    topo = _one_host(source)
    nvlink_note, warnings = "", []
    if topo is not None:
        _require_gpus(topo, source)
        # Clusters get none: the planner reports on their hosts.
        nvlink_note = topo.nvlink_note()
        # The plan rests on what the reader assumed for a file cut short or contradicting itself.
        warnings = reader_warnings(topo)
    hosts, split = args.hosts, None
    config = TopoConfig.from_env()
    # A live cluster carries the network its group was configured with; a file or this
    # host's probe gets the environment's.
    network = network_pins(config) if not isinstance(source, dict) else {}
    named = _source_name(args, source)
    if domain_hosts is not None:
        source, hosts = with_nvlink_domains(source, hosts, domain_hosts), 1
    if args.attention is not None and traffic is not None:
        raise ValueError("--traffic: not with --attention, expected one of them (the split "
                         "adds a cp dimension the traffic would have to name)")
    # Resolved once, so that its hosts are checked before the mesh is laid out on them.
    source, backend = priced_as_the_backend(source, hosts, config, network=network,
                                            nccl_version=nccl_version)
    hosts = 1
    _require_equal_hosts(source, named)
    if args.attention is not None:
        shape = AttentionShape.parse(args.attention)
        candidates = sequence_split_candidates(source, mesh, shape)
        split = (shape, candidates, choose_sequence_split(candidates))
        mesh = split_mesh(mesh, split[2].ulysses)
    # The hints are shown whether or not TORCH_TOPO_NCCL_HINTS will apply them (nccl_hints_enabled).
    planned = Plan.build(source, mesh, traffic, hosts=hosts, nccl_hints=True, backend=backend,
                         **network)
    naive = (Plan.naive(source, mesh, traffic, hosts=hosts, backend=backend, **network)
             if args.compare else None)
    hints_on = config.nccl_hints
    if args.json:
        out = planned.to_dict()
        out["nccl_hints_enabled"] = hints_on
        out["sequence_parallel"] = _sequence_groups(planned)
        if split is not None:
            out["sequence_split"] = _split_dict(*split)
        if naive is not None:
            out["compare"] = {
                "naive": {"mesh": naive.mesh, "groups": naive.to_dict()["groups"],
                          "cost": naive.to_dict()["cost"], "total_cost": naive.cost()},
                "ratio": naive.cost() / planned.cost() if planned.cost() > 0 else 1.0,
            }
        out["nvlink"] = nvlink_note
        # The bare origin, as show --json gives it (None for a cluster).
        out["nvlink_origin"] = topo.nvlink_origin if topo is not None else None
        out["reader_warnings"] = warnings
        print(json.dumps(out, indent=2))
        return 0
    if split is not None:
        print(describe_candidates(split[0], split[1]))
    print(planned.explain())
    if nvlink_note:
        print(nvlink_note)
    for text in warnings:
        print(f"reader warning: {text}")
    if planned.nccl_hints:
        print("nccl hints " + ("applied by init_device_mesh (TORCH_TOPO_NCCL_HINTS is on)"
                               if hints_on else "not applied: TORCH_TOPO_NCCL_HINTS is off"))
    for kind, entry in _sequence_groups(planned).items():
        print(f"{kind} groups ({entry['dim']}): {entry['groups']}")
    if naive is not None:
        print()
        print(naive.explain())
        ratio = naive.cost() / planned.cost() if planned.cost() > 0 else 1.0
        print(f"\ncontiguous / planned predicted time: {ratio:.2f}x")
    return 0
