# SPDX-License-Identifier: Apache-2.0
"""Does NCCL run several ranks on one GPU when each has its own NCCL_HOSTID? (issue 21: the
mechanism under `python -m torch_topo.emulate --one-gpu`, checked before anything is built on it)

    python tests/gpu/nccl_hostid_check.py [--worlds 2 4 8] [--json F]

For each world size, tries the settings below in order until one works, each as a launch of
plain NCCL ranks (no torch-topo in the ranks: init_process_group("nccl", device_id=cuda:0),
all_reduce and all_gather of 4 MiB checked against the exact result, barrier) under the
rehearsal launcher, and records what it tried: setting, exit code, seconds, and the last lines a
failing rank printed. Exit 0 when worlds 2 and 4 found a working setting; without CUDA it says
so, writes {"skipped": ...} and exits 0 (scripts/gpu_check.sh runs it first).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Any host with >= 4 GPUs serves: NCCL never sees it, the launcher only places ranks on it.
HOST = os.path.join(ROOT, "tests", "data", "nccl_topo_xml", "aws_p4d.24xlarge_8xA100_topo.xml")
# NCCL 2.28 already keeps P2P, SHM and NVLS off between different host hashes (paths.cc,
# shm.cc, nvls.cc); what can still object is the multi-node NVLink check it runs once there are
# several "nodes" (mnnvl.cc), cuMem allocations shared by processes on one device, and the
# network plugin or interface it picks.
_FALLBACK = ["NCCL_MNNVL_ENABLE=0", "NCCL_CUMEM_ENABLE=0", "NCCL_CUMEM_HOST_ENABLE=0",
             "NCCL_NET=Socket"]
SETTINGS = [
    ("NCCL_HOSTID per rank", []),
    ("+ MNNVL, cuMem off, Socket", _FALLBACK),
    ("+ P2P, SHM, NVLS off too", [*_FALLBACK, "NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1",
                                   "NCCL_NVLS_ENABLE=0"]),
]
# NCCL's lines worth keeping from a launch: the transport of each connection, its warnings.
_EVIDENCE = re.compile(r"via NET/|NCCL WARN|Duplicate GPU|[Ee]rror|MNNVL|NCCL version")


def rank_program() -> int:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    x = torch.full((1 << 20,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    ok = bool((x == world * (world + 1) / 2).all())
    out = torch.empty(world << 20, device=dev)
    dist.all_gather_into_tensor(out, torch.full((1 << 20,), float(rank), device=dev))
    ok &= torch.equal(out.view(world, -1)[:, 0].cpu(), torch.arange(world, dtype=torch.float32))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {'ok' if ok else 'WRONG RESULT'}", flush=True)
    return 0 if ok else 3


def _attempt(world: int, nccl_env: list[str], timeout_s: float) -> dict:
    cmd = [sys.executable, "-m", "torch_topo.emulate", "--one-gpu", "--nodes", "2",
           "--procs-per-node", str(world // 2), "--topology", HOST, "--timeout-s",
           str(timeout_s), "--grace-s", "10"]
    # NCCL's INIT and NET lines name the transport of every connection (and why one failed).
    for item in [*nccl_env, "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET"]:
        cmd += ["--nccl-env", item]
    cmd += ["--", sys.executable, os.path.abspath(__file__), "--rank-program"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT,
                                                                     os.environ.get("PYTHONPATH")])))
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=timeout_s + 30)
        rc, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, text = 124, f"launcher did not return: {exc}"
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return {"world": world, "nccl_env": nccl_env, "rc": rc,
            "seconds": round(time.monotonic() - start, 1),
            "nccl_lines": [ln[-300:] for ln in lines if _EVIDENCE.search(ln)][:40],
            "tail": [] if rc == 0 else [ln for ln in lines if not _EVIDENCE.search(ln)][-20:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--timeout-s", type=float, default=60.0, help="per attempt")
    parser.add_argument("--json", default=None)
    parser.add_argument("--rank-program", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank_program:
        return rank_program()
    bad = [w for w in args.worlds if w < 2 or w % 2]
    if bad:
        parser.error(f"--worlds: got {bad[0]}, expected even sizes >= 2 (2 played hosts)")
    import torch

    if not torch.cuda.is_available():
        print("nccl_hostid_check: no CUDA device here; nothing to check")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": "no CUDA device"}, f)
        return 0
    attempts, working = [], {}

    def save() -> None:  # after every attempt: a deadline may cut the run short
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"gpu": torch.cuda.get_device_name(0), "nccl": ".".join(
                    map(str, torch.cuda.nccl.version())), "attempts": attempts,
                    "working": working}, f, indent=1)

    first = 0  # a larger world starts from the setting that worked at the one before
    for world in args.worlds:
        for index, (name, nccl_env) in enumerate(SETTINGS[first:], start=first):
            result = _attempt(world, nccl_env, args.timeout_s)
            result["setting"] = name
            attempts.append(result)
            status = "ok" if result["rc"] == 0 else f"exit {result['rc']}"
            print(f"world {world:2d}  {name:24s} {status:8s} {result['seconds']:6.1f} s",
                  flush=True)
            for line in result["tail"] + [ln for ln in result["nccl_lines"]
                                          if result["rc"] or "via NET/" not in ln][:12]:
                print(f"    {line}")
            if result["rc"] == 0:
                working[world] = name
                first = index
            save()
            if result["rc"] == 0:
                break
    print("working settings:", working or "none")
    return 0 if all(w in working for w in (2, 4) if w in args.worlds) else 1


if __name__ == "__main__":
    sys.exit(main())
