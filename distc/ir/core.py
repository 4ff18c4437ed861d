"""The IR: a program is a block of operations; operations own regions of blocks; values keep
use-def chains.  Operations, blocks and values are mutable and compared by identity; types and
attributes are immutable values.

This module defines operations: an op's name, operands (use-def chains kept on its values),
results, attributes (a parsed op's kept as the text of its source line until asked for, and edits
of that line since), regions, and where it came from.  The containers (blocks, regions, the
program and its walks) are :mod:`.program`'s, values :mod:`.values`'; the rest of distc takes
them all from here (``from distc.ir.core import Block, Operation, Program ...``).

Every operation remembers the source line it was parsed from.  As long as nothing about the
operation (or the types of its operands) changes, the printer emits that line as it was, so
untouched parts of a program print back byte for byte and fast.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, contains, is_not, not_

from .attrs import Attribute
from .dist import OperationDistAttr
from .types import Type
from .program import Block, Program, Region, set_printer  # noqa: F401 (re-exported: the IR's classes are taken from here)
from .values import BlockArgument, OpResult, Value, _add_use  # noqa: F401 (Value, BlockArgument: re-exported)

_NEW = object.__new__
_ABSENT = object()  # (an attribute deleted: the value of its edit; a missing key to ``attr``)


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


def new_op(name: str, operands: Sequence[Value | None], result_types: Sequence[Type], attrs: dict[str, Attribute],
           sig: str = "full", indent: str | None = None) -> Operation:
    """``Operation(name, operands, result_types, attrs, sig=sig)`` with ``indent`` set, made slot by
    slot (the passes' builders make thousands: under half the constructor's time).  ``attrs`` is
    held, not copied (attribute dicts are never changed in place); ``operands`` and
    ``result_types`` are lists or tuples."""
    op = _NEW(Operation)
    if len(result_types) == 1:  # (most new ops)
        r = _NEW(OpResult)
        r._type, r.uses, r.name, r.op = result_types[0], (), None, op
        op.results = [r]
    else:
        op.results = res = [_NEW(OpResult) for _ in result_types]
        for r, t in zip(res, result_types):
            r._type, r.uses, r.name, r.op = t, (), None, op
    if operands:
        op._operands = vals = list(operands)
        i = 0
        for v in vals:
            if v is not None:
                u = v.uses
                if u:
                    u.append((op, i))
                else:
                    v.uses = [(op, i)]
            i += 1
    else:
        op._operands = ()
    op.name, op.op_id, op.operand_keywords, op._attrs, op.sig, op.indent = name, None, (), attrs, sig, indent
    op._as_read, op.dirty = False, True
    op._reader = op._dist = op._edits = op.parent = op._line = op._col = op.src = op._prev = op._next = None
    op.regions = op.pre = ()
    return op


def ops_with_attr(ops: list[Operation], key: str) -> list[tuple[Operation, Attribute]]:
    """``[(op, op.attr(key)) for op in ops if op.has_attr(key)]`` without a call an op: the ops
    that may hold ``key`` are found in C -- those whose attribute dict holds it, those left unread
    whose source line names it, those with edits -- and only they are asked (a pass's scan of a
    whole program for a key few ops have: ``ring_id``, ``multi_precision``)."""
    n = len(ops)
    dicts = list(map(_ATTRS, ops))
    read = list(map(is_not, dicts, repeat(None)))  # (a dict: new ops, and parsed ops asked for their attributes)
    hits = set(compress(compress(range(n), read), map(contains, compress(dicts, read), repeat(key))))
    if not all(read):  # (ops left unread: their source line, and their edits, say)
        idx = list(compress(range(n), map(not_, read)))
        unread = list(map(ops.__getitem__, idx))
        hits.update(compress(idx, map(contains, map(_SRC, unread), repeat(key + ":"))))
        edits = list(map(_EDITS, unread))
        edited = list(map(is_not, edits, repeat(None)))
        if any(edited):  # (an unread op's edits: a key set there, or deleted)
            hits.update(compress(compress(idx, edited), map(contains, compress(edits, edited), repeat(key))))
    out = []
    for i in sorted(hits):
        op = ops[i]
        v = op.attr(key, _ABSENT)
        if v is not _ABSENT:
            out.append((op, v))
    return out


_ATTRS, _SRC, _EDITS = attrgetter("_attrs"), attrgetter("src"), attrgetter("_edits")


def _with(attrs: Mapping[str, Attribute], key: str, value) -> dict[str, Attribute]:
    """A copy of an attribute dict with ``key`` set (deleted: ``value`` _ABSENT)."""
    d = dict(attrs)
    if value is _ABSENT:
        d.pop(key, None)
    else:
        d[key] = value
    return d
