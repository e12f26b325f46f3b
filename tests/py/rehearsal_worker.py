# SPDX-License-Identifier: Apache-2.0
"""Rank program of the one-GPU rehearsal tests (`python -m torch_topo.emulate --one-gpu`):
tests/py/test_emulate_one_gpu.py runs it with CPU tensors (Gloo inside "topo"),
tests/gpu/test_rehearsal_cuda.py with CUDA tensors (NCCL, every rank on the one GPU).

Initialises "topo" from the launcher's environment (with `--device cuda`: device_id
cuda:$LOCAL_RANK, as torch recommends), records the cluster topo believes in, then runs every
c10d collective through the world group: each reduction for every dtype and reduce op the inner
backend supports, gathers, scatters, even and uneven all-to-all, coalesced ops,
batch_isend_irecv (and a refused one, after which the group goes on), and the overlap ops; on
CUDA, with a late peer, that coalesced blocks' wait() and barrier() order the caller after the
op (barrier() also after an op nobody waited for), that wait(timeout) of a hierarchical op
blocks the host up to the timeout, that NCCL's own ops, coalesced blocks and hierarchical ones
on one tensor follow each other unwaited, that the future of a block of CPU and CUDA ops orders
its user after both, and that a dropped work's buffers (and the copies of strided all-to-all
inputs) are not reused early. Each result is compared with the one computed locally from every
rank's seeded inputs (small integers: exact in every dtype and summation order, so equality is
exact). With `--mesh`, also a 2-D DeviceMesh (split from the world when device_id was given),
on CUDA a `split_group` that leaves ranks out, and `new_group(backend=...)`
subgroups. Writes <out>/rank<R>.json; the test asserts
on it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

R = dist.ReduceOp
_NUMEL = 4096
# The dtypes each inner backend reduces: NCCL every one here; Gloo all but bfloat16 (not
# assumed: the releases we support differ there).
_DTYPES = {
    "cuda": [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
             torch.uint8, torch.int32, torch.int64],
    "cpu": [torch.float32, torch.float16, torch.float64, torch.int8, torch.uint8, torch.int32,
            torch.int64],
}


def _ops(dtype: torch.dtype, device_type: str) -> list[str]:
    ops = ["SUM", "PRODUCT", "MIN", "MAX"]
    # NCCL averages integers too (truncating, as the reference's cast does); Gloo has no AVG.
    if dtype.is_floating_point or device_type == "cuda":
        ops.append("AVG")
    # torch builds NCCL's PREMUL_SUM for half, float and double only.
    if dtype in (torch.float16, torch.float32, torch.float64):
        ops.append("PREMUL_SUM")
    return ops


def _input(rank: int, salt: int, dtype: torch.dtype, numel: int = _NUMEL) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 * salt + rank)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, (numel,), generator=gen).to(dtype)


def _reduce_op(name: str):
    return dist._make_nccl_premul_sum(0.5) if name == "PREMUL_SUM" else getattr(R, name)


def _reference(tensors: list[torch.Tensor], name: str) -> torch.Tensor:
    stack = torch.stack([t.to(torch.float64) for t in tensors])
    out = {"SUM": stack.sum(0), "PRODUCT": stack.prod(0), "MIN": stack.amin(0),
           "MAX": stack.amax(0), "AVG": stack.mean(0), "PREMUL_SUM": stack.sum(0) * 0.5}[name]
    return out.to(tensors[0].dtype)


class Checks:
    def __init__(self, device: torch.device):
        self.device = device
        self.failed: list[str] = []
        self.count = 0

    def same(self, name: str, got: torch.Tensor, want: torch.Tensor) -> None:
        self.count += 1
        got = got.cpu()
        if got.dtype != want.dtype or not torch.equal(got, want):
            self.failed.append(name)

    def put(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device)


def _reductions(c: Checks, rank: int, world: int, dtypes) -> None:
    every = range(world)
    for i, dtype in enumerate(dtypes):
        for j, op in enumerate(_ops(dtype, c.device.type)):
            salt = 100 + 10 * (6 * i + j)  # the same on every rank (str hashes are not)
            t = c.put(_input(rank, salt, dtype))
            dist.all_reduce(t, op=_reduce_op(op))
            c.same(f"all_reduce {dtype} {op}", t,
                   _reference([_input(r, salt, dtype) for r in every], op))
            t = c.put(_input(rank, salt + 1, dtype))
            dist.reduce(t, dst=world - 1, op=_reduce_op(op))
            if rank == world - 1:  # elsewhere the tensor's content is unspecified (Gloo)
                c.same(f"reduce {dtype} {op}", t,
                       _reference([_input(r, salt + 1, dtype) for r in every], op))
            whole = c.put(_input(rank, salt + 2, dtype))
            out = c.put(torch.empty(_NUMEL // world, dtype=dtype))
            dist.reduce_scatter_tensor(out, whole, op=_reduce_op(op))
            want = _reference([_input(r, salt + 2, dtype) for r in every], op)
            c.same(f"reduce_scatter_tensor {dtype} {op}", out, want.chunk(world)[rank])
            blocks = [c.put(b) for b in _input(rank, salt + 3, dtype).chunk(world)]
            dist.reduce_scatter(out, blocks, op=_reduce_op(op))
            want = _reference([_input(r, salt + 3, dtype) for r in every], op)
            c.same(f"reduce_scatter {dtype} {op}", out, want.chunk(world)[rank])


def _inference_and_grad(c: Checks, rank: int, world: int) -> None:
    """Tensors our steps write in place as the inner backend writes through raw pointers."""
    want = _reference([_input(r, 70, torch.float32) for r in range(world)], "SUM")
    with torch.inference_mode():
        made = c.put(_input(rank, 70, torch.float32))
    leaf = c.put(_input(rank, 70, torch.float32)).requires_grad_()
    for name, t in (("an inference tensor", made), ("a leaf that requires grad", leaf)):
        dist.all_reduce(t)
        c.same(f"all_reduce of {name}", t.detach(), want)


# NCCL moves float8 as bytes (torch refuses it only in reductions); Gloo has no float8.
_FLOAT8 = {"cuda": [torch.float8_e4m3fn, torch.float8_e5m2], "cpu": []}


def _movement(c: Checks, rank: int, world: int, dtypes) -> None:
    every = range(world)
    for dtype in dtypes[:3] + _FLOAT8[c.device.type]:
        mine = _input(rank, 50, dtype)
        out = c.put(torch.empty(world * _NUMEL, dtype=dtype))
        dist.all_gather_into_tensor(out, c.put(mine))
        gathered = torch.cat([_input(r, 50, dtype) for r in every])
        c.same(f"all_gather_into_tensor {dtype}", out, gathered)
        outs = [c.put(torch.empty(_NUMEL, dtype=dtype)) for _ in every]
        dist.all_gather(outs, c.put(mine))
        c.same(f"all_gather {dtype}", torch.cat([o.cpu() for o in outs]), gathered)
        t = c.put(_input(rank, 51, dtype))
        dist.broadcast(t, src=1 % world)
        c.same(f"broadcast {dtype}", t, _input(1 % world, 51, dtype))
        # Even all-to-all: rank r's block j goes to rank j.
        a2a = c.put(torch.empty(_NUMEL, dtype=dtype))
        dist.all_to_all_single(a2a, c.put(_input(rank, 52, dtype)))
        want = torch.cat([_input(r, 52, dtype).chunk(world)[rank] for r in every])
        c.same(f"all_to_all_single {dtype}", a2a, want)
        # Uneven: rank r sends r + j + 1 elements to rank j.
        sizes = [[r + j + 1 for j in every] for r in every]
        src = _input(rank, 53, dtype, sum(sizes[rank]))
        recv = c.put(torch.empty(sum(sizes[r][rank] for r in every), dtype=dtype))
        dist.all_to_all_single(recv, c.put(src), output_split_sizes=[sizes[r][rank] for r in every],
                               input_split_sizes=sizes[rank])
        want = torch.cat([_input(r, 53, dtype, sum(sizes[r])).split(sizes[r])[rank]
                          for r in every])
        c.same(f"all_to_all_single uneven {dtype}", recv, want)
        lists_out = [c.put(torch.empty(8, dtype=dtype)) for _ in every]
        dist.all_to_all(lists_out, [c.put(b) for b in _input(rank, 54, dtype, 8 * world).chunk(world)])
        want = torch.cat([_input(r, 54, dtype, 8 * world).chunk(world)[rank] for r in every])
        c.same(f"all_to_all {dtype}", torch.cat([o.cpu() for o in lists_out]), want)
        root = world - 1
        gat = [c.put(torch.empty(16, dtype=dtype)) for _ in every] if rank == root else None
        dist.gather(c.put(_input(rank, 55, dtype, 16)), gat, dst=root)
        if rank == root:
            c.same(f"gather {dtype}", torch.cat([g.cpu() for g in gat]),
                   torch.cat([_input(r, 55, dtype, 16) for r in every]))
        sc = c.put(torch.empty(16, dtype=dtype))
        parts = ([c.put(p) for p in _input(root, 56, dtype, 16 * world).chunk(world)]
                 if rank == root else None)
        dist.scatter(sc, parts, src=root)
        c.same(f"scatter {dtype}", sc, _input(root, 56, dtype, 16 * world).chunk(world)[rank])


# About 0.5 s of GPU time on an H200 (torch.cuda._sleep spins for a number of clock cycles).
_LATE_CYCLES = 10**9


def _late_peer(c: Checks, rank: int, world: int) -> None:
    """On CUDA the last rank queues a long kernel before its next collective, so the others'
    results arrive late: a wait() that does not order the caller's stream after the op (or a
    barrier that does not block the host) then reads stale values (or returns early)."""
    if c.device.type == "cuda" and rank == world - 1:
        torch.cuda._sleep(_LATE_CYCLES)


def _barrier_waits_for_peers(c: Checks, rank: int, world: int) -> None:
    """dist.barrier() returns on every rank only after the last rank's earlier GPU work."""
    if c.device.type != "cuda" or world < 2:
        return
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    torch.cuda._sleep(_LATE_CYCLES)
    end.record()
    end.synchronize()
    late_s = start.elapsed_time(end) / 1e3
    dist.barrier()
    _late_peer(c, rank, world)
    began = time.perf_counter()
    dist.barrier()
    waited = time.perf_counter() - began
    c.count += 1
    if rank != world - 1 and waited < 0.5 * late_s:
        c.failed.append(f"barrier returned after {waited:.3f} s, before the last rank's "
                        f"{late_s:.3f} s of GPU work")


def _all_reduce_behind_late_peer(c: Checks, rank: int, world: int, salt: int):
    """An async all_reduce of 1 Mi floats issued while the last rank is late: the tensor, its
    work and the expected sum."""
    t = c.put(_input(rank, salt, torch.float32, 1 << 20))
    _late_peer(c, rank, world)
    want = sum(_input(r, salt, torch.float32, 1 << 20) for r in range(world))
    return t, dist.all_reduce(t, async_op=True), want


def _barrier_after_unwaited_op(c: Checks, rank: int, world: int) -> None:
    """dist.barrier() returns after an earlier all_reduce that nobody waited for, as on a plain
    NCCL group (its barrier's allreduce follows the group's collectives on their stream). A
    hierarchical all_reduce runs on topo's internal stream and level groups instead, which
    NCCL's barrier alone does not follow; the last rank is late, so the op is still running
    when a barrier that does not wait for it returns."""
    if c.device.type != "cuda" or world < 2:
        return
    t, work, want = _all_reduce_behind_late_peer(c, rank, world, 74)
    dist.barrier()
    c.count += 1
    if not work.is_completed():
        c.failed.append("barrier returned before an earlier all_reduce had completed")
    work.wait()
    c.same("all_reduce before a barrier", t, want)


def _wait_with_timeout(c: Checks, rank: int, world: int) -> None:
    """work.wait(timeout) of a hierarchical all_reduce (topo's own work, on its internal
    stream) blocks the host as ProcessGroupNCCL's does: behind the late rank's GPU work a short
    timeout raises, the op keeps running, and a later wait() completes it. Only where every
    all_reduce is hierarchical: NCCL's own work aborts its communicator when the time runs
    out."""
    if c.device.type != "cuda" or world < 2 or \
            os.environ.get("TORCH_TOPO_HIERARCHICAL") != "always":
        return
    t, work, want = _all_reduce_behind_late_peer(c, rank, world, 75)
    c.count += 1
    try:
        work.wait(timeout=datetime.timedelta(milliseconds=20))
        c.failed.append("wait(timeout=20 ms) returned behind the late rank's GPU work")
    except RuntimeError as e:
        if "did not complete within" not in str(e):
            c.failed.append(f"wait(timeout=20 ms) raised another error: {e}")
    work.wait()
    c.same("all_reduce after a wait that timed out", t, want)


def _flat_and_hierarchical_unwaited(c: Checks, rank: int, world: int) -> None:
    """Async collectives on one tensor, none waited before the next is issued, where
    all_reduce is hierarchical (topo's internal stream and level groups) and all_to_all_single
    and batch_isend_irecv are NCCL's own ops: on a plain NCCL group all its collectives share
    one stream, so each reads what the one before wrote. Behind a late last rank: a flat op
    that does not follow the hierarchical one reads the tensor before it is reduced, and a
    hierarchical op that does not follow the flat one reduces the tensor before it is filled
    (deterministic on the ranks of the other host: their first level step needs no late peer)."""
    if c.device.type != "cuda" or world < 2 or \
            os.environ.get("TORCH_TOPO_HIERARCHICAL") != "always":
        return
    every = range(world)
    numel = 1 << 20

    def exchanged(salt: int, r: int) -> torch.Tensor:  # rank r's all_to_all_single output
        return torch.cat([_input(j, salt, torch.float32, numel).chunk(world)[r] for j in every])

    filled = c.put(torch.empty(numel))
    src = c.put(_input(rank, 76, torch.float32, numel))
    _late_peer(c, rank, world)
    works = [dist.all_to_all_single(filled, src, async_op=True),
             dist.all_reduce(filled, async_op=True)]
    t = c.put(_input(rank, 77, torch.float32, numel))
    read, got = c.put(torch.empty(numel)), c.put(torch.empty(numel))
    _late_peer(c, rank, world)
    works += [dist.all_reduce(t, async_op=True),
              dist.all_to_all_single(read, t, async_op=True)]
    works += dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (rank + 1) % world),
                                     dist.P2POp(dist.irecv, got, (rank - 1) % world)])
    for work in works:
        work.wait()
    c.same("hierarchical all_reduce after an unwaited all_to_all_single", filled,
           sum(exchanged(76, r) for r in every))
    reduced = sum(_input(r, 77, torch.float32, numel) for r in every)
    c.same("all_to_all_single after an unwaited hierarchical all_reduce", read,
           torch.cat([reduced.chunk(world)[rank]] * world))
    c.same("batch_isend_irecv after an unwaited hierarchical all_reduce", got, reduced)
    dist.barrier()


def _hierarchical_after_unwaited_block(c: Checks, rank: int, world: int) -> None:
    """A coalesced block (`_coalescing_manager` with a device: all_to_all_single goes into
    NCCL's own group) nobody waited for, then a hierarchical all_reduce of the block's output:
    on a plain NCCL group the grouped launch and the all_reduce share one stream. Behind a late
    last rank, an all_reduce on topo's internal stream that does not follow the block reduces
    the tensor before the block fills it (deterministic on the ranks of the other host, as in
    _flat_and_hierarchical_unwaited)."""
    if c.device.type != "cuda" or world < 2 or \
            os.environ.get("TORCH_TOPO_HIERARCHICAL") != "always":
        return
    every = range(world)
    numel = 1 << 20
    filled = c.put(torch.empty(numel))
    src = c.put(_input(rank, 78, torch.float32, numel))
    _late_peer(c, rank, world)
    with dist._coalescing_manager(device=c.device, async_ops=True) as cm:
        dist.all_to_all_single(filled, src, async_op=True)
    work = dist.all_reduce(filled, async_op=True)
    cm.wait()
    work.wait()
    exchanged = [torch.cat([_input(j, 78, torch.float32, numel).chunk(world)[r] for j in every])
                 for r in every]
    c.same("hierarchical all_reduce after an unwaited coalesced block", filled, sum(exchanged))
    dist.barrier()


def _mixed_block_future(c: Checks, rank: int, world: int) -> None:
    """A coalesced block of a CPU and a CUDA broadcast from the late last rank, finished through
    its future alone, as torch.futures users and DDP's comm hooks do: `fut.wait()` and a then()
    callback must see NCCL's grouped launch done on the caller's (the callback's) stream, not
    only the Gloo broadcast, which the late rank's host sends at once."""
    if c.device.type != "cuda" or world < 2:
        return
    root, numel = world - 1, 1 << 20
    host = _input(rank, 79, torch.float32, 64)
    dev = c.put(_input(rank, 80, torch.float32, numel))
    _late_peer(c, rank, world)
    with dist._coalescing_manager(device=c.device, async_ops=True) as cm:
        dist.broadcast(host, src=root, async_op=True)
        dist.broadcast(dev, src=root, async_op=True)
    c.count += 1
    try:
        fut = cm.works[0].get_future()
    except RuntimeError as e:
        c.failed.append(f"get_future() of a CPU and CUDA coalesced block raised: {e}")
        cm.wait()
        return
    copied = fut.then(lambda f: f.value()[1].clone())
    fut.wait()
    c.same("CPU broadcast in a mixed coalesced block, after its future", host,
           _input(root, 79, torch.float32, 64))
    c.same("CUDA broadcast in a mixed coalesced block, after its future", dev,
           _input(root, 80, torch.float32, numel))
    c.same("CUDA broadcast in a mixed coalesced block, in its future's then()", copied.wait(),
           _input(root, 80, torch.float32, numel))
    cm.wait()
    dist.barrier()


def _refused_batch(c: Checks, rank: int, world: int) -> None:
    """A batch_isend_irecv refused on every rank (a peer outside the group; NCCL only warns of a
    non-contiguous p2p tensor) raises, and the group goes on: the block torch and the backend
    opened must be closed although it failed, or the next collectives queue into it and never
    run. Refused at its first op, and at its last after a ring send and receive, which stay in
    flight and deliver (dropped, Gloo's would cancel and the next collective wait out the
    timeout)."""
    f32, every = torch.float32, range(world)
    received = c.put(torch.zeros(_NUMEL, dtype=f32))
    for ring in ([dist.P2POp(dist.isend, c.put(torch.zeros(4)), world),
                  dist.P2POp(dist.irecv, c.put(torch.empty(4)), (rank - 1) % world)],
                 [dist.P2POp(dist.isend, c.put(_input(rank, 94, f32)), (rank + 1) % world),
                  dist.P2POp(dist.irecv, received, (rank - 1) % world),
                  dist.P2POp(dist.isend, c.put(torch.zeros(4)), world)]):
        try:
            dist.batch_isend_irecv(ring)
            c.failed.append("a send to rank world_size in batch_isend_irecv was not refused")
        except (RuntimeError, ValueError):
            pass
    reduced = c.put(_input(rank, 90, f32))
    dist.all_reduce(reduced)
    c.same("all_reduce after a refused batch", reduced, sum(_input(r, 90, f32) for r in every))
    gathered = c.put(torch.empty(world * _NUMEL, dtype=f32))
    dist.all_gather_into_tensor(gathered, c.put(_input(rank, 91, f32)))
    c.same("all_gather_into_tensor after a refused batch", gathered,
           torch.cat([_input(r, 91, f32) for r in every]))
    shard = c.put(torch.empty(_NUMEL // world, dtype=f32))
    dist.reduce_scatter_tensor(shard, c.put(_input(rank, 92, f32)))
    c.same("reduce_scatter_tensor after a refused batch", shard,
           sum(_input(r, 92, f32) for r in every).chunk(world)[rank])
    got = c.put(torch.empty(_NUMEL, dtype=f32))
    for work in dist.batch_isend_irecv([
            dist.P2POp(dist.isend, c.put(_input(rank, 93, f32)), (rank + 1) % world),
            dist.P2POp(dist.irecv, got, (rank - 1) % world)]):
        work.wait()
    c.same("batch_isend_irecv after a refused batch", got, _input((rank - 1) % world, 93, f32))
    # Nothing is left to wait on: the stream orders the CUDA receive, and a CPU one lands in
    # its own time.
    want = _input((rank - 1) % world, 94, f32)
    if c.device.type == "cuda":
        torch.cuda.synchronize(c.device)
    deadline = time.monotonic() + 10
    while not torch.equal(received.cpu(), want) and time.monotonic() < deadline:
        time.sleep(0.01)
    c.same("the receive posted before a refused op", received, want)


def _dropped_all_to_all(c: Checks, rank: int, world: int) -> None:
    """An uneven list all-to-all (topo packs it into one buffer and unpacks after) whose work
    is dropped without wait(). On CUDA the last rank is late and then allocates buffers of
    the packed sizes on its stream and fills them with NaN at once: had topo's buffers gone
    back to that stream's pool when the work was dropped, the NaNs would land in what it sends
    or unpacks. Results are read after a device synchronize (on CPU after wait(): a dropped
    CPU work ends on Gloo's thread, which nothing here could wait for)."""
    every = range(world)
    dtype = torch.float32
    sizes = [[64 * (r + j + 1) for j in every] for r in every]
    outs = [c.put(torch.empty(sizes[r][rank], dtype=dtype)) for r in every]
    sent = _input(rank, 57, dtype, sum(sizes[rank]))
    ins = [c.put(p) for p in sent.split(sizes[rank])]
    _late_peer(c, rank, world)
    work = dist.all_to_all(outs, ins, async_op=True)
    if c.device.type == "cuda":
        del work
        for numel in (sum(sizes[rank]), sum(sizes[r][rank] for r in every)):
            torch.full((numel,), float("nan"), dtype=dtype, device=c.device)
        torch.cuda.synchronize()
    else:
        work.wait()
    want = torch.cat([_input(r, 57, dtype, sum(sizes[r])).split(sizes[r])[rank] for r in every])
    c.same("all_to_all uneven, work dropped", torch.cat([o.cpu() for o in outs]), want)
    dist.barrier()


def _strided_uneven_all_to_all(c: Checks, rank: int, world: int) -> None:
    """An uneven list all-to-all of non-contiguous inputs (topo flattens them into copies to
    pack them), issued while topo's internal stream is still held up by an earlier one with a
    late peer; at once the caller's stream allocates blocks of the copies' sizes and fills them
    with NaN. Had the copies been made on the caller's stream, they would have gone back to its
    pool when the call returned, before the internal stream packed them, and the NaNs would
    travel. Probabilistic (the allocator must hand those very blocks out again): a pass says
    less than a failure."""
    if c.device.type != "cuda":
        return
    every = range(world)
    dtype = torch.float32
    sizes = [[4096 * (r + j + 1) + 17 for j in every] for r in every]
    held = [[c.put(torch.empty(sizes[r][rank], dtype=dtype)) for r in every] for _ in range(2)]
    first = [c.put(p) for p in _input(rank, 58, dtype, sum(sizes[rank])).split(sizes[rank])]
    strided = []
    for part in _input(rank, 59, dtype, sum(sizes[rank])).split(sizes[rank]):
        pair = c.put(torch.zeros(part.numel(), 2, dtype=dtype))
        pair[:, 0] = c.put(part)
        strided.append(pair[:, 0])  # stride 2: reshape(-1) copies it
    _late_peer(c, rank, world)
    works = [dist.all_to_all(held[0], first, async_op=True),
             dist.all_to_all(held[1], strided, async_op=True)]
    decoys = [torch.full((n,), float("nan"), dtype=dtype, device=c.device)
              for n in sizes[rank] for _ in range(8)]
    for work in works:
        work.wait()
    torch.cuda.synchronize()
    del decoys
    for k, salt in enumerate((58, 59)):
        want = torch.cat([_input(r, salt, dtype, sum(sizes[r])).split(sizes[r])[rank]
                          for r in every])
        c.same(f"all_to_all uneven {'strided, behind a late one' if k else 'late peer'}",
               torch.cat([o.cpu() for o in held[k]]), want)
    dist.barrier()


def _coalesced_and_p2p(c: Checks, rank: int, world: int) -> None:
    every = range(world)
    dtype = torch.float32
    # torch coalesces one kind of collective at a time: two of each kind.
    ins = [[_input(rank, 60 + 3 * k + i, dtype, 64 * world) for i in range(2)] for k in range(3)]
    refs = [[[_input(r, 60 + 3 * k + i, dtype, 64 * world) for r in every] for i in range(2)]
            for k in range(3)]
    reduced = [c.put(t) for t in ins[0]]
    _late_peer(c, rank, world)
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in reduced:
            dist.all_reduce(t)
    cm.wait()
    # Copied on the caller's stream at once: only cm.wait() orders it after the grouped launch.
    reduced = [t.clone() for t in reduced]
    gathered = [c.put(torch.empty(world * t.numel(), dtype=dtype)) for t in ins[1]]
    _late_peer(c, rank, world)
    with dist._coalescing_manager(async_ops=True) as cm:
        for out, t in zip(gathered, ins[1], strict=True):
            dist.all_gather_into_tensor(out, c.put(t))
    cm.wait()
    gathered = [t.clone() for t in gathered]
    shards = [c.put(torch.empty(64, dtype=dtype)) for _ in ins[2]]
    _late_peer(c, rank, world)
    with dist._coalescing_manager(async_ops=True) as cm:
        for out, t in zip(shards, ins[2], strict=True):
            dist.reduce_scatter_tensor(out, c.put(t))
    cm.wait()
    shards = [t.clone() for t in shards]
    for i in range(2):
        c.same(f"coalesced all_reduce {i}", reduced[i], sum(refs[0][i]))
        c.same(f"coalesced all_gather_into_tensor {i}", gathered[i], torch.cat(refs[1][i]))
        c.same(f"coalesced reduce_scatter_tensor {i}", shards[i],
               sum(refs[2][i]).chunk(world)[rank])
    # Ring exchange through batch_isend_irecv, then a plain send/recv pair.
    right, left = (rank + 1) % world, (rank - 1) % world
    got = c.put(torch.empty(_NUMEL, dtype=dtype))
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, c.put(_input(rank, 63, dtype)), right),
                                   dist.P2POp(dist.irecv, got, left)])
    for req in reqs:
        req.wait()
    c.same("batch_isend_irecv", got, _input(left, 63, dtype))
    if world > 1:
        t = c.put(_input(rank, 64, dtype))
        if rank == 0:
            dist.send(t, 1)
        elif rank == 1:
            dist.recv(t, 0)
            c.same("send/recv", t, _input(0, 64, dtype))
    dist.barrier()


def _overlap_ops(c: Checks, rank: int, world: int) -> None:
    """matmul_reduce_scatter and all_gather_matmul with real collectives, against the torch
    computation they replace, from every rank's inputs (small integers: exact)."""
    from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter

    every, rows, k, n = range(world), 8, 24, 20
    f32 = torch.float32

    def mat(salt: int, r: int, *shape: int) -> torch.Tensor:
        return _input(r, salt, f32, shape[0] * shape[1]).view(*shape)

    for chunks in (1, 2, 4):
        got = matmul_reduce_scatter(c.put(mat(80, rank, world * rows, k)),
                                    c.put(mat(81, rank, n, k)), chunks=chunks)
        full = sum(mat(80, r, world * rows, k) @ mat(81, r, n, k).t() for r in every)
        c.same(f"matmul_reduce_scatter chunks={chunks}", got, full.chunk(world)[rank])
        w = mat(82, 0, n, k)  # one weight: every rank holds the same rows here
        got = all_gather_matmul(c.put(mat(83, rank, rows, k)), c.put(w), chunks=chunks)
        want = torch.cat([mat(83, r, rows, k) for r in every]) @ w.t()
        c.same(f"all_gather_matmul chunks={chunks}", got, want)


def _mesh_and_subgroups(c: Checks, rank: int, world: int, device_type: str) -> dict:
    from torch.distributed.device_mesh import init_device_mesh

    info = {}
    mesh = init_device_mesh(device_type, (2, world // 2), mesh_dim_names=("dp", "tp"))
    for dim in ("dp", "tp"):
        group = mesh[dim].get_group()
        ranks = dist.get_process_group_ranks(group)
        t = c.put(_input(rank, 70, torch.float32))
        dist.all_reduce(t, group=group)
        c.same(f"mesh {dim} all_reduce", t, sum(_input(r, 70, torch.float32) for r in ranks))
        info[dim] = {"backend": dist.get_backend(group), "ranks": ranks}
    if device_type == "cuda":
        _split_with_non_members(c, rank, world)
    inner = "nccl" if device_type == "cuda" else "gloo"
    for backend in (inner, None):
        sub = dist.new_group([0, world - 1], backend=backend)
        if rank in (0, world - 1):
            t = c.put(_input(rank, 71, torch.float32))
            dist.all_reduce(t, group=sub)
            c.same(f"new_group({backend}) all_reduce", t,
                   _input(0, 71, torch.float32) + _input(world - 1, 71, torch.float32))
    return info


def _split_with_non_members(c: Checks, rank: int, world: int) -> None:
    """dist.split_group with ranks outside the child (split_group needs a bound device, so CUDA
    only), after a CPU op built the lazy Gloo side on every rank. A non-member's NCCL split is
    its part of the members' ncclCommSplit: a non-member that skips it leaves the members
    waiting, and one that does it twice (torch before 2.14 splits once per device type) waits
    itself. The world all-reduce after it shows nobody is stuck."""
    dist.all_reduce(torch.ones(1))
    members = list(range(0, world, 2))
    child = dist.split_group(split_ranks=[members])
    if rank in members:
        t = c.put(_input(rank, 72, torch.float32))
        dist.all_reduce(t, group=child)
        c.same("split_group child all_reduce", t,
               sum(_input(r, 72, torch.float32) for r in members))
    elif child is not None:
        c.failed.append(f"split_group gave non-member rank {rank} a group")
    t = c.put(_input(rank, 73, torch.float32))
    dist.all_reduce(t)
    c.same("all_reduce after split_group", t,
           sum(_input(r, 73, torch.float32) for r in range(world)))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--mesh", action="store_true",
                        help="also a 2 x (world/2) DeviceMesh and new_group subgroups")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    record: dict[str, object] = {"rank": rank}
    code = 0
    try:
        import torch_topo
        from torch_topo.cluster import world_cluster

        kwargs = {}
        device = torch.device("cpu")
        if args.device == "cuda":
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
            torch.cuda.set_device(device)
            kwargs["device_id"] = device
        dist.init_process_group("topo", **kwargs)
        cluster = world_cluster()
        record["hosts"] = cluster.hostnames
        record["gpus_per_host"] = [h.gpu_count for h in cluster.hosts]
        record["placements"] = [[p.host, p.local_gpu] for p in cluster.placements]
        checks = Checks(device)
        _reductions(checks, rank, world, _DTYPES[args.device])
        backend = dist.group.WORLD._get_backend(device)
        record["all_reduce_choices"] = sorted(
            {c for op, _, c in backend.last_decisions() if op == "allreduce"})
        _movement(checks, rank, world, _DTYPES[args.device])
        _inference_and_grad(checks, rank, world)
        _coalesced_and_p2p(checks, rank, world)
        _refused_batch(checks, rank, world)
        _dropped_all_to_all(checks, rank, world)
        _strided_uneven_all_to_all(checks, rank, world)
        _barrier_waits_for_peers(checks, rank, world)
        _barrier_after_unwaited_op(checks, rank, world)
        _wait_with_timeout(checks, rank, world)
        _flat_and_hierarchical_unwaited(checks, rank, world)
        _hierarchical_after_unwaited_block(checks, rank, world)
        _mixed_block_future(checks, rank, world)
        _overlap_ops(checks, rank, world)
        if args.mesh:
            record["mesh"] = _mesh_and_subgroups(checks, rank, world, args.device)
        record["checked"], record["failed"] = checks.count, checks.failed
        record["torch_topo"] = torch_topo.__file__
        dist.barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001  (the test shows it)
        record["exception"] = traceback.format_exc()[-3000:]
        code = 4
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    return code


if __name__ == "__main__":
    sys.exit(main())
