# SPDX-License-Identifier: Apache-2.0
"""Registers the torch.distributed backend "topo" and builds its inner backends.

`import torch_topo` calls `register()`. The creator runs once per process group, on member ranks
only, and never calls world collectives or `new_group`: it builds the flat inner backends from
the creator's prefixed store (Gloo for CPU tensors, NCCL for CUDA tensors when CUDA is usable),
wraps them in the C++ `TopoBackend`, then lets `torch_topo.hierarchy.attach_hierarchy` add the
topology-derived levels. In a group whose ranks all bound a CUDA device the Gloo side is lazy:
`TopoBackend` builds it at the group's first CPU op, or never (`lazy_gloo`).

`register()` also keeps a "topo" default group from being torch's split source for new groups
(`split_source_for_new_group`), and gives groups torch splits from a "topo" group the levels and
NCCL hints the creator gives its own (`torch_topo.split`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from datetime import timedelta

import torch
import torch.distributed as dist

from torch_topo import _C
from torch_topo.config import TopoConfig
from torch_topo.group_settings import agree_on_settings, refuse_settings
from torch_topo.hierarchy import attach_hierarchy
from torch_topo.nccl_hints import connect_with_hints
from torch_topo.numa import bind_at_init
from torch_topo.split import guard_split_group

__all__ = ["BACKEND_NAME", "register", "resolve_config", "build_inner_backends", "lazy_gloo",
           "split_source_for_new_group"]

BACKEND_NAME = "topo"


def resolve_config(pg_options: object | None) -> TopoConfig:
    """The config of a group: `pg_options` (a TopoConfig, or None) merged with TORCH_TOPO_*."""
    if pg_options is None:
        return TopoConfig.from_env()
    if isinstance(pg_options, TopoConfig):
        return pg_options.merged_with_env()
    if isinstance(pg_options, dict):
        # A plain mapping is accepted for launchers that cannot import torch_topo; unknown keys
        # get TopoConfig's own TypeError turned into a ValueError that names them.
        known = set(TopoConfig.__dataclass_fields__)
        unknown = sorted(set(pg_options) - known)
        if unknown:
            raise ValueError(
                f"topo backend pg_options: unknown config field {unknown[0]!r}, expected one of "
                + ", ".join(sorted(known))
            )
        return TopoConfig(**pg_options).merged_with_env()
    raise ValueError(
        f"topo backend pg_options: got {type(pg_options).__name__}, expected a "
        "torch_topo.TopoConfig, a dict of its fields, or None"
    )


def _set_if_present(options: object, name: str, value: object) -> None:
    # Older releases lack some option fields; those releases do not read them either.
    if hasattr(options, name):
        setattr(options, name, value)


def _build_gloo(store, rank: int, size: int, timeout: timedelta, group_name: str, ranks):
    gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
    _set_if_present(gloo.options, "group_name", group_name)
    _set_if_present(gloo.options, "global_ranks_in_group", list(ranks))
    return gloo


def _build_nccl(store, rank: int, size: int, timeout: timedelta, group_name: str, ranks):
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = False
    options._timeout = timeout
    _set_if_present(options, "group_name", group_name)
    _set_if_present(options, "global_ranks_in_group", list(ranks))
    # The NCCL communicator itself is created lazily by ProcessGroupNCCL on first use (or
    # eagerly when init_process_group got device_id, via eager_connect_single_device).
    return dist.ProcessGroupNCCL(store, rank, size, options)


def _cuda_usable() -> bool:
    return torch.cuda.is_available() and dist.is_nccl_available()


def lazy_gloo(store, rank: int, size: int, options):
    """The Gloo side of a group built at its first CPU op (`TopoBackend` calls this with the
    creator's store and its own options). Its device connects each pair of ranks at their first
    exchange, so a send between two ranks builds it on those two without waiting for the rest;
    GLOO_SOCKET_IFNAME is honoured as torch's own constructor does."""
    gloo_cls = dist.ProcessGroupGloo
    interfaces = [i for i in os.environ.get("GLOO_SOCKET_IFNAME", "").split(",") if i]
    devices = [gloo_cls.create_device(interface=i, lazy_init=True) for i in interfaces]
    opts = gloo_cls._Options()
    opts._devices = devices or [gloo_cls.create_default_device(lazy_init=True)]
    opts._threads = 2 * len(opts._devices)
    opts._timeout = options._timeout
    _set_if_present(opts, "group_name", options.group_name)
    _set_if_present(opts, "global_ranks_in_group", list(options.global_ranks_in_group))
    return gloo_cls(dist.PrefixStore("gloo/", store), rank, size, opts)


def _bound_device_type(dist_opts) -> str | None:
    """The device type this rank bound for the group (init_process_group's device_id, which
    torch sets on the group before its backends are created), or None."""
    device = getattr(getattr(dist_opts, "process_group", None), "bound_device_id", None)
    return None if device is None else device.type


def _gloo_side_is_lazy(dist_opts) -> bool:
    """Whether this group's Gloo side waits for its first CPU op: this rank bound a CUDA device
    (and NCCL serves it). Every rank must agree (`agree_on_settings`), else one builds eagerly
    and waits for peers that never join."""
    return _cuda_usable() and _bound_device_type(dist_opts) == "cuda"


def build_inner_backends(store, rank: int, size: int, timeout: timedelta, group_name: str = "",
                         ranks=(), *, lazy_cpu: bool = False) -> dict:
    """The flat inner backends of one group, keyed by device type, each on its own store prefix
    (no "cpu" entry with `lazy_cpu`: the C++ backend builds it through `lazy_gloo`)."""
    inner = {}
    if not lazy_cpu:
        inner["cpu"] = _build_gloo(dist.PrefixStore("gloo/", store), rank, size, timeout,
                                   group_name, ranks)
    if _cuda_usable():
        inner["cuda"] = _build_nccl(dist.PrefixStore("nccl/", store), rank, size, timeout,
                                    group_name, ranks)
        # A planned NCCL_ALGO must be in force when this communicator is created.
        connect_with_hints(inner["cuda"], ranks)
    return inner


def _own_config(pg_options, dist_opts) -> TopoConfig:
    config = resolve_config(pg_options)
    timeout = config.timeout if config.timeout is not None else dist_opts.timeout
    # The cluster exchange and the levels wait as long as the group's collectives would.
    try:
        return config.with_fields(timeout_s=timeout.total_seconds())
    except ValueError as exc:  # only init_process_group's / new_group's timeout can get here
        raise ValueError(f"topo backend: the process group's timeout: {exc} (set by "
                         "init_process_group or new_group(timeout=...))") from None


def _create_backend(dist_opts, pg_options):
    store = dist_opts.store
    rank, size = dist_opts.group_rank, dist_opts.group_size
    try:
        config = _own_config(pg_options, dist_opts)
    except ValueError as exc:
        refuse_settings(store, rank, exc)
        raise
    timeout = config.timeout
    group_name = str(getattr(dist_opts, "group_id", ""))
    ranks = list(dist_opts.global_ranks_in_group) or list(range(size))
    if not dist.is_initialized():  # the world group: bind before inner backends start threads
        bind_at_init(config, ranks[rank], size, ranks[rank])
    lazy_cpu = _gloo_side_is_lazy(dist_opts)
    agree_on_settings(store, rank, size, config, lazy_cpu=lazy_cpu, timeout=timeout)
    inner = build_inner_backends(store, rank, size, timeout, group_name, ranks,
                                 lazy_cpu=lazy_cpu)
    options = _C.TopoBackend.Options(timeout)
    options.debug = config.debug
    options.plain = not config.use_topo_aware_collectives
    _set_if_present(options, "group_name", group_name)
    _set_if_present(options, "global_ranks_in_group", ranks)
    backend = _C.TopoBackend(store, rank, size, options, inner,
                             {"cpu": lazy_gloo} if lazy_cpu else {})
    attach_hierarchy(backend, store, rank, size, ranks, config)
    return backend


def split_source_for_new_group(source):
    """What `new_group` may split from, given what torch picked (`_get_split_source`): None
    when torch picked a TopoBackend, else torch's pick unchanged.

    With a bound device torch takes the default group's backend for that device as the split
    source of every new group, whatever backend the group asks for: a "nccl" group under a
    "topo" default group then gets our TopoBackend as `ProcessGroupNCCL.Options.split_from`
    (torch 2.11-2.13: TypeError; 2.14: AssertionError). Splitting needs a parent of the child's
    own backend, and none of ours is one: the "topo" creator builds its inner communicators
    from the store, and Gloo and NCCL children cannot split from a TopoBackend. So a topo
    parent is never the source. The answer depends only on the default group, so members and
    non-members decide alike: nobody splits, and no non-member calls `perform_nocolor_split`
    (which would wait for members that never split). `split_group` (init_device_mesh with
    device_id) does not come here; it calls TopoBackend.split.
    """
    return None if isinstance(source, _C.TopoBackend) else source


def _guard_split_source() -> None:
    # torch has no hook for this decision: wrap its private helper (2.11-2.15 call it once per
    # new group, by its module-global name). A release without it keeps its own behaviour.
    # 2.15 added `requested_backend` and itself refuses a parent of another backend (a "nccl"
    # child of "topo"), but still offers the TopoBackend to a "topo" child: the guard stays.
    c10d = dist.distributed_c10d
    original = getattr(c10d, "_get_split_source", None)
    if original is None or getattr(original, "_torch_topo_guard", False):
        return

    @functools.wraps(original)
    def guarded(pg, *args, **kwargs):
        return split_source_for_new_group(original(pg, *args, **kwargs))

    guarded._torch_topo_guard = True
    c10d._get_split_source = guarded


def _is_topo_group(group) -> bool:
    try:
        return dist.get_backend(group) == BACKEND_NAME
    except (RuntimeError, ValueError):  # destroyed, or not a group this rank knows
        return False


def _guard_coalescing_manager() -> None:
    # torch's `_coalescing_manager` (2.11-2.15) does nothing when its block raises (an op of
    # batch_isend_irecv refused on every rank): the group stays in `_world.pg_coalesce_state`,
    # so every later all_reduce, all_gather_into_tensor and reduce_scatter_tensor on it is
    # queued there and returns without running, and the backend stays in its block. Gloo never
    # takes that path (it does not coalesce); topo, which coalesces for NCCL, does. For a topo
    # group the guard drops that state and ends the backend's block, then re-raises.
    # batch_isend_irecv looks the manager up by its module-global name.
    c10d = dist.distributed_c10d
    original = getattr(c10d, "_coalescing_manager", None)
    if original is None or getattr(original, "_torch_topo_guard", False):
        return

    @contextlib.contextmanager
    def guarded(group=None, device=None, async_ops=False):
        group = group or c10d._get_default_group()
        try:
            with original(group, device, async_ops) as cm:
                yield cm
        except BaseException:
            if _is_topo_group(group):
                c10d._world.pg_coalesce_state.pop(group, None)
                if device is not None:
                    # The ops issued before the failure stay in flight, as unbatched ones would:
                    # the backend holds their work, whose loss would cancel Gloo's transfers.
                    group._get_backend(torch.device(device)).abandon_coalescing()
            raise

    functools.update_wrapper(guarded, original)
    guarded._torch_topo_guard = True
    c10d._coalescing_manager = guarded


def register() -> None:
    """Registers "topo" once (importing torch_topo calls this)."""
    _guard_split_source()
    _guard_coalescing_manager()
    guard_split_group()
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    # A list, not a string: some releases iterate a string by character.
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"]
    )
