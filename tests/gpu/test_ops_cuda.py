# SPDX-License-Identifier: Apache-2.0
"""CUDA pack/unpack kernels of the Ulysses exchange and the ring block kernel on a GPU, against
the CPU path (run by scripts/gpu_check.sh; skipped without CUDA)."""

import pytest
import torch

from torch_topo import _C

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not _C.cuda_built, reason="torch_topo built without CUDA"),
]

# (shapes, scatter_dim, world, replicate): Q/K/V with MHA, GQA and replicated MQA heads.
PACK_CASES = [
    ([(2, 5, 8, 16), (2, 5, 8, 16), (2, 5, 8, 16)], 2, 4, [False, False, False]),
    ([(1, 7, 6, 8), (1, 7, 3, 8), (1, 7, 3, 8)], 2, 3, [False, False, False]),
    ([(2, 3, 8, 4), (2, 3, 2, 4), (2, 3, 2, 4)], 2, 4, [False, True, True]),
    ([(2, 12, 4, 8)], 1, 4, [False]),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int8])
@pytest.mark.parametrize("shapes,scatter_dim,world,replicate", PACK_CASES)
def test_cuda_pack_unpack_equal_cpu(shapes, scatter_dim, world, replicate, dtype):
    gen = torch.Generator().manual_seed(0)
    cpu = [(torch.randn(*s, generator=gen) * 10).to(dtype) for s in shapes]
    buf_cpu = _C.ulysses_pack(cpu, scatter_dim, world, replicate)
    buf_gpu = _C.ulysses_pack([t.cuda() for t in cpu], scatter_dim, world, replicate)
    assert buf_gpu.is_cuda
    torch.testing.assert_close(buf_gpu.cpu(), buf_cpu, rtol=0, atol=0)
    slices = [_C.ulysses_slice_shape(list(s), scatter_dim, world, r)
              for s, r in zip(shapes, replicate, strict=False)]
    gather_dim = 1 if scatter_dim != 1 else 2
    for a, b in zip(_C.ulysses_unpack(buf_gpu, slices, gather_dim, world),
                    _C.ulysses_unpack(buf_cpu, slices, gather_dim, world), strict=False):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0)


def test_cuda_replica_reduce_equals_cpu():
    buf = torch.randn(4 * 2 * 3 * 5)
    shape = [[2, 3, 1, 5]]
    got = _C.ulysses_unpack(buf.cuda(), shape, 2, 4, [2])[0].cpu()
    torch.testing.assert_close(got, _C.ulysses_unpack(buf, shape, 2, 4, [2])[0])


@pytest.mark.parametrize("causal", [False, True])
def test_cuda_block_kernel_equals_cpu_flash(causal):
    from torch_topo.ops.ring_attention import block_backward, block_forward

    gen = torch.Generator().manual_seed(1)
    q, dout = (torch.randn(2, 4, 33, 16, generator=gen) for _ in range(2))
    k, v = (torch.randn(2, 2, 33, 16, generator=gen) for _ in range(2))
    out, lse = block_forward(q, k, v, causal, 0.25)
    g_out, g_lse = block_forward(q.cuda(), k.cuda(), v.cuda(), causal, 0.25)
    torch.testing.assert_close(g_out.cpu(), out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(g_lse.cpu(), lse, rtol=1e-4, atol=1e-4)
    grads = block_backward(dout, q, k, v, out, lse, causal, 0.25)
    g_grads = block_backward(dout.cuda(), q.cuda(), k.cuda(), v.cuda(), g_out, g_lse, causal,
                             0.25)
    for a, b in zip(g_grads, grads, strict=False):
        torch.testing.assert_close(a.cpu().float(), b.float(), rtol=1e-4, atol=1e-4)
