"""The containers of the IR: a block is an ordered list of ops (a doubly linked list, see
:class:`Block`) with its arguments; a region, an op's list of blocks; a program, its top-level
block and the style it prints back in, with the whole-program walks the passes scan with
(:meth:`Program.walk`, :meth:`Program.all_ops`, :meth:`Program.find`) and the printer hook
(``str(program)``).  Operations (:mod:`.core`) appear here in annotations only: this module imports
none of them (``core`` re-exports these classes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress
from operator import attrgetter

from .attrs import Attribute
from .types import Type
from .values import BlockArgument, Value


class Block:
    """An ordered list of ops, kept as a doubly linked list so that inserting next to an op and
    removing one are O(1) however large the program.  ``block.ops`` gives a list snapshot (cached
    until the block changes; do not mutate it)."""

    __slots__ = ("_first", "_last", "_len", "_cache", "args", "parent", "post", "arg_src", "dirty", "indent")

    def __init__(self, ops: Iterable[Operation] = ()) -> None:
        self._first: Operation | None = None
        self._last: Operation | None = None
        self._len = 0
        self._cache: list[Operation] | None = []
        self.args: list[BlockArgument] = []
        self.parent: Region | None = None
        self.post: list[str] = []  # comment/blank lines before the block's closing line
        self.arg_src: str | None = None  # the block-argument line as read
        self.dirty = False
        self.indent: str | None = None
        for op in ops:
            self.append(op)

    @property
    def ops(self) -> list[Operation]:
        c = self._cache
        if c is None:
            c = []
            op = self._first
            while op is not None:
                c.append(op)
                op = op._next
            self._cache = c
        return c

    def add_argument(self, type: Type, name: str | None = None, keyword: str | None = None,
                     attrs: Mapping[str, Attribute] | None = None) -> BlockArgument:
        a = BlockArgument(self, len(self.args), type, name, keyword, attrs)
        self.args.append(a)
        self.dirty = True
        return a

    def _link(self, op: Operation, prev: Operation | None, nxt: Operation | None) -> Operation:
        if op.parent is not None:
            raise ValueError(f"{op!r} is already in a block")
        op.parent = self
        op._prev = prev
        op._next = nxt
        if prev is None:
            self._first = op
        else:
            prev._next = op
        if nxt is None:
            self._last = op
        else:
            nxt._prev = op
        self._len += 1
        self._cache = None
        return op

    def append(self, op: Operation) -> Operation:
        return self._link(op, self._last, None)

    def extend(self, ops: Sequence[Operation]) -> None:
        """Append new ops (in no block yet) at the end, in order, linked in one pass (the parser's runs)."""
        if ops:
            last = self._last
            for op, p, n in zip(ops, (last, *ops), (*ops[1:], None)):
                op.parent, op._prev, op._next = self, p, n
            if last is not None:
                last._next = ops[0]
            self._first, self._last, self._len, self._cache = self._first or ops[0], ops[-1], self._len + len(ops), None

    def prepend(self, op: Operation) -> Operation:
        return self._link(op, None, self._first)

    def index(self, op: Operation) -> int:
        if op.parent is not self:
            raise ValueError(f"{op!r} is not in this block")
        i = 0
        o = self._first
        while o is not op:
            o = o._next  # type: ignore[union-attr]
            i += 1
        return i

    def insert(self, index: int, op: Operation) -> Operation:
        if index >= self._len:
            return self.append(op)
        return self.insert_before(self.ops[index], op)

    def insert_before(self, anchor: Operation, *ops: Operation) -> Operation:
        if anchor.parent is not self:
            raise ValueError(f"{anchor!r} is not in this block")
        for op in ops:
            self._link(op, anchor._prev, anchor)
        return ops[-1] if ops else anchor

    def insert_after(self, anchor: Operation, *ops: Operation) -> Operation:
        if anchor.parent is not self:
            raise ValueError(f"{anchor!r} is not in this block")
        for op in ops:
            anchor = self._link(op, anchor, anchor._next)
        return anchor

    def remove(self, op: Operation) -> None:
        if op.parent is not self:
            raise ValueError(f"{op!r} is not in this block")
        p, n = op._prev, op._next
        if p is None:
            self._first = n
        else:
            p._next = n
        if n is None:
            self._last = p
        else:
            n._prev = p
        op._prev = op._next = None
        op.parent = None
        self._len -= 1
        self._cache = None

    @property
    def first(self) -> Operation | None:
        return self._first

    @property
    def last(self) -> Operation | None:
        return self._last

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.ops)

    def __len__(self) -> int:
        return self._len


class Region:
    __slots__ = ("blocks", "parent", "close_src", "open_src")

    def __init__(self, blocks: Iterable[Block] = ()) -> None:
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        self.close_src: str | None = None  # the line that closes it ('    }' or '    } else {')
        self.open_src: str | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, b: Block) -> Block:
        b.parent = self
        self.blocks.append(b)
        return b

    @property
    def block(self) -> Block:
        return self.blocks[0]


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
