# SPDX-License-Identifier: Apache-2.0
"""Attention on one ring block with its log-sum-exp (LSE), through torch's fused kernels: the
choice of kernel per device, dtype, head_dim and GPU (a pure function), the calls, and the
explicit fp32 fallback. Layout [batch, heads, seq, head_dim]; every kernel accepts strided
views whose last dim is contiguous.

Facts these calls rely on (schemas read from torch 2.4.0, 2.5.0, 2.11.0 and 2.14.1; cuDNN's
from 2.11.0, 2.13.0 and 2.14.1, and checked at run time):
- `aten::_scaled_dot_product_flash_attention` and `_efficient_attention` and their backwards
  have the same arguments in all four; flash's outputs 7-8 are named `philox_seed,
  philox_offset` up to 2.5 and `rng_state, unused` later, and 2.11 adds a `.quantized`
  overload (so the default overload is called by name-free positional Python calls).
- The LSE is fp32: flash [b, h, Sq]; efficient [b, h, ceil(Sq / 32) * 32] on CUDA (its meta
  kernel says so too; ROCm returns [b, h, Sq]): sliced to Sq here, padded again for its
  backward, which indexes the padded layout.
- Flash needs fp16/bf16, sm80+, head_dim a multiple of 8 and at most 256 (its backward above
  192 only on sm80/sm90), and takes GQA (kv heads dividing q heads) itself. The efficient
  kernel has no GQA: K/V are expanded and dK/dV summed per group.
- With causal and Sq != Sk, flash aligns the mask bottom-right and efficient top-left: the
  ring only sets causal on square diagonal blocks, and block_forward refuses anything else.
- Meta kernels exist for both forwards from 2.5 (2.4 has only the backwards').
- `aten::_scaled_dot_product_cudnn_attention` returns the LSE as [b, h, Sq, 1] fp32 and its
  output in [b, Sq, h, d] memory order; its backward takes that 4-D LSE (contiguous), the
  philox pair and undefined bias / cumulative-length tensors. On an H200 (torch 2.11, bf16,
  s8192, h32, d128, causal) it ran the forward in 0.89 ms and the backward in 2.56 ms against
  flash's 1.73 and 4.81 ms, and SDPA picks it there: the ring uses it wherever torch's own
  SDPA would (`torch._fused_sdp_choice`, which knows this build's cuDNN limits and honours
  `torch.nn.attention.sdpa_kernel`), so a ring block is never slower than the attention a
  user would call instead.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Literal, NamedTuple

import torch

__all__ = [
    "BlockResult",
    "Kernel",
    "block_backward",
    "block_forward",
    "select_block_kernel",
    "select_for",
]

Kernel = Literal["cudnn", "flash", "efficient", "cpu_flash", "math"]

_EFFICIENT_LSE_ALIGN = 32
_FLASH_MAX_HEAD_DIM = 256
_FLASH_BWD_MAX_HEAD_DIM_SM86_89 = 192
_HALF_TYPES = (torch.float16, torch.bfloat16)
_CUDNN_FORWARD_ARGS = ("query", "key", "value", "attn_bias", "compute_log_sumexp", "dropout_p",
                       "is_causal", "return_debug_mask", "scale")
_CUDNN_BACKWARD_ARGS = ("grad_out", "query", "key", "value", "out", "logsumexp", "philox_seed",
                        "philox_offset", "attn_bias", "cum_seq_q", "cum_seq_k", "max_q", "max_k",
                        "dropout_p", "is_causal", "scale")
_warned: set[str] = set()


@functools.cache
def _flash_max_capability() -> tuple[int, int]:
    # torch 2.7 extended flash attention from sm80-sm90 to sm80-sm121 (Blackwell).
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return (12, 1) if (major, minor) >= (2, 7) else (9, 0)


@functools.cache  # the schemas are fixed for the process; reading them costs ~12 us a call
def _cudnn_schemas_match() -> bool:
    """Whether this torch's cuDNN attention ops take the arguments block_forward/backward pass
    (their schema changed in 2.5; a future change turns the kernel off rather than failing)."""
    try:
        ops = (torch.ops.aten._scaled_dot_product_cudnn_attention.default,
               torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default)
    except (AttributeError, RuntimeError):
        return False
    names = [tuple(a.name for a in op._schema.arguments) for op in ops]
    return names == [_CUDNN_FORWARD_ARGS, _CUDNN_BACKWARD_ARGS]


_SDP_FLAGS = ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled",
              "cudnn_sdp_enabled")
_sdpa_choices: dict[tuple, str | None] = {}


def sdpa_choice(q: torch.Tensor) -> str | None:
    """The fused kernel torch's scaled_dot_product_attention would run for self-attention on
    q ([b, h, s, d], CUDA) with a backward: "cudnn", "flash", "efficient", "math" or None.

    Remembered per shape, strides, dtype, device, the SDPA backend switches and their priority
    order (what `torch.nn.attention.sdpa_kernel` sets): a ring calls this once per forward, and
    torch's check is host work done before the first kernel is queued."""
    flags = tuple(getattr(torch.backends.cuda, f, lambda: None)() for f in _SDP_FLAGS)
    priority = getattr(torch._C, "_get_sdp_priority_order", lambda: None)()  # from 2.5
    key = (tuple(q.shape), q.stride(), q.dtype, q.device, flags,
           tuple(priority) if priority is not None else None)
    if key in _sdpa_choices:
        return _sdpa_choices[key]
    from torch.nn.attention import SDPBackend

    probe = q.detach().requires_grad_()  # the choice must allow a backward
    try:
        choice = torch._fused_sdp_choice(probe, probe, probe)
    except RuntimeError:  # no kernel at all for these inputs
        choice = None
    names = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
             SDPBackend.EFFICIENT_ATTENTION: "efficient"}
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        names[SDPBackend.CUDNN_ATTENTION] = "cudnn"
    name = next((n for b, n in names.items() if int(b.value) == choice), None)
    if len(_sdpa_choices) >= 1024:  # bounded: shapes vary without end in some programs
        _sdpa_choices.clear()
    _sdpa_choices[key] = name
    return name


def select_block_kernel(device_type: str, dtype: torch.dtype, head_dim: int,
                        capability: tuple[int, int] | None, *, rocm: bool = False,
                        flash_max_capability: tuple[int, int] = (12, 1),
                        torch_choice: str | None = None, gqa: bool = False,
                        cudnn_usable: bool = True) -> Kernel:
    """The kernel for one attention block (forward and backward use the same one).

    Args:
        device_type: "cpu", "cuda", "meta", ...
        dtype: the q/k/v dtype.
        head_dim: last dim of q/k/v.
        capability: (major, minor) of the CUDA device, None elsewhere.
        rocm: a ROCm build (its fused kernels have other limits: not used here).
        flash_max_capability: the newest GPU this torch's flash kernel supports.
        torch_choice: what torch's SDPA picks for these inputs (sdpa_choice), if known.
        gqa: K/V carry fewer heads than Q.
        cudnn_usable: this torch's cuDNN attention ops have the schemas called here.
    Returns:
        "cpu_flash" on CPU; on CUDA "cudnn" where torch's SDPA picks it (without GQA, which
        cuDNN supports only in some releases), else "flash" for fp16/bf16 where it applies,
        else "efficient" where it applies; "math" (explicit fp32, materialises the scores)
        otherwise.
    """
    if device_type == "cpu":
        return "cpu_flash"
    if device_type != "cuda" or capability is None or rocm:
        return "math"
    if torch_choice == "cudnn" and cudnn_usable and not gqa:
        return "cudnn"
    if (dtype in _HALF_TYPES and (8, 0) <= capability <= flash_max_capability
            and head_dim % 8 == 0 and head_dim <= _FLASH_MAX_HEAD_DIM
            and not (capability in ((8, 6), (8, 9))
                     and head_dim > _FLASH_BWD_MAX_HEAD_DIM_SM86_89)):
        return "flash"
    # Memory-efficient attention: fp32/fp16 from sm50, bf16 from sm80; 16-byte aligned rows.
    aligned = head_dim > 0 and head_dim % (4 if dtype == torch.float32 else 8) == 0
    if aligned and capability >= (5, 0) and (
            dtype in (torch.float32, torch.float16)
            or (dtype == torch.bfloat16 and capability >= (8, 0))):
        return "efficient"
    return "math"


def select_for(q: torch.Tensor, kv_heads: int | None = None) -> Kernel:
    """select_block_kernel for q ([b, h, s, d]) on its device, with K/V of kv_heads heads
    (default: as many as q), warning once per reason when it falls to math."""
    cuda = q.device.type == "cuda"
    cap = torch.cuda.get_device_capability(q.device) if cuda else None
    kernel = select_block_kernel(q.device.type, q.dtype, q.shape[-1], cap,
                                 rocm=torch.version.hip is not None,
                                 flash_max_capability=_flash_max_capability(),
                                 torch_choice=sdpa_choice(q) if cuda else None,
                                 gqa=kv_heads not in (None, q.shape[1]),
                                 cudnn_usable=_cudnn_schemas_match())
    if kernel == "math" and q.device.type == "cuda":
        key = f"{q.dtype}/{q.shape[-1]}/{cap}"
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"ring_attention: no fused attention kernel for dtype {q.dtype}, "
                          f"head_dim {q.shape[-1]} on sm{cap[0]}{cap[1]}: using the explicit "
                          "fp32 path, which holds a [s, s] score matrix per head (slow, large); "
                          "use fp16/bf16 with head_dim a multiple of 8 for flash attention",
                          stacklevel=3)
    return kernel


class BlockResult(NamedTuple):
    out: torch.Tensor
    """[b, h, sq, d] in q's dtype."""
    lse: torch.Tensor
    """[b, h, sq] fp32 (fp64 for fp64 inputs)."""
    rng: tuple
    """Kernel state its backward takes (no dropout here, but the schema wants it)."""


def expand_kv(t: torch.Tensor, q_heads: int) -> torch.Tensor:
    """[b, kv_heads, s, d] -> [b, q_heads, s, d] (GQA: query head i uses K/V head i // g)."""
    groups = q_heads // t.shape[1]
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)


def fold_kv(grad: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """Inverse of expand_kv for gradients: each K/V head's query group summed in fp32."""
    b, h, s, d = grad.shape
    if h == kv_heads:
        return grad
    acc = torch.float64 if grad.dtype == torch.float64 else torch.float32
    return grad.view(b, kv_heads, h // kv_heads, s, d).sum(2, dtype=acc)


def _padded_lse(lse: torch.Tensor) -> torch.Tensor:
    """The efficient backward reads the LSE in its forward's padded layout."""
    sq = lse.shape[-1]
    if torch.version.hip is not None:
        return lse.contiguous()
    padded = lse.new_zeros(*lse.shape[:-1], math.ceil(sq / _EFFICIENT_LSE_ALIGN)
                           * _EFFICIENT_LSE_ALIGN)
    padded[..., :sq] = lse
    return padded


def _math_forward(q, k, v, causal, scale):
    """Explicit fp32 block attention with LSE (fp64 stays fp64)."""
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    s = torch.matmul(q.to(acc), k.to(acc).transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = torch.matmul(torch.exp(s - lse.unsqueeze(-1)), v.to(acc))
    return out.to(q.dtype), lse


def _math_backward(dout, q, k, v, out, lse, causal, scale):
    acc = lse.dtype
    qf, kf, vf, df = q.to(acc), k.to(acc), v.to(acc), dout.to(acc)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = torch.matmul(p.transpose(-1, -2), df)
    dp = torch.matmul(df, vf.transpose(-1, -2))
    ds = p * (dp - (df * out.to(acc)).sum(-1, keepdim=True))
    return torch.matmul(ds, kf) * scale, torch.matmul(ds.transpose(-1, -2), qf) * scale, dv


def block_forward(q, k, v, causal: bool, scale: float, kernel: Kernel | None = None
                  ) -> BlockResult:
    """One block on [b, h, s, d] views (k/v may carry fewer heads: GQA).

    Args:
        q: [b, h, sq, d]; k, v: [b, kv_heads, sk, d].
        causal: mask j > i; only for square blocks (sq == sk), see the module notes.
        scale: softmax scale.
        kernel: from select_for(q) (default), or forced (tests on meta tensors).
    """
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(f"block_forward: causal needs a square block: got sq={q.shape[2]}, "
                         f"sk={k.shape[2]} (the fused kernels align such masks differently)")
    kernel = kernel or select_for(q, k.shape[1])
    sq = q.shape[2]
    if kernel == "flash":
        out, lse, _, _, _, _, rng_a, rng_b, _ = \
            torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False,
                                                               scale=scale)
        return BlockResult(out, lse, (rng_a, rng_b))
    k, v = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])
    if kernel == "cudnn":
        out, lse, _, _, _, _, seed, offset, _ = \
            torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal,
                                                               False, scale=scale)
        return BlockResult(out, lse.squeeze(-1), (seed, offset))
    if kernel == "efficient":
        out, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(
            q, k, v, None, True, 0.0, causal, scale=scale)
        return BlockResult(out, lse[..., :sq], (seed, offset))
    if kernel == "cpu_flash":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, causal, scale=scale)
        return BlockResult(out, lse, ())
    out, lse = _math_forward(q, k, v, causal, scale)
    return BlockResult(out, lse, ())


def block_backward(dout, q, k, v, out, lse, causal: bool, scale: float, rng: tuple = (),
                   kernel: Kernel | None = None):
    """Gradients of one block given the FINAL out and lse rows of its queries (the softmax
    weights are then the global ones, as torch's context parallel does).

    Returns dq [b, h, sq, d] and dk, dv [b, kv_heads, sk, d]: in the input dtype where the
    kernel handles GQA or there is none, in fp32 where expanded K/V heads were summed.
    `rng` is BlockResult.rng of any forward with this kernel on this device."""
    kernel = kernel or select_for(q, k.shape[1])
    kv_heads = k.shape[1]
    if kernel == "flash":
        rng_a, rng_b = rng
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse.contiguous(), None, None, q.shape[2], k.shape[2], 0.0,
            causal, rng_a, rng_b, scale=scale)
    k, v = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])
    if kernel == "cudnn":
        seed, offset = rng
        dq, dk, dv = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            dout, q, k, v, out, lse.unsqueeze(-1).contiguous(), seed, offset, None, None, None,
            q.shape[2], k.shape[2], 0.0, causal, scale=scale)
    elif kernel == "efficient":
        seed, offset = rng
        dq, dk, dv, _ = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            dout, q, k, v, None, out, _padded_lse(lse), seed, offset, 0.0,
            [True, True, True, False], causal, scale=scale)
    elif kernel == "cpu_flash":
        dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout, q, k, v, out, lse, 0.0, causal, scale=scale)
    else:
        dq, dk, dv = _math_backward(dout, q, k, v, out, lse, causal, scale)
    return dq, fold_kv(dk, kv_heads), fold_kv(dv, kv_heads)
