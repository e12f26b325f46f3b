# SPDX-License-Identifier: Apache-2.0
"""Bad input on one rank only, run on every rank of a RankPool: every rank must raise the
input check's ValueError. A rank that raised its own shape error before the check left the
others waiting in the check's all_gather for the group's timeout (then a Gloo error). The
calls check on every call (check_inputs=True): with "once", ranks whose shapes the group agreed
on in an earlier test skip the check, the documented limit of that mode."""

from __future__ import annotations

import re

import torch
from ops_cases import qkv

import torch_topo

_CASES = {
    # heads not a multiple of the group size on the last rank only
    "ulysses_heads": lambda last, w: torch_topo.ulysses_attention(
        *qkv(h=w + 1 if last else 2 * w, hk=1), check_inputs=True),
    # v with other heads than k on the last rank only
    "ulysses_v_heads": lambda last, w: torch_topo.ulysses_attention(
        *qkv(h=2 * w, hk=2 * w, hv=w if last else None), check_inputs=True),
    "ring_zigzag_odd": lambda last, w: torch_topo.ring_attention(
        *qkv(s=3 if last else 4), balance="zigzag", check_inputs=True),
    "ring_v_heads": lambda last, w: torch_topo.ring_attention(*qkv(hv=2 if last else None),
                                                             check_inputs=True),
    # Shards of another length or dtype on the last rank aborted Gloo's all_gather (SIGABRT);
    # shapes no other test uses, as these checks run "once".
    "unshard_length": lambda last, w: torch_topo.unshard_sequence(
        torch.zeros(3, 5, 2 * w + 2 * last), 2, balance="none"),
    "zigzag_unshard_dtype": lambda last, w: torch_topo.zigzag_unshard(
        torch.zeros(3, 5, 2, dtype=torch.float64 if last else torch.float32), 2),
    # Equal shards but a dim out of range on the last rank: it raised alone, before the check.
    "unshard_dim": lambda last, w: torch_topo.unshard_sequence(
        torch.zeros(3, 7, 2), 5 if last else 1, balance="none"),
    "zigzag_unshard_dim": lambda last, w: torch_topo.zigzag_unshard(
        torch.zeros(3, 9, 2), -4 if last else 2),
}

# What every rank raises: the shapes' disagreement, or, where they agree and one rank refused
# its own input, that rank's error and on the others one naming it.
_AGREED_ERROR = (r"shapes or dtypes differ across ranks|dim: got -?\d+, expected"
                 r"|the input of rank\(s\) \[\d+\] of the group was refused")


def one_rank_bad(rank, world, *, call):
    try:
        _CASES[call](rank == world - 1, world)
    except ValueError as e:
        if not re.search(_AGREED_ERROR, str(e)):
            raise AssertionError(f"{call}: message {str(e)!r}") from e
        return str(e)
    raise AssertionError(f"{call}: no ValueError raised")
