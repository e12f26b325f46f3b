# SPDX-License-Identifier: Apache-2.0
"""Cases run on every rank of a RankPool. Each rank builds the same global tensors from a seed,
computes the single-process reference with autograd (torch's scaled_dot_product_attention),
runs the distributed op on its shard and compares its slice of outputs and gradients."""

from __future__ import annotations

import functools
import re

import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_topo

# float32: both sides are exact softmax attention, differences are summation order only.
# bfloat16: inputs, block outputs and gradients are rounded to 8 mantissa bits (2^-8 = 3.9e-3
# relative); the reference runs in fp32 on the same rounded inputs, so allow a few roundings.
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (3e-2, 3e-2),
              torch.float64: (1e-10, 1e-10)}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}

_groups_2d: dict = {}


def groups_2x2():
    """(sp_group, ring_group) of a 2 x 2 mesh: Ulysses over {0,1},{2,3}, ring over {0,2},{1,3};
    built once per pool, by every rank in the same order."""
    if not _groups_2d:
        cfg = torch_topo.UlyssesConfig(sequence_parallel_size=4, ulysses_degree=2)
        _groups_2d["g"] = torch_topo.build_sequence_parallel_groups(cfg)
    return _groups_2d["g"]


def expected_positions(layout: str, seq_len: int, rank: int, world: int) -> torch.Tensor:
    """Global positions of a rank's shard, written out independently of the code under test."""
    if layout == "contiguous":
        n = seq_len // world
        return torch.arange(rank * n, (rank + 1) * n)
    if layout == "zigzag":
        c = seq_len // (2 * world)
        return torch.cat([torch.arange(rank * c, (rank + 1) * c),
                          torch.arange((2 * world - 1 - rank) * c, (2 * world - rank) * c)])
    # 2x2 layouts: ring rank c = rank // 2 holds a ring block (zigzag or contiguous over 2
    # ring ranks), Ulysses rank u = rank % 2 holds half u of it.
    ring_layout = layout.split("-")[1]
    block = expected_positions(ring_layout, seq_len, rank // 2, 2)
    half = block.numel() // 2
    return block[(rank % 2) * half:(rank % 2 + 1) * half]


def qkv(b=1, s=4, h=4, hk=4, d=4, dtype=torch.float32, hv=None):
    """Random q, k, v in [batch, seq, heads, head_dim] (k with `hk` heads, v with `hv`, by
    default `hk`)."""
    return (torch.randn(b, s, h, d, dtype=dtype), torch.randn(b, s, hk, d, dtype=dtype),
            torch.randn(b, s, hk if hv is None else hv, d, dtype=dtype))


def _reference(q, k, v, dout, causal, scale):
    """fp32 single-process attention with autograd: (out, dq, dk, dv, lse) in [b, s, h, d]."""
    q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, scale=scale,
        enable_gqa=k.shape[2] != q.shape[2]).transpose(1, 2)
    out.backward(dout.float())
    kk = k.detach().repeat_interleave(q.shape[2] // k.shape[2], dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.detach(), kk) * (scale or q.shape[-1] ** -0.5)
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return out.detach(), q.grad, k.grad, v.grad, torch.logsumexp(s, -1)


def _op(name: str, causal: bool, scale, balance: str):
    if name == "ulysses":
        return functools.partial(torch_topo.ulysses_attention, causal=causal, softmax_scale=scale)
    if name == "ring":
        return functools.partial(torch_topo.ring_attention, causal=causal, softmax_scale=scale,
                                 balance=balance)
    sp, ring = groups_2x2()
    cfg = torch_topo.UlyssesConfig(sequence_parallel_size=4, ulysses_degree=2, ring_balance=balance,
                                   causal=causal, softmax_scale=scale)
    return torch_topo.SequenceParallelAttention(cfg, sp_group=sp, ring_group=ring)


def _layout(op: str, balance: str) -> str:
    if op == "2d":
        return "2d-" + ("zigzag" if balance == "zigzag" else "contiguous")
    return "zigzag" if op == "ring" and balance == "zigzag" else "contiguous"


def _shard(x, op: str, balance: str):
    """The layout each op expects, through the public shard helpers."""
    if op == "2d":
        sp, ring = groups_2x2()
        return torch_topo.shard_sequence(x, 1, sp, ring, balance=balance)
    if op == "ring" and balance == "zigzag":
        return torch_topo.zigzag_shard(x, 1)
    rank, world = dist.get_rank(), dist.get_world_size()
    n = x.shape[1] // world
    return x[:, rank * n:(rank + 1) * n]


def attention(rank, world, *, op, causal, heads, kv_heads, seq_local, dtype="float32",
              balance="none", batch=2, head_dim=8, scale=None, seed=0, device="cpu",
              tolerance=None):
    """Forward and dQ/dK/dV of one op on this rank's shard against the reference (on `device`;
    `tolerance` (rtol, atol) overrides the dtype's, e.g. for GPU kernels)."""
    dt = DTYPES[dtype]
    seq = seq_local * world
    gen = torch.Generator().manual_seed(seed)
    q, dout = (torch.randn(batch, seq, heads, head_dim, generator=gen).to(device, dt)
               for _ in range(2))
    k, v = (torch.randn(batch, seq, kv_heads, head_dim, generator=gen).to(device, dt)
            for _ in range(2))
    ref_out, ref_dq, ref_dk, ref_dv, ref_lse = _reference(q, k, v, dout, causal, scale)

    pos = expected_positions(_layout(op, balance), seq, rank, world)
    shard = functools.partial(_shard, op=op, balance=balance)
    torch.testing.assert_close(shard(q), q[:, pos], rtol=0, atol=0)
    ql, kl, vl = (shard(t).detach().clone().requires_grad_() for t in (q, k, v))
    fn = _op(op, causal, scale, balance)
    rtol, atol = tolerance or TOLERANCES[dt]
    if op == "ring":
        out, lse = fn(ql, kl, vl, return_lse=True)
        torch.testing.assert_close(lse, ref_lse[:, :, pos], rtol=rtol, atol=atol)
    else:
        out = fn(ql, kl, vl)
    out.backward(shard(dout))
    for name, got, want in (("out", out, ref_out), ("dq", ql.grad, ref_dq),
                            ("dk", kl.grad, ref_dk), ("dv", vl.grad, ref_dv)):
        if got.dtype != dt:
            raise AssertionError(f"{name}: dtype {got.dtype}, expected {dt}")
        torch.testing.assert_close(got.float(), want[:, pos], rtol=rtol, atol=atol,
                                   msg=lambda m, n=name: f"{n}: {m}")


def ulysses_in_place(rank, world, *, batch, kv_heads):
    """An attn_fn that scales q in place and a caller that scales the output in place, against
    the reference on the full sequence (at batch 1 the exchange's outputs share its buffer)."""
    import torch_topo.ops.ulysses as ulysses

    heads, seq, dt = 2 * world, 3 * world, torch.float64
    gen = torch.Generator().manual_seed(4)
    q, dout = (torch.randn(batch, seq, heads, 8, generator=gen, dtype=dt) for _ in range(2))
    k, v = (torch.randn(batch, seq, kv_heads, 8, generator=gen, dtype=dt) for _ in range(2))
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(
        (qr * 2).transpose(1, 2), kr.transpose(1, 2), vr.transpose(1, 2), is_causal=True,
        enable_gqa=kv_heads != heads).transpose(1, 2) * 3
    ref.backward(dout)

    def attn_fn(q, k, v, *, causal, softmax_scale):
        q.mul_(2.0)
        return ulysses.sdpa_attention(q, k, v, causal=causal, softmax_scale=softmax_scale)

    pos = expected_positions("contiguous", seq, rank, world)
    ql, kl, vl = (t[:, pos].clone().requires_grad_() for t in (q, k, v))
    out = torch_topo.ulysses_attention(ql, kl, vl, causal=True, attn_fn=attn_fn)
    out.mul_(3.0)
    out.backward(dout[:, pos])
    for name, got, want in (("out", out, ref), ("dq", ql.grad, qr.grad),
                            ("dk", kl.grad, kr.grad), ("dv", vl.grad, vr.grad)):
        torch.testing.assert_close(got, want[:, pos], rtol=1e-10, atol=1e-10,
                                   msg=lambda m, n=name: f"{n}: {m}")


def ring_in_place(rank, world, *, op, causal, balance, batch=2):
    """The caller scales the op's output in place, then backward. The 2-D op's output comes out
    of the Ulysses exchange, which hands out tensors of its own: against the reference on the
    full sequence. The ring's output is what its backward reads: the write must raise (at once
    or at backward, as torch's SDPA does), never pass into wrong gradients. Returns the error
    text (None when there was none)."""
    heads, seq, dt = 4, 4 * world, torch.float64
    gen = torch.Generator().manual_seed(6)
    q, dout = (torch.randn(batch, seq, heads, 8, generator=gen, dtype=dt) for _ in range(2))
    k, v = (torch.randn(batch, seq, 2, 8, generator=gen, dtype=dt) for _ in range(2))
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(
        qr.transpose(1, 2), kr.transpose(1, 2), vr.transpose(1, 2), is_causal=causal,
        enable_gqa=True).transpose(1, 2) * 3
    ref.backward(dout)

    pos = expected_positions(_layout(op, balance), seq, rank, world)
    ql, kl, vl = (t[:, pos].clone().requires_grad_() for t in (q, k, v))
    out = _op(op, causal, None, balance)(ql, kl, vl)
    try:
        out.mul_(3.0)
        out.backward(dout[:, pos])
    except RuntimeError as e:
        return str(e)
    for name, got, want in (("out", out, ref), ("dq", ql.grad, qr.grad),
                            ("dk", kl.grad, kr.grad), ("dv", vl.grad, vr.grad)):
        torch.testing.assert_close(got, want[:, pos], rtol=1e-10, atol=1e-10,
                                   msg=lambda m, n=name: f"{n}: {m}")
    return None


# Short enough for a test to wait out, long enough for a loaded 2-core host to go round a ring
# (its two ranks run warm in the pool: a ring step takes milliseconds).
_SHORT_TIMEOUT_S = 5


def ring_fails_mid_ring(rank, world, *, phase, failing):
    """The block kernel of `phase` ("forward" or "backward") raises at ring step 0 on the ranks
    in `failing`, with the step-1 exchange posted, on a group with a short timeout. A failing
    rank must raise its own error with every transfer it posted finished; when all ranks fail,
    the group must then give the reference result. A rank that goes on alone must get a
    RingTransferError after the timeout. Returns (error type, whether a failing rank's posted
    transfers were all finished when it raised)."""
    import datetime
    import sys

    ring_module = sys.modules["torch_topo.ops.ring_attention"]
    group = dist.new_group(list(range(world)),
                           timeout=datetime.timedelta(seconds=_SHORT_TIMEOUT_S))
    seq, heads = 2 * world, 2
    gen = torch.Generator().manual_seed(8)
    q, k, v, dout = (torch.randn(1, seq, heads, 4, generator=gen) for _ in range(4))
    pos = expected_positions("contiguous", seq, rank, world)

    def run():
        ql, kl, vl = (t[:, pos].clone().requires_grad_() for t in (q, k, v))
        out = torch_topo.ring_attention(ql, kl, vl, group=group, check_inputs=False)
        out.backward(dout[:, pos])
        return out, ql.grad, kl.grad, vl.grad

    def fail(*args, **kwargs):
        raise RuntimeError(f"injected {phase} kernel failure on rank {rank}")

    name, works = f"block_{phase}", []
    kernel, batch_isend_irecv = getattr(ring_module, name), dist.batch_isend_irecv

    def recording_batch(ops):
        posted = batch_isend_irecv(ops)
        works.extend(posted)
        return posted

    if rank in failing:
        setattr(ring_module, name, fail)
    dist.batch_isend_irecv = recording_batch
    try:
        run()
    except RuntimeError as e:
        error = e
    else:
        raise AssertionError(f"{phase}: rank {rank} raised nothing")
    finally:
        setattr(ring_module, name, kernel)
        dist.batch_isend_irecv = batch_isend_irecv
    if rank in failing:
        if "injected" not in str(error):
            raise AssertionError(f"rank {rank} raised {error!r}, expected its own error")
    elif not isinstance(error, torch_topo.ops.utils.RingTransferError) or not re.search(
            r"ring_attention backward.*did not complete.*a rank that raised mid-ring", str(error)):
        raise AssertionError(f"rank {rank} raised {error!r}, expected a RingTransferError")
    finished = all(w.is_completed() for w in works)
    if len(failing) == world:  # the group is left clean: the next call is exact
        ref = _reference(q, k, v, dout, False, None)
        for what, got, want in zip(("out", "dq", "dk", "dv"), run(), ref, strict=False):
            torch.testing.assert_close(got, want[:, pos], rtol=1e-5, atol=1e-5,
                                       msg=lambda m, n=what: f"{n}: {m}")
    return type(error).__name__, finished


class _Scatter(torch.autograd.Function):
    """Test harness: full tensor -> this rank's rows `pos`; the backward all-gathers the shard
    gradients, so every rank sees the full gradient of a function every rank computes alike."""

    @staticmethod
    def forward(ctx, x, pos, all_pos):
        ctx.all_pos = all_pos
        return x[:, pos].clone()

    @staticmethod
    def backward(ctx, g):
        parts = [torch.empty_like(g) for _ in ctx.all_pos]
        dist.all_gather(parts, g.contiguous())
        full = torch.zeros(g.shape[0], sum(p.numel() for p in ctx.all_pos), *g.shape[2:],
                           dtype=g.dtype)
        for p, part in zip(ctx.all_pos, parts, strict=False):
            full[:, p] = part
        return full, None, None


class _Gather(torch.autograd.Function):
    """Test harness: every rank's rows -> the full tensor; the backward keeps this rank's rows
    (every rank receives the same output gradient)."""

    @staticmethod
    def forward(ctx, x, pos, all_pos):
        ctx.pos = pos
        parts = [torch.empty_like(x) for _ in all_pos]
        dist.all_gather(parts, x.contiguous())
        full = torch.empty(x.shape[0], sum(p.numel() for p in all_pos), *x.shape[2:],
                           dtype=x.dtype)
        for p, part in zip(all_pos, parts, strict=False):
            full[:, p] = part
        return full

    @staticmethod
    def backward(ctx, g):
        return g[:, ctx.pos].contiguous(), None, None


def gradcheck(rank, world, *, op, causal, heads, kv_heads, seq_local, balance="none", seed=0):
    """torch.autograd.gradcheck in float64 of full -> shard -> op -> gather, on every rank."""
    seq = seq_local * world
    layout = _layout(op, balance)
    all_pos = [expected_positions(layout, seq, r, world) for r in range(world)]
    fn = _op(op, causal, None, balance)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(1, seq, heads, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(1, seq, kv_heads, 4, generator=gen, dtype=torch.float64,
                        requires_grad=True) for _ in range(2))

    def full(q, k, v):
        local = [_Scatter.apply(t, all_pos[rank], all_pos) for t in (q, k, v)]
        return _Gather.apply(fn(*local), all_pos[rank], all_pos)

    if not torch.autograd.gradcheck(full, (q, k, v), eps=1e-6, atol=1e-7, rtol=1e-5):
        raise AssertionError("gradcheck returned False")


class _CollectiveLog:
    """Wraps torch.distributed's collectives and point-to-point calls to record each call."""

    NAMES = ("all_to_all_single", "all_to_all", "all_gather", "all_gather_into_tensor",
             "all_reduce", "broadcast", "reduce_scatter", "reduce_scatter_tensor", "isend",
             "irecv", "send", "recv", "batch_isend_irecv")

    def __init__(self, names=NAMES):
        self.names = names

    def __enter__(self):
        self.calls, self._saved = [], {}
        for name in self.names:
            orig = getattr(dist, name)
            self._saved[name] = orig

            def wrapper(*args, _orig=orig, _name=name, **kwargs):
                numel = args[1].numel() if _name == "all_to_all_single" else None
                self.calls.append((_name, numel))
                return _orig(*args, **kwargs)

            setattr(dist, name, wrapper)
        return self

    def __exit__(self, *exc):
        for name, orig in self._saved.items():
            setattr(dist, name, orig)


def ulysses_collective_count(rank, world, *, heads, kv_heads, check_inputs):
    """One all_to_all_single carries Q, K and V (its input has all their elements, replicated
    K/V heads included), one carries the output; the backward mirrors it."""
    b, s, d = 1, 3, 4
    q = torch.randn(b, s, heads, d, requires_grad=True)
    k, v = (torch.randn(b, s, kv_heads, d, requires_grad=True) for _ in range(2))
    with _CollectiveLog() as fwd:
        out = torch_topo.ulysses_attention(q, k, v, check_inputs=check_inputs)
    with _CollectiveLog() as bwd:
        out.sum().backward()
    kv_sent = max(kv_heads, world) * b * s * d
    want_fwd = [("all_to_all_single", q.numel() + 2 * kv_sent), ("all_to_all_single", q.numel())]
    if check_inputs:
        want_fwd.insert(0, ("all_gather", None))
    if fwd.calls != want_fwd:
        raise AssertionError(f"forward collectives {fwd.calls}, expected {want_fwd}")
    want_bwd = [("all_to_all_single", q.numel()), ("all_to_all_single", q.numel() + 2 * kv_sent)]
    if bwd.calls != want_bwd:
        raise AssertionError(f"backward collectives {bwd.calls}, expected {want_bwd}")


class _HostReads:
    """Counts Tensor.tolist / item calls: how the shape check reads its records on the host
    (on CUDA each is a device sync)."""

    def __enter__(self):
        self.count, self._saved = 0, {}
        for name in ("tolist", "item"):
            orig = self._saved[name] = getattr(torch.Tensor, name)

            def wrapper(t, *args, _orig=orig, **kwargs):
                self.count += 1
                return _orig(t, *args, **kwargs)

            setattr(torch.Tensor, name, wrapper)
        return self

    def __exit__(self, *exc):
        for name, orig in self._saved.items():
            setattr(torch.Tensor, name, orig)


def input_check_count(rank, world, *, op, check_inputs):
    """Per call: the shape check's all_gather and host reads, for three calls with one shape
    and one with another. Shapes are unique to this case (the agreed-shape cache lives as
    long as the rank). Returns [(all_gathers, host reads)] per call."""
    heads = 2 * world
    seq = {"ulysses": 5, "ring": 6, "a2a": 7}[op] + 10 * (check_inputs is True)
    out = []
    for s in (seq, seq, seq, seq + 2):
        q, k, v = qkv(b=2, s=s, h=heads, hk=heads, d=3)
        # Only the all_gather is wrapped: P2POp refuses a wrapped isend / irecv (ring).
        with _CollectiveLog(("all_gather",)) as log, _HostReads() as reads:
            if op == "ulysses":
                torch_topo.ulysses_attention(q, k, v, check_inputs=check_inputs)
            elif op == "ring":
                torch_topo.ring_attention(q, k, v, check_inputs=check_inputs)
            else:
                torch_topo.ulysses_all_to_all(q, 2, 1, check_inputs=check_inputs)
        out.append((sum(name == "all_gather" for name, _ in log.calls), reads.count))
    return out


def split_traffic(rank, world, *, heads, kv_heads):
    """Bytes the 2 x 2 layer (Ulysses 2 x zigzag ring 2) sends, forward and backward, against
    the messages torch_topo.ops.sequence_split prices for that split: every all_to_all_single's
    send buffer, every ring step's isend."""
    from torch_topo.mesh import cpu_cluster_doc
    from torch_topo.ops.sequence_split import AttentionShape, sequence_split_candidates
    from torch_topo.plan import resolve_cluster

    b, seq, d = 2, 16, 4
    sp, ring = groups_2x2()
    cfg = torch_topo.UlyssesConfig(sequence_parallel_size=4, ulysses_degree=2, causal=True,
                                   check_inputs=False)
    attn = torch_topo.SequenceParallelAttention(cfg, sp_group=sp, ring_group=ring)
    gen = torch.Generator().manual_seed(5)
    full = [torch.randn(b, seq, h, d, generator=gen) for h in (heads, kv_heads, kv_heads)]
    q, k, v = (torch_topo.shard_sequence(t, 1, sp, ring).clone().requires_grad_()
               for t in full)
    a2a, sends = [], []
    saved = dist.all_to_all_single, dist.batch_isend_irecv

    def all_to_all_single(output, input, *args, **kwargs):
        a2a.append(input.numel() * input.element_size())
        return saved[0](output, input, *args, **kwargs)

    def batch_isend_irecv(ops):
        sends.extend(op.tensor.numel() * op.tensor.element_size() for op in ops
                     if op.op is dist.isend)
        return saved[1](ops)

    dist.all_to_all_single, dist.batch_isend_irecv = all_to_all_single, batch_isend_irecv
    try:
        attn(q, k, v).sum().backward()
    finally:
        dist.all_to_all_single, dist.batch_isend_irecv = saved
    shape = AttentionShape(heads=heads, kv_heads=kv_heads, head_dim=d, seq_len=seq, batch=b,
                           dtype=torch.float32)
    priced = next(c for c in sequence_split_candidates(
        resolve_cluster(cpu_cluster_doc(4)), {"sp": 4}, shape) if c.ulysses == 2)
    m = priced.messages
    want_a2a = sorted([m["qkv"], m["qkv"], m["out"], m["out"]])
    # Forward and backward each pass K/V R - 1 times; dK/dV travel R steps (R = 2).
    want_sends = sorted([m["kv"]] * 2 + [m["dkv"]] * 2)
    if sorted(a2a) != want_a2a or sorted(sends) != want_sends:
        raise AssertionError(f"sent all-to-all {sorted(a2a)}, ring {sorted(sends)}; priced "
                             f"{want_a2a}, {want_sends}")


def all_to_all_roundtrip(rank, world, *, scatter_dim, gather_dim, shape):
    """ulysses_all_to_all against an explicit reference built from every rank's input."""
    gen = torch.Generator().manual_seed(7)
    inputs = [torch.randn(*shape, generator=gen) for _ in range(world)]
    x = inputs[rank].clone().requires_grad_()
    y = torch_topo.ulysses_all_to_all(x, scatter_dim, gather_dim)
    want = torch.cat([inp.chunk(world, scatter_dim)[rank] for inp in inputs], gather_dim)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    # The gradient of sum(y * w) is w routed back: exchange w's pieces the inverse way.
    weights = [torch.randn(*want.shape, generator=gen) for _ in range(world)]
    (y * weights[rank]).sum().backward()
    want_grad = torch.cat([w.chunk(world, gather_dim)[rank] for w in weights], scatter_dim)
    torch.testing.assert_close(x.grad, want_grad, rtol=0, atol=0)


def zigzag_helpers(rank, world, *, seq):
    """zigzag_positions, shard and unshard against the written-out layout."""
    x = torch.arange(2 * seq * 3, dtype=torch.float32).view(2, seq, 3)
    pos = expected_positions("zigzag", seq, rank, world)
    torch.testing.assert_close(torch_topo.zigzag_positions(seq), pos, rtol=0, atol=0)
    shard = torch_topo.zigzag_shard(x, 1)
    torch.testing.assert_close(shard, x[:, pos], rtol=0, atol=0)
    torch.testing.assert_close(torch_topo.zigzag_unshard(shard, 1), x, rtol=0, atol=0)


def sequence_roundtrip_2x2(rank, world, *, balance, seq):
    sp, ring = groups_2x2()
    x = torch.randn(2, seq, 3, generator=torch.Generator().manual_seed(3))
    pos = expected_positions("2d-" + ("zigzag" if balance == "zigzag" else "contiguous"), seq,
                             rank, world)
    shard = torch_topo.shard_sequence(x, 1, sp, ring, balance=balance)
    torch.testing.assert_close(shard, x[:, pos], rtol=0, atol=0)
    back = torch_topo.unshard_sequence(shard, 1, sp, ring, balance=balance)
    torch.testing.assert_close(back, x, rtol=0, atol=0)
