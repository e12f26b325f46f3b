# SPDX-License-Identifier: Apache-2.0
"""Copy bandwidths of one host's GPUs (layer: Python package, CUDA only): host-to-device and
device-to-host from pinned memory per GPU, and peer copies per GPU pair, one transfer at a time
so no two share a link. Rates are bytes / wall time between device synchronisations, the median
of `reps` blocks; the copies are large enough (default 256 MiB) for launch costs to vanish."""

from __future__ import annotations

import statistics
import time

import torch

__all__ = ["COPY_BYTES", "host_device_gbps", "peer_gbps"]

COPY_BYTES = 256 << 20


def _rate(copy, devices: list[torch.device], nbytes: int, reps: int, per_block: int = 4) -> float:
    def sync():
        for d in devices:
            torch.cuda.synchronize(d)

    copy()  # first use: peer-access enabling, allocator and context warm-up
    times = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        for _ in range(per_block):
            copy()
        sync()
        times.append((time.perf_counter() - start) / per_block)
    return nbytes / statistics.median(times) / 1e9


def host_device_gbps(device: torch.device, nbytes: int = COPY_BYTES, reps: int = 5
                     ) -> tuple[float, float]:
    """(host-to-device, device-to-host) GB/s of `device` with pinned host memory."""
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = _rate(lambda: dev.copy_(host, non_blocking=True), [device], nbytes, reps)
    d2h = _rate(lambda: host.copy_(dev, non_blocking=True), [device], nbytes, reps)
    return h2d, d2h


def peer_gbps(a: torch.device, b: torch.device, nbytes: int = COPY_BYTES, reps: int = 5) -> float:
    """GB/s of the slower direction of peer copies between `a` and `b` (torch uses the copy
    engines over NVLink or PCIe when peer access is possible, else stages through the host)."""
    x = torch.empty(nbytes, dtype=torch.uint8, device=a)
    y = torch.empty(nbytes, dtype=torch.uint8, device=b)
    forward = _rate(lambda: y.copy_(x, non_blocking=True), [a, b], nbytes, reps)
    backward = _rate(lambda: x.copy_(y, non_blocking=True), [a, b], nbytes, reps)
    return min(forward, backward)
