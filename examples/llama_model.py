# SPDX-License-Identifier: Apache-2.0
"""A small Llama-style decoder (RMSNorm, RoPE, SwiGLU, grouped-query attention) for the
end-to-end example; plain single-device modules. examples/llama_parallel.py shards it."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(kw_only=True, frozen=True, slots=True)
class LlamaConfig:
    """Model shape. Defaults give ~0.1 M parameters: well under a second per step on CPU."""

    vocab_size: int = 256
    """Tokens are bytes."""
    dim: int = 64
    """Model width."""
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    """Fewer K/V heads than query heads: grouped-query attention."""
    ffn_dim: int = 128
    """SwiGLU hidden width."""
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.dim % self.n_heads:
            raise ValueError(f"LlamaConfig.dim: got {self.dim}, expected a multiple of n_heads "
                             f"{self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"LlamaConfig.n_kv_heads: got {self.n_kv_heads}, expected a divisor "
                             f"of n_heads {self.n_heads}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) \
            * self.weight


def rope_tables(cfg: LlamaConfig, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of shape [len(positions), head_dim / 2] (RoFormer, arXiv:2104.09864)."""
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32)
                                   / cfg.head_dim)
    angles = positions.float()[:, None] * inv[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [batch, seq, heads, head_dim]; rotates interleaved pairs by the position's angle."""
    x32 = x.float().unflatten(-1, (-1, 2))
    a, b = x32[..., 0], x32[..., 1]
    c, s = cos[None, :, None, :].to(x.device), sin[None, :, None, :].to(x.device)
    return torch.stack((a * c - b * s, a * s + b * c), -1).flatten(-2).type_as(x)


def local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention on [batch, seq, heads, head_dim]; K/V heads repeated for GQA."""
    rep = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(rep, 2), v.repeat_interleave(rep, 2)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=True)
    return out.transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)

    def forward(self, x, cos, sin, attn=local_attention):
        b, s, _ = x.shape
        hd = self.cfg.head_dim
        q = apply_rope(self.wq(x).view(b, s, -1, hd), cos, sin)
        k = apply_rope(self.wk(x).view(b, s, -1, hd), cos, sin)
        v = self.wv(x).view(b, s, -1, hd)
        return self.wo(attn(q, k, v).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, cos, sin, attn=local_attention):
        x = x + self.attention(self.attention_norm(x), cos, sin, attn)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None,
                attn=local_attention) -> torch.Tensor:
        """tokens [batch, seq] -> logits [batch, seq, vocab]; `positions` (default 0..seq-1)
        lets a sequence shard carry its global positions."""
        if positions is None:
            positions = torch.arange(tokens.shape[1])
        cos, sin = rope_tables(self.cfg, positions)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin, attn)
        return self.output(self.norm(h))


def build_model(cfg: LlamaConfig, seed: int) -> Llama:
    """The same initial weights on every process for a given seed."""
    torch.manual_seed(seed)
    model = Llama(cfg)
    for name, p in model.named_parameters():
        if p.dim() > 1:
            nn.init.normal_(p, std=0.02 if "output" not in name else cfg.dim ** -0.5)
    return model


def synthetic_batch(step: int, seed: int, batch: int, seq_len: int, vocab: int) -> torch.Tensor:
    """[batch, seq_len + 1] tokens with learnable structure (a noisy repeating pattern), the
    same on every process for (step, seed)."""
    gen = torch.Generator().manual_seed(seed * 100003 + step)
    base = torch.randint(0, vocab, (batch, 1), generator=gen)
    stride = torch.randint(1, 7, (batch, 1), generator=gen)
    tokens = (base + stride * torch.arange(seq_len + 1)[None, :]) % vocab
    noise = torch.rand(batch, seq_len + 1, generator=gen) < 0.1
    return torch.where(noise, torch.randint(0, vocab, tokens.shape, generator=gen), tokens)
