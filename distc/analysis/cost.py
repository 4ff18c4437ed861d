"""Communication summary of a lowered program: each collective, its group, bytes moved per rank.

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

An op whose group does not hold the rank (Paddle lowers some steps on every rank, e.g. the
all-to-all after a cross-mesh copy on the sending ranks; its later ``remove_other_rank_op_pass``
drops them) is listed with ``runs=False`` and moves nothing.

Two entry points: :func:`record_dict` turns the records the reshard pass keeps while it lowers
(``PassContext.collectives``) into plain dicts, and :func:`collectives_in` finds the collectives
of any program (already lowered by distc or by Paddle) by scanning its ops.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import DTYPE_BYTES, DistTensorType

COLLECTIVE_OPS = {
    "pd_op.all_gather": "all_gather", "pd_op.c_allgather": "all_gather",
    "pd_op.all_reduce": "all_reduce", "pd_op.all_reduce_": "all_reduce",
    "pd_op.c_allreduce_sum_": "all_reduce", "pd_op.c_allreduce_max_": "all_reduce",
    "pd_op.c_allreduce_min_": "all_reduce", "pd_op.c_allreduce_prod_": "all_reduce",
    "pd_op.c_allreduce_avg_": "all_reduce", "pd_op.c_allreduce_sum": "all_reduce",
    "pd_op.reduce_scatter": "reduce_scatter", "pd_op.c_reducescatter": "reduce_scatter",
    "pd_op.all_to_all": "all_to_all", "pd_op.alltoall": "all_to_all",
    "pd_op.broadcast": "broadcast", "pd_op.c_broadcast": "broadcast",
    "pd_op.send_v2": "send", "pd_op.recv_v2": "recv",
}


def bytes_moved(kind: str, nbytes: int, nranks: int, *, root: bool = True) -> int:
    """Bytes one rank sends for a collective over ``nranks`` with a local buffer of ``nbytes``."""
    n = max(nranks, 1)
    if kind == "all_gather":
        return (n - 1) * nbytes
    if kind in ("reduce_scatter", "all_to_all"):
        return (n - 1) * nbytes // n
    if kind == "all_reduce":
        return 2 * (n - 1) * nbytes // n
    if kind == "broadcast":
        return nbytes if root else 0
    if kind == "send":
        return nbytes
    return 0


@dataclass
class Collective:
    kind: str
    op: str
    ring_id: int | None
    ranks: tuple[int, ...]
    rank: int | None
    dtype: str
    local_shape: tuple[int, ...]
    nbytes: int  # the local buffer
    moved: int  # bytes this rank sends
    received: int = 0
    reshard: str = ""
    function: str = ""
    line: int | None = None
    runs: bool = True  # False: the rank is not in the group (Paddle removes the op on this rank later)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _collective(kind, op_name, ring_id, ranks, rank, dtype, shape, **kw) -> Collective:
    n = 1
    for d in shape:
        n *= max(d, 0)
    nbytes = n * DTYPE_BYTES.get(dtype, 4)
    nr = len(ranks) if ranks else 1
    kw.pop("runs", None)
    if rank is not None and ranks and rank not in ranks:
        kw.pop("root", None)
        return Collective(kind, op_name, ring_id, tuple(ranks), rank, dtype, tuple(shape), nbytes, 0, 0,
                          runs=False, **kw)
    if kind == "recv":
        moved, received = 0, nbytes
    elif kind == "broadcast":
        root_idx = kw.pop("root", 0)
        is_root = rank is not None and ranks and ranks[root_idx] == rank
        moved = bytes_moved(kind, nbytes, nr, root=bool(is_root))
        received = 0 if is_root else nbytes
    else:
        moved = bytes_moved(kind, nbytes, nr)
        received = {"all_gather": moved, "reduce_scatter": moved, "all_to_all": moved,
                    "all_reduce": moved}.get(kind, 0)
    kw.pop("root", None)
    return Collective(kind, op_name, ring_id, tuple(ranks), rank, dtype, tuple(shape), nbytes, moved,
                      received, **kw)


def record_dict(rec) -> dict:
    """A :class:`~distc.passes.reshard.CollectiveRecord` as a plain dict (for PassContext)."""
    extra = dict(rec.extra)
    c = _collective(rec.kind, rec.op_name, rec.ring_id, rec.ranks, rec.rank, rec.dtype, rec.local_shape,
                    reshard=rec.reshard, function=rec.function, line=rec.loc[0] if rec.loc else None,
                    **({"root": extra["root"]} if "root" in extra else {}))
    d = c.as_dict()
    d.update({k: v for k, v in extra.items() if k not in d})
    return d


def collectives_in(prog, rank: int | None = None, rings: dict | None = None) -> list[Collective]:
    """The collectives of a program, found by op name (both eras).  Group ranks come from
    ``rings`` (ring id -> ranks) when given, else from the op's mesh (for send/recv: the pair)."""
    out = []
    for op in prog.walk():
        kind = COLLECTIVE_OPS.get(op.name)
        if kind is None:
            continue
        rid = getattr(op.attrs.get("ring_id"), "value", None)
        ranks: tuple[int, ...] = ()
        if rings and rid in rings:
            ranks = tuple(rings[rid])
        elif op.dist_attr is not None:
            ranks = tuple(sorted(op.dist_attr.mesh.process_ids))
            if kind in ("send", "recv"):
                ranks = ()
        v = op.operand(0) if op.num_operands else (op.results[0] if op.results else None)
        t = v.type if v is not None else None
        dtype = getattr(t, "dtype", "f32")
        if isinstance(t, DistTensorType):
            shape = t.local_shape(rank)
        else:
            shape = tuple(getattr(t, "shape", ()))
        if kind == "recv":
            osh = getattr(op.attrs.get("out_shape"), "value", None)
            if osh:
                shape = tuple(osh)
        root = getattr(op.attrs.get("root"), "value", 0)
        kw = {"root": root} if kind == "broadcast" else {}
        out.append(_collective(kind, op.name, rid, ranks, rank, dtype, shape,
                               line=op.loc[0] if op.loc else None, **kw))
    return out


def summarize(collectives: list) -> dict:
    """Totals per kind and overall (bytes sent by this rank)."""
    tot: dict[str, dict] = {}
    for c in collectives:
        d = c if isinstance(c, dict) else c.as_dict()
        t = tot.setdefault(d["kind"], {"count": 0, "moved": 0})
        t["count"] += 1
        t["moved"] += d["moved"]
    return {"by_kind": tot, "count": sum(t["count"] for t in tot.values()),
            "moved": sum(t["moved"] for t in tot.values())}


def human_bytes(n: int) -> str:
    """``96 B``, ``1.5 KiB``, ``3.0 MiB``."""
    if abs(n) < 1024:
        return f"{n} B"
    x = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        x /= 1024
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.1f} {unit}"
    return f"{n} B"  # pragma: no cover
