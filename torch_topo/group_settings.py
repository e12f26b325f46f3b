# SPDX-License-Identifier: Apache-2.0
"""The settings every rank of a "topo" group must share, checked when the group is created.

Each rank decides alone, from its own TopoConfig, whether a collective runs flat or through a
hierarchical schedule, at which sizes, in which chunks, and whether the group's Gloo side waits
for its first CPU op. Ranks that decide differently call different inner collectives and wait
for each other until the timeout (or, over NCCL, may pair unrelated operations). Environment
variables set on one node's launcher but not another's make that easy, so the creator compares
the settings through the store before building anything: every rank publishes its own, group
rank 0 compares them and publishes a verdict, and every rank raises the same error naming the
first setting that differs. Each rank reads one key whatever the group size.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from torch_topo import _C
from torch_topo.config import ENV_VARS, TopoConfig
from torch_topo.store_rounds import (
    decided_by_root,
    get_many,
    publish_failure,
    raise_if_reported,
    wait_all,
)

__all__ = ["SHARED_FIELDS", "agree_on_settings", "refuse_settings"]

SHARED_FIELDS = ("use_topo_aware_collectives", "hierarchical", "pipeline_chunk_bytes",
                 "inter_host_gbps", "inter_host_latency_us", "nccl_hints")
"""TopoConfig fields that shape the group's collectives (or, for nccl_hints, its NCCL
communicators); the others (timeout, files, binding, debug output, play) may differ by rank."""

_KEY_PREFIX = "torch_topo/settings/"
_VERDICT_KEY = "torch_topo/settings"
_LAZY = "lazy_cpu"


def _settings(config: TopoConfig, lazy_cpu: bool) -> dict:
    return {**{name: getattr(config, name) for name in SHARED_FIELDS}, _LAZY: lazy_cpu}


# Published as what differs from the defaults only (usually nothing), so group rank 0 reads a
# few bytes per rank. A release whose defaults differ would read another release's "{}" as its
# own defaults, so each rank also publishes a digest of the defaults it left out.
_DEFAULTS = _settings(TopoConfig(), False)
_DIGEST = "defaults"


def _defaults_digest() -> str:
    text = json.dumps(_DEFAULTS, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _encode(settings: dict) -> str:
    changed = {k: v for k, v in settings.items() if v != _DEFAULTS[k]}
    return json.dumps({_DIGEST: _defaults_digest(), **changed}, separators=(",", ":"))


def _decode(raw: bytes) -> tuple[str, dict]:
    published = json.loads(raw)
    return published.pop(_DIGEST), {**_DEFAULTS, **published}


def _difference(rank: int, theirs: dict, ours: dict) -> str:
    if theirs[_LAZY] != ours[_LAZY]:
        return (f"group rank {rank} {'bound' if theirs[_LAZY] else 'did not bind'} a CUDA "
                f"device but group rank 0 {'did' if ours[_LAZY] else 'did not'}; expected every "
                "rank of a group to pass device_id to init_process_group, or none")
    name = next(n for n in SHARED_FIELDS if theirs[n] != ours[n])
    shown = ["unset" if v is None else repr(v) for v in (theirs[name], ours[name])]
    return (f"{ENV_VARS[name]} (TopoConfig.{name}) is {shown[0]} on group rank {rank} but "
            f"{shown[1]} on group rank 0; expected one value on every rank of a group, as it "
            "decides how each collective runs (set it in every node's environment, or in none)")


def agree_on_settings(store, group_rank: int, group_size: int, config: TopoConfig, *,
                      lazy_cpu: bool, timeout: timedelta) -> None:
    """Raises TopoMismatchError on every rank of the group when any rank's shared settings
    (SHARED_FIELDS, and whether its Gloo side is lazy) differ from group rank 0's."""
    mine = _settings(config, lazy_cpu)
    store.set(f"{_KEY_PREFIX}{group_rank}", _encode(mine))

    def compare() -> bytes:
        keys = [f"{_KEY_PREFIX}{r}" for r in range(group_size)]
        wait_all(store, keys, timeout, 0, "settings")
        ours = _defaults_digest()
        for r, raw in enumerate(get_many(store, keys)):
            digest, theirs = _decode(raise_if_reported(raw, f"raised on group rank {r}"))
            if digest != ours:
                raise _C.TopoMismatchError(
                    f"topo backend: group rank {r} runs a torch-topo whose default settings "
                    f"differ from group rank 0's (digest {digest} against {ours}): another "
                    "release or build; expected the same torch-topo on every rank of a group")
            if theirs != mine:
                raise _C.TopoMismatchError(f"topo backend: {_difference(r, theirs, mine)}")
        return b"same"

    decided_by_root(store, _VERDICT_KEY, group_rank, timeout, "the settings check", compare)


def refuse_settings(store, group_rank: int, exc: Exception) -> None:
    """Publishes the error of a rank that could not read its own settings (a bad TORCH_TOPO_*
    value in its node's environment) in their place, so that every rank raises it at once:
    the others waited out the group's timeout (30 minutes by default) for its settings, then
    blamed a crashed rank."""
    publish_failure(store, group_rank, f"{_KEY_PREFIX}{group_rank}", _VERDICT_KEY, exc)
