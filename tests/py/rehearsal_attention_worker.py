# SPDX-License-Identifier: Apache-2.0
"""Rank program: Ulysses, ring (zigzag) and 2-D sequence-parallel attention, forward and
backward, on this rank's shard against single-process SDPA with autograd (the cases of
tests/py/ops/ops_cases.py), at world 4 under `python -m torch_topo.emulate --one-gpu`.
tests/gpu/test_rehearsal_cuda.py runs it on CUDA over NCCL, tests/py/test_emulate_one_gpu.py
on CPU over Gloo. Writes <out>/rank<R>.json: {case: "ok" or the failure}."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops"))

import ops_cases  # noqa: E402

# name, op, causal, heads, kv_heads, balance
CASES = [
    ("ulysses", "ulysses", False, 8, 8, "none"),
    ("ulysses_gqa_causal", "ulysses", True, 8, 2, "none"),
    ("ring", "ring", False, 4, 4, "none"),
    ("ring_zigzag_causal", "ring", True, 4, 2, "zigzag"),
    ("2d_zigzag_causal", "2d", True, 4, 4, "zigzag"),
]
# On a GPU the reference and the blocks may run different SDPA kernels (math, efficient, flash,
# cuDNN): fp32 results then differ by more than summation order, bf16 by a few roundings.
GPU_TOLERANCES = {"float32": (1e-3, 1e-3), "bfloat16": (3e-2, 3e-2)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    results: dict[str, str] = {}
    kwargs = {}
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
        kwargs["device_id"] = dev
    dist.init_process_group("topo", **kwargs)
    dtypes = ["float32", "bfloat16"] if args.device == "cuda" else ["float32"]
    for name, op, causal, heads, kv_heads, balance in CASES:
        for dtype in dtypes:
            tolerance = GPU_TOLERANCES[dtype] if args.device == "cuda" else None
            try:
                ops_cases.attention(rank, world, op=op, causal=causal, heads=heads,
                                    kv_heads=kv_heads, seq_local=32, dtype=dtype, balance=balance,
                                    head_dim=64, device=args.device, tolerance=tolerance)
                results[f"{name} {dtype}"] = "ok"
            except Exception:  # noqa: BLE001  (recorded; the other cases still run)
                results[f"{name} {dtype}"] = traceback.format_exc()[-1500:]
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    return 0 if all(v == "ok" for v in results.values()) else 3


if __name__ == "__main__":
    sys.exit(main())
