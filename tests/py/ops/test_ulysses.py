# SPDX-License-Identifier: Apache-2.0
"""Ulysses attention and the all-to-all on 2, 3 and 4 Gloo ranks against single-process
attention with autograd; the one-exchange-for-Q/K/V count; bad input."""

import pytest
from ops_pool import backends, get_pool

# (world, heads, kv_heads): MHA, GQA with kv_heads a multiple of P, and kv_heads < P
# (replicated K/V heads, MQA included).
HEADS = [(2, 4, 4), (2, 4, 2), (2, 4, 1), (3, 6, 6), (3, 6, 3), (3, 6, 1), (4, 8, 8),
         (4, 8, 4), (4, 8, 2), (4, 8, 1)]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("world,heads,kv_heads", HEADS)
@pytest.mark.parametrize("causal", [False, True])
def test_ulysses_matches_reference(world, heads, kv_heads, causal, backend):
    pool = get_pool(world, backend)
    # seq_local 3: the global length is not a multiple of 2P; 4 is (for P = 2).
    for seq_local in (3, 4):
        pool.run("attention", op="ulysses", causal=causal, heads=heads, kv_heads=kv_heads,
                 seq_local=seq_local)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,heads,kv_heads", [(2, 4, 1), (4, 8, 8), (4, 8, 2)])
def test_ulysses_bfloat16(world, heads, kv_heads):
    get_pool(world).run("attention", op="ulysses", causal=True, heads=heads, kv_heads=kv_heads,
                        seq_local=4, dtype="bfloat16", scale=0.3)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,heads,kv_heads,causal", [(2, 2, 1, True), (3, 3, 3, False)])
def test_ulysses_gradcheck_float64(world, heads, kv_heads, causal):
    get_pool(world).run("gradcheck", op="ulysses", causal=causal, heads=heads,
                        kv_heads=kv_heads, seq_local=2)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,kv_heads", [(2, 4), (3, 1)])
@pytest.mark.parametrize("batch", [1, 2])
def test_ulysses_in_place_on_exchanged_tensors(world, kv_heads, batch):
    # In-place writes worked at batch 2 and raised at batch 1, where the exchange returned
    # views of its receive buffer.
    get_pool(world).run("ulysses_in_place", batch=batch, kv_heads=kv_heads)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world,heads,kv_heads", [(2, 4, 4), (4, 8, 2), (3, 3, 1)])
@pytest.mark.parametrize("check_inputs", [False, True])
def test_ulysses_one_exchange_for_qkv(world, heads, kv_heads, check_inputs):
    get_pool(world).run("ulysses_collective_count", heads=heads, kv_heads=kv_heads,
                        check_inputs=check_inputs)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("op", ["ulysses", "ring", "a2a"])
@pytest.mark.parametrize("check_inputs,checked", [
    # Default: the first call with a shape is checked; repeats of the agreed shape are not; a
    # new shape is checked again.
    ("once", [1, 0, 0, 1]),
    (True, [1, 1, 1, 1]),
    (False, [0, 0, 0, 0]),
])
def test_input_check_collectives_and_host_reads(world, op, check_inputs, checked):
    # A check is one all_gather and one host read per gathered record (world of them);
    # the exchanges themselves read nothing on the host.
    want = [(c, c * world) for c in checked]
    got = get_pool(world).run("input_check_count", op=op, check_inputs=check_inputs)
    assert got == [want] * world


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("scatter_dim,gather_dim,shape",
                         [(2, 1, (2, 3, 6, 4)), (1, 2, (2, 6, 3, 4)), (0, -1, (6, 5))])
def test_all_to_all_exchange_and_gradient(world, scatter_dim, gather_dim, shape):
    get_pool(world).run("all_to_all_roundtrip", scatter_dim=scatter_dim, gather_dim=gather_dim,
                        shape=shape)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("call,match", [
    ("ulysses_heads", r"query heads cannot be split over a group of"),
    ("ulysses_kv_heads", r"key/value heads cannot be split .* multiple or a divisor"),
    ("ulysses_dtype", r"k has dtype torch.float64, expected torch.float32"),
    ("ulysses_device", r"k is on meta, expected cpu"),
    ("ulysses_kv_length", r"ulysses_attention: k has local sequence length 6, expected 4 like q"),
    ("ulysses_seq_differs",
     r"shapes or dtypes differ across ranks: rank \d has q float32 \[1, \d, "),
    ("ulysses_dtype_differs", r"shapes or dtypes differ across ranks: rank \d has q float(32|64) "
                              r"\[1, 4, .*rank \d has q float(32|64) \[1, 4, "),
    ("ulysses_causal_differs", r"^ulysses_attention: settings differ across ranks: rank \d "
                               r"has causal=[01], rank \d has causal=[01]; every rank must give "
                               r"the same causal$"),
    ("a2a_dims_differ", r"^ulysses_all_to_all: settings differ across ranks: .*scatter_dim=1, "
                        r"gather_dim=2"),
    ("a2a_not_divisible", r"ulysses_all_to_all: x: size \d of scatter_dim 0 cannot be split "
                          r"over a group of \d, expected a multiple of \d"),
    ("ulysses_int_dtype", r"ulysses_attention: q, k and v have dtype torch.int64, expected a "
                          r"floating-point dtype"),
    ("ulysses_scale_nan", r"ulysses_attention: softmax_scale: got nan, expected None or a "
                          r"finite number > 0"),
    ("a2a_float_dim", r"ulysses_all_to_all: scatter_dim: got 0.0, expected an int in \[-2, 1\]"),
    ("a2a_scalar", r"^ulysses_all_to_all: scatter_dim: got 1, but the tensor is 0-d \(a scalar\)"),
    ("ulysses_attn_fn_shape", r"^ulysses_attention: attn_fn returned shape \[1, 1, 1, \d+\], "
                              r"expected a tensor of shape \[1, \d+, 1, \d+\]"),
    ("ulysses_attn_fn_tuple", r"^ulysses_attention: attn_fn returned tuple, expected a tensor"),
])
def test_ulysses_bad_input(world, call, match):
    get_pool(world).run("bad_input_cases.raises", call=call, match=match)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("call", ["ulysses_heads", "ulysses_v_heads"])
def test_bad_input_on_one_rank_raises_on_every_rank(call):
    get_pool(2).run("one_rank_cases.one_rank_bad", call=call)
