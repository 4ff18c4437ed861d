"""Making new attributes, dist attributes and types in a program's own print style, and the one
insertion point, and :func:`become` (an op made anew in place).

A pass that inserts ``pd_op.all_gather`` into a 2024-style program must write ``ring_id:(Int32)3``
and no ``placements``; in a current program ``ring_id:3`` and ``placements:[...]``.  Attributes and
types go through :class:`Maker` so no pass spells a style itself; ops are built by
:class:`distc.passes.paddle_api.PaddleAPI` (on a :class:`Maker`) and placed with :class:`InsertPoint`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

from . import attrs as A
from .core import Block, Operation
from .dist import OperationDistAttr, Placement, ProcessMesh, TensorDistAttr, VecDistAttr
from .types import DenseTensorType, DistTensorType

TYPE_CHECKING = False
if TYPE_CHECKING:  # names in annotations only: typing is ~4 ms of every run's start-up
    from .types import Type
    from .values import OpResult, Value


@functools.lru_cache(maxsize=1024)
def _bools(key: tuple[bool, ...]) -> A.ArrayAttr:
    """Attributes are immutable: one object for each spelling."""
    return A.ArrayAttr(tuple(A.BoolAttr(v) for v in key))


class Maker:
    def __init__(self, style) -> None:
        self.style = style
        self.typed = style.typed_attrs

    # -- scalar attributes -------------------------------------------------------------------
    def i32(self, v: int) -> A.IntAttr:
        return A.IntAttr(int(v), "Int32" if self.typed else None)

    def i64(self, v: int) -> A.IntAttr:
        return A.IntAttr(int(v), "Int64" if self.typed else None)

    def f32(self, v: float) -> A.FloatAttr:
        return A.FloatAttr.of(v, "Float" if self.typed else None)

    def f64(self, v: float) -> A.FloatAttr:
        return A.FloatAttr.of(v, "Double" if self.typed else None)

    def fill_value(self, v: float) -> A.FloatAttr:
        """``pd_op.full``'s value: (Double) in 2024 dumps, (Float) in 2023 ones."""
        return self.f64(v) if self.style.double_fill else self.f32(v)

    @staticmethod
    def bool(v: bool) -> A.BoolAttr:
        return A.BoolAttr(bool(v))

    @staticmethod
    def bools(vs: Iterable[bool]) -> A.ArrayAttr:
        return _bools(tuple(bool(v) for v in vs))

    @staticmethod
    def str(s: str) -> A.StrAttr:
        return A.StrAttr.of(s)

    def dtype(self, name: str) -> A.Attribute:
        return A.DataTypeAttr(name, True) if self.typed else A.IdentAttr(name)

    def place(self, text: str) -> A.PlaceAttr:
        return A.PlaceAttr(text, self.typed)

    def int_array(self, vals: Sequence[int]) -> A.Attribute:
        """An IntArray attribute (``shape``, ``axis`` of full/sum...)."""
        if self.typed:
            return A.IntArrayAttr(tuple(int(v) for v in vals), True)
        return A.ArrayAttr(tuple(A.IntAttr(int(v)) for v in vals))

    def i32s(self, vals: Sequence[int]) -> A.ArrayAttr:
        return A.ArrayAttr(tuple(self.i32(v) for v in vals))

    def i64s(self, vals: Sequence[int]) -> A.ArrayAttr:
        return A.ArrayAttr(tuple(self.i64(v) for v in vals))

    # -- dist attributes ---------------------------------------------------------------------
    def tensor_dist(self, mesh: ProcessMesh, dims_mapping: Sequence[int],
                    partial: Iterable[tuple[int, str]] = ()) -> TensorDistAttr:
        return TensorDistAttr(mesh, tuple(dims_mapping), tuple(partial), form=self.style.dist_form,
                              placements_shown=self.style.placements)

    def from_placements(self, mesh: ProcessMesh, placements: Sequence[Placement], ndim: int) -> TensorDistAttr:
        d = TensorDistAttr.from_placements(mesh, placements, ndim)
        return d.with_(form=self.style.dist_form, placements_shown=self.style.placements, given=d.given)

    def restyle(self, d: TensorDistAttr | VecDistAttr) -> TensorDistAttr | VecDistAttr:
        if isinstance(d, VecDistAttr):
            return VecDistAttr(tuple(self.restyle(x) for x in d.items))  # type: ignore[misc]
        if d.is_empty or (d.form == self.style.dist_form and d.placements_shown == self.style.placements):
            return d  # (already in style: the same object, which printing and replaying key on)
        return d.with_(form=self.style.dist_form, placements_shown=self.style.placements, given=d.given)

    def op_dist(self, mesh: ProcessMesh, operands: Sequence = (), results: Sequence = ()) -> OperationDistAttr:
        return OperationDistAttr(mesh, tuple(self.restyle(x) for x in operands),
                                 tuple(self.restyle(x) for x in results),
                                 -1 if self.style.chunk_id else None)

    def dist_type(self, shape: Sequence[int], dtype: str, dist: TensorDistAttr) -> DistTensorType:
        return DistTensorType(tuple(shape), dtype, self.restyle(dist))  # type: ignore[arg-type]

    def dense_type(self, shape: Sequence[int], dtype: str) -> DenseTensorType:
        return DenseTensorType(tuple(shape), dtype, self.style.tensor_prefix)


class InsertPoint:
    """Where new ops go (as xDSL's ``InsertPoint``): before ``anchor``, or at the block's end when
    ``anchor`` is None; ops inserted one after another stay in creation order.  New ops take the
    indentation of their neighbours."""

    def __init__(self, block: Block, anchor: Operation | None) -> None:
        self.block = block
        self.anchor = anchor

    @staticmethod
    def before(op: Operation) -> "InsertPoint":
        assert op.parent is not None
        return InsertPoint(op.parent, op)

    @staticmethod
    def after(op: Operation) -> "InsertPoint":
        assert op.parent is not None
        return InsertPoint(op.parent, op.next)

    @staticmethod
    def at_start(block: Block) -> "InsertPoint":
        return InsertPoint(block, block.first)

    @staticmethod
    def at_end(block: Block) -> "InsertPoint":
        return InsertPoint(block, None)

    def insert(self, op: Operation) -> Operation:
        block, anchor = self.block, self.anchor
        if anchor is None:  # (Block.append / insert_before, linked here: thousands of new ops a pass)
            ref = block._last
            if op.indent is None and ref is not None:
                op.indent = ref.indent
            return block._link(op, ref, None)
        if op.indent is None:
            op.indent = anchor.indent
        if anchor.parent is not block:
            raise ValueError(f"{anchor!r} is not in this block")
        return block._link(op, anchor._prev, anchor)


# ------------------------------------------------------------------------ an op made anew in place
# A rewrite that replaces a one-result op ``a`` by a new op ``b`` whose result takes the place of
# ``a``'s (``b`` built, ``a``'s uses moved to it, ``a`` erased) may instead turn ``a`` itself into
# ``b``: the op object keeps its place in its block and its result object keeps its uses; every
# other slot is set as ``Operation()`` sets a new op's.  The program is the same; identity is not:
# a caller holding ``a`` across the rewrite finds it in the program as ``b`` (not erased).  The
# reshard pass's replay uses it (thousands of ops a program, a few us each less).


def become(op: Operation, name: str, result_type: Type, attrs: Mapping[str, A.Attribute],
           operands: Sequence[Value | None] | None = None, sig: str = "full") -> OpResult:
    """Make the one-result ``op`` (no regions, no lines before it) the new op ``name(operands) ->
    result_type {attrs}`` in place (``operands`` None: it keeps its own), as ``Operation(...)``
    would make it: no op id, loc, source line or result name, dirty, ``attrs`` itself held (the
    dict is never changed in place); the users of its result are marked dirty, as
    ``set_operand`` marks an op that reads another value.  Returns its result."""
    assert len(op.results) == 1 and not op.regions and not op.pre, op
    if operands is not None:
        op.set_operands(operands)
    op.name, op.op_id, op.operand_keywords, op.sig, op.src = name, None, (), sig, None
    op._attrs, op._as_read, op._reader, op._dist, op._edits = attrs, False, None, None, None
    op._line = op._col = None
    op.dirty = True
    r = op.results[0]
    r._type, r.name = result_type, None
    for u, _ in r.uses:
        u.dirty = True
    return r
