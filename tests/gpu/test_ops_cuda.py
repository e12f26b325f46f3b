# SPDX-License-Identifier: Apache-2.0
"""On a GPU: the Ulysses pack/unpack kernels against the CPU path; every ring block kernel
(cuDNN, flash, efficient, math) against the fp32 math path, the ring's choice against SDPA's, forward and backward, causal, GQA and the
zigzag half-blocks; ring_attention at world size 1 against SDPA, and its peak memory against
flash's (run by scripts/gpu_check.sh; skipped without CUDA)."""

import pytest
import torch

from torch_topo import _C
from torch_topo.bench.cuda_memory import peak_bytes

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not _C.cuda_built, reason="torch_topo built without CUDA"),
]

# (shapes, scatter_dim, world, replicate, transpose): the Ulysses exchanges on [b, s, h, d]
# (one launch: heads side by side) with MHA, GQA, replicated MQA heads, strided gradients
# (transposed), odd head dims (narrower words), five tensors (ATen path), other layouts (ATen).
PACK_CASES = [
    ([(2, 5, 8, 16), (2, 5, 8, 16), (2, 5, 8, 16)], 2, 4, [False] * 3, False),
    ([(1, 7, 6, 8), (1, 7, 3, 8), (1, 7, 3, 8)], 2, 3, [False] * 3, False),
    ([(2, 3, 8, 4), (2, 3, 2, 4), (2, 3, 2, 4)], 2, 4, [False, True, True], False),
    ([(1, 12, 2, 8), (1, 12, 1, 8), (1, 12, 1, 8)], 1, 4, [False] * 3, True),
    ([(2, 6, 3, 3), (2, 6, 3, 3)], 1, 3, [False] * 2, False),
    ([(1, 4, 4, 8)] * 5, 2, 2, [False] * 5, False),
    ([(2, 12, 4, 8)], 1, 4, [False], False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int8])
@pytest.mark.parametrize("shapes,scatter_dim,world,replicate,transpose", PACK_CASES)
def test_cuda_pack_unpack_equal_cpu(shapes, scatter_dim, world, replicate, transpose, dtype):
    gen = torch.Generator().manual_seed(0)
    cpu = [(torch.randn(*s, generator=gen) * 10).to(dtype) for s in shapes]
    if transpose:  # same values, [b, h, s, d] memory, as gradients of transposed views come
        cpu = [t.transpose(1, 2).contiguous().transpose(1, 2) for t in cpu]
    cat_dim = 2
    buf_cpu = _C.ulysses_pack(cpu, scatter_dim, cat_dim, world, replicate)
    buf_gpu = _C.ulysses_pack([t.cuda() for t in cpu], scatter_dim, cat_dim, world, replicate)
    assert buf_gpu.is_cuda
    torch.testing.assert_close(buf_gpu.cpu(), buf_cpu, rtol=0, atol=0)
    sizes = [_C.ulysses_slice_shape(list(s), scatter_dim, world, r)[cat_dim]
             for s, r in zip(shapes, replicate, strict=True)]
    gather_dim = 1 if scatter_dim != 1 else 2
    for a, b in zip(_C.ulysses_unpack(buf_gpu, sizes, cat_dim, gather_dim),
                    _C.ulysses_unpack(buf_cpu, sizes, cat_dim, gather_dim), strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)


def test_cuda_replica_reduce_equals_cpu():
    buf = torch.randn(4, 2, 3, 1, 5)
    got = _C.ulysses_unpack(buf.cuda(), [1], 2, 2, [2])[0].cpu()
    torch.testing.assert_close(got, _C.ulysses_unpack(buf, [1], 2, 2, [2])[0])


# (kernel, dtype, tolerance vs the fp32 math path on the same rounded inputs; fp32 allows for
# the efficient kernel's TF32 tensor-core products on sm80+)
KERNELS = [("cudnn", torch.bfloat16, 3e-2), ("cudnn", torch.float16, 1e-2),
           ("flash", torch.bfloat16, 3e-2), ("flash", torch.float16, 1e-2),
           ("efficient", torch.bfloat16, 3e-2), ("efficient", torch.float32, 2e-3),
           ("math", torch.bfloat16, 3e-2)]


def _qkv(b, h, hk, s, d, dtype, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, dout = (torch.randn(b, h, s, d, device="cuda", generator=gen).to(dtype)
               for _ in range(2))
    k, v = (torch.randn(b, hk, s, d, device="cuda", generator=gen).to(dtype) for _ in range(2))
    return q, k, v, dout


def _blocks_then_grads(q, k, v, dout, blocks, kernel):
    """Forward of several (query rows, key rows, causal) blocks merged through the LSE, then
    each block's backward from the merged out and LSE (what the ring does on one rank)."""
    from torch_topo.ops.attention_blocks import block_backward, block_forward
    from torch_topo.ops.utils import merge_block

    out = lse = rng = None
    for qs, ks, causal in blocks:
        r = block_forward(q[:, :, qs], k[:, :, ks], v[:, :, ks], causal, 0.1, kernel)
        if out is None:
            out, lse, rng = r.out.float(), r.lse.float(), r.rng
        else:
            merge_block(out[:, :, qs], lse[:, :, qs], r.out, r.lse)
    out_q = out.to(q.dtype)
    dq, dk, dv = (torch.zeros(t.shape, device="cuda") for t in (q, k, v))
    for qs, ks, causal in blocks:
        g = block_backward(dout[:, :, qs], q[:, :, qs], k[:, :, ks], v[:, :, ks],
                           out_q[:, :, qs], lse[:, :, qs], causal, 0.1, rng, kernel)
        dq[:, :, qs] += g[0]
        dk[:, :, ks] += g[1]
        dv[:, :, ks] += g[2]
    return out_q, lse, dq, dk, dv


def _check_against_math(kernel, dtype, tol, blocks, kv_heads):
    q, k, v, dout = _qkv(2, 8, kv_heads, 200, 64, dtype)  # 200, 100: the efficient LSE pads
    got = _blocks_then_grads(q, k, v, dout, blocks, kernel)
    want = _blocks_then_grads(*(t.float() for t in (q, k, v, dout)), blocks, "math")
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want, strict=True):
        torch.testing.assert_close(a.float(), b, rtol=tol, atol=tol,
                                   msg=lambda m, n=name: f"{kernel} {dtype} {n}: {m}")


@pytest.mark.parametrize("kernel,dtype,tol", KERNELS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_heads", [8, 2])
def test_block_kernel_matches_fp32_math(kernel, dtype, tol, causal, kv_heads):
    every = slice(None)
    _check_against_math(kernel, dtype, tol, [(every, every, causal)], kv_heads)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_ring_block_kernel_is_sdpas_when_sdpa_runs_cudnn(dtype, head_dim):
    """Where a user's scaled_dot_product_attention would run cuDNN, the ring's blocks do too
    (anything else lost to it on an H200 by 2x); with GQA they use flash."""
    from torch_topo.ops.attention_blocks import sdpa_choice, select_for

    q = _qkv(1, 32, 32, 4096, head_dim, dtype)[0]
    choice = sdpa_choice(q)
    print(f"\n{dtype} d{head_dim}: SDPA runs {choice}, the ring {select_for(q)}")
    assert (select_for(q) == "cudnn") == (choice == "cudnn")
    if choice == "cudnn":
        assert select_for(q, kv_heads=8) == "flash"


@pytest.mark.parametrize("kernel,dtype,tol", KERNELS)
def test_zigzag_half_blocks_match_fp32_math(kernel, dtype, tol):
    """Rank r's three kinds of zigzag blocks on one device: its own block (causal, square),
    a lower rank's block (every query row, the first key half), a higher rank's block (the
    second query half, every key row); the backward slices the merged LSE's second half."""
    every, first, second = slice(None), slice(0, 100), slice(100, None)
    # Keys 0-199 stand for the local block; the other blocks reuse them as their keys, which
    # changes nothing for the slicing and merging under test.
    _check_against_math(kernel, dtype, tol, [(every, every, True), (every, first, False),
                                             (second, every, False)], 2)


@pytest.fixture
def ring_as_rank0(monkeypatch):
    """ring_as_rank0(world): the ring module playing rank 0 of `world` ranks on this GPU, its
    exchanges done by _DelayedRing (a device copy after an optional delay), no process group."""
    import importlib

    ring = importlib.import_module("torch_topo.ops.ring_attention")

    def play(world):
        monkeypatch.setattr(ring, "RingExchange", _DelayedRing)
        monkeypatch.setattr(ring, "group_rank_size", lambda group: (0, world))
        _DelayedRing.cycles = 0
        return ring

    return play


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 3e-2), (torch.float32, 2e-3)])
def test_ring_attention_world_one_matches_sdpa(ring_as_rank0, dtype, tol):
    ring = ring_as_rank0(1)
    q, k, v, dout = (t.transpose(1, 2).contiguous() for t in _qkv(2, 8, 2, 512, 64, dtype))
    ours = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = [t.float().requires_grad_() for t in (q, k, v)]
    out = ring.RingAttentionFunction.apply(*ours, None, True, 64**-0.5, "none")[0]
    out.backward(dout)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2) for t in ref), is_causal=True, enable_gqa=True,
        scale=64**-0.5).transpose(1, 2)
    want.backward(dout.float())
    torch.testing.assert_close(out.float(), want, rtol=tol, atol=tol)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a.grad.float(), b.grad, rtol=tol, atol=tol)


def test_ring_forward_peak_memory_s16384_under_twice_flash(ring_as_rank0):
    """b1 h32 s16384 d128 bf16 causal: the ring (world 1) may hold at most twice what torch's
    flash forward holds beyond the inputs (the old fp32 block path needed 32 GiB here)."""
    ring = ring_as_rank0(1)
    q, k, v, _ = _qkv(1, 32, 32, 16384, 128, torch.bfloat16)
    q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    flash = peak_bytes(lambda: torch.ops.aten._scaled_dot_product_flash_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, True))
    ours = peak_bytes(lambda: ring.RingAttentionFunction.apply(q, k, v, None, True, 0.088,
                                                                "none"))
    print(f"\npeak beyond inputs, s16384: flash {flash / 2**20:.0f} MiB, ring "
          f"{ours / 2**20:.0f} MiB")
    assert ours <= 2 * flash


class _DelayedRing:
    """Stands in for RingExchange on one GPU: each step's 'transfer' is a fixed-length delay
    kernel plus the copy, on a side stream, the way NCCL runs point-to-point on its own
    stream; wait() makes the compute stream wait for it (no host sync)."""

    cycles = 0

    def __init__(self, group, where: str = "") -> None:
        self.stream, self.done = torch.cuda.Stream(), None

    def post(self, send, recv, tag=0) -> None:
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(self.cycles)
            recv.copy_(send)
        send.record_stream(self.stream)
        recv.record_stream(self.stream)
        self.done = torch.cuda.Event()
        self.done.record(self.stream)

    def wait(self) -> None:
        if self.done is not None:
            torch.cuda.current_stream().wait_event(self.done)
            self.done = None


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_ring_hides_the_exchange_behind_block_compute(ring_as_rank0, direction):
    """Rank 0 of a 4-rank ring on one GPU, each exchange replaced by a delay of half a block's
    compute: overlapped, the exchanges hide behind the blocks (the backward's last dK/dV send
    has nothing left to hide behind), so the ring takes its compute time plus about one delay,
    not compute plus every exchange."""
    import statistics

    world = 4
    ring = ring_as_rank0(world)
    q, k, v, dout = (t.transpose(1, 2).contiguous() for t in _qkv(1, 16, 16, 2048, 128,
                                                                     torch.bfloat16))
    leaves = [t.requires_grad_() for t in (q, k, v)]

    def once() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if direction == "forward":
            start.record()
            ring.RingAttentionFunction.apply(*leaves, None, False, 0.088, "none")
            end.record()
        else:
            out = ring.RingAttentionFunction.apply(*leaves, None, False, 0.088, "none")[0]
            start.record()
            out.backward(dout)
            end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def median_ms(fn) -> float:
        fn()
        return statistics.median(fn() for _ in range(5))

    def sleep_ms(cycles) -> float:
        def run():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)
        return median_ms(run)

    _DelayedRing.cycles = 0
    t_compute = median_ms(once)
    _DelayedRing.cycles = int(1_000_000 * 0.5 * (t_compute / world) / sleep_ms(1_000_000))
    sends = world - 1 if direction == "forward" else world  # the dK/dV chain in backward
    t_exchange = sends * sleep_ms(_DelayedRing.cycles)
    t_both = median_ms(once)
    print(f"\nring {direction}, {world} steps: compute {t_compute:.2f} ms, exchanges "
          f"{t_exchange:.2f} ms, together {t_both:.2f} ms")
    assert t_both <= t_compute + 0.5 * t_exchange + 0.3
