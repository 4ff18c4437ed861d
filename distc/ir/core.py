"""The IR: a program is a block of operations; operations own regions of blocks; values keep
use-def chains.  Operations, blocks and values are mutable and compared by identity; types and
attributes are immutable values.

Every operation remembers the source line it was parsed from.  As long as nothing about the
operation (or the types of its operands) changes, the printer emits that line as it was, so
untouched parts of a program print back byte for byte and fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from .attrs import Attribute
from .dist import OperationDistAttr
from .types import Type
from .values import BlockArgument, OpResult, Value, _add_use  # noqa: F401 (Value, BlockArgument: re-exported)

_NEW = object.__new__


class Operation:
    __slots__ = (
        "name", "op_id", "_operands", "operand_keywords", "results", "_attrs", "regions", "parent",
        "_line", "_col", "src", "indent", "pre", "dirty", "sig", "_prev", "_next", "_as_read", "_reader", "_dist",
        "_edits", "__weakref__",
    )

    def __init__(
        self,
        name: str,
        operands: Sequence[Value | None] = (),
        result_types: Sequence[Type] = (),
        attrs: Mapping[str, Attribute] | None = None,
        regions: Sequence["Region"] = (),
        *,
        op_id: int | None = None,
        result_names: Sequence[str | None] | None = None,
        operand_keywords: tuple[tuple[int, str], ...] = (),
        sig: str = "full",
    ) -> None:
        self.name = name
        self.op_id = op_id
        self.operand_keywords = operand_keywords
        if result_names:
            self.results = [OpResult(self, t, n) for t, n in zip(result_types, result_names)]
        else:  # (a new op's results made slot by slot, as OpResult() makes them: passes build thousands)
            ts = result_types if type(result_types) in (list, tuple) else tuple(result_types)  # (read once)
            self.results = res = [_NEW(OpResult) for _ in ts]
            for r, t in zip(res, ts):
                r._type, r.uses, r.name, r.op = t, (), None, self
        self._attrs: dict[str, Attribute] | None = attrs if isinstance(attrs, dict) else dict(attrs or {})
        self._as_read = False  # a parsed op whose attributes are those of its source line (see ``attrs``)
        self._reader = None
        self._dist = None  # op_dist_attr of an unread text, once asked (False: none)
        self._edits = None  # a parsed op's attributes set or deleted since: key -> value (_ABSENT: deleted)
        # (no regions, no lines before: one shared empty tuple, not a list an op: millions of ops)
        self.regions: list[Region] | tuple = ()
        self.parent: Block | None = None
        self._line: int | None = None  # ``loc``, as two numbers (a tuple an op is 56 bytes more)
        self._col: int | None = None
        self.src: str | None = None  # the source line, printed as is while the op is clean
        self.indent: str | None = None
        self.pre: list[str] | tuple = ()  # comment and blank lines before the op
        self.dirty = True
        self.sig = sig  # "full": ': (in) -> out'; "results": '-> out' only (pd_op.if)
        self._prev: Operation | None = None  # neighbours in the parent block's list
        self._next: Operation | None = None
        self._take_operands(operands)
        for r in regions:
            self.add_region(r)

    @property
    def loc(self) -> tuple[int, int] | None:
        """(line, column) of the op in its source, or None for a new op."""
        return None if self._line is None else (self._line, self._col)  # type: ignore[return-value]

    @loc.setter
    def loc(self, loc: tuple[int, int] | None) -> None:
        self._line, self._col = (None, None) if loc is None else loc

    @property
    def operands(self) -> tuple[Value | None, ...]:
        return tuple(self._operands)

    def operand(self, i: int) -> Value | None:
        return self._operands[i]

    @property
    def num_operands(self) -> int:
        return len(self._operands)

    def set_operand(self, i: int, v: Value | None) -> None:
        old = self._operands[i]
        if old is v:
            return
        if old is not None:
            old.uses.remove((self, i))
        self._operands[i] = v
        if v is not None:
            _add_use(v, self, i)
        self.dirty = True

    def set_operands(self, values: Sequence[Value | None]) -> None:
        self._drop_operand_uses()
        self._take_operands(values)
        self.dirty = True

    def _take_operands(self, values: Iterable[Value | None]) -> None:
        """The operands become ``values`` (a list if any: one list, not one append an operand), each use added."""
        self._operands = vals = list(values) or ()
        for i, v in enumerate(vals):
            if v is not None:
                _add_use(v, self, i)

    def _drop_operand_uses(self) -> None:
        for i, v in enumerate(self._operands):
            if v is not None:
                v.uses.remove((self, i))

    @property
    def result(self) -> OpResult:
        (r,) = self.results
        return r

    @property
    def num_results(self) -> int:
        return len(self.results)

    def replace_all_uses_with(self, values: Sequence[Value]) -> None:
        for r, v in zip(self.results, values):
            r.replace_all_uses_with(v)

    # Attributes: a parsed op knows whether they are still those of its source line (``_as_read``):
    # the printer copies their text for an op whose operands or types changed.  The parser may leave
    # the dict unread (``_attrs`` None) where the text is known to read well (its shape was read
    # before, only its strings differ): ``_reader.read_attrs(src)`` builds it on first use,
    # ``_reader.read_item(src, key)`` one item (op_dist_attr).  Attributes set or deleted later are
    # edits of its line (``_edits``: key -> value, _ABSENT where deleted; the printer splices them).
    def _read_attrs(self) -> dict[str, Attribute]:
        d = self._reader.read_attrs(self.src)  # type: ignore[union-attr]
        for k, v in (self._edits or {}).items():
            d = _with(d, k, v)
        self._attrs = d
        self._dist = None
        return d

    @property
    def attrs(self) -> Mapping[str, Attribute]:
        a = self._attrs
        return a if a is not None else self._read_attrs()

    def attr(self, key: str, default=None):
        a = self._attrs
        if a is not None:
            return a.get(key, default)
        e = self._edits
        if e is not None and key in e:
            v = e[key]
            return default if v is _ABSENT else v
        if key == "op_dist_attr":
            d = self._unread_dist()
            return default if d is None else d
        t = self.src
        if ("{" + key + ":") not in t and ("," + key + ":") not in t:  # type: ignore[operator]
            return default  # (a key of the dict is at its start or after a comma: not in the line, not there)
        return self._read_attrs().get(key, default)

    def _unread_dist(self):
        d = self._dist
        if d is None:
            d = self._reader.read_item(self.src, "op_dist_attr")  # type: ignore[union-attr]
            self._dist = d = False if d is None else d
        return None if d is False else d

    def has_attr(self, key: str) -> bool:
        return self.attr(key, _ABSENT) is not _ABSENT

    def _change(self, key: str, value) -> None:
        """Set (or delete: ``value`` _ABSENT) one attribute; a parsed op keeps it as an edit of its line."""
        e = self._edits
        if e is None and self._as_read and self.src is not None:
            self._edits = e = {}
        elif e is not None and value is not _ABSENT and e.get(key) is _ABSENT:
            self.attrs  # (deleted, then set again: the item moves to the end of the dict, printed anew)
            self._edits = e = None
        if e is not None:
            e[key] = value
        if self._attrs is not None or e is None:
            self._attrs = _with(self.attrs, key, value)
        self._as_read = False
        self.dirty = True

    def set_attr(self, key: str, value: Attribute) -> None:
        self._change(key, value)

    def del_attr(self, key: str) -> None:
        if self.has_attr(key):
            self._change(key, _ABSENT)

    def set_attrs(self, attrs: Mapping[str, Attribute]) -> None:
        self._attrs = dict(attrs)
        self._edits = None
        self._as_read = False
        self.dirty = True

    @property
    def dist_attr(self) -> OperationDistAttr | None:
        a = self._attrs
        if a is not None:
            d = a.get("op_dist_attr")
        else:
            e = self._edits
            d = e.get("op_dist_attr") if e is not None and "op_dist_attr" in e else self._unread_dist()
        return d if isinstance(d, OperationDistAttr) else None

    @dist_attr.setter
    def dist_attr(self, a: OperationDistAttr | None) -> None:
        if a is None:
            self.del_attr("op_dist_attr")
        else:
            self.set_attr("op_dist_attr", a)

    def add_region(self, r: "Region") -> None:
        r.parent = self
        if not self.regions:
            self.regions = []
        self.regions.append(r)

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0] if "." in self.name else ""

    def erase(self) -> None:
        """Remove the op from its block; its results must be unused."""
        for r in self.results:
            if r.uses:
                raise ValueError(f"cannot erase {self.name}: result {r.index} still has uses")
        self._drop_operand_uses()
        self._operands = []
        for region in self.regions:
            for block in region.blocks:
                for op in list(reversed(block.ops)):
                    op.drop_all_uses_and_erase()
        if self.parent is not None:
            self.parent.remove(self)

    def drop_all_uses_and_erase(self) -> None:
        for r in self.results:
            for user, idx in list(r.uses):
                user.set_operand(idx, None)
        self.erase()

    prev = property(lambda self: self._prev, doc="The op before it in its block (None: the first).")
    next = property(lambda self: self._next, doc="The op after it in its block (None: the last).")

    def walk(self) -> Iterator["Operation"]:
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


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
        for op in self.block.ops:
            if op.regions:
                yield from op.walk()
            else:
                yield op  # (most ops hold no regions: no nested generator for them)

    def values(self) -> Iterator[Value]:
        for op in self.walk():
            for r in op.regions:
                for b in r.blocks:
                    yield from b.args
            yield from op.results

    def find(self, name: str) -> list[Operation]:
        return [op for op in self.walk() if op.name == name]

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


_ABSENT = object()


def _with(attrs: Mapping[str, Attribute], key: str, value) -> dict[str, Attribute]:
    """A copy of an attribute dict with ``key`` set (deleted: ``value`` _ABSENT)."""
    d = dict(attrs)
    if value is _ABSENT:
        d.pop(key, None)
    else:
        d[key] = value
    return d

# The printer lives a layer up (distc.syntax.printer) and installs itself here, so that
# ``str(program)`` works while ``ir`` imports nothing from ``syntax``.
_PRINTER = None


def set_printer(fn, names) -> None:
    """``fn(program)`` prints, ``names(program)`` gives each value's printed name (no ``%``)."""
    global _PRINTER
    _PRINTER = (fn, names)
