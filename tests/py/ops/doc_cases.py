# SPDX-License-Identifier: Apache-2.0
"""Cases that run docs/ops.md's code blocks as a reader would, on every rank of a RankPool,
against single-process attention."""

from __future__ import annotations

import pathlib
import re

import torch
import torch.nn.functional as F

import torch_topo

_OPS_MD = pathlib.Path(__file__).resolve().parents[3] / "docs" / "ops.md"


def snippet(heading: str) -> str:
    """The first python block after `heading` in docs/ops.md."""
    text = _OPS_MD.read_text()
    block = re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S)
    return block.group(1)


def expected_positions(seq_len: int, ulysses: int, u_rank: int, ring: int, r_rank: int,
                       zigzag: bool) -> torch.Tensor:
    """Global positions a rank holds, from the layout the doc describes: the ring shards first
    (zigzag: 2R chunks, ring rank r holds chunks r and 2R-1-r; else contiguous), then the ring
    block is cut contiguously over the Ulysses group."""
    if ring > 1 and zigzag:
        c = seq_len // (2 * ring)
        block = torch.cat([torch.arange(r_rank * c, (r_rank + 1) * c),
                           torch.arange((2 * ring - 1 - r_rank) * c, (2 * ring - r_rank) * c)])
    else:
        n = seq_len // ring
        block = torch.arange(r_rank * n, (r_rank + 1) * n)
    return block.chunk(ulysses)[u_rank]


def two_d_snippet(rank, world):
    """The 2-D block with its sequence_parallel_size set to the pool's world; it raised
    "UlyssesConfig.attention: not set" when it left the split to the planner without a shape."""
    import torch.distributed as dist

    code = snippet("## 2-D: Ulysses inside, ring across")
    code = code.replace("sequence_parallel_size=16", f"sequence_parallel_size={world}")
    g = torch.Generator().manual_seed(5)
    b, s, h, hk, d = 2, 8 * world, 2 * world, world // 2, 4
    q_full = torch.randn(b, s, h, d, generator=g, dtype=torch.float64)
    k_full, v_full = (torch.randn(b, s, hk, d, generator=g, dtype=torch.float64)
                      for _ in range(2))
    scope = {"torch_topo": torch_topo, "q_full": q_full, "k_full": k_full, "v_full": v_full,
             "shape": torch_topo.AttentionShape(heads=h, kv_heads=hk, head_dim=d, seq_len=s,
                                                batch=b, dtype=torch.float64)}
    exec(code, scope)
    sp_group, ring_group, cfg = scope["sp_group"], scope["ring_group"], scope["cfg"]
    ring = 1 if ring_group is None else dist.get_world_size(ring_group)
    pos = expected_positions(s, dist.get_world_size(sp_group), dist.get_rank(sp_group), ring,
                             0 if ring_group is None else dist.get_rank(ring_group),
                             cfg.ring_balance == "zigzag")
    ref = F.scaled_dot_product_attention(q_full.transpose(1, 2), k_full.transpose(1, 2),
                                         v_full.transpose(1, 2), is_causal=True,
                                         enable_gqa=True).transpose(1, 2)
    torch.testing.assert_close(scope["out"], ref[:, pos], rtol=1e-12, atol=1e-12)
    return ring


def ring_snippet(rank, world, *, dtype):
    """The ring block as written: outputs, the RoPE positions and the LSE, whose dtype the doc
    states (fp32, fp64 for fp64 inputs), against the scores' logsumexp in float64."""
    import torch.distributed as dist

    dtype = getattr(torch, dtype)
    g = torch.Generator().manual_seed(6)
    seq_len, h, hk, d = 4 * world, 4, 2, 8
    q_full = torch.randn(2, seq_len, h, d, generator=g, dtype=torch.float64)
    k_full, v_full = (torch.randn(2, seq_len, hk, d, generator=g, dtype=torch.float64)
                      for _ in range(2))
    scope = {"torch_topo": torch_topo, "cp_group": dist.group.WORLD, "seq_len": seq_len,
             "q_full": q_full.to(dtype), "k_full": k_full.to(dtype), "v_full": v_full.to(dtype)}
    exec(snippet("## Ring attention"), scope)
    q64, k64, v64 = (t.to(dtype).double().transpose(1, 2) for t in (q_full, k_full, v_full))
    k64, v64 = (t.repeat_interleave(h // hk, 1) for t in (k64, v64))
    scores = (q64 @ k64.transpose(-1, -2)) * d ** -0.5
    scores = scores.masked_fill(torch.ones(seq_len, seq_len).triu(1).bool(), float("-inf"))
    ref_out = (scores.softmax(-1) @ v64).transpose(1, 2)
    pos = expected_positions(seq_len, 1, 0, world, rank, zigzag=True)
    assert scope["pos"].tolist() == pos.tolist()
    lse = scope["lse"]
    assert lse.dtype == (torch.float64 if dtype == torch.float64 else torch.float32), lse.dtype
    assert not lse.requires_grad
    tol = 1e-12 if dtype == torch.float64 else 3e-2
    torch.testing.assert_close(lse.double(), scores.logsumexp(-1)[:, :, pos], rtol=tol,
                               atol=tol)
    torch.testing.assert_close(scope["full"].double(), ref_out, rtol=tol, atol=tol)
