# SPDX-License-Identifier: Apache-2.0
"""Parallel forms of the example Llama: tensor parallelism through torch-topo's overlap ops
(Megatron-style, with the residual stream sharded by tokens over tp), sequence parallelism
through torch-topo's Ulysses, ring attention or both (2-D), the two together (each tp rank's
heads attend over the sequence shards of its sp ranks), and the data-parallel wrappers (FSDP2,
DDP, or one gradient all-reduce)."""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
import torch.nn.functional as F
from llama_model import Block, Llama, apply_rope, local_attention, rope_tables
from torch import nn

import torch_topo.ops
from torch_topo.ops import all_gather_matmul, matmul_reduce_scatter


def _rows(weight: torch.Tensor, part: int, parts: int) -> torch.Tensor:
    return weight.chunk(parts, 0)[part]


def _cols(weight: torch.Tensor, part: int, parts: int) -> torch.Tensor:
    return weight.chunk(parts, 1)[part]


class TensorParallelBlock(nn.Module):
    """One decoder block on a token shard [tokens / tp, dim]. Q/K/V and w1/w3 are each one
    column-parallel `all_gather_matmul`; wo and w2 are row-parallel `matmul_reduce_scatter`.
    Heads (query and K/V) and the SwiGLU width are split over tp; norms are replicated."""

    def __init__(self, block: Block, group: dist.ProcessGroup, chunks: int,
                 attn=local_attention) -> None:
        super().__init__()
        cfg = block.attention.cfg
        tp, rank = group.size(), group.rank()
        for what, count in (("n_heads", cfg.n_heads), ("n_kv_heads", cfg.n_kv_heads),
                            ("ffn_dim", cfg.ffn_dim)):
            if count % tp:
                raise ValueError(f"--tp: got {tp}, expected a divisor of {what} {count}")
        self.group, self.chunks, self.head_dim, self.attn = group, chunks, cfg.head_dim, attn
        self.q_width = cfg.n_heads // tp * cfg.head_dim
        self.kv_width = cfg.n_kv_heads // tp * cfg.head_dim
        a, f = block.attention, block.feed_forward
        self.attention_norm, self.ffn_norm = block.attention_norm, block.ffn_norm
        self.wqkv = nn.Parameter(torch.cat([_rows(a.wq.weight, rank, tp),
                                            _rows(a.wk.weight, rank, tp),
                                            _rows(a.wv.weight, rank, tp)]).detach().clone())
        self.wo = nn.Parameter(_cols(a.wo.weight, rank, tp).detach().clone())
        self.w13 = nn.Parameter(torch.cat([_rows(f.w1.weight, rank, tp),
                                           _rows(f.w3.weight, rank, tp)]).detach().clone())
        self.w2 = nn.Parameter(_cols(f.w2.weight, rank, tp).detach().clone())

    def forward(self, h: torch.Tensor, batch: int, cos, sin) -> torch.Tensor:
        op = functools.partial(all_gather_matmul, group=self.group, chunks=self.chunks)
        reduce = functools.partial(matmul_reduce_scatter, group=self.group, chunks=self.chunks)
        qkv = op(self.attention_norm(h), self.wqkv).view(batch, -1, self.wqkv.shape[0])
        q, k, v = qkv.split([self.q_width, self.kv_width, self.kv_width], -1)
        shape = (batch, q.shape[1], -1, self.head_dim)
        attn = self.attn(apply_rope(q.reshape(shape), cos, sin),
                         apply_rope(k.reshape(shape), cos, sin), v.reshape(shape))
        h = h + reduce(attn.reshape(-1, self.q_width), self.wo)
        gate, up = op(self.ffn_norm(h), self.w13).chunk(2, -1)
        return h + reduce(F.silu(gate) * up, self.w2)


class _SequenceShards:
    """torch-topo's 2-D sequence layout (`shard_sequence`): the sequence cut into zigzag blocks
    over the ring group, each block contiguously over the Ulysses group, and the
    `SequenceParallelAttention` that runs on it (Ulysses over `sp_group`, ring attention over
    `ring_group` when it has more than one rank)."""

    def __init__(self, sp_group: dist.ProcessGroup, ring_group: dist.ProcessGroup | None):
        ring = ring_group if ring_group is not None and ring_group.size() > 1 else None
        ulysses = sp_group.size()
        cfg = torch_topo.ops.UlyssesConfig(
            sequence_parallel_size=ulysses * (1 if ring is None else ring.size()),
            ulysses_degree=ulysses, enable_ring_exchange=ring is not None, causal=True)
        self.sp_group, self.ring_group = sp_group, ring
        self.attn = torch_topo.ops.SequenceParallelAttention(cfg, sp_group=sp_group,
                                                             ring_group=ring)

    def shard(self, t: torch.Tensor) -> torch.Tensor:
        """This rank's positions of [batch, seq] (dim 1)."""
        return torch_topo.ops.shard_sequence(t, 1, self.sp_group, self.ring_group)

    def positions(self, seq: int) -> torch.Tensor:
        return self.shard(torch.arange(seq)[None])[0]


class TensorParallelLlama(nn.Module):
    """The model with tp-sharded blocks. Rank t of the tp group holds tokens
    [t * T / tp, (t + 1) * T / tp) of the flattened [batch * seq] tokens; embedding, final norm
    and output head are replicated and see only those tokens, so their gradients are summed
    over tp (`replicated_parameters`). With `sp_groups` (Ulysses group, ring group) the
    sequence is first sharded over them and attention is sequence-parallel over the tp rank's
    heads."""

    def __init__(self, model: Llama, group: dist.ProcessGroup, chunks: int,
                 sp_groups: tuple[dist.ProcessGroup, dist.ProcessGroup | None] | None = None
                 ) -> None:
        super().__init__()
        self.cfg, self.group = model.cfg, group
        self.seq = _SequenceShards(*sp_groups) if sp_groups is not None else None
        attn = self.seq.attn if self.seq is not None else local_attention
        self.tok_embeddings, self.norm, self.output = model.tok_embeddings, model.norm, \
            model.output
        self.layers = nn.ModuleList(TensorParallelBlock(b, group, chunks, attn)
                                    for b in model.layers)

    def replicated_parameters(self) -> list[nn.Parameter]:
        blocks = [p for layer in self.layers
                  for p in (*layer.attention_norm.parameters(), *layer.ffn_norm.parameters())]
        return [*self.tok_embeddings.parameters(), *self.norm.parameters(),
                *self.output.parameters(), *blocks]

    def _tp_shard(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(-1).chunk(self.group.size())[self.group.rank()]

    def token_shard(self, t: torch.Tensor) -> torch.Tensor:
        return self._tp_shard(self.seq.shard(t) if self.seq is not None else t)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [batch, seq] -> logits of this rank's token shard [batch * seq / tp, vocab]
        (of its sequence shard's tokens with sp)."""
        batch, seq = tokens.shape
        if self.seq is not None:
            positions, tokens = self.seq.positions(seq), self.seq.shard(tokens)
        else:
            positions = torch.arange(seq)
        cos, sin = rope_tables(self.cfg, positions)
        h = self.tok_embeddings(self._tp_shard(tokens))
        for layer in self.layers:
            h = layer(h, batch, cos, sin)
        return self.output(self.norm(h))


class SequenceParallelLlama(nn.Module):
    """The model on a sequence shard in torch-topo's 2-D layout (see _SequenceShards). Every
    parameter is replicated over both groups."""

    def __init__(self, model: Llama, sp_group: dist.ProcessGroup,
                 ring_group: dist.ProcessGroup | None) -> None:
        super().__init__()
        self.model, self.seq = model, _SequenceShards(sp_group, ring_group)
        self.attn = self.seq.attn

    def token_shard(self, t: torch.Tensor) -> torch.Tensor:
        return self.seq.shard(t).reshape(-1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [batch, seq] -> logits of this rank's sequence shard [batch, seq / sp, vocab];
        not flattened here: under FSDP2 a view as the module's output drew its warning that an
        in-place op on it would skip the gradients' all-gather (the loss flattens them)."""
        return self.model(self.seq.shard(tokens), self.seq.positions(tokens.shape[1]), self.attn)


def apply_data_parallel(model: nn.Module, mode: str, mesh, group: dist.ProcessGroup,
                        device: torch.device) -> nn.Module:
    """FSDP2 (`fully_shard` per block, then the root), DDP, or nothing ("replicate": gradients
    averaged by `average_gradients` after backward)."""
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model.layers if hasattr(model, "layers") else model.model.layers:
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, process_group=group, device_ids=ids)
    return model


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def average_gradients(params, group: dist.ProcessGroup) -> None:
    """Mean over the data-parallel group, one all_reduce per parameter (the "replicate" mode)."""
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, group=group)
            p.grad.div_(group.size())


def sum_gradients(params, group: dist.ProcessGroup) -> None:
    """Sum over tp of the replicated parameters' partial gradients (each saw its token shard)."""
    for p in params:
        if p.grad is not None:
            dist.all_reduce(_local(p.grad), group=group)
