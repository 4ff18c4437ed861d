"""Communication summary of a lowered program: each collective, its group, bytes moved per rank.

The collective ops of both eras, the :class:`~distc.dialects.collectives.Collective` record and
its byte model ("bytes moved" = what one rank sends with the usual ring algorithms) are in
:mod:`distc.dialects.collectives`.

The reshard pass records a ``Collective`` for each op it inserts (``PassContext.collectives``);
:func:`collectives_in` finds the collectives of any program (already lowered by distc or by
Paddle) by scanning its ops (``distc diff``), and :func:`totals` totals either.
"""

from __future__ import annotations

from operator import attrgetter

from ..dialects.collectives import (  # noqa: F401 (bytes_moved, Collective: re-exported)
    ALL_GATHER, BROADCAST, COLLECTIVE_OPS, RECV, REDUCE_SCATTER, SEND, Collective, bytes_moved,
)
from ..ir.types import DistTensorType
from ..syntax.diagnostics import DiagnosticError

_REGIONS = attrgetter("regions")


def collectives_in(prog, rank: int | None = None, rings: dict | None = None) -> list[Collective]:
    """The collectives of a program, found by op name (both eras).  Group ranks come from
    ``rings`` (ring id -> ranks) when given, else from the op's mesh (for send/recv: the pair).
    An op without a mesh (a dense program) gets its group's size from its ``nranks``, else from
    another op of its ring (:func:`ring_sizes`); neither: a record of unknown size (``sized``)."""
    out = []
    sizes = None
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
            if kind in (SEND, RECV):
                ranks = ()
        size = None
        if not ranks and kind not in (SEND, RECV):
            if sizes is None:
                sizes = ring_sizes(prog)
            size = _nranks(op) or sizes.get(rid)
        v = op.operand(0) if op.num_operands else (op.results[0] if op.results else None)
        t = v.type if v is not None else None
        dtype = getattr(t, "dtype", "f32")
        if isinstance(t, DistTensorType):
            shape = t.local_shape(rank)
        else:
            shape = tuple(getattr(t, "shape", ()))
        if kind == RECV:
            osh = getattr(op.attrs.get("out_shape"), "value", None)
            if osh:
                shape = tuple(osh)
        root = getattr(op.attrs.get("root"), "value", 0)
        peer = getattr(op.attrs.get("peer"), "value", None)  # send/recv: the other rank's index in the pair
        peer = ranks[peer] if kind in (SEND, RECV) and isinstance(peer, int) and 0 <= peer < len(ranks) else None
        out.append(Collective.of(kind, op.name, rid, ranks, rank, dtype, shape,
                                 line=op.loc[0] if op.loc else None,
                                 root=root if kind == BROADCAST else None, peer=peer, size=size))
    return out


def _nranks(op) -> int | None:
    n = getattr(op.attrs.get("nranks"), "value", None)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def ring_sizes(prog) -> dict[int, int]:
    """Ring id -> group size, as a dense program says it: an op's ``nranks``, else an all-gather's
    (reduce-scatter's) first dim out (in) over in (out).  A ring of two sizes is left out."""
    found: dict[int, set[int]] = {}
    for op in prog.walk():
        kind = COLLECTIVE_OPS.get(op.name)
        rid = getattr(op.attrs.get("ring_id"), "value", None)
        if kind is None or not isinstance(rid, int) or kind in (SEND, RECV):
            continue
        n = _nranks(op)
        if n is None and kind in (ALL_GATHER, REDUCE_SCATTER) and op.num_operands and op.results:
            src, dst = op.operand(0), op.results[0]
            a = getattr(getattr(src, "type", None), "shape", None)
            b = getattr(dst.type, "shape", None)
            if kind == REDUCE_SCATTER:
                a, b = b, a
            if a and b and a[0] > 0 and b[0] > 0 and b[0] % a[0] == 0:
                n = b[0] // a[0]
        if n is not None:
            found.setdefault(rid, set()).add(n)
    return {rid: next(iter(ns)) for rid, ns in found.items() if len(ns) == 1}


def totals(collectives, *, by_group: bool = False) -> dict:
    """Count and bytes sent of the collectives a rank runs (records with ``runs``), per kind, or
    with ``by_group`` per (kind, group ranks); sorted by key.  The one totalling of ``shard``,
    ``diff`` and their ``--json``: ``{"all_gather": {"count": 6, "bytes_sent": 1312}, ...}``."""
    out: dict = {}
    for c in collectives:
        if not c.runs:
            continue
        key = (c.kind, c.ranks) if by_group else c.kind
        t = out.get(key)
        if t is None:
            t = out[key] = {"count": 0, "bytes_sent": 0}
        t["count"] += 1
        t["bytes_sent"] += c.moved
        if not c.sized:  # bytes_sent leaves these out: their group's size is unknown
            t["unsized"] = t.get("unsized", 0) + 1
    return dict(sorted(out.items()))


def sent_to(c: Collective) -> dict[int, int]:
    """Who gets the bytes ``c.rank`` sends in collective ``c``: ``{rank: bytes}``.  A send goes to
    its peer; a group collective's bytes (its byte model, :func:`bytes_moved`) are split evenly over
    the group's other ranks (each gets its piece of an all-gather, its 1/n of a reduce-scatter or an
    all-reduce; a broadcast's root sends to every other rank), so the values add up to ``c.moved``."""
    if not c.runs or c.moved <= 0:
        return {}
    if c.kind == SEND:
        return {c.peer: c.moved} if c.peer is not None else {}
    others = [r for r in c.ranks if r != c.rank]
    if not others:
        return {}
    share, extra = divmod(c.moved, len(others))
    return {r: share + (i < extra) for i, r in enumerate(others)}


def human_bytes(n: float) -> str:
    """``96 B``, ``1.5 KiB``, ``3.0 MiB``: the one byte formatter of every report (whole bytes
    below 1 KiB, also for a float: a chart's axis)."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    x = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        x /= 1024
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def program_ranks(prog) -> list[int]:
    """Every process id of every mesh in the program (op meshes and value types)."""
    meshes = {}  # by identity: a program shares a few mesh objects among all its ops
    seen: set[int] = set()  # ids of the op dist attrs and types looked at (shared objects: each once)
    ops = prog.block.ops
    for op in (prog.walk() if any(map(_REGIONS, ops)) else ops):  # (walk's generator only for regions)
        d = op.dist_attr
        if d is not None and id(d) not in seen:
            seen.add(id(d))
            meshes[id(d.mesh)] = d.mesh
        for r in op.results:
            t = r._type
            if id(t) not in seen:
                seen.add(id(t))
                if isinstance(t, DistTensorType):
                    meshes[id(t.dist.mesh)] = t.dist.mesh
    return sorted({p for m in meshes.values() for p in m.process_ids})


def has_rank(prog, rank: int) -> bool:
    """Whether ``rank`` is in :func:`program_ranks` (each mesh looked at once, up to the first
    holding it: a one-rank run's check of its ``--rank`` sees a few ops)."""
    seen: set[int] = set()  # ids of the meshes looked at
    for op in prog.walk():
        d = op.dist_attr
        if d is not None and id(d.mesh) not in seen:
            if rank in d.mesh.process_ids:
                return True
            seen.add(id(d.mesh))
        for r in op.results:
            t = r.type
            if isinstance(t, DistTensorType) and id(t.dist.mesh) not in seen:
                if rank in t.dist.mesh.process_ids:
                    return True
                seen.add(id(t.dist.mesh))
    return False


def require_rank(prog, rank: int, *, known: list[int] | None = None, prefix: str = "", hint: str = "",
                 filename: str | None = None) -> list[int]:
    """``rank`` is a process of one of the program's meshes (every command's ``--rank``, a pass's
    ``rank=``), else a diagnostic naming the ranks there are; the program's ranks."""
    known = program_ranks(prog) if known is None else known
    if known and rank not in known:
        raise DiagnosticError(f"{prefix}rank {rank} is in none of the program's meshes (ranks "
                              f"{', '.join(map(str, known))}){hint}", filename=filename or prog.filename)
    return known
