# SPDX-License-Identifier: Apache-2.0
"""Shared pieces of the sequence-parallel ops: input checks, the fp32 LSE merge and the ring
exchange (one module for all algorithms, as in zhuzilin/ring-flash-attention's utils.py)."""

from __future__ import annotations

import contextlib
import math
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

import torch
import torch.distributed as dist

from torch_topo import _C
from torch_topo.validation import is_int_in

__all__ = [
    "CheckInputs",
    "RingExchange",
    "RingTransferError",
    "check_floating",
    "check_qkv",
    "check_tensors",
    "check_same_shape",
    "group_rank_size",
    "merge_block",
    "resolve_group",
    "settled_on_error",
]

# Fixed-size shape record so the agreement check is itself a safe, equal-size collective.
_META_LEN = 24

# A dtype's code in the records: the same in every process (str hashes are salted per process).
_DTYPE_NAMES = {zlib.crc32(str(d).encode()): str(d).removeprefix("torch.")
                for d in vars(torch).values() if isinstance(d, torch.dtype)}

CheckInputs = bool | Literal["once"]
"""How the sequence-parallel ops verify that every rank's shapes agree: "once" (default) the
first call per group, op and shapes; True every call; False never."""

# Shape records every rank of a group has agreed on: per group object, keyed by (op, records).
# Only a passing check adds one, so all ranks of the group hold the same keys in the same order
# and evict the same ones: one table for all groups let a rank's other groups evict an entry
# its peers kept, after which it alone gathered. Keyed by the object, not the name, because a
# group re-created after destroy_process_group takes the old name ("0") and must not inherit
# what another set of ranks agreed on.
_AGREED: weakref.WeakKeyDictionary[dist.ProcessGroup, OrderedDict[tuple, None]] = \
    weakref.WeakKeyDictionary()
_AGREED_MAX = 1024


def resolve_group(where: str, group):
    """`group`, or the world for None. new_group hands the ranks it leaves out an int
    (GroupMember.NON_GROUP_MEMBER), on which the ops failed with "'int' object has no attribute
    'group_name'"."""
    if group is None:
        return dist.group.WORLD
    if not isinstance(group, dist.ProcessGroup):
        raise ValueError(f"{where}: group: got {group!r}, expected a ProcessGroup this rank "
                         "belongs to (new_group returns GroupMember.NON_GROUP_MEMBER to the "
                         "ranks it leaves out: call the op only on the group's members)")
    return group


def group_rank_size(group) -> tuple[int, int]:
    """(rank in group, group size) of this process; `group=None` is the default group."""
    return dist.get_rank(group), dist.get_world_size(group)


def check_tensors(where: str, **tensors: object) -> None:
    """TypeError naming the argument that is no tensor, as torch's own ops raise; None or a
    list got as far as `.dim()` and an AttributeError. Run before any collective: the shape
    check that makes ranks fail alike needs tensors to describe."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name}: got {type(t).__name__}, expected a torch.Tensor")


def check_qkv(where: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Layout [batch, seq, heads, head_dim]: same dtype and device, K and V alike, q, k and v
    of one local length (self-attention: the sequence is sharded once for all three), query
    heads a multiple of key/value heads (GQA/MQA)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(
                f"{where}: {name} must be [batch, seq, heads, head_dim]: got shape "
                f"{tuple(t.shape)}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{where}: {name} has dtype {t.dtype}, expected {q.dtype} like q")
        if t.device != q.device:
            raise ValueError(f"{where}: {name} is on {t.device}, expected {q.device} like q")
    if k.shape != v.shape:
        raise ValueError(f"{where}: k shape {tuple(k.shape)} differs from v shape "
                         f"{tuple(v.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"{where}: k shape {tuple(k.shape)} does not match q shape "
                         f"{tuple(q.shape)} in batch or head_dim")
    if k.shape[1] != q.shape[1]:
        raise ValueError(f"{where}: k has local sequence length {k.shape[1]}, expected "
                         f"{q.shape[1]} like q (the ops shard one sequence for q, k and v)")
    if k.shape[2] == 0 or q.shape[2] % k.shape[2] != 0:
        raise ValueError(f"{where}: query heads {q.shape[2]} are not a multiple of key/value "
                         f"heads {k.shape[2]}")


def check_attention_options(prefix: str, causal: object, softmax_scale: object) -> None:
    """`causal` a bool and `softmax_scale` None or a finite number > 0: a NaN scale came back
    as a finite output (SDPA), inf as NaNs, and causal="no" masked as if True. `prefix` starts
    the message ("ring_attention: ", "UlyssesConfig.")."""
    if not isinstance(causal, bool):
        raise ValueError(f"{prefix}causal: got {causal!r}, expected True or False")
    if softmax_scale is not None and (
            isinstance(softmax_scale, bool) or not isinstance(softmax_scale, int | float)
            or not math.isfinite(softmax_scale) or not softmax_scale > 0):
        raise ValueError(f"{prefix}softmax_scale: got {softmax_scale!r}, expected None or a "
                         "finite number > 0")


def check_dim(where: str, name: str, x: torch.Tensor, dim: object) -> int:
    """`dim` of `x` as a non-negative index; a float dim was a pybind11 TypeError and one out
    of range a bare IndexError."""
    if x.dim() == 0:  # the range below would read [0, -1]
        raise ValueError(f"{where}: {name}: got {dim!r}, but the tensor is 0-d (a scalar), "
                         "expected a tensor with a dimension to index")
    if not is_int_in(dim, -x.dim(), x.dim() - 1):
        raise ValueError(f"{where}: {name}: got {dim!r}, expected an int in "
                         f"[{-x.dim()}, {x.dim() - 1}] for a tensor with {x.dim()} dims")
    return dim % x.dim()


def check_floating(where: str, q: torch.Tensor) -> None:
    """Attention needs a floating-point dtype. Run as check_same_shape's `validate`, so that
    every rank raises alike: found later, by the kernel, the error would come
    after the first exchange was posted, a kernel error rather than one naming the input."""
    if not q.dtype.is_floating_point:
        raise ValueError(f"{where}: q, k and v have dtype {q.dtype}, expected a floating-point "
                         "dtype")


def check_same_shape(where: str, group, tensors: dict[str, torch.Tensor],
                     check_inputs: CheckInputs = "once",
                     rule: str = "the same dtype, local sequence length and head counts",
                     validate: Callable[[], None] | None = None,
                     settings: dict[str, int] | None = None) -> None:
    """Raises ValueError on every rank when the ranks of `group` hold tensors of different
    shapes or dtypes, give different `settings` (the op's arguments that every rank must give
    alike, as ints), or when `validate` (the op's own checks, raising ValueError) refuses the
    input of any rank.

    Equal-split exchanges with mismatched sizes (a dtype changes the bytes too) abort Gloo
    (SIGABRT in pair.cc) and corrupt or hang NCCL, so one small all_gather of fixed-size shape
    records runs first; every rank sees the same records and raises the same error, so none is
    left waiting in a collective. Each record also says whether `validate` refused the rank's
    input: a rank that raised its own error before the all_gather left the others waiting in
    it, so the refused rank raises its error after the all_gather and the others one naming
    it. Shapes `validate` refuses are never recorded as agreed.

    The check costs a collective and a host sync (the records are compared on the CPU), so by
    default ("once") it runs the first time a group sees these shapes at this op and is skipped
    for shapes the group already agreed on. A mismatch is caught when every rank holds shapes
    new to the group; a rank that alone changes to a shape the group agreed on earlier, or to
    a new one while the others repeat an old one, is not (True checks every call). Nor is a
    rank whose input `validate` alone refuses in agreed shapes (for what it reads beyond the
    records: devices, an overlap op's in_features): it raises by itself, and the others go on
    into the op's collective, which fails or waits out the timeout once that rank has stopped,
    and pairs with its next call if it goes on."""
    refused = None
    if validate is not None:
        try:
            validate()
        except ValueError as e:
            refused = e
    agreed, key = _compare(where, group, tensors, check_inputs, rule, refused is not None,
                           settings or {})
    if refused is not None:
        raise refused
    if key is not None:
        agreed[key] = None
        if len(agreed) > _AGREED_MAX:
            agreed.popitem(last=False)


def _compare(where: str, group, tensors: dict[str, torch.Tensor], check_inputs: CheckInputs,
             rule: str, refused: bool, settings: dict[str, int]
             ) -> tuple[OrderedDict | None, tuple | None]:
    """check_same_shape's comparison: (the group's agreed shapes, the key to add there once
    every rank accepted its input), the key None when nothing was compared. Raises when the
    records differ or another rank's input was refused."""
    if check_inputs is False:
        return None, None
    if check_inputs is not True and check_inputs != "once":
        raise ValueError(f"{where}: check_inputs: got {check_inputs!r}, expected True, False "
                         "or 'once'")
    rank, world = group_rank_size(group)
    if world == 1:
        return None, None
    records = []
    for t in tensors.values():
        records += [zlib.crc32(str(t.dtype).encode()), t.dim(), *t.shape]
    records += settings.values()
    if len(records) >= _META_LEN:  # the last slot is the refused flag
        raise ValueError(f"{where}: too many dims to check ({len(records)}, max "
                         f"{_META_LEN - 1})")
    agreed = _AGREED.setdefault(group, OrderedDict())
    key = (where, tuple(records))
    if check_inputs == "once" and key in agreed:
        agreed.move_to_end(key)
        return None, None
    device = next(iter(tensors.values())).device
    meta = torch.full((_META_LEN,), -1, dtype=torch.int64, device=device)
    meta[: len(records)] = torch.tensor(records, dtype=torch.int64)
    meta[-1] = int(refused)
    gathered = [torch.empty_like(meta) for _ in range(world)]
    dist.all_gather(gathered, meta, group=group)
    rows = [g.tolist() for g in gathered]
    split = len(records) - len(settings)
    for other, row in enumerate(rows):
        if row[:split] != rows[rank][:split]:
            raise ValueError(
                f"{where}: tensor shapes or dtypes differ across ranks: rank {rank} has "
                f"{_describe(tensors, settings, rows[rank])}, rank {other} has "
                f"{_describe(tensors, settings, row)}; every rank must hold {rule}")
        if row[split:-1] != rows[rank][split:-1]:
            raise ValueError(
                f"{where}: settings differ across ranks: rank {rank} has "
                f"{_describe({}, settings, rows[rank][split:])}, rank {other} has "
                f"{_describe({}, settings, row[split:])}; every rank must give the same "
                f"{', '.join(settings)}")
    others = [r for r, row in enumerate(rows) if row[-1] == 1 and r != rank]
    if others and not refused:
        raise ValueError(f"{where}: the input of rank(s) {others} of the group was refused "
                         "(their error names the problem); this rank stops too, before the "
                         "exchange")
    return agreed, key


def _describe(tensors, settings, row) -> str:
    parts, i = [], 0
    for name in tensors:
        dtype, ndim = _DTYPE_NAMES.get(row[i], "unknown dtype"), row[i + 1]
        # A 0-d record stands for a dtype alone (an overlap op's weight).
        parts.append(f"{name} {dtype}" + (f" {row[i + 2:i + 2 + ndim]}" if ndim else ""))
        i += 2 + ndim
    parts += [f"{name}={value}" for name, value in zip(settings, row[i:], strict=False)]
    return ", ".join(parts)


def merge_block(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor,
                block_lse: torch.Tensor) -> None:
    """Merges one block into the running fp32 (out [..., s, d], lse [..., s]), in place."""
    _C.merge_attn_block(out, lse, block_out, block_lse)


class RingTransferError(RuntimeError):
    """A ring transfer did not complete (on Gloo: the group's timeout ran out while a peer
    never posted its side). The backend's own error is the cause (`__cause__`)."""


class RingExchange:
    """Send to the next rank, receive from the previous one, over a process group.

    `post` starts one step (isend + irecv, batched so NCCL sees them together) and returns at
    once; `wait` finishes it. Posting step i+1 before computing on step i is the double buffer:
    the caller owns two buffers and never writes one that is still being sent. On CUDA the
    NCCL point-to-point kernels run on c10d's internal per-peer streams, and `wait` only makes
    the current stream wait on them (no host sync); on CPU Gloo runs them on its own threads.
    Run the steps inside `settled_on_error`, so that a failure between post and wait leaves
    nothing in flight.
    """

    def __init__(self, group, where: str = "ring exchange") -> None:
        self.group = group if group is not None else dist.group.WORLD
        self.rank, self.world = group_rank_size(self.group)
        self.next = dist.get_global_rank(self.group, (self.rank + 1) % self.world)
        self.prev = dist.get_global_rank(self.group, (self.rank - 1) % self.world)
        self.where = where
        self._works: list = []
        self._posted = 0

    def post(self, send: torch.Tensor, recv: torch.Tensor, tag: int = 0) -> None:
        ops = [dist.P2POp(dist.isend, send, self.next, self.group, tag),
               dist.P2POp(dist.irecv, recv, self.prev, self.group, tag)]
        self._works += dist.batch_isend_irecv(ops)
        self._posted += 1

    def wait(self) -> None:
        works, self._works = self._works, []
        for work in works:
            try:
                work.wait()
            except RuntimeError as e:
                raise RingTransferError(
                    f"{self.where}: transfer {self._posted} (send to rank {self.next}, receive "
                    f"from rank {self.prev}) did not complete: {e}; a rank that raised "
                    "mid-ring (e.g. in its attention kernel) or stopped calling the op never "
                    "posts its side, so this rank waited for the group's timeout: the group "
                    "may still hold unmatched transfers, destroy and re-create it") from e


@contextlib.contextmanager
def settled_on_error(*rings: RingExchange):
    """Re-raises an error of the ring steps inside only after every ring's posted transfers
    have finished, so none completes after the op has returned: into a buffer the allocator
    may hand out again, or matched against a later op's transfer with the same tag. Every rank
    posts the same transfers up to the step where it stops, and its neighbours go on at least
    that far, so these waits return as soon as the peers get there. A failed transfer
    (RingTransferError) is re-raised at once: the group is broken, and waiting for the other
    transfers would cost one more timeout each; a wait that fails here becomes a note on the
    error being raised (Python 3.11 and later; 3.10 has no notes and keeps the error as it
    is)."""
    try:
        yield
    except Exception as error:
        if not isinstance(error, RingTransferError):
            for ring in rings:
                try:
                    ring.wait()
                except RingTransferError as e:
                    if hasattr(error, "add_note"):
                        error.add_note(f"while finishing the posted transfers: {e}")
                    break
        raise
