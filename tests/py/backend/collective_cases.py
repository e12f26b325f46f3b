# SPDX-License-Identifier: Apache-2.0
"""Every collective and point-to-point op, run on every rank of a RankPool: each issues the same
call on the "topo" world group and on a plain Gloo group over the same ranks, from seeded
inputs, and returns the mismatches (an empty list passes). `mixed_stress` issues them in a long
random sequence.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from gloo_reference import (
    ALL_OPS,
    COMPLEX,
    FLOATS,
    INTS,
    R,
    _diff,
    _finish,
    dtypes_for,
    reduce_scatter_ref,
    ref_reduce,
    seeded,
    topo_op,
)


def allreduce_all(rank, size, ref, shape=(5, 3)):
    bad = []
    for op in ALL_OPS:
        for dtype in dtypes_for(op):
            for async_op in (False, True):
                x = seeded(rank, shape, dtype, salt=ALL_OPS.index(op))
                a, b = x.clone(), x.clone()
                _finish(dist.all_reduce(a, op=topo_op(op, dtype), async_op=async_op), async_op)
                gop, scale = ref_reduce(op)
                dist.all_reduce(b, op=gop, group=ref)
                if scale:
                    scale(b, size)
                _diff(f"all_reduce {op} {dtype} async={async_op}", a, b, bad)
    return bad


def allreduce_future(rank, size, ref):
    """The work's future fires with the outputs, without wait() (DDP's reducer path)."""
    x = seeded(rank, (4,), torch.float32)
    a, b = x.clone(), x.clone()
    work = dist.all_reduce(a, op=R.AVG, async_op=True)
    value = work.get_future().wait()
    dist.all_reduce(b, group=ref)
    b.div_(size)
    bad = []
    _diff("future value", value[0], b, bad)
    _diff("in place", a, b, bad)
    if not work.is_completed() or not work.is_success():
        bad.append("work not completed after its future")
    return bad


def strided_views(rank, size, ref):
    """In-place ops on views that are not contiguous (every other column): plain Gloo reads
    and writes their storage as one block (wrong values, neighbours overwritten); the reference
    is plain Gloo on contiguous copies, and the columns between must stay as they were."""
    bad = []
    names = ["all_reduce AVG", "all_reduce SUM async", "broadcast", "reduce",
             "all_reduce_coalesced", "all_to_all_single", "scatter"]
    if hasattr(dist, "gather_into_tensor"):  # torch >= 2.14
        # Refused on the root alone: the other ranks waited out the timeout in their sends.
        names.append("gather_into_tensor")
    for name in names:
        base = seeded(rank, (2 * size, 6), torch.float64)
        view, between = base[:, ::2], base[:, 1::2].clone()
        want = view.contiguous()
        if name == "all_reduce AVG":
            dist.all_reduce(view, op=R.AVG)
            dist.all_reduce(want, group=ref)
            want.div_(size)
        elif name == "all_reduce SUM async":
            _finish(dist.all_reduce(view, async_op=True), True)
            dist.all_reduce(want, group=ref)
        elif name == "broadcast":
            dist.broadcast(view, src=size - 1)
            dist.broadcast(want, src=size - 1, group=ref)
        elif name == "reduce":
            dist.reduce(view, dst=0, op=R.MAX)
            dist.reduce(want, dst=0, op=R.MAX, group=ref)
        elif name == "all_to_all_single":
            source = seeded(rank, (2 * size, 6), torch.float64, salt=1)
            dist.all_to_all_single(view, source[:, 1::2])
            dist.all_to_all_single(want, source[:, 1::2].contiguous(), group=ref)
        elif name == "gather_into_tensor":
            piece = seeded(rank, (2, 3), torch.float64, salt=3)
            dist.gather_into_tensor(piece, view if rank == 0 else None, dst=0)
            pieces = [torch.empty_like(piece) for _ in range(size)] if rank == 0 else None
            dist.gather(piece, pieces, dst=0, group=ref)
            if rank == 0:
                want = torch.cat(pieces)
        elif name == "scatter":
            pieces = [seeded(r, (2 * size, 3), torch.float64, salt=2) for r in range(size)]
            dist.scatter(view, pieces if rank == 0 else None, src=0)
            dist.scatter(want, pieces if rank == 0 else None, src=0, group=ref)
        else:
            dist.all_reduce_coalesced([view], group=dist.group.WORLD)
            dist.all_reduce(want, group=ref)
        if name not in ("reduce", "gather_into_tensor") or rank == 0:
            _diff(f"{name} strided view", view, want, bad)
        _diff(f"{name} columns between the view's", base[:, 1::2], between, bad)
    return bad


def allreduce_sparse(rank, size, ref):
    """Sparse tensors (DDP's sparse gradients) stay on Gloo's sparse all-reduce."""
    bad = []
    idx = torch.tensor([[rank % 5, 7]])
    x = torch.sparse_coo_tensor(idx, torch.tensor([1.0 + rank, 2.0]), (10,))
    want = x.clone()
    dist.all_reduce(x)
    dist.all_reduce(want, group=ref)
    _diff("all_reduce sparse", x.to_dense(), want.to_dense(), bad)
    return bad


def integer_avg(rank, size, ref):
    """AVG on integer tensors as NCCL averages them: the sum, then a division truncating toward
    zero (negative sums included). Sizes below and above the two-rank one-step cap; reference:
    every rank's input gathered over plain Gloo, summed and divided here."""
    bad = []
    for dtype in INTS:
        for numel in (5, 1 << 18):
            x = seeded(rank, (numel,), dtype, salt=numel)
            gathered = [torch.empty_like(x) for _ in range(size)]
            dist.all_gather(gathered, x, group=ref)
            want = torch.stack(gathered).sum(0).to(dtype).div_(size, rounding_mode="trunc")
            got = x.clone()
            dist.all_reduce(got, op=R.AVG)
            _diff(f"all_reduce AVG {dtype} {numel}", got, want, bad)
            parts = list(x.chunk(size)) if numel % size == 0 else None
            if parts is not None:
                out = torch.empty_like(parts[0])
                dist.reduce_scatter_tensor(out, x, op=R.AVG)
                _diff(f"reduce_scatter AVG {dtype} {numel}", out, want.chunk(size)[rank], bad)
    return bad


def reduce_all(rank, size, ref):
    bad = []
    for root in range(size):
        for op in ALL_OPS:
            for dtype in dtypes_for(op)[::2] if root else dtypes_for(op):
                x = seeded(rank, (7,), dtype, salt=root)
                a, b = x.clone(), x.clone()
                async_op = bool(root % 2)
                _finish(dist.reduce(a, root, op=topo_op(op, dtype), async_op=async_op), async_op)
                gop, scale = ref_reduce(op)
                dist.reduce(b, root, op=gop, group=ref)
                if scale and rank == root:
                    scale(b, size)
                if rank == root:
                    _diff(f"reduce root={root} {op} {dtype}", a, b, bad)
    return bad


def broadcast_all(rank, size, ref):
    bad = []
    for root in range(size):
        for dtype in FLOATS + INTS:
            for async_op in (False, True):
                x = seeded(rank, (3, 4), dtype, salt=root)
                a, b = x.clone(), x.clone()
                _finish(dist.broadcast(a, root, async_op=async_op), async_op)
                dist.broadcast(b, root, group=ref)
                _diff(f"broadcast root={root} {dtype}", a, b, bad)
    return bad


def allgather_all(rank, size, ref):
    bad = []
    for dtype in FLOATS + INTS:
        for async_op in (False, True):
            x = seeded(rank, (2, 3), dtype)
            got = [torch.empty_like(x) for _ in range(size)]
            want = [torch.empty_like(x) for _ in range(size)]
            _finish(dist.all_gather(got, x, async_op=async_op), async_op)
            dist.all_gather(want, x, group=ref)
            for i in range(size):
                _diff(f"all_gather {dtype} [{i}]", got[i], want[i], bad)
            # Tensor form, and FSDP2's form: the input is this rank's slice of the output.
            out = torch.empty((size * 2, 3), dtype=dtype)
            _finish(dist.all_gather_into_tensor(out, x, async_op=async_op), async_op)
            _diff(f"all_gather_into_tensor {dtype}", out, torch.cat(want), bad)
            inplace = torch.empty((size * 2, 3), dtype=dtype)
            inplace[rank * 2:(rank + 1) * 2].copy_(x)
            piece = inplace[rank * 2:(rank + 1) * 2]
            _finish(dist.all_gather_into_tensor(inplace, piece, async_op=async_op), async_op)
            _diff(f"all_gather_into_tensor in place {dtype}", inplace, torch.cat(want), bad)
    return bad


def allgather_coalesced_all(rank, size, ref):
    bad = []
    for dtype in (torch.float32, torch.float64, torch.int64):
        xs = [seeded(rank, (3,), dtype, 1), seeded(rank, (2, 2), dtype, 2)]
        outs = [torch.empty((size * 3,), dtype=dtype), torch.empty((size * 2, 2), dtype=dtype)]
        with dist._coalescing_manager(async_ops=True) as cm:
            for o, x in zip(outs, xs, strict=True):
                dist.all_gather_into_tensor(o, x)
        cm.wait()
        for o, x in zip(outs, xs, strict=True):
            want = [torch.empty_like(x) for _ in range(size)]
            dist.all_gather(want, x, group=ref)
            _diff(f"allgather_into_tensor_coalesced {x.dtype}", o, torch.cat(want), bad)
    # Gloo would pack a float64 into a float32 buffer: topo must refuse, naming the dtypes.
    try:
        with dist._coalescing_manager():
            dist.all_gather_into_tensor(torch.empty(size * 3), torch.ones(3))
            dist.all_gather_into_tensor(torch.empty(size * 3, dtype=torch.float64),
                                        torch.ones(3, dtype=torch.float64))
        bad.append("mixed-dtype allgather_into_tensor_coalesced on Gloo did not raise")
    except ValueError as e:
        if "Float and Double" not in str(e):
            bad.append(f"mixed-dtype error does not name the dtypes: {e}")
    # allgather_coalesced: one output list per rank, each holding that rank's inputs (one dtype).
    xs = [seeded(rank, (3,), torch.float32, 5), seeded(rank, (2, 2), torch.float32, 6)]
    lists = [[torch.empty_like(x) for x in xs] for _ in range(size)]
    dist.all_gather_coalesced(lists, xs)
    for i, x in enumerate(xs):
        want = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(want, x, group=ref)
        for r in range(size):
            _diff(f"allgather_coalesced {x.dtype} from rank {r}", lists[r][i], want[r], bad)
    return bad


def allreduce_coalesced_all(rank, size, ref):
    bad = []
    for op in ("SUM", "AVG", "MAX"):
        xs = [seeded(rank, (4,), torch.float32, 3), seeded(rank, (2, 3), torch.float32, 4)]
        got = [x.clone() for x in xs]
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        opts = dist.AllreduceCoalescedOptions()
        opts.reduceOp = getattr(R, op)
        backend.allreduce_coalesced(got, opts).wait()
        # Gloo's coalesced form sums one flattened buffer, so its rounding is the reference.
        gop, scale = ref_reduce(op)
        want = [x.clone() for x in xs]
        ref_opts = dist.AllreduceCoalescedOptions()
        ref_opts.reduceOp = gop
        ref._get_backend(torch.device("cpu")).allreduce_coalesced(want, ref_opts).wait()
        for g, w in zip(got, want, strict=True):
            if scale:
                scale(w, size)
            _diff(f"allreduce_coalesced {op}", g, w, bad)
    return bad


def reduce_scatter_all(rank, size, ref):
    bad = []
    for op in ALL_OPS:
        for dtype in dtypes_for(op):
            async_op = dtype in (torch.float64, torch.int64)
            x = seeded(rank, (size * 3,), dtype, salt=ALL_OPS.index(op))
            want = reduce_scatter_ref(rank, size, ref, x, op)
            out = torch.empty((3,), dtype=dtype)
            _finish(dist.reduce_scatter_tensor(out, x, op=topo_op(op, dtype),
                                               async_op=async_op), async_op)
            _diff(f"reduce_scatter_tensor {op} {dtype}", out, want, bad)
            lst = torch.empty((3,), dtype=dtype)
            _finish(dist.reduce_scatter(lst, list(x.chunk(size)), op=topo_op(op, dtype),
                                        async_op=async_op), async_op)
            _diff(f"reduce_scatter list {op} {dtype}", lst, want, bad)
            # Within tolerance of Gloo's own all-reduce-based reduce-scatter, too.
            gop, scale = ref_reduce(op)
            gloo = torch.empty((3,), dtype=dtype)
            dist.reduce_scatter_tensor(gloo, x, op=gop, group=ref)
            if scale:
                scale(gloo, size)
            if not torch.allclose(out.double(), gloo.double(), rtol=1e-2, atol=1e-2):
                bad.append(f"reduce_scatter_tensor {op} {dtype}: {out.tolist()} vs Gloo's "
                           f"{gloo.tolist()}")
    # Complex (torch's Python layer lets reduce-scatter pass it with these ops): Gloo's typed
    # collectives know no complex type, so topo must move real views and fold complex values.
    for op in ("SUM", "AVG", "PREMUL_SUM", "PRODUCT"):
        for dtype in COMPLEX:
            x = seeded(rank, (size * 3,), dtype, salt=20 + ALL_OPS.index(op))
            want = reduce_scatter_ref(rank, size, ref, x, op)
            out = torch.empty((3,), dtype=dtype)
            dist.reduce_scatter_tensor(out, x, op=topo_op(op, dtype))
            _diff(f"reduce_scatter_tensor {op} {dtype}", out, want, bad)
            lst = torch.empty((3,), dtype=dtype)
            dist.reduce_scatter(lst, list(x.chunk(size)), op=topo_op(op, dtype))
            _diff(f"reduce_scatter list {op} {dtype}", lst, want, bad)
    # Coalesced tensor form.
    xs = [seeded(rank, (size * 2,), torch.float32, 7), seeded(rank, (size * 4,), torch.float32, 8)]
    outs = [torch.empty((2,)), torch.empty((4,))]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, x in zip(outs, xs, strict=True):
            dist.reduce_scatter_tensor(o, x, op=R.AVG)
    cm.wait()
    for o, x in zip(outs, xs, strict=True):
        want = torch.empty_like(o)
        dist.reduce_scatter_tensor(want, x, group=ref)
        want.div_(size)
        _diff("reduce_scatter_tensor_coalesced AVG", o, want, bad)
    return bad


def gather_scatter_all(rank, size, ref):
    bad = []
    for root in range(size):
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            x = seeded(rank, (3,), dtype, salt=root)
            got = [torch.empty_like(x) for _ in range(size)] if rank == root else None
            want = [torch.empty_like(x) for _ in range(size)] if rank == root else None
            dist.gather(x, got, dst=root)
            dist.gather(x, want, dst=root, group=ref)
            if rank == root:
                for i in range(size):
                    _diff(f"gather root={root} {dtype} [{i}]", got[i], want[i], bad)
            src = [seeded(100 + i, (3,), dtype, salt=root) for i in range(size)]
            a, b = torch.empty_like(x), torch.empty_like(x)
            work = dist.scatter(a, src if rank == root else None, src=root, async_op=True)
            work.wait()
            dist.scatter(b, src if rank == root else None, src=root, group=ref)
            _diff(f"scatter root={root} {dtype}", a, b, bad)
    return bad


def alltoall_all(rank, size, ref):
    bad = []
    for dtype in (torch.float32, torch.int32, torch.float16):
        x = seeded(rank, (size * 2, 3), dtype)
        a, b = torch.empty_like(x), torch.empty_like(x)
        dist.all_to_all_single(a, x)
        dist.all_to_all_single(b, x, group=ref)
        _diff(f"all_to_all_single even {dtype}", a, b, bad)
        # Uneven: rank r sends (r + j + 1) rows to rank j.
        send = [rank + j + 1 for j in range(size)]
        recv = [j + rank + 1 for j in range(size)]
        x = seeded(rank, (sum(send), 2), dtype, salt=5)
        a = torch.empty((sum(recv), 2), dtype=dtype)
        b = torch.empty_like(a)
        dist.all_to_all_single(a, x, recv, send, async_op=True).wait()
        dist.all_to_all_single(b, x, recv, send, group=ref)
        _diff(f"all_to_all_single uneven {dtype}", a, b, bad)
        ins = [seeded(rank, (2, 3), dtype, salt=j) for j in range(size)]
        outs_a = [torch.empty((2, 3), dtype=dtype) for _ in range(size)]
        dist.all_to_all(outs_a, ins)
        # Gloo's list form is missing in torch 2.11; its flat form is the reference.
        flat_b = torch.empty((size * 2, 3), dtype=dtype)
        dist.all_to_all_single(flat_b, torch.cat(ins), group=ref)
        for j in range(size):
            _diff(f"all_to_all list even {dtype} [{j}]", outs_a[j], flat_b[2 * j:2 * j + 2], bad)
        # Uneven lists: rank r sends (j + 1, 2) to rank j.
        ins = [seeded(rank, (j + 1, 2), dtype, salt=j) for j in range(size)]
        outs_a = [torch.empty((rank + 1, 2), dtype=dtype) for _ in range(size)]
        dist.all_to_all(outs_a, ins)
        # Gloo's list form needs equal sizes; its flat form with splits is the reference.
        flat_b = torch.empty((size * (rank + 1), 2), dtype=dtype)
        dist.all_to_all_single(flat_b, torch.cat(ins), [rank + 1] * size,
                               [j + 1 for j in range(size)], group=ref)
        outs_b = list(flat_b.split(rank + 1))
        for j in range(size):
            _diff(f"all_to_all list uneven {dtype} [{j}]", outs_a[j], outs_b[j], bad)
    return bad


def p2p_all(rank, size, ref):
    """Ring exchange with send/recv, isend/irecv, batch_isend_irecv and recv from any source."""
    bad = []
    if size == 1:
        return bad
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    x = seeded(rank, (4,), torch.float32)
    want = seeded(prv, (4,), torch.float32)
    got = torch.empty(4)
    if rank % 2 == 0:
        dist.send(x, nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(x, nxt)
    _diff("send/recv", got, want, bad)
    got = torch.empty(4)
    reqs = [dist.isend(x, nxt), dist.irecv(got, prv)]
    for r in reqs:
        r.wait()
    _diff("isend/irecv", got, want, bad)
    got = torch.empty(4)
    ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, got, prv)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    _diff("batch_isend_irecv", got, want, bad)
    # Any source: rank 0 collects one tensor from every other rank.
    if rank == 0:
        seen = set()
        for _ in range(size - 1):
            t = torch.empty(4)
            sender = dist.recv(t)
            seen.add(sender)
            _diff(f"recv anysource from {sender}", t, seeded(sender, (4,), torch.float32), bad)
        if seen != set(range(1, size)):
            bad.append(f"recv anysource saw {sorted(seen)}")
    else:
        dist.send(x, 0)
    return bad


def mixed_stress(rank, size, ref, count=300, seed=5):
    """`count` random collectives (op, ReduceOp, dtype, size, async) issued back to back, with
    async works waited out of order, each checked against Gloo."""
    rng = torch.Generator().manual_seed(seed)  # same sequence on every rank
    bad, pending = [], []

    def pick(seq):
        return seq[int(torch.randint(len(seq), (1,), generator=rng))]

    for i in range(count):
        kind = pick(["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"])
        op = pick(ALL_OPS)
        dtype = pick(dtypes_for(op))
        n = int(torch.randint(1, 2000, (1,), generator=rng)) * size
        async_op = bool(torch.randint(2, (1,), generator=rng))
        x = seeded(rank, (n,), dtype, salt=i)
        if kind == "all_reduce":
            got, want = x.clone(), x.clone()
            work = dist.all_reduce(got, op=topo_op(op, dtype), async_op=async_op)
            gop, scale = ref_reduce(op)
            dist.all_reduce(want, op=gop, group=ref)
            if scale:
                scale(want, size)
        elif kind == "reduce_scatter":
            got = torch.empty(n // size, dtype=dtype)
            work = dist.reduce_scatter_tensor(got, x, op=topo_op(op, dtype), async_op=async_op)
            want = reduce_scatter_ref(rank, size, ref, x, op)
        elif kind == "all_gather":
            got, want = torch.empty(n * size, dtype=dtype), torch.empty(n * size, dtype=dtype)
            work = dist.all_gather_into_tensor(got, x, async_op=async_op)
            dist.all_gather_into_tensor(want, x, group=ref)
        elif kind == "broadcast":
            root = i % size
            got, want = x.clone(), x.clone()
            work = dist.broadcast(got, root, async_op=async_op)
            dist.broadcast(want, root, group=ref)
        else:
            got, want = torch.empty_like(x), torch.empty_like(x)
            work = dist.all_to_all_single(got, x, async_op=async_op)
            dist.all_to_all_single(want, x, group=ref)
        pending.append((f"#{i} {kind} {op} {dtype} n={n}", work, got, want))
        if len(pending) == 4 or i == count - 1:
            for name, w, g, r in reversed(pending):  # out of issue order
                if w is not None:
                    w.wait()
                _diff(name, g, r, bad)
            pending.clear()
    return bad
