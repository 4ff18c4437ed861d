"""Values: the results of operations and the arguments of blocks, with their use lists (each
use an (operation, operand index) pair; only :mod:`distc.ir.core` changes them)."""

from __future__ import annotations

from collections.abc import Mapping

from .attrs import Attribute
from .dist import TensorDistAttr
from .types import DistTensorType, Type

# ``Operation`` and ``Block`` in annotations are distc.ir.core and .program (not imported: they import this
# module, and an import circle is one even under TYPE_CHECKING)


class Value:
    __slots__ = ("_type", "uses", "name")

    def __init__(self, type: Type, name: str | None = None) -> None:
        self._type = type
        # (no uses yet: a shared empty tuple until the first, a list from then on: a program of
        # 800,000 values is 800,000 lists otherwise; only this module changes use lists)
        self.uses: list[tuple[Operation, int]] | tuple = ()
        self.name = name  # the source spelling without '%', or None for new values

    @property
    def type(self) -> Type:
        return self._type

    @type.setter
    def type(self, t: Type) -> None:
        if t == self._type:
            return
        self._type = t
        self._touch()
        for op, _ in self.uses:
            op.dirty = True

    def retype(self, t: Type) -> None:
        """``self.type = t`` for a ``t`` the caller knows is not equal to the value's type (a
        pass's memo of what it did to values of that type): no comparison of the two."""
        self._type = t
        self._touch()
        for op, _ in self.uses:
            op.dirty = True

    def _touch(self) -> None:
        pass

    @property
    def owner(self) -> "Operation | None":
        return None

    @property
    def dist_attr(self) -> TensorDistAttr | None:
        t = self._type
        return t.dist if isinstance(t, DistTensorType) else None

    @property
    def users(self) -> list["Operation"]:
        seen: dict[int, Operation] = {}
        for op, _ in self.uses:
            seen.setdefault(id(op), op)
        return list(seen.values())

    def has_uses(self) -> bool:
        return bool(self.uses)

    def replace_all_uses_with(self, new: "Value", *, where=None) -> None:
        """Point every use (or those whose op satisfies ``where``) at ``new``."""
        if new is self:
            return
        for op, idx in list(self.uses):
            if where is None or where(op):
                op.set_operand(idx, new)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name} : {self._type}>"


def _add_use(v: Value, op: "Operation", idx: int) -> None:
    if v.uses:
        v.uses.append((op, idx))
    else:
        v.uses = [(op, idx)]


class OpResult(Value):
    __slots__ = ("op",)

    def __init__(self, op: "Operation", type: Type, name: str | None = None) -> None:
        super().__init__(type, name)
        self.op = op

    @property
    def index(self) -> int:
        """The result's place among its op's results (found, not stored: an op of 800,000 results
        would hold 800,000 more numbers; ops have a few)."""
        results = self.op.results
        if results and results[0] is self:
            return 0
        return results.index(self)

    @property
    def owner(self) -> "Operation":
        return self.op

    def _touch(self) -> None:
        self.op.dirty = True


class BlockArgument(Value):
    __slots__ = ("block", "index", "keyword", "attrs", "attrs_shown")

    def __init__(self, block: "Block", index: int, type: Type, name: str | None = None,
                 keyword: str | None = None, attrs: Mapping[str, Attribute] | None = None) -> None:
        super().__init__(type, name)
        self.block = block
        self.index = index
        self.keyword = keyword  # for %kwarg_<name> arguments
        self.attrs = dict(attrs or {})
        self.attrs_shown = True

    def _touch(self) -> None:
        self.block.dirty = True
