# SPDX-License-Identifier: Apache-2.0
"""Cases run on every rank of a RankPool: each issues the same call on the "topo" world group
and on a plain Gloo group over the same ranks, from seeded inputs, and returns the mismatches
(an empty list passes). Gloo is the independent reference; AVG and PREMUL_SUM, which Gloo
lacks, are referenced as Gloo SUM followed by the same scaling written out here.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int32, torch.int64]
COMPLEX = [torch.complex64, torch.complex128]
ALL_OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
PREMUL_FACTOR = 0.375


def seeded(rank: int, shape, dtype, salt: int = 0) -> torch.Tensor:
    if dtype.is_complex:
        part = torch.float32 if dtype == torch.complex64 else torch.float64
        return torch.complex(seeded(rank, shape, part, salt), seeded(rank, shape, part, salt + 1))
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        # Small magnitudes keep PRODUCT finite in float16 for 8 ranks.
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 1.5 + 0.25).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=torch.int64).to(dtype)


def dtypes_for(op: str):
    if op in ("BAND", "BOR", "BXOR"):
        return INTS
    if op in ("AVG", "PREMUL_SUM"):
        return FLOATS
    return FLOATS + INTS


def topo_op(op: str, dtype):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(R, op)


def ref_reduce(op: str):
    """The Gloo op and the scaling that completes it (AVG, PREMUL_SUM)."""
    if op == "AVG":
        return R.SUM, lambda t, size: t.div_(size)
    if op == "PREMUL_SUM":
        return R.SUM, lambda t, size: t.mul_(PREMUL_FACTOR)
    return getattr(R, op), None


def _finish(work, async_op):
    if async_op:
        work.wait()


def _diff(name, got, want, out):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        out.append(f"{name}: got {got.flatten()[:6].tolist()} want {want.flatten()[:6].tolist()}")


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
    for name in ("all_reduce AVG", "all_reduce SUM async", "broadcast", "reduce",
                 "all_reduce_coalesced", "all_to_all_single", "scatter"):
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
        elif name == "scatter":
            pieces = [seeded(r, (2 * size, 3), torch.float64, salt=2) for r in range(size)]
            dist.scatter(view, pieces if rank == 0 else None, src=0)
            dist.scatter(want, pieces if rank == 0 else None, src=0, group=ref)
        else:
            dist.all_reduce_coalesced([view], group=dist.group.WORLD)
            dist.all_reduce(want, group=ref)
        if name != "reduce" or rank == 0:
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


_FOLDS = {
    "SUM": torch.add, "AVG": torch.add, "PREMUL_SUM": torch.add, "PRODUCT": torch.mul,
    "MIN": torch.minimum, "MAX": torch.maximum, "BAND": torch.bitwise_and,
    "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor,
}


def reduce_scatter_ref(rank, size, ref, x, op):
    """What "topo" computes on Gloo (one all-to-all, then block r of every rank folded in rank
    order), from the inputs gathered over the plain Gloo group `ref`: each rank's block of the
    result is exact to the bit, independently of either side's collective."""
    inputs = [torch.empty_like(x) for _ in range(size)]
    dist.all_gather(inputs, x, group=ref)
    blocks = [t.chunk(size)[rank] for t in inputs]
    want = blocks[0].clone()
    for b in blocks[1:]:
        want = _FOLDS[op](want, b)
    _, scale = ref_reduce(op)
    if scale:
        scale(want, size)
    return want


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


def barrier_and_seq(rank, size, ref):
    bad = []
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    before = backend._get_sequence_number_for_group()
    dist.barrier()
    t = torch.ones(1)
    dist.all_reduce(t)
    after = backend._get_sequence_number_for_group()
    if after - before != 2:
        bad.append(f"sequence number moved by {after - before}, expected 2")
    if dist.get_backend() != "topo":
        bad.append(f"get_backend() = {dist.get_backend()}")
    if backend.name() != "topo":
        bad.append(f"backend name {backend.name()}")
    return bad


def object_collectives(rank, size, ref):
    bad = []
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "x": [rank] * rank})
    if objs != [{"rank": r, "x": [r] * r} for r in range(size)]:
        bad.append(f"all_gather_object {objs}")
    box = [f"from {rank}"]
    dist.broadcast_object_list(box, src=size - 1)
    if box != [f"from {size - 1}"]:
        bad.append(f"broadcast_object_list {box}")
    out = [None]
    dist.scatter_object_list(out, [f"to {r}" for r in range(size)] if rank == 0 else None, src=0)
    if out != [f"to {rank}"]:
        bad.append(f"scatter_object_list {out}")
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(rank * 10, gathered, dst=0)
    if rank == 0 and gathered != [r * 10 for r in range(size)]:
        bad.append(f"gather_object {gathered}")
    return bad


def subgroups(rank, size, ref):
    """new_group over non-contiguous ranks (even ranks, and the reversed odd ranks)."""
    bad = []
    even = list(range(0, size, 2))
    odd = list(range(1, size, 2))[::-1]
    g_even = dist.new_group(even)
    g_odd = dist.new_group(odd) if odd else None
    r_even = dist.new_group(even, backend="gloo")
    r_odd = dist.new_group(odd, backend="gloo") if odd else None
    mine, mine_ref = (g_even, r_even) if rank in even else (g_odd, r_odd)
    if dist.get_backend(mine) != "topo":
        bad.append(f"subgroup backend {dist.get_backend(mine)}")
    for op in ("SUM", "AVG", "MAX"):
        x = seeded(rank, (6,), torch.float32, salt=11)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, op=topo_op(op, None), group=mine)
        gop, scale = ref_reduce(op)
        dist.all_reduce(b, op=gop, group=mine_ref)
        if scale:
            scale(b, dist.get_world_size(mine))
        _diff(f"subgroup all_reduce {op}", a, b, bad)
    n = dist.get_world_size(mine)
    x = seeded(rank, (2,), torch.float64)
    got = [torch.empty_like(x) for _ in range(n)]
    want = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(got, x, group=mine)
    dist.all_gather(want, x, group=mine_ref)
    for i in range(n):
        _diff(f"subgroup all_gather [{i}]", got[i], want[i], bad)
    root = (even if rank in even else odd)[-1]
    a = seeded(rank, (3,), torch.float32)
    b = a.clone()
    dist.broadcast(a, root, group=mine)
    dist.broadcast(b, root, group=mine_ref)
    _diff("subgroup broadcast (global root)", a, b, bad)
    return bad


def bad_inputs(rank, size, ref):
    """Each call must raise ValueError naming the problem; returns the misses."""
    bad = []
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))

    def expect(fragment, fn):
        try:
            fn()
        except ValueError as e:
            if fragment not in str(e):
                bad.append(f"{fragment!r} not in {e}")
            return
        except Exception as e:  # noqa: BLE001
            bad.append(f"{fragment!r}: got {type(e).__name__}: {e}")
            return
        bad.append(f"{fragment!r}: no error")

    f = torch.ones(4)
    i = torch.ones(4, dtype=torch.int32)
    expect("TopoBackend::allreduce: ReduceOp.BAND needs an integer tensor",
           lambda: dist.all_reduce(f, op=R.BAND))
    expect("TopoBackend::allreduce: ReduceOp.AVG needs a floating-point or complex tensor",
           lambda: dist.all_reduce(i, op=R.AVG))
    c = torch.ones(4 * size, dtype=torch.complex64)
    expect("TopoBackend::_reduce_scatter_base: ReduceOp.MAX needs a real tensor: got ComplexFloat",
           lambda: dist.reduce_scatter_tensor(torch.empty(4, dtype=c.dtype), c, op=R.MAX))
    expect("TopoBackend::reduce_scatter: ReduceOp.MIN needs a real tensor: got ComplexFloat",
           lambda: dist.reduce_scatter(torch.empty(4, dtype=c.dtype), list(c.chunk(size)),
                                       op=R.MIN))
    opts = dist.BroadcastOptions()
    opts.rootRank = size
    expect("TopoBackend::broadcast: root rank out of range", lambda: backend.broadcast([f], opts))
    ropts = dist.ReduceOptions()
    ropts.rootRank = -1
    expect("TopoBackend::reduce: root rank out of range", lambda: backend.reduce([f], ropts))
    expect("TopoBackend::_allgather_base: output has",
           lambda: backend._allgather_base(torch.empty(4 * size + 1), f))
    expect("TopoBackend::_reduce_scatter_base: input has",
           lambda: backend._reduce_scatter_base(torch.empty(3), torch.empty(3 * size + 2),
                                                dist.ReduceScatterOptions()))
    expect("TopoBackend::allgather: output list holds",
           lambda: backend.allgather([[torch.empty(4)] * (size + 1)], [f]))
    expect("TopoBackend::alltoall_base: input split sizes sum to",
           lambda: backend.alltoall_base(torch.empty(size), torch.empty(size), [1] * size,
                                         [2] * size, dist.AllToAllOptions()))
    expect("TopoBackend::send: destination rank out of range",
           lambda: backend.send([f], size, 0))
    expect("TopoBackend::recv: source rank out of range", lambda: backend.recv([f], -2, 0))
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


def decisions_logged(rank, size, ref):
    """runCollective records (op, bytes, choice); without levels every op stays flat."""
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    backend.set_hierarchical_thresholds("cpu", {"allreduce": 0, "allgather": 0})
    bad = []
    x = torch.ones(10, dtype=torch.float64)
    dist.all_reduce(x)
    out = torch.empty(10 * size, dtype=torch.float64)
    dist.all_gather_into_tensor(out, x)
    dist.broadcast(x, 0)
    got = backend.last_decisions()[-3:]
    want = [("allreduce", 80, "flat"), ("_allgather_base", 80, "flat"), ("broadcast", 80, "flat")]
    if got != want:
        bad.append(f"decisions {got}, expected {want}")
    backend.set_hierarchical_thresholds("cpu", {})
    return bad


def wait_timeout_then_wait(rank, size, ref):
    """wait(timeout) that runs out while a late rank has not joined raises and leaves the op
    running, as on plain Gloo: a later wait() completes it, with the AVG scaling and the
    one-step reduce-scatter's fold. Inputs are small integers, so every order sums exactly."""
    import datetime

    bad = []
    short = datetime.timedelta(milliseconds=50)
    for name in ("all_reduce AVG", "reduce_scatter_tensor"):
        results = {}
        for label, group in (("gloo", ref), ("topo", dist.group.WORLD)):
            x = torch.arange(2 * size, dtype=torch.float64) + rank
            out = torch.empty(2, dtype=torch.float64)
            if rank == 0 and size > 1:
                time.sleep(0.5)
            if name == "all_reduce AVG":
                # Gloo has no AVG: its reference is the SUM, scaled below.
                op = R.SUM if label == "gloo" else R.AVG
                work, got = dist.all_reduce(x, op=op, group=group, async_op=True), x
            else:
                work = dist.reduce_scatter_tensor(out, x, group=group, async_op=True)
                got = out
            try:
                work.wait(timeout=short)
            except RuntimeError as e:
                if "timed out" not in str(e):
                    bad.append(f"{name} {label}: first wait raised {e}")
            try:
                work.wait()
            except RuntimeError as e:
                bad.append(f"{name} {label}: wait() after a wait(timeout) raised {e}")
                continue
            if label == "gloo" and name == "all_reduce AVG":
                got = got / size
            results[label] = got
            # Gloo's own reduce-scatter work never reports itself completed: topo's only.
            if label == "topo" and not (work.is_completed() and work.is_success()):
                bad.append(f"{name} topo: not completed successfully after wait()")
        if len(results) == 2:
            _diff(f"{name} after wait(timeout)", results["topo"], results["gloo"], bad)
    return bad


def p2p_future_refused(rank, size, ref):
    """Gloo's send and recv works have no future, and "topo"'s refuse theirs while pending too:
    only wait() completes them, so a caller waiting on the future would wait forever."""
    bad = []
    if size == 1 or rank > 1:
        return bad
    peer = 1 - rank
    for label, group in (("gloo", ref), ("topo", dist.group.WORLD)):
        t = torch.full((3,), float(rank))
        work = dist.isend(t, peer, group=group) if rank == 0 else dist.irecv(t, peer, group=group)
        try:
            work.get_future()
            bad.append(f"{label}: get_future() of a pending {'send' if rank == 0 else 'recv'} "
                       "returned a future that only wait() completes")
        except RuntimeError as e:
            if label == "topo" and "wait()" not in str(e):
                bad.append(f"topo: get_future() error does not say to call wait(): {e}")
        work.wait()
        _diff(f"{label} p2p", t, torch.zeros(3), bad)
    # A batch of sends and receives ends in one work over Gloo's: the same holds for it.
    t = torch.full((3,), float(rank))
    op = dist.isend if rank == 0 else dist.irecv
    works = dist.batch_isend_irecv([dist.P2POp(op, t, peer)])
    for w in works:
        try:
            w.get_future()
            bad.append("topo: get_future() of a pending batch_isend_irecv work returned a future "
                       "that only wait() completes")
        except RuntimeError:
            pass
        w.wait()
    _diff("topo batch_isend_irecv", t, torch.zeros(3), bad)
    return bad
