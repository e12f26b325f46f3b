# SPDX-License-Identifier: Apache-2.0
"""Every public collective of torch.distributed, called the same way on "topo" and on a plain
Gloo group over the same ranks (run on every rank of a RankPool).

`CALLS` maps a function name to a call `fn(rank, size, group)` returning what the call produced
on this rank (tensors, objects, or None where a rank gets nothing). Integer data throughout, so
results are exact whatever order a backend sums in. `NOT_COLLECTIVES` names the public
functions that take a group but issue no collective on it. A torch function that takes a group
and is in neither table fails `unclassified()`, so a new op cannot go unnoticed.
"""

from __future__ import annotations

import inspect
from datetime import timedelta

import torch
import torch.distributed as dist

NOT_COLLECTIVES = {
    # Queries and bookkeeping: no backend call.
    "destroy_process_group", "get_backend", "get_backend_config", "get_backend_impl",
    "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size",
    # Group creation: covered by the subgroup and split tests (group_cases.subgroups,
    # test_split_source).
    "new_subgroups",
}


def _data(rank: int, shape, salt: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(97 * rank + salt)
    return torch.randint(-1000, 1000, shape, generator=g, dtype=torch.int64)


def _all_reduce(rank, size, g):
    t = _data(rank, (5,))
    dist.all_reduce(t, group=g)
    return t


def _all_reduce_coalesced(rank, size, g):
    ts = [_data(rank, (3,), 1), _data(rank, (2, 2), 2)]
    dist.all_reduce_coalesced(ts, group=g)
    return ts


def _reduce(rank, size, g):
    t = _data(rank, (4,))
    dist.reduce(t, dst=0, group=g)
    return t if rank == 0 else None  # other ranks' buffers are scratch space


def _broadcast(rank, size, g):
    t = _data(rank, (2, 3))
    dist.broadcast(t, src=size - 1, group=g)
    return t


def _all_gather(rank, size, g):
    out = [torch.empty(3, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(out, _data(rank, (3,)), group=g)
    return out


def _all_gather_coalesced(rank, size, g):
    xs = [_data(rank, (3,), 1), _data(rank, (2,), 2)]
    out = [[torch.empty_like(x) for x in xs] for _ in range(size)]
    dist.all_gather_coalesced(out, xs, group=g)
    return out


def _gathered_into_tensor(name):
    def call(rank, size, g):
        out = torch.empty(size * 4, dtype=torch.int64)
        getattr(dist, name)(out, _data(rank, (4,)), group=g)
        return out
    return call


def _gather(rank, size, g):
    out = [torch.empty(3, dtype=torch.int64) for _ in range(size)] if rank == 0 else None
    dist.gather(_data(rank, (3,)), out, dst=0, group=g)
    return out


def _gather_single(name):
    def call(rank, size, g):
        out = torch.empty((size, 2, 2), dtype=torch.int64) if rank == size - 1 else None
        getattr(dist, name)(_data(rank, (2, 2)), out, dst=size - 1, group=g)
        return out
    return call


def _gather_single_via_gather(rank, size, g):
    # Gloo has no gather_single: the reference is its list gather, stacked.
    out = [torch.empty((2, 2), dtype=torch.int64) for _ in range(size)]
    root = rank == size - 1
    dist.gather(_data(rank, (2, 2)), out if root else None, dst=size - 1, group=g)
    return torch.stack(out) if root else None


def _scatter(rank, size, g):
    src = [_data(r, (3,), 5) for r in range(size)] if rank == 0 else None
    out = torch.empty(3, dtype=torch.int64)
    dist.scatter(out, src, src=0, group=g)
    return out


def _reduce_scatter(rank, size, g):
    out = torch.empty(3, dtype=torch.int64)
    dist.reduce_scatter(out, [_data(rank, (3,), r) for r in range(size)], group=g)
    return out


def _reduce_scatter_into(name):
    def call(rank, size, g):
        out = torch.empty(3, dtype=torch.int64)
        getattr(dist, name)(out, _data(rank, (size * 3,)), group=g)
        return out
    return call


def _all_to_all(rank, size, g):
    out = [torch.empty(2, dtype=torch.int64) for _ in range(size)]
    dist.all_to_all(out, [_data(rank, (2,), r) for r in range(size)], group=g)
    return out


def _all_to_all_single(rank, size, g):
    # Uneven: rank r sends r + 1 + j rows to rank j.
    send = [rank + 1 + j for j in range(size)]
    recv = [j + 1 + rank for j in range(size)]
    out = torch.empty(sum(recv), dtype=torch.int64)
    dist.all_to_all_single(out, _data(rank, (sum(send),)), recv, send, group=g)
    return out


def _barrier(rank, size, g):
    dist.barrier(group=g)


# Before torch 2.14, dist.monitored_barrier refuses every backend not named "gloo" in Python,
# before any backend is called; the group's own method reaches the backend on every release.
_MONITORED_BY_NAME_ONLY = "only implemented for GLOO" in inspect.getsource(dist.monitored_barrier)


def _monitored_barrier(rank, size, g):
    timeout = timedelta(seconds=60)
    if _MONITORED_BY_NAME_ONLY:
        (g or dist.group.WORLD).monitored_barrier(timeout)
    else:
        dist.monitored_barrier(group=g, timeout=timeout)


def _pair_send_recv(send_fn, recv_fn):
    """Rank 0 sends to rank 1, then rank 1 answers; other ranks take no part."""
    def call(rank, size, g):
        if rank > 1:
            return None
        t = _data(rank, (4,))
        got = torch.empty(4, dtype=torch.int64)
        peer = 1 - rank
        if rank == 0:
            send_fn(t, peer, g)
            recv_fn(got, peer, g)
        else:
            recv_fn(got, peer, g)
            send_fn(t, peer, g)
        return got
    return call


def _ring(rank, size, g, post):
    got = torch.empty(4, dtype=torch.int64)
    works = post(_data(rank, (4,)), got, (rank + 1) % size, (rank - 1) % size, g)
    for w in works:
        w.wait()
    return got


def _isend_irecv(rank, size, g):
    return _ring(rank, size, g, lambda t, got, nxt, prv, g: [
        dist.irecv(got, prv, group=g), dist.isend(t, nxt, group=g)])


def _batch_isend_irecv(rank, size, g):
    return _ring(rank, size, g, lambda t, got, nxt, prv, g: dist.batch_isend_irecv([
        dist.P2POp(dist.irecv, got, prv, group=g), dist.P2POp(dist.isend, t, nxt, group=g)]))


def _objects(rank):
    return {"rank": rank, "items": list(range(rank + 2))}


def _all_gather_object(rank, size, g):
    out = [None] * size
    dist.all_gather_object(out, _objects(rank), group=g)
    return out


def _gather_object(rank, size, g):
    out = [None] * size if rank == 0 else None
    dist.gather_object(_objects(rank), out, dst=0, group=g)
    return out


def _broadcast_object_list(rank, size, g):
    objs = [_objects(rank), rank * 3]
    dist.broadcast_object_list(objs, src=size - 1, group=g)
    return objs


def _scatter_object_list(rank, size, g):
    out = [None]
    dist.scatter_object_list(out, [_objects(r) for r in range(size)] if rank == 0 else None,
                             src=0, group=g)
    return out


def _object_pair(rank, size, g):
    if rank > 1:
        return None
    if rank == 0:
        dist.send_object_list([_objects(rank)], dst=1, group=g)
        return None
    got = [None]
    dist.recv_object_list(got, src=0, group=g)
    return got


def _set_timeout(rank, size, g):
    # The new timeout must leave the group usable; a collective follows.
    dist.set_timeout(timedelta(seconds=120), group=g)
    return _all_reduce(rank, size, g)


def _shrink_group(rank, size, g):
    # Neither Gloo nor topo can shrink a communicator: both must refuse alike.
    dist.shrink_group([size - 1], group=g)


_send = _pair_send_recv(lambda t, p, g: dist.send(t, p, group=g),
                        lambda t, p, g: dist.recv(t, p, group=g))

CALLS = {
    "all_reduce": _all_reduce,
    "all_reduce_coalesced": _all_reduce_coalesced,
    "reduce": _reduce,
    "broadcast": _broadcast,
    "all_gather": _all_gather,
    "all_gather_coalesced": _all_gather_coalesced,
    "all_gather_into_tensor": _gathered_into_tensor("all_gather_into_tensor"),
    "all_gather_single": _gathered_into_tensor("all_gather_single"),
    "gather": _gather,
    "gather_into_tensor": _gather_single("gather_into_tensor"),
    "gather_single": _gather_single("gather_single"),
    "scatter": _scatter,
    "reduce_scatter": _reduce_scatter,
    "reduce_scatter_tensor": _reduce_scatter_into("reduce_scatter_tensor"),
    "reduce_scatter_single": _reduce_scatter_into("reduce_scatter_single"),
    "all_to_all": _all_to_all,
    "all_to_all_single": _all_to_all_single,
    "barrier": _barrier,
    "monitored_barrier": _monitored_barrier,
    "send": _send,
    "recv": _send,
    "isend": _isend_irecv,
    "irecv": _isend_irecv,
    "batch_isend_irecv": _batch_isend_irecv,
    "all_gather_object": _all_gather_object,
    "gather_object": _gather_object,
    "broadcast_object_list": _broadcast_object_list,
    "scatter_object_list": _scatter_object_list,
    "send_object_list": _object_pair,
    "recv_object_list": _object_pair,
    "set_timeout": _set_timeout,
    "shrink_group": _shrink_group,
}

def _all_to_all_via_single(rank, size, g):
    # torch 2.11's Gloo has no list all_to_all; its flat form carries the same rows.
    out = torch.empty(2 * size, dtype=torch.int64)
    dist.all_to_all_single(out, torch.cat([_data(rank, (2,), r) for r in range(size)]), group=g)
    return list(out.split(2))


# Ops Gloo lacks that topo composes: the reference is another Gloo call with the same meaning.
REFERENCES = {
    "all_to_all": _all_to_all_via_single,
    "gather_into_tensor": _gather_single_via_gather,
    "gather_single": _gather_single_via_gather,
}


def public_group_functions() -> list[str]:
    """The public torch.distributed functions that take a process group."""
    names = []
    for name in dir(dist):
        fn = getattr(dist, name)
        if name.startswith("_") or inspect.isclass(fn) or not callable(fn):
            continue
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            continue
        if {"group", "group_src", "group_dst"} & set(params):
            names.append(name)
    if hasattr(dist, "batch_isend_irecv"):  # its group travels inside each P2POp
        names.append("batch_isend_irecv")
    return sorted(names)


def unclassified() -> list[str]:
    return [n for n in public_group_functions() if n not in CALLS and n not in NOT_COLLECTIVES]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _outcome(fn, rank, size, group):
    try:
        return "ok", fn(rank, size, group)
    except Exception as e:  # noqa: BLE001  (the kind of error is what is compared)
        return "raised", type(e).__name__, str(e).splitlines()[0][:160]


def every_collective(rank, size, ref) -> list[tuple]:
    """(name, topo outcome, gloo outcome, same) for every public collective of this torch."""
    topo = dist.group.WORLD
    rows = []
    for name in public_group_functions():
        if name not in CALLS:
            continue
        got = _outcome(CALLS[name], rank, size, topo)
        want = _outcome(REFERENCES.get(name, CALLS[name]), rank, size, ref)
        if got[0] == want[0] == "ok":
            same = _same(got[1], want[1])
        else:
            same = got[0] == want[0] and got[1] == want[1]  # same kind of error on both
        rows.append((name, got[:2] if got[0] == "ok" else got, want[:2] if want[0] == "ok"
                     else want, same))
    return [(name, repr(g)[:200], repr(w)[:200], same) for name, g, w, same in rows]
