# SPDX-License-Identifier: Apache-2.0
"""The C++ cores in one process: Ulysses pack/unpack layout (slices side by side, views where
the layout allows), GQA replication and replica sums, the fp32 LSE merge and zigzag index
math, each against an explicit construction."""

import pytest
import torch

from torch_topo import _C


def test_pack_puts_each_rank_slice_of_every_tensor_side_by_side():
    world = 3
    q, k = torch.randn(2, 5, 6, 4), torch.randn(2, 5, 3, 4)
    buf = _C.ulysses_pack([q, k], 2, 2, world)
    want = torch.stack([torch.cat([q[:, :, 2 * j:2 * j + 2], k[:, :, j:j + 1]], 2)
                        for j in range(world)])
    torch.testing.assert_close(buf, want, rtol=0, atol=0)


def test_pack_by_sequence_keeps_heads_side_by_side():
    """The backward's exchange: rank j gets positions j, heads of both tensors together; the
    inputs may be strided (gradients of transposed views)."""
    world = 3
    g1 = torch.randn(1, 2, 6, 4).transpose(1, 2)  # [1, 6, 2, 4], not contiguous
    g2 = torch.randn(1, 6, 1, 4)
    buf = _C.ulysses_pack([g1, g2], 1, 2, world)
    want = torch.stack([torch.cat([g1[:, 2 * j:2 * j + 2], g2[:, 2 * j:2 * j + 2]], 2)
                        for j in range(world)])
    torch.testing.assert_close(buf, want, rtol=0, atol=0)


def test_pack_replicates_the_kv_head_each_rank_uses():
    world = 4
    k = torch.randn(1, 3, 2, 5)  # 2 kv heads over 4 ranks: ranks 0,1 -> head 0; 2,3 -> head 1
    buf = _C.ulysses_pack([k], 2, 2, world, [True])
    want = torch.stack([k[:, :, j // 2:j // 2 + 1] for j in range(world)])
    torch.testing.assert_close(buf, want, rtol=0, atol=0)


def test_pack_of_one_tensor_in_rank_order_is_a_view():
    x = torch.randn(1, 6, 2, 4)  # batch 1, sequence scattered: already [rank, ...] in memory
    buf = _C.ulysses_pack([x], 1, 2, 3)
    assert buf.data_ptr() == x.data_ptr() and buf.shape == (3, 1, 2, 2, 4)


@pytest.mark.parametrize("batch,views", [(1, True), (2, False)])
def test_unpack_splits_and_gathers_views_at_batch_one(batch, views):
    world = 3
    buf = torch.randn(world, batch, 2, 3 + 1, 5)  # per rank: 3 q heads and 1 k head
    q, k = _C.ulysses_unpack(buf, [3, 1], 2, 1)
    torch.testing.assert_close(q, torch.cat(list(buf[:, :, :, :3]), 1), rtol=0, atol=0)
    torch.testing.assert_close(k, torch.cat(list(buf[:, :, :, 3:]), 1), rtol=0, atol=0)
    assert (q.untyped_storage().data_ptr() == buf.untyped_storage().data_ptr()) == views


def test_unpack_gathers_heads_and_reduces_replicas():
    world = 4
    buf = torch.randn(world, 1, 3, 1, 5)
    (gathered,) = _C.ulysses_unpack(buf, [1], 2, 2)
    torch.testing.assert_close(gathered, torch.cat(list(buf), 2), rtol=0, atol=0)
    (summed,) = _C.ulysses_unpack(buf, [1], 2, 2, [2])
    torch.testing.assert_close(summed, torch.cat([buf[0] + buf[1], buf[2] + buf[3]], 2))


def test_unpack_reduces_bfloat16_replicas_in_fp32():
    buf = torch.tensor([[256.0] * 4, [1.0] * 4, [1.0] * 4], dtype=torch.bfloat16)
    (summed,) = _C.ulysses_unpack(buf, [4], 0, 0, [3])
    # Summed pairwise in bf16, 256 + 1 rounds back to 256 twice; in fp32 it is 258 exactly.
    assert summed.dtype == torch.bfloat16 and summed.tolist() == [258.0] * 4


def test_pack_unpack_errors():
    with pytest.raises(ValueError, match=r"size 5 of dim 2 cannot be split over the group"):
        _C.ulysses_pack([torch.zeros(1, 1, 5, 1)], 2, 2, 2)
    with pytest.raises(ValueError, match=r"tensor 1 has dtype Double, expected Float"):
        _C.ulysses_pack([torch.zeros(2), torch.zeros(2, dtype=torch.float64)], 0, 0, 2)
    with pytest.raises(ValueError, match=r"tensor 1 has slice shape \[1, 2, 1\], expected "
                                         r"\[1, 1, 1\] like tensor 0 except in dim 2"):
        _C.ulysses_pack([torch.zeros(2, 1, 1), torch.zeros(2, 2, 1)], 0, 2, 2)
    with pytest.raises(ValueError, match=r"add up to 4, the buffer has 3"):
        _C.ulysses_unpack(torch.zeros(2, 3), [4], 0, 0)


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
        _C.merge_attn_block(out.half(), lse, o2, lse)


def test_zigzag_index_math():
    torch.testing.assert_close(_C.zigzag_index(12, 3, 1), torch.tensor([2, 3, 8, 9]))
    shards = [_C.zigzag_shard(torch.arange(12), 0, 3, r) for r in range(3)]
    torch.testing.assert_close(shards[0], torch.tensor([0, 1, 10, 11]))
    torch.testing.assert_close(_C.zigzag_unshard(shards, 0), torch.arange(12))
    with pytest.raises(ValueError, match=r"sequence length 10 is not divisible by 2 x group size"):
        _C.zigzag_index(10, 3, 0)


class _FakeGroup:
    """Stands in for a ProcessGroup of two ranks whose peer always agrees."""

    def __init__(self, name: str):
        self.group_name = name


def _count_shape_checks(monkeypatch):
    from torch_topo.ops import utils

    gathers = []

    def all_gather(out, meta, group):
        gathers.append(group)
        for o in out:
            o.copy_(meta)

    monkeypatch.setattr(utils, "group_rank_size", lambda group: (0, 2))
    monkeypatch.setattr(utils.dist, "all_gather", all_gather)
    monkeypatch.setattr(utils, "_AGREED", type(utils._AGREED)())
    return utils, gathers


def test_once_check_is_not_inherited_by_a_recreated_group_of_the_same_name(monkeypatch):
    # After destroy_process_group and a new init, the world is named "0" again; the old
    # world's agreement skipped the check, so a rank whose peers held other shapes went into
    # the exchange while they gathered records.
    utils, gathers = _count_shape_checks(monkeypatch)
    x = {"q": torch.empty(1, 4, 2, 8)}
    old, new = _FakeGroup("0"), _FakeGroup("0")
    for group in (old, old, new, new):
        utils.check_same_shape("op", group, x, "once")
    assert gathers == [old, new]


def test_once_check_eviction_is_per_group(monkeypatch):
    # One table for all groups: the entries a rank's other group added evicted the shape its
    # peers in group A still held as agreed, so this rank alone gathered at A's next call.
    utils, gathers = _count_shape_checks(monkeypatch)
    monkeypatch.setattr(utils, "_AGREED_MAX", 2)
    a, b = _FakeGroup("a"), _FakeGroup("b")
    utils.check_same_shape("op", a, {"q": torch.empty(1, 4, 2, 8)}, "once")
    for seq in (5, 6, 7):
        utils.check_same_shape("op", b, {"q": torch.empty(1, seq, 2, 8)}, "once")
    utils.check_same_shape("op", a, {"q": torch.empty(1, 4, 2, 8)}, "once")
    assert gathers == [a, b, b, b]
