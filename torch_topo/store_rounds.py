# SPDX-License-Identifier: Apache-2.0
"""Rounds of agreement through a c10d store, for code that runs inside a backend creator and so
cannot use a collective: every rank publishes under its own key, group rank 0 decides from what
all published and publishes the verdict (or the error it raised), and every other rank reads
only that verdict. Used by the cluster exchange, the hierarchy's host names and the group
settings check."""

from __future__ import annotations

import json
from datetime import timedelta

from torch_topo import _C

__all__ = ["decided_by_root", "get_many", "publish_failure", "raise_if_reported", "wait_all"]


def wait_all(store, keys: list[str], timeout: timedelta, group_rank: int,
             what: str = "topology records") -> None:
    """Waits for every rank's key (`keys[r]` is rank r's); a timeout names the missing ranks."""
    try:
        store.wait(keys, timeout)
    except RuntimeError as exc:  # c10d raises DistStoreError (a RuntimeError) on timeout
        missing = [i for i, k in enumerate(keys) if not store.check([k])]
        raise TimeoutError(
            f"topo group creation: rank {group_rank} waited {timeout.total_seconds():g} s for the "
            f"{what} of ranks {missing} of {len(keys)}; those ranks did not reach "
            "backend creation (crashed, or a different world size)"
        ) from exc


def get_many(store, keys: list[str]) -> list[bytes]:
    # One round trip on stores that have multi_get (TCPStore); the others get key by key.
    multi_get = getattr(store, "multi_get", None)
    return multi_get(keys) if multi_get is not None else [store.get(k) for k in keys]


# What group rank 0 publishes instead of its result when it failed; the others raise the same.
_ERROR_MARK = b"!"
_ERROR_TYPES = {cls.__name__: cls for cls in (_C.TopoMismatchError, _C.TopoParseError,
                                              _C.TopoError, ValueError, TimeoutError)}


def _error_report(exc: Exception) -> bytes:
    return _ERROR_MARK + json.dumps({"type": type(exc).__name__, "message": str(exc)}).encode()


def raise_if_reported(payload: bytes, where: str) -> bytes:
    """`payload` unless it is an error report (`publish_failure`, `decided_by_root`): then
    raises that error again, its message followed by `where`."""
    if payload.startswith(_ERROR_MARK):
        report = json.loads(payload[len(_ERROR_MARK):])
        error = _ERROR_TYPES.get(report["type"], RuntimeError)
        raise error(f"{report['message']} ({where})")
    return payload


def publish_failure(store, group_rank: int, own_key: str, root_key: str,
                    exc: Exception) -> None:
    """A rank that cannot produce its record publishes its error in the record's place, so
    group rank 0 raises it for everyone (`decided_by_root`) instead of every rank waiting out
    the timeout; group rank 0's own failure goes straight to the root's key."""
    store.set(own_key, _error_report(exc))
    if group_rank == 0:
        store.set(root_key, _error_report(exc))


def decided_by_root(store, key: str, group_rank: int, timeout: timedelta, what: str,
                     decide) -> bytes:
    """Group rank 0 runs `decide()` (which reads what every rank published) and publishes the
    bytes it returns under `key`, or the error it raised; every other rank reads only that, and
    returns the same bytes or raises the same error. This keeps each rank's reads independent
    of the group size."""
    if group_rank == 0:
        try:
            payload = decide()
        except Exception as exc:
            store.set(key, _error_report(exc))
            raise
        store.set(key, payload)
        return payload
    try:
        store.wait([key], timeout)
    except RuntimeError as exc:
        raise TimeoutError(
            f"topo group creation: rank {group_rank} waited {timeout.total_seconds():g} s for "
            f"{what} from group rank 0, which publishes it once every rank's record has "
            "arrived; a rank did not reach backend creation (crashed, or a different world "
            "size), or group rank 0 was slower than the timeout"
        ) from exc
    return raise_if_reported(store.get(key), "reported by group rank 0")
