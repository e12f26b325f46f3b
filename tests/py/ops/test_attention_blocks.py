# SPDX-License-Identifier: Apache-2.0
"""The ring's block kernels without a GPU: which kernel each dtype/shape/device/GPU gets, the
fused ops' calls and output shapes on meta tensors (the efficient LSE padding included), and
the explicit fp32 path against torch's CPU flash attention and autograd."""

import pytest
import torch
import torch.nn.functional as F

from torch_topo.ops.attention_blocks import (
    _cudnn_schemas_match,
    block_backward,
    block_forward,
    fold_kv,
    select_block_kernel,
)

BF16, FP16, FP32, FP64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
# torch 2.4 registers meta kernels only for the fused backwards (FakeTensorMode covers the rest).
needs_meta_forwards = pytest.mark.skipif(
    tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 5),
    reason="torch < 2.5 has no meta kernels for the fused attention forwards")

# (device, dtype, head_dim, capability, flash_max, expected, why)
SELECTION = [
    ("cpu", BF16, 128, None, (12, 1), "cpu_flash", "CPU: torch's CPU flash op"),
    ("cpu", FP64, 7, None, (12, 1), "cpu_flash", "CPU takes any dtype / head_dim"),
    ("meta", BF16, 128, None, (12, 1), "math", "no fused kernel off CUDA/CPU"),
    ("cuda", BF16, 128, None, (12, 1), "math", "capability unknown"),
    ("cuda", BF16, 128, (9, 0), (12, 1), "flash", "H100/H200"),
    ("cuda", FP16, 64, (8, 0), (12, 1), "flash", "A100"),
    ("cuda", BF16, 256, (9, 0), (12, 1), "flash", "flash's largest head_dim"),
    ("cuda", BF16, 264, (9, 0), (12, 1), "efficient", "head_dim above flash's 256"),
    ("cuda", BF16, 120, (8, 0), (12, 1), "flash", "multiple of 8"),
    ("cuda", BF16, 100, (8, 0), (12, 1), "math", "not 16-byte aligned for either"),
    ("cuda", FP16, 256, (8, 6), (12, 1), "efficient", "sm86 flash backward stops at 192"),
    ("cuda", FP16, 192, (8, 9), (12, 1), "flash", "sm89 flash backward up to 192"),
    ("cuda", FP16, 64, (7, 5), (12, 1), "efficient", "T4: no flash below sm80"),
    ("cuda", BF16, 64, (7, 5), (12, 1), "math", "no bf16 kernels below sm80"),
    ("cuda", FP32, 128, (9, 0), (12, 1), "efficient", "fp32: efficient only"),
    ("cuda", FP32, 6, (9, 0), (12, 1), "math", "fp32 head_dim not a multiple of 4"),
    ("cuda", FP32, 4, (9, 0), (12, 1), "efficient", "fp32 head_dim multiple of 4"),
    ("cuda", FP64, 64, (9, 0), (12, 1), "math", "fp64: no fused kernel"),
    ("cuda", FP16, 64, (3, 7), (12, 1), "math", "older than sm50"),
    ("cuda", BF16, 128, (10, 0), (9, 0), "efficient", "torch < 2.7: flash stops at sm90"),
    ("cuda", BF16, 128, (10, 0), (12, 1), "flash", "torch >= 2.7: Blackwell"),
]


@pytest.mark.parametrize("device,dtype,head_dim,cap,flash_max,expected,why", SELECTION)
def test_kernel_selection(device, dtype, head_dim, cap, flash_max, expected, why):
    got = select_block_kernel(device, dtype, head_dim, cap, flash_max_capability=flash_max)
    assert got == expected, why


# (torch's SDPA choice, GQA, cuDNN ops callable, expected, why) on an H200 with bf16, d128
FOLLOWS_TORCH = [
    ("cudnn", False, True, "cudnn", "SDPA runs cuDNN here: so does the ring"),
    ("cudnn", True, True, "flash", "GQA: cuDNN takes it only in some releases, flash always"),
    ("cudnn", False, False, "flash", "cuDNN ops with another schema are never called"),
    ("flash", False, True, "flash", "SDPA runs flash"),
    ("efficient", False, True, "flash", "our own rules below cuDNN (sdpa_kernel may narrow)"),
    (None, False, True, "flash", "no SDPA choice known"),
]


@pytest.mark.parametrize("choice,gqa,usable,expected,why", FOLLOWS_TORCH)
def test_kernel_selection_follows_torchs_cudnn_choice(choice, gqa, usable, expected, why):
    got = select_block_kernel("cuda", BF16, 128, (9, 0), torch_choice=choice, gqa=gqa,
                              cudnn_usable=usable)
    assert got == expected, why


@pytest.mark.skipif(tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 11),
                    reason="cuDNN schemas read from torch 2.11, 2.13 and 2.14")
def test_cudnn_schemas_are_the_ones_called():
    assert _cudnn_schemas_match()


def test_sdpa_choice_is_asked_once_per_shape_and_switches(monkeypatch):
    """torch's choice is remembered per inputs and SDPA switches: asked again when the shape,
    a switch or the priority order (what sdpa_kernel sets) changes, never for a repeat."""
    from torch_topo.ops import attention_blocks

    calls = []

    def fake_choice(q, k, v):
        calls.append(tuple(q.shape))
        return 1  # SDPBackend.FLASH_ATTENTION

    monkeypatch.setattr(torch, "_fused_sdp_choice", fake_choice)
    monkeypatch.setattr(attention_blocks, "_sdpa_choices", {})
    q = torch.zeros(1, 2, 8, 16)
    assert attention_blocks.sdpa_choice(q) == "flash"
    assert attention_blocks.sdpa_choice(q) == "flash"
    assert calls == [(1, 2, 8, 16)]
    attention_blocks.sdpa_choice(torch.zeros(1, 2, 9, 16))
    assert len(calls) == 2
    enabled = torch.backends.cuda.flash_sdp_enabled()
    try:
        torch.backends.cuda.enable_flash_sdp(not enabled)
        attention_blocks.sdpa_choice(q)
    finally:
        torch.backends.cuda.enable_flash_sdp(enabled)
    assert len(calls) == 3
    if hasattr(torch._C, "_set_sdp_priority_order"):  # sdpa_kernel(..., set_priority=True)
        order = torch._C._get_sdp_priority_order()
        try:
            torch._C._set_sdp_priority_order(list(reversed(order)))
            attention_blocks.sdpa_choice(q)
        finally:
            torch._C._set_sdp_priority_order(order)
        assert len(calls) == 4


def test_cudnn_choice_needs_cuda():
    assert select_block_kernel("cpu", BF16, 128, None, torch_choice="cudnn") == "cpu_flash"
    assert select_block_kernel("cuda", BF16, 128, None, torch_choice="cudnn") == "math"
    assert select_block_kernel("cuda", BF16, 128, (9, 0), rocm=True,
                               torch_choice="cudnn") == "math"


def test_kernel_selection_rocm_uses_math():
    assert select_block_kernel("cuda", BF16, 128, (9, 4), rocm=True) == "math"


def _meta(*shape, dtype):
    return torch.empty(*shape, dtype=dtype, device="meta")


cudnn_ops = pytest.mark.skipif(not _cudnn_schemas_match(),
                               reason="this torch's cuDNN attention ops have another schema")


@needs_meta_forwards
@pytest.mark.parametrize("kernel,dtype", [
    ("flash", BF16), ("flash", FP16), ("efficient", FP32), ("efficient", BF16),
    pytest.param("cudnn", BF16, marks=cudnn_ops), pytest.param("cudnn", FP16, marks=cudnn_ops)])
@pytest.mark.parametrize("sq,sk,causal", [(100, 100, True), (50, 100, False),
                                          (100, 50, False), (37, 37, False)])
def test_fused_calls_on_meta(kernel, dtype, sq, sk, causal):
    """The ops accept our arguments; LSE is [b, h, sq] fp32 whatever the kernel pads; the
    backward takes the merged LSE of a zigzag half (a strided slice) and returns dK/dV with
    the K/V head count (GQA: flash natively, efficient and cuDNN through expand and sum)."""
    b, h, hk, d = 2, 8, 2, 64
    q, dout = _meta(b, h, sq, d, dtype=dtype), _meta(b, h, sq, d, dtype=dtype)
    k, v = _meta(b, hk, sk, d, dtype=dtype), _meta(b, hk, sk, d, dtype=dtype)
    res = block_forward(q, k, v, causal, 0.125, kernel)
    assert res.out.shape == (b, h, sq, d) and res.out.dtype == dtype
    assert res.lse.shape == (b, h, sq) and res.lse.dtype == FP32
    merged_lse = _meta(b, h, 2 * sq, dtype=FP32)[..., sq:]  # second half of a merged LSE
    dq, dk, dv = block_backward(dout, q, k, v, res.out, merged_lse, causal, 0.125, res.rng,
                                kernel)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape


@needs_meta_forwards
def test_efficient_lse_is_padded_by_the_op_and_sliced_here():
    q = _meta(1, 2, 33, 8, dtype=FP32)
    raw = torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, True)[1]
    assert raw.shape[-1] == 64  # ceil(33 / 32) * 32: the layout its backward indexes
    assert block_forward(q, q, q, False, 0.3, "efficient").lse.shape[-1] == 33


def test_causal_needs_a_square_block():
    q, k = torch.zeros(1, 1, 4, 8), torch.zeros(1, 1, 6, 8)
    with pytest.raises(ValueError, match=r"causal needs a square block: got sq=4, sk=6"):
        block_forward(q, k, k, True, 1.0, "math")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,tol", [(FP32, 1e-5), (FP64, 1e-10)])
def test_math_path_equals_cpu_flash_and_autograd(causal, dtype, tol):
    """The explicit path (CUDA's last resort) against torch's CPU flash op and against
    autograd through scaled_dot_product_attention, GQA included."""
    gen = torch.Generator().manual_seed(3)
    q, dout = (torch.randn(2, 4, 9, 8, generator=gen, dtype=dtype) for _ in range(2))
    k, v = (torch.randn(2, 2, 9, 8, generator=gen, dtype=dtype) for _ in range(2))
    m = block_forward(q, k, v, causal, 0.3, "math")
    c = block_forward(q, k, v, causal, 0.3, "cpu_flash")
    torch.testing.assert_close(m.out, c.out, rtol=tol, atol=tol)
    torch.testing.assert_close(m.lse, c.lse.to(m.lse.dtype), rtol=tol, atol=tol)
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=0.3,
                                         enable_gqa=True)
    ref.backward(dout)
    got = block_backward(dout, q, k, v, m.out, m.lse, causal, 0.3, (), "math")
    for name, g, want in zip("qkv", got, (qr.grad, kr.grad, vr.grad), strict=True):
        torch.testing.assert_close(g.to(dtype), want, rtol=tol, atol=tol,
                                   msg=lambda s, n=name: f"d{n}: {s}")


def test_fold_kv_sums_each_group_in_fp32():
    g = torch.full((1, 4, 1, 1), 256.0, dtype=BF16)
    g[:, 1::2] = 1.0  # heads (0, 1) and (2, 3) share K/V heads 0 and 1
    folded = fold_kv(g, 2)
    assert folded.dtype == FP32 and folded.flatten().tolist() == [257.0, 257.0]
    assert fold_kv(g, 4) is g
