"""Paddle's collective ops in both print eras, and the one record of a collective with its byte model.

A 2024-style program (typed attributes) spells collectives ``c_allgather``, ``c_reducescatter``,
``c_broadcast`` and ``c_allreduce_<reduce>_`` (the reduce type in the name); current programs
write ``all_gather``, ``reduce_scatter``, ``broadcast`` and ``all_reduce`` with a
``reduce_type`` attribute.  :data:`COLLECTIVE_OPS` maps every spelling to its *kind*.

"Bytes moved" is what one rank sends over the network with the usual ring algorithms, for a
buffer of ``B`` bytes on that rank and a group of ``n`` ranks:

==============  =============================  =========================================
kind            B is                           bytes sent per rank
==============  =============================  =========================================
all_gather      the local piece (input)        ``(n-1) * B``
reduce_scatter  the local full buffer (input)  ``(n-1)/n * B``
all_reduce      the buffer                     ``2 (n-1)/n * B``
all_to_all      the local buffer (input)       ``(n-1)/n * B``
broadcast       the buffer                     ``B`` on the root, 0 elsewhere (``B`` with a ring)
send / recv     the message                    ``B`` sent / 0 sent (``B`` received)
==============  =============================  =========================================

An op whose group does not hold the rank (Paddle lowers some steps on every rank and drops them
later in ``remove_other_rank_op_pass``) is a record with ``runs=False`` that moves nothing.
"""

from __future__ import annotations


from ..ir.dist import REDUCE_TYPES, TensorDistAttr
from ..ir.records import field, record
from ..ir.types import DTYPE_BYTES

# the kinds
ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, SEND, RECV = (
    "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast", "send", "recv")

# current op names
PD_ALL_GATHER = "pd_op.all_gather"
PD_ALL_REDUCE = "pd_op.all_reduce"
PD_ALL_REDUCE_ = "pd_op.all_reduce_"
PD_REDUCE_SCATTER = "pd_op.reduce_scatter"
PD_ALL_TO_ALL = "pd_op.all_to_all"
PD_BROADCAST = "pd_op.broadcast"
PD_SEND_V2 = "pd_op.send_v2"
PD_RECV_V2 = "pd_op.recv_v2"
# 2024 op names
C_ALLGATHER = "pd_op.c_allgather"
C_REDUCESCATTER = "pd_op.c_reducescatter"
C_BROADCAST = "pd_op.c_broadcast"
C_ALLTOALL = "pd_op.alltoall"
C_ALLREDUCE_SUM_ = "pd_op.c_allreduce_sum_"
C_ALLREDUCE_MAX_ = "pd_op.c_allreduce_max_"
C_ALLREDUCE_MIN_ = "pd_op.c_allreduce_min_"
C_ALLREDUCE_PROD_ = "pd_op.c_allreduce_prod_"
C_ALLREDUCE_AVG_ = "pd_op.c_allreduce_avg_"
C_ALLREDUCE_SUM = "pd_op.c_allreduce_sum"
C_ALLREDUCE_MAX = "pd_op.c_allreduce_max"

# reduce type -> the 2024 all-reduce op (in place, as Paddle's 2024 reshard functions emit it)
ALLREDUCE_2024 = {
    "SUM": C_ALLREDUCE_SUM_, "MAX": C_ALLREDUCE_MAX_, "MIN": C_ALLREDUCE_MIN_,
    "PRODUCT": C_ALLREDUCE_PROD_, "AVG": C_ALLREDUCE_AVG_,
}
# current name -> 2024 name (typed-attribute programs); all_to_all keeps its name in both
ERA_2024_NAMES = {
    PD_ALL_GATHER: C_ALLGATHER,
    PD_REDUCE_SCATTER: C_REDUCESCATTER,
    PD_BROADCAST: C_BROADCAST,
}

# every spelling -> kind
COLLECTIVE_OPS = {
    PD_ALL_GATHER: ALL_GATHER, C_ALLGATHER: ALL_GATHER,
    PD_ALL_REDUCE: ALL_REDUCE, PD_ALL_REDUCE_: ALL_REDUCE,
    **{name: ALL_REDUCE for name in ALLREDUCE_2024.values()},
    C_ALLREDUCE_SUM: ALL_REDUCE, C_ALLREDUCE_MAX: ALL_REDUCE,
    "pd_op.c_allreduce_min": ALL_REDUCE, "pd_op.c_allreduce_prod": ALL_REDUCE, "pd_op.c_allreduce_avg": ALL_REDUCE,
    PD_REDUCE_SCATTER: REDUCE_SCATTER, C_REDUCESCATTER: REDUCE_SCATTER,
    PD_ALL_TO_ALL: ALL_TO_ALL, C_ALLTOALL: ALL_TO_ALL,
    PD_BROADCAST: BROADCAST, C_BROADCAST: BROADCAST,
    PD_SEND_V2: SEND, PD_RECV_V2: RECV,
}


def base_name(op_name: str) -> str:
    """``pd_op.c_allreduce_sum_`` -> ``c_allreduce_sum``: the name without dialect and in-place ``_``."""
    short = op_name.split(".", 1)[1] if "." in op_name else op_name
    return short[:-1] if short.endswith("_") and short != "share_data_" else short


# the same tables keyed by base name (the simulator's view: in-place or not runs the same)
KIND_BY_BASE = {base_name(n): k for n, k in COLLECTIVE_OPS.items()}
# 2024 all-reduce base name -> Paddle's ReduceType index (the reduce type is in the name)
C_ALLREDUCE_REDUCE = {base_name(n): REDUCE_TYPES.index(r) for r, n in ALLREDUCE_2024.items()}


def collective_kind(op_name: str) -> str | None:
    return COLLECTIVE_OPS.get(op_name)


def bytes_moved(kind: str, nbytes: int, nranks: int, *, root: bool = True) -> int:
    """Bytes one rank sends for a collective over ``nranks`` with a local buffer of ``nbytes``."""
    n = max(nranks, 1)
    if kind == ALL_GATHER:
        return (n - 1) * nbytes
    if kind in (REDUCE_SCATTER, ALL_TO_ALL):
        return (n - 1) * nbytes // n
    if kind == ALL_REDUCE:
        return 2 * (n - 1) * nbytes // n
    if kind == BROADCAST:
        return nbytes if root else 0
    if kind == SEND:
        return nbytes
    return 0


def buffer_bytes(dtype: str, shape) -> int:
    n = 1
    for d in shape:
        n *= max(d, 0)
    return n * DTYPE_BYTES.get(dtype, 4)


@record
class Collective:
    """One communication op as one rank runs it: group, buffer, bytes sent and received.

    Made by the reshard lowering as it inserts ops (with the layouts and function) and by
    scanning any lowered program (:func:`distc.analysis.cost.collectives_in`)."""

    kind: str  # all_gather, all_reduce, reduce_scatter, all_to_all, broadcast, send, recv
    op: str  # the op name as printed
    ring_id: int | None
    ranks: tuple[int, ...]
    rank: int | None
    dtype: str
    local_shape: tuple[int, ...]  # the buffer this rank contributes (send/input) or receives
    nbytes: int  # the local buffer
    moved: int  # bytes this rank sends
    received: int = 0
    function: str = ""  # the reshard function that emitted it
    line: int | None = None
    runs: bool = True  # False: the rank is not in the group (Paddle removes the op on this rank later)
    layouts: tuple[TensorDistAttr, TensorDistAttr] | None = field(default=None, repr=False)
    reduce: str | None = None  # all_reduce: the reduce type
    root: int | None = None  # broadcast: the root's index in the group
    peer: int | None = None  # send/recv: the other rank
    sized: bool = True  # False: the group's size is unknown (a dense program's op with no nranks, ring
    # of unknown size): ``moved``/``received`` are 0 but not known to be 0

    @property
    def reshard(self) -> str:
        """``s1 on [0,1] -> r on [0,1]``: the reshard being lowered (empty if unknown)."""
        if not self.layouts:
            return ""
        return f"{self.layouts[0].short_name()} -> {self.layouts[1].short_name()}"

    @classmethod
    def of(cls, kind: str, op: str, ring_id: int | None, ranks, rank: int | None, dtype: str, shape,
           **kw) -> "Collective":
        """The record with its byte model applied (``root`` for broadcasts: index in ``ranks``).
        ``size``: the group's size where ``ranks`` are unknown (a dense program's ``nranks``);
        neither known (and the op not a send/recv): a record with ``sized`` False."""
        ranks = tuple(ranks)
        shape = tuple(shape)
        size = kw.pop("size", None)
        nbytes = buffer_bytes(dtype, shape)
        if rank is not None and ranks and rank not in ranks:
            return cls(kind, op, ring_id, ranks, rank, dtype, shape, nbytes, 0, 0, runs=False, **kw)
        if kind == RECV:
            moved, received = 0, nbytes
        elif not ranks and kind != SEND and (size is None or kind == BROADCAST):
            return cls(kind, op, ring_id, ranks, rank, dtype, shape, nbytes, 0, 0, sized=False, **kw)
        elif not ranks and kind != SEND:
            moved = bytes_moved(kind, nbytes, size)
            received = moved
        elif kind == BROADCAST:
            root_idx = kw.get("root") or 0
            is_root = rank is not None and ranks and ranks[root_idx] == rank
            moved = bytes_moved(kind, nbytes, len(ranks) or 1, root=bool(is_root))
            received = 0 if is_root else nbytes
        else:
            moved = bytes_moved(kind, nbytes, len(ranks) or 1)
            received = moved if kind in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, ALL_REDUCE) else 0
        return cls(kind, op, ring_id, ranks, rank, dtype, shape, nbytes, moved, received, **kw)

    def as_dict(self) -> dict:
        """Plain data (for JSON): every field but the layouts, ``reshard`` as text; reduce, root
        and peer only where they apply."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("layouts", "reduce", "root", "peer", "sized")}
        d["reshard"] = self.reshard
        if not self.sized:
            d["sized"] = False
        for k in ("reduce", "root", "peer"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d
