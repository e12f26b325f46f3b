# SPDX-License-Identifier: Apache-2.0
"""Ring attention on 2, 3 and 4 Gloo ranks against single-process attention with autograd:
causal and not, zigzag and not, MHA/GQA/MQA, fp32 and bf16, the LSE, zigzag helpers, errors,
the output written in place (refused by the ring, exact through the 2-D op), a kernel that
fails mid-ring."""

import pytest
from ops_pool import backends, get_pool

HEADS = [(2, 2, 2), (2, 4, 1), (3, 3, 3), (3, 6, 2), (4, 4, 4), (4, 4, 2), (4, 8, 1)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("world,heads,kv_heads", HEADS)
@pytest.mark.parametrize("causal,balance", [(False, "none"), (True, "none"), (True, "zigzag"),
                                            (False, "zigzag")])
def test_ring_matches_reference(world, heads, kv_heads, causal, balance, backend):
    pool = get_pool(world, backend)
    # zigzag needs a global length that is a multiple of 2P (seq_local even); contiguous
    # blocks also run an odd seq_local, where the global length is not a multiple of 2P.
    for seq_local in ((2, 6) if balance == "zigzag" else (3, 4)):
        pool.run("attention", op="ring", causal=causal, heads=heads, kv_heads=kv_heads,
                 seq_local=seq_local, balance=balance)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,balance", [(2, "zigzag"), (3, "none"), (4, "zigzag")])
def test_ring_bfloat16(world, balance):
    get_pool(world).run("attention", op="ring", causal=True, heads=4, kv_heads=2, seq_local=8,
                        dtype="bfloat16", balance=balance)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,causal,balance,kv_heads",
                         [(2, True, "zigzag", 1), (3, True, "none", 2), (2, False, "none", 2)])
def test_ring_gradcheck_float64(world, causal, balance, kv_heads):
    get_pool(world).run("gradcheck", op="ring", causal=causal, heads=2, kv_heads=kv_heads,
                        seq_local=2, balance=balance)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,op,causal,balance", [
    (2, "ring", True, "zigzag"), (2, "ring", False, "none"), (4, "ring", True, "zigzag"),
    (4, "ring", False, "none"), (4, "2d", True, "zigzag")])
@pytest.mark.parametrize("batch", [1, 2])
def test_output_written_in_place(world, op, causal, balance, batch):
    # The 2-D op lets the write through with exact gradients; the ring refuses it in autograd's
    # words (its backward reads the output; a copy to allow the write would cost memory).
    errors = get_pool(world).run("ring_in_place", op=op, causal=causal, balance=balance,
                                 batch=batch)
    if op == "2d":
        assert errors == [None] * world
    else:
        assert all(e is not None and "inplace" in e for e in errors), errors


@pytest.mark.timeout(300)
@pytest.mark.parametrize("phase", ["forward", "backward"])
@pytest.mark.parametrize("failing", [(0, 1), (0,)])
def test_kernel_failure_mid_ring(phase, failing):
    # A kernel error left the next step's transfers posted and unwaited; a rank that went on
    # alone got Gloo's bare "Timed out waiting" with nothing naming the ring.
    got = get_pool(2).run("ring_fails_mid_ring", phase=phase, failing=failing)
    for rank, (error, finished) in enumerate(got):
        if rank in failing:
            assert (error, finished) == ("RuntimeError", True)
        else:
            assert error == "RingTransferError"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3, 4])
def test_zigzag_positions_shard_unshard(world):
    get_pool(world).run("zigzag_helpers", seq=4 * world)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("call,match", [
    ("ring_seq_differs", r"ring_attention: tensor shapes or dtypes differ across ranks"),
    ("ring_dtype_differs", r"ring_attention: tensor shapes or dtypes differ across ranks: "
                           r"rank \d has q float(32|64) "),
    ("ring_balance", r"balance='diagonal', expected one of"),
    ("ring_causal_differs", r"^ring_attention: settings differ across ranks: rank \d has "
                            r"causal=[01], zigzag=0, rank \d has causal=[01], zigzag=0; every "
                            r"rank must give the same causal, zigzag$"),
    ("ring_balance_differs", r"^ring_attention: settings differ across ranks: .*zigzag=1"),
    ("ring_kv_length", r"ring_attention: k has local sequence length 6, expected 4 like q"),
    ("ring_zigzag_odd", r"needs an even local length"),
    ("ring_int_dtype", r"ring_attention: q, k and v have dtype torch.int64, expected a "
                       r"floating-point dtype"),
    ("ring_empty_seq", r"ring_attention: q has shape \(1, 0, 4, 4\): expected a local sequence "
                       r"length and head_dim >= 1"),
    # Named the C++ functions zigzagShard and zigzagIndex, and an odd shard zigzagUnshard.
    ("zigzag_not_2p", r"^zigzag_shard: x: length along dim 1: got (5|7), expected a multiple of "
                      r"2 x group size = (4|6); pad"),
    ("zigzag_positions_not_2p", r"^zigzag_positions: seq_len: got (6|8), expected a multiple of "
                                r"2 x group size = (4|6); pad"),
    ("zigzag_unshard_odd", r"^zigzag_unshard: x: length 3 along dim 1 is odd, expected the two "
                           r"equal chunks zigzag_shard cuts"),
    ("shard_zigzag_not_2p", r"^shard_sequence: x: length along dim 1: got (5|7), expected a "
                            r"multiple of 2 x group size = (4|6); pad"),
    ("ring_scale_inf", r"ring_attention: softmax_scale: got inf, expected None or a finite"),
    ("ring_causal_str", r"ring_attention: causal: got 'no', expected True or False"),
    ("zigzag_positions_negative", r"zigzag_positions: seq_len: got -2, expected an int >= 0"),
    ("shard_dim_out_of_range", r"shard_sequence: dim: got 5, expected an int in \[-2, 1\]"),
    ("shard_balance", r"shard_sequence: balance: got 'stripe', expected 'none' or 'zigzag'"),
])
def test_ring_bad_input(world, call, match):
    get_pool(world).run("bad_input_cases.raises", call=call, match=match)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("call,error,match", [
    ("ring_q_none", "TypeError", r"ring_attention: q: got NoneType, expected a torch.Tensor"),
    ("ulysses_v_list", "TypeError", r"ulysses_attention: v: got list, expected a torch.Tensor"),
    ("a2a_none", "TypeError", r"ulysses_all_to_all: x: got NoneType, expected a torch.Tensor"),
    ("zigzag_shard_none", "TypeError", r"zigzag_shard: x: got NoneType"),
    ("unshard_none", "TypeError", r"unshard_sequence: x: got NoneType"),
    ("zigzag_shard_float_dim", "ValueError", r"zigzag_shard: dim: got 1.0, expected an int in "
                                             r"\[-2, 1\]"),
    ("zigzag_shard_bool_dim", "ValueError", r"zigzag_shard: dim: got True"),
    ("zigzag_unshard_float_dim", "ValueError", r"zigzag_unshard: dim: got 1.0"),
    ("shard_sp_group_str", "ValueError", r"shard_sequence \(sp_group\): group: got 'x', "
                                         r"expected a ProcessGroup"),
    ("unshard_ring_group_int", "ValueError", r"unshard_sequence \(ring_group\): group: got 3"),
    ("ring_return_lse_str", "ValueError", r"ring_attention: return_lse: got 'no', expected "
                                          r"True or False"),
    ("ulysses_attn_fn_int", "ValueError", r"ulysses_attention: attn_fn: got 3, expected None "
                                          r"or a callable"),
])
def test_arguments_of_the_wrong_type(call, error, match):
    get_pool(2).run("bad_input_cases.raises", call=call, match=match, error=error)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("op", ["ring", "ulysses", "a2a", "2d"])
def test_rank_outside_the_group(op):
    # SequenceParallelAttention said "sp_group has -1 ranks".
    got = get_pool(3).run("bad_input_cases.non_member", op=op)
    where = {"ring": "ring_attention", "ulysses": "ulysses_attention",
             "a2a": "ulysses_all_to_all", "2d": "SequenceParallelAttention (sp_group)"}[op]
    assert got[:2] == [None, None] and got[2].startswith(
        where + ": group: got -100, expected a ProcessGroup this rank belongs to")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("call", ["ring_zigzag_odd", "ring_v_heads", "unshard_length",
                                  "zigzag_unshard_dtype", "unshard_dim", "zigzag_unshard_dim"])
def test_bad_input_on_one_rank_raises_on_every_rank(call):
    get_pool(2).run("one_rank_cases.one_rank_bad", call=call)
