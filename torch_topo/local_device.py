# SPDX-License-Identifier: Apache-2.0
"""This process's GPU, as every part of "topo" that needs it sees it (the cluster record, NUMA
binding, the NCCL communicators created under hints).

The order is torch's own recommendation first: the `device_id` given to `init_process_group`,
else the launcher's `LOCAL_RANK`, else the current device. Before issue 21 only the current
device counted, so on a host with several GPUs every rank that had not called
`torch.cuda.set_device` claimed GPU 0 and the cluster exchange refused the group.
"""

from __future__ import annotations

import os
import sys

import torch

__all__ = ["bound_device_index", "local_cuda_index"]

_C10D_MODULE = "torch.distributed.distributed_c10d"
_HELPER = "_new_process_group_helper"


def _cuda_index(device) -> int | None:
    if device is None:
        return None
    device = torch.device(device)
    return device.index if device.type == "cuda" and device.index is not None else None


def bound_device_index() -> int | None:
    """The CUDA index of `init_process_group(..., device_id=...)`, or None without one."""
    import torch.distributed as dist

    if dist.is_initialized():
        return _cuda_index(getattr(dist.distributed_c10d._get_default_group(),
                                   "bound_device_id", None))
    # The world group's creator runs inside init_process_group, and torch hands a creator no
    # device: device_id is then only a local of torch's process-group helper (the same name
    # in 2.11-2.15), the frame that called the creator. Outside that call there is none.
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == _HELPER and frame.f_globals.get("__name__") == _C10D_MODULE:
            return _cuda_index(frame.f_locals.get("device_id"))
        frame = frame.f_back
    return None


def local_cuda_index(environ=None) -> int:
    """The CUDA device index of this process: `device_id`, else `LOCAL_RANK`, else the current
    device; -1 without CUDA, or when `LOCAL_RANK` names no visible device (more ranks than
    GPUs: such a rank has no GPU of its own).

    Args:
        environ: environment to read LOCAL_RANK from (default os.environ).
    """
    if not torch.cuda.is_available():
        return -1
    bound = bound_device_index()
    if bound is not None:
        return bound
    text = (os.environ if environ is None else environ).get("LOCAL_RANK", "").strip()
    if not text:
        return torch.cuda.current_device()
    try:
        local = int(text)
    except ValueError:
        raise ValueError(f"LOCAL_RANK: got {text!r}, expected a rank number >= 0") from None
    if local < 0:
        raise ValueError(f"LOCAL_RANK: got {local}, expected a rank number >= 0")
    return local if local < torch.cuda.device_count() else -1
