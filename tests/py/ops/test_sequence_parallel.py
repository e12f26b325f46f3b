# SPDX-License-Identifier: Apache-2.0
"""2-D sequence parallelism on a 2 x 2 Gloo mesh (Ulysses over pairs, ring across) against
single-process attention; its layout helpers and configuration errors."""

import functools
import re

import pytest
from ops_pool import get_pool

import torch_topo


@pytest.mark.timeout(300)
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("causal,balance", [(False, "none"), (True, "none"), (True, "zigzag")])
def test_2x2_matches_reference(heads, kv_heads, causal, balance):
    get_pool(4).run("attention", op="2d", causal=causal, heads=heads, kv_heads=kv_heads,
                    seq_local=4, balance=balance)


@pytest.mark.timeout(300)
def test_2x2_bfloat16():
    get_pool(4).run("attention", op="2d", causal=True, heads=4, kv_heads=2, seq_local=8,
                    dtype="bfloat16", balance="zigzag")


@pytest.mark.timeout(300)
def test_2x2_gradcheck_float64():
    get_pool(4).run("gradcheck", op="2d", causal=True, heads=2, kv_heads=2, seq_local=2,
                    balance="zigzag")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (4, 1)])
def test_priced_messages_are_what_the_layer_sends(heads, kv_heads):
    # kv_heads 1 < Ulysses 2: each rank receives a replica of the one K/V head.
    get_pool(4).run("split_traffic", heads=heads, kv_heads=kv_heads)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("balance", ["none", "zigzag"])
def test_2x2_shard_unshard(balance):
    get_pool(4).run("sequence_roundtrip_2x2", balance=balance, seq=16)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("world", [3, 4])
def test_sp_size_not_dividing_world(world):
    get_pool(world).run("bad_input_cases.raises", call="sp_not_dividing_world",
                        match=r"does not divide the world")


@pytest.mark.parametrize("kwargs,match", [
    ({"sequence_parallel_size": 0}, r"sequence_parallel_size: got 0, expected an int >= 1"),
    ({"sequence_parallel_size": 2.0}, r"sequence_parallel_size: got 2.0"),
    ({"sequence_parallel_size": 2, "ring_balance": "stripe"}, r"ring_balance: got 'stripe'"),
    ({"sequence_parallel_size": 2, "softmax_scale": -1.0}, r"softmax_scale: got -1.0"),
    ({"sequence_parallel_size": 2, "softmax_scale": float("inf")},
     r"UlyssesConfig.softmax_scale: got inf, expected None or a finite number > 0"),
    ({"sequence_parallel_size": 2, "causal": 1}, r"UlyssesConfig.causal: got 1"),
    # Accepted before: "no" (truthy) enabled the ring.
    ({"sequence_parallel_size": 2, "enable_ring_exchange": "no"},
     r"UlyssesConfig.enable_ring_exchange: got 'no', expected True or False"),
])
def test_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        torch_topo.UlyssesConfig(**kwargs)


_SHAPE = torch_topo.AttentionShape(heads=4, kv_heads=4, head_dim=8, seq_len=64)


@pytest.mark.parametrize("call,match", [
    # A config that is no UlyssesConfig: AttributeError "... no attribute 'sequence_parallel_size'".
    (lambda: torch_topo.resolve_sequence_parallel_degrees(None, world_size=2),
     r"resolve_sequence_parallel_degrees: config: got NoneType, expected a "
     r"torch_topo.UlyssesConfig"),
    (lambda: torch_topo.build_sequence_parallel_groups({"sequence_parallel_size": 2}),
     r"build_sequence_parallel_groups: config: got dict, expected"),
    (lambda: torch_topo.SequenceParallelAttention(None),
     r"SequenceParallelAttention: config: got NoneType, expected"),
    (lambda: torch_topo.ops.sequence_parallel_candidates(None, world_size=2),
     r"sequence_parallel_candidates: config: got NoneType"),
    # world_size 0, -2 or 4.0 passed `world % sp` and came back as degrees (1, 2); "4" was a
    # TypeError of the % formatting.
    *[(functools.partial(torch_topo.resolve_sequence_parallel_degrees,
                         torch_topo.UlyssesConfig(sequence_parallel_size=2, ulysses_degree=1),
                         world_size=bad),
       rf"resolve_sequence_parallel_degrees: world_size: got {re.escape(repr(bad))}, expected "
       r"None or an int >= 1") for bad in (0, -2, 4.0, "4", True)],
    # A list mesh was dict()'s TypeError, a cluster of the wrong type an AttributeError.
    (lambda: torch_topo.ops.sequence_parallel_candidates(
        torch_topo.UlyssesConfig(sequence_parallel_size=2, attention=_SHAPE), world_size=2,
        mesh=[("sp", 2)]), r"sequence_parallel_candidates: mesh: got \[\('sp', 2\)\]"),
    (lambda: torch_topo.ops.sequence_parallel_candidates(
        torch_topo.UlyssesConfig(sequence_parallel_size=2, attention=_SHAPE), world_size=2,
        cluster="a100.txt"), r"sequence_parallel_candidates: cluster: got str, expected None or"),
    # The planner found it, naming the split mesh ("dp=3 x cp=2 x sp=1") the caller never gave.
    (lambda: torch_topo.ops.sequence_parallel_candidates(
        torch_topo.UlyssesConfig(sequence_parallel_size=2, attention=_SHAPE), world_size=2,
        mesh={"dp": 3, "sp": 2}), r"mesh: got \{'dp': 3, 'sp': 2\}, expected sizes whose "
                                  r"product is the world size 2"),
    (lambda: torch_topo.build_sequence_parallel_groups(
        torch_topo.UlyssesConfig(sequence_parallel_size=2), plan=3),
     r"build_sequence_parallel_groups: plan: got int, expected None or a torch_topo Plan"),
])
def test_bad_arguments_before_any_group(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_config_is_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        torch_topo.UlyssesConfig(2)
    cfg = torch_topo.UlyssesConfig(sequence_parallel_size=2)
    with pytest.raises(AttributeError):
        cfg.causal = True
