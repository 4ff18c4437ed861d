"""The state of lowering one ``dist_op.reshard`` for one rank.

A :class:`ReshardContext` is what a reshard function sees besides the two layouts: the rank, the
ring allocator (Paddle's ``new_group``), the collective records, notes and fixes of the lowering,
and ``ctx.api``, a :class:`distc.passes.paddle_api.PaddleAPI` positioned right before the reshard op
(its ``op_role`` and the program's print style), through which every op is built.  The builder
keeps no lowering state: it asks ``rings`` for ring ids and tells this context of each collective
it builds, which becomes a :class:`~distc.dialects.collectives.Collective` record.
"""

from __future__ import annotations

from ...dialects.collectives import Collective
from ...ir.builder import InsertPoint
from ...ir.core import Operation, Program, Value
from ..paddle_api import PaddleAPI
from .groups import RingAllocator

__all__ = ["ReshardContext", "retire"]


class ReshardContext:
    """Lowering state for one ``dist_op.reshard`` and one rank; ``api`` builds the ops."""

    def __init__(self, prog: Program, reshard_op: Operation, rank: int, rings: RingAllocator,
                 *, records: list | None = None, notes: list | None = None, cache: dict | None = None) -> None:
        """``prog``: the program ``reshard_op`` is in (its print style); ``cache``: the dist attrs
        built so far in this lowering, shared by its contexts."""
        self.op = reshard_op
        self.rank = rank
        self.rings = rings
        self.records: list[Collective] = records if records is not None else []
        self.notes: list[str] = notes if notes is not None else []
        self.function = ""  # name of the reshard function running (for records)
        self.layouts: tuple | None = None  # (src, dst) of the reshard being lowered
        # True: reproduce Paddle 3.3.1 exactly, bugs included; False: Paddle's lowering with its
        # numeric bugs fixed (the text differs only on the ranks Paddle gets wrong)
        self.paddle_only = False
        self.fixes: list[str] = []
        self.api = PaddleAPI(prog.style, InsertPoint.before(reshard_op), op_role=reshard_op.attr("op_role"),
                             new_group=rings.get, on_collective=self._record, cache=cache)

    def ring(self, ranks) -> int:
        return self.rings.get(ranks)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def fix(self, text: str) -> None:
        """Record that distc departs from Paddle's text here to fix a numeric bug of Paddle's."""
        self.fixes.append(text)
        self.notes.append(text)

    def _record(self, kind: str, op: Operation, ring_id: int, ranks, v: Value | None, shape=None,
                dtype: str = "f32", **extra) -> None:
        if v is not None:
            dtype = getattr(v.type, "dtype", "f32")
            shape = self.api.local_shape(v, self.rank) if shape is None else shape
        self.records.append(Collective.of(
            kind, op.name, ring_id, ranks, self.rank, dtype, tuple(shape or ()), layouts=self.layouts,
            function=self.function, line=self.op.loc[0] if self.op.loc else None, **extra))


def retire(op: Operation, out: Value | None) -> Value | None:
    """The lowered reshard ``op``'s uses go to ``out`` (if any); ``op`` goes when nothing uses it."""
    r = op.results[0]
    if out is not None:
        r.replace_all_uses_with(out)
    if not r.uses:
        op.erase()
    return out
