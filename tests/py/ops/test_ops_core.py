# SPDX-License-Identifier: Apache-2.0
"""The C++ cores in one process: Ulysses pack/unpack layout, GQA replication and replica sums,
the fp32 LSE merge and zigzag index math, each against an explicit construction."""

import pytest
import torch

from torch_topo import _C


def test_pack_puts_each_rank_slice_of_every_tensor_in_its_chunk():
    world = 3
    q, k = torch.randn(2, 5, 6, 4), torch.randn(2, 5, 3, 4)
    buf = _C.ulysses_pack([q, k], 2, world)
    want = torch.cat([torch.cat([q[:, :, 2 * j:2 * j + 2].reshape(-1),
                                 k[:, :, j:j + 1].reshape(-1)]) for j in range(world)])
    torch.testing.assert_close(buf, want, rtol=0, atol=0)


def test_pack_replicates_the_kv_head_each_rank_uses():
    world = 4
    k = torch.randn(1, 3, 2, 5)  # 2 kv heads over 4 ranks: ranks 0,1 -> head 0; 2,3 -> head 1
    buf = _C.ulysses_pack([k], 2, world, [True])
    want = torch.cat([k[:, :, j // 2].reshape(-1) for j in range(world)])
    torch.testing.assert_close(buf, want, rtol=0, atol=0)


def test_unpack_concatenates_and_reduces_replicas():
    world = 4
    pieces = [torch.randn(1, 3, 1, 5) for _ in range(world)]
    buf = torch.cat([p.reshape(-1) for p in pieces])
    (gathered,) = _C.ulysses_unpack(buf, [[1, 3, 1, 5]], 1, world)
    torch.testing.assert_close(gathered, torch.cat(pieces, 1), rtol=0, atol=0)
    (summed,) = _C.ulysses_unpack(buf, [[1, 3, 1, 5]], 2, world, [2])
    want = torch.cat([pieces[0] + pieces[1], pieces[2] + pieces[3]], 2)
    torch.testing.assert_close(summed, want)


def test_unpack_reduces_bfloat16_replicas_in_fp32():
    pieces = [torch.full((4,), 256.0, dtype=torch.bfloat16),
              torch.full((4,), 1.0, dtype=torch.bfloat16),
              torch.full((4,), 1.0, dtype=torch.bfloat16)]
    buf = torch.cat(pieces)
    (summed,) = _C.ulysses_unpack(buf, [[4]], 0, 3, [3])
    # Summed pairwise in bf16, 256 + 1 rounds back to 256 twice; in fp32 it is 258 exactly.
    assert summed.dtype == torch.bfloat16 and summed.tolist() == [258.0] * 4


def test_pack_unpack_errors():
    with pytest.raises(ValueError, match=r"size 5 of dim 2 cannot be split over the group"):
        _C.ulysses_pack([torch.zeros(1, 1, 5, 1)], 2, 2)
    with pytest.raises(ValueError, match=r"tensor 1 has dtype Double, expected Float"):
        _C.ulysses_pack([torch.zeros(2), torch.zeros(2, dtype=torch.float64)], 0, 2)
    with pytest.raises(ValueError, match=r"buffer has 6 elements, expected 2 ranks x 4"):
        _C.ulysses_unpack(torch.zeros(6), [[4]], 0, 2)


def test_merge_equals_softmax_over_both_blocks():
    torch.manual_seed(0)
    s1, s2 = torch.randn(2, 3, 5, 7) * 4, torch.randn(2, 3, 5, 9) * 4
    v1, v2 = torch.randn(2, 3, 7, 4), torch.randn(2, 3, 9, 4)
    o1, o2 = torch.softmax(s1, -1) @ v1, torch.softmax(s2, -1) @ v2
    want = torch.softmax(torch.cat([s1, s2], -1), -1) @ torch.cat([v1, v2], -2)
    out, lse = o1.clone(), torch.logsumexp(s1, -1)
    _C.merge_attn_block(out, lse, o2, torch.logsumexp(s2, -1))
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse, torch.logsumexp(torch.cat([s1, s2], -1), -1))
    with pytest.raises(ValueError, match=r"running out and lse must be float32"):
        _C.merge_attn_block(out.double(), lse, o2, lse)


def test_zigzag_index_math():
    torch.testing.assert_close(_C.zigzag_index(12, 3, 1), torch.tensor([2, 3, 8, 9]))
    shards = [_C.zigzag_shard(torch.arange(12), 0, 3, r) for r in range(3)]
    torch.testing.assert_close(shards[0], torch.tensor([0, 1, 10, 11]))
    torch.testing.assert_close(_C.zigzag_unshard(shards, 0), torch.arange(12))
    with pytest.raises(ValueError, match=r"sequence length 10 is not divisible by 2 x group size"):
        _C.zigzag_index(10, 3, 0)
