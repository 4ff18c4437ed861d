"""A program: its top-level block and the style it prints back in; the whole-program walks the
passes scan with (:meth:`Program.walk`, :meth:`Program.find`); the printer hook (``str(program)``)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress
from operator import attrgetter

from .block import Block
from .operation import Operation
from .values import Value


class Program:
    """A printed PIR program: its top-level block, plus what is needed to print it back in its own style."""

    def __init__(self, block: Block | None = None, style=None, filename: str | None = None) -> None:
        from .style import Style

        self.block = block if block is not None else Block()  # (an empty Block is falsy: len 0)
        self.style: Style = style or Style()
        self.filename = filename
        self.head = "{\n"  # text before the first op (banner, the '{' line)
        self.tail = "}\n"  # the closing line and anything after it

    @property
    def ops(self) -> list[Operation]:
        return self.block.ops

    def walk(self) -> Iterator[Operation]:
        """Every op, nested ones included, in program order (each op before the ops of its
        regions).  Ops added or removed while walking are not seen: the walk is over the blocks'
        op lists as they were when it reached them.  Where no op holds regions (most programs) it
        iterates the top block's own list: a whole-program scan without a generator step an op."""
        ops = self.block.ops
        return iter(ops) if not any(map(_REGIONS, ops)) else self._walk_nested(ops)

    def _walk_nested(self, ops: list[Operation]) -> Iterator[Operation]:
        for op in ops:
            if op.regions:
                yield from op.walk()
            else:
                yield op  # (most ops hold no regions: no nested generator for them)

    def all_ops(self) -> list[Operation]:
        """``list(self.walk())``; where no op holds regions, the top block's own list (do not change it)."""
        ops = self.block.ops
        return ops if not any(map(_REGIONS, ops)) else list(self._walk_nested(ops))

    def values(self) -> Iterator[Value]:
        for op in self.walk():
            for r in op.regions:
                for b in r.blocks:
                    yield from b.args
            yield from op.results

    def find(self, name: str) -> list[Operation]:
        """The ops named ``name``, in walk order (the names compared in one pass in C)."""
        ops = self.all_ops()
        return list(compress(ops, map(name.__eq__, map(_NAME, ops))))

    def __str__(self) -> str:
        if _PRINTER is None:
            raise RuntimeError("no PIR printer installed: import distc.syntax (or use distc.Program, which does)")
        return _PRINTER[0](self)

    def value(self, name: str) -> Value:
        """A value by its printed name (``%3``) in the program's current numbering."""
        if _PRINTER is None:
            raise RuntimeError("no PIR printer installed: import distc.syntax (or use distc.Program, which does)")
        want = name.lstrip("%")
        for v, n in _PRINTER[1](self).items():
            if n == want:
                return v
        raise KeyError(name)

    def clone(self) -> "Program":
        """A structural copy that prints exactly as this program does."""
        from .clone import clone_program

        return clone_program(self)


_NAME, _REGIONS = attrgetter("name"), attrgetter("regions")

# The printer lives a layer up (distc.syntax.printer) and installs itself here, so that
# ``str(program)`` works while ``ir`` imports nothing from ``syntax``.
_PRINTER = None


def set_printer(fn, names) -> None:
    """``fn(program)`` prints, ``names(program)`` gives each value's printed name (no ``%``)."""
    global _PRINTER
    _PRINTER = (fn, names)
