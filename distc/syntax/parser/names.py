"""Name resolution and building ops: the :class:`Builder` both parser paths create operations
through (nested value scopes, operand/result checks, block arguments learnt at their first use),
and :func:`read_run`, which builds the fast path's ordinary op lines in its scopes.

Runs of ordinary op lines: a dump is mostly a run of ordinary op lines at the top level:
``(%r, ...) = "name" [id:N] (%a, ...) {attributes} : (types) -> types``, one a line, of few value
names, whose attributes and types (the line's tail after its head) were read before, by an op line
of the same kind (the fast path's tail cache, or its skeleton for lines that differ only in their
strings).  :func:`read_run` reads such a run without a call per op: each line is matched, its op
built slot by slot (what ``Operation(...)`` builds), its results defined, in one loop, the ops
linked at the end.  It stops at the first line that is anything else (a comment, a region, a line
it cannot read, a use of an undefined value or a value of another type, a name defined twice, a
tail it has not seen): the fast path's line loop reads that line, then hands over again.  The line
loop builds the other ordinary op lines it reads (the first of a kind, those inside regions,
joined lines) here too, one at a time (``first``); where one cannot be built, the grammar reads
the line, for its message."""

from __future__ import annotations

from sys import intern

from ...ir.core import Block, BlockArgument, Operation, OpResult, Value
from ...ir.types import NULL_TYPE
from ..diagnostics import DiagnosticError
from ..regex import LazyPattern
from .texts import CACHE_TEXT

TYPE_CHECKING = False
if TYPE_CHECKING:  # (annotations only: a run imports no re, distc.syntax.regex)
    import re


class Builder:
    """Creates operations from parsed pieces, resolving value names in nested scopes."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Value]] = [{}]
        self.top: Block | None = None
        # the results read by read_run are %0, %1, ... in order, the others plain names (the
        # print style's ``renumber``: see distc.syntax.parser.detect_style)
        self.canonical = True
        self.numbered = 0

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def lookup(self, name: str) -> Value | None:
        scopes = self.scopes
        if len(scopes) == 1:
            return scopes[0].get(name)
        for s in reversed(scopes):
            v = s.get(name)
            if v is not None:
                return v
        return None

    def define(self, name: str, value: Value, line=None, col=None) -> None:
        if self.lookup(name) is not None:
            raise DiagnosticError(f"value %{name} is defined twice", line, col)
        self.scopes[-1][name] = value
        value.name = name

    def define_args(self, block, args, keywords: bool) -> None:
        """A block header's arguments: ``(name, attribute dict or None when none is printed, line,
        column)`` each; ``keywords``: a '^kw:' header (``%kwarg_x`` is keyword ``x``)."""
        for name, attrs, line, col in args:
            keyword = (name[6:] if name.startswith("kwarg_") else name) if keywords else None
            v = block.add_argument(NULL_TYPE, name, keyword=keyword, attrs=attrs or {})
            v.attrs_shown = attrs is not None  # type: ignore[attr-defined]
            self.define(name, v, line, col)
        block.dirty = False

    def build(self, results, name, op_id, operands, attrs, in_types, out_types, sig, regions, line, col,
              inline_args=None) -> Operation:
        """``results``: [(name, line, col)]; ``operands``: [(name|None, keyword|None, line, col)]."""
        if sig == "none":  # pd_op.while prints no types: its results carry the loop values' types
            out_types = None
        elif len(out_types) != len(results):
            raise DiagnosticError(
                f"'{name}' has {len(results)} result(s) but {len(out_types)} result type(s)", line, col)
        if in_types is not None and len(in_types) != len(operands):
            raise DiagnosticError(
                f"'{name}' has {len(operands)} operand(s) but {len(in_types)} operand type(s)", line, col)
        values: list[Value | None] = []
        kws = []
        for i, (vname, kw, vl, vc) in enumerate(operands):
            if kw is not None:
                kws.append((i, kw))
            if vname is None:
                if in_types is not None and in_types[i] is not NULL_TYPE:
                    raise DiagnosticError(f"<<NULL VALUE>> operand {i} of '{name}' has a non-null type", vl, vc)
                values.append(None)
                continue
            v = self.lookup(vname)
            if v is None and inline_args and i in inline_args:
                if in_types is None:
                    raise DiagnosticError(f"block argument %{vname} needs a type", vl, vc)
                v = self.top.add_argument(in_types[i], vname, attrs=inline_args[i])
                self.scopes[0][vname] = v
            elif v is None:
                raise DiagnosticError(f"use of undefined value %{vname}", vl, vc)
            elif v._type is NULL_TYPE and in_types is not None and _untyped(v):
                v._type = in_types[i]  # block arguments print no type: learn it from the first use
            if in_types is not None and in_types[i] is not v._type and in_types[i] != v._type:
                raise DiagnosticError(
                    f"operand {i} of '{name}' is declared as {in_types[i]} but %{vname} has type {v.type}", vl, vc)
            values.append(v)
        if out_types is None:
            carried = values[len(values) - len(results):] if len(results) <= len(values) else []
            out_types = [v.type if v is not None else NULL_TYPE for v in carried]
            if len(out_types) != len(results):
                raise DiagnosticError(f"'{name}' has {len(results)} result(s) but {len(values)} operand(s)", line, col)
        # op_dist_attr entries are read as printed, even where they do not fit their values (Paddle's
        # gradient-merge add_ carries its gradient's producer's): analysis.verify checks them
        op = Operation(name, values, out_types, attrs, regions, op_id=op_id,
                       operand_keywords=tuple(kws), sig=sig)
        op.loc = (line, col)
        for r, (rname, rl, rc) in zip(op.results, results):
            self.define(rname, r, rl, rc)
        return op


VALUE = r"%[^\s,()\[\]{}<>=:]+"  # the grammar's VALUE
VALUE_OR_NULL = rf"(?:{VALUE}|<<NULL VALUE>>)"
_ONE_VALUE = LazyPattern(r"%([^\s,()\[\]{}<>=:]+)")
_ONE_OPERAND = LazyPattern(r"%([^\s,()\[\]{}<>=:]+)|<<NULL VALUE>>")
# one check for the whole list, not one per value; possessive (*+): no backtracking state kept per
# item (a list of 800,000 results took 30x its size in the regex engine's stack)
RESULTS = LazyPattern(f"{VALUE}(?:, {VALUE})*+")
OPERANDS = LazyPattern(f"{VALUE_OR_NULL}(?:, {VALUE_OR_NULL})*+")


class Named:
    """The ``(name, line, col)`` of each result (operands: ``(name, None, line, col)``) of an op
    line, read one at a time as :meth:`Builder.build` asks for them: an op of 800,000 results is
    not a list of 800,000 tuples and names at once.  A text that is not a list of values raises
    ValueError."""

    __slots__ = ("text", "line", "operands")

    def __init__(self, pattern: re.Pattern, text: str, line: int, operands: bool = False) -> None:
        if pattern.fullmatch(text) is None:
            raise ValueError(text[:80])
        self.text, self.line, self.operands = text, line, operands

    def __len__(self) -> int:
        return self.text.count(", ") + 1

    def __iter__(self):
        line = self.line
        if self.operands:
            for m in _ONE_OPERAND.finditer(self.text):
                yield (m.group(1), None, line, 0)
        else:
            for m in _ONE_VALUE.finditer(self.text):
                yield (m.group(1), line, 0)


def _untyped(v: Value) -> bool:
    """A value whose type the text does not print: a block argument, or a result of an op that
    prints no types (``pd_op.while`` carrying a block argument of an enclosing loop)."""
    if isinstance(v, BlockArgument):
        return True
    owner = v.owner
    return owner is not None and owner.sig == "none"


_NEW = object.__new__
_NAMED = LazyPattern(r"[A-Za-z_][\w.@]*")
_FEW = 4096  # characters of value names on an op line up to which they are read as one list
_FEW_QUOTES = range(2, 34, 2)  # the quotes of an op's strings, where its attribute text is known by its skeleton


def read_run(text: str, pos: int, i: int, limit: int, head, block, builder, tails, skeletons, reader,
             unsorted: dict, first: tuple | None = None) -> tuple:
    """Read the ordinary op lines from offset ``pos`` (line ``i``, 0-based) up to the first other
    line or offset ``limit``, appending their ops to ``block`` (``builder``'s innermost scope's).
    ``head``: the fast path's op-head regex's ``match``; ``tails``, ``skeletons``: its caches of
    tails read (see :class:`~distc.syntax.parser.fast.FastParser`).  ``first``: the op line at
    ``pos`` as the caller read it, built alone: ``((indent, results, name, id, operands) as
    printed, (attribute dict or None: unread, input types, output types, op_dist_attr of an unread
    dict: False for none, None where not known), line text, offset of its end)`` (an op line of
    few value names; joined lines too).  Returns ``(offset of the line
    not read, its 0-based number, (line, offset) of the last op read or None, whether an
    attribute dict read has its keys out of order, the last op read or None)``."""
    find = text.find
    scopes = builder.scopes
    scope = scopes[-1]
    get = scope.get if len(scopes) == 1 else builder.lookup
    tget = tails.get
    sget = skeletons.get
    ops: list = []  # (linked to the block at the end)
    add = ops.append
    names: list[str] = []
    extend = names.extend if builder.canonical else None
    out_of_order = False
    last = -1
    indent, col = "", 1
    limit = min(limit, text.rfind("\n") + 1)  # (each line read ends in a newline)
    one = first is not None
    while one or pos < limit:
        if one:
            (ind, res, name, oid, opnds), (d, t_in, t_out, dist), line, e = first  # type: ignore[misc]
            one, limit = False, 0  # (that op alone)
        else:
            e = find("\n", pos)
            line = text[pos:e]
            hm = head(line)
            if hm is None:
                break
            h = hm.end()
            if h >= _FEW or e - pos - h >= CACHE_TEXT:  # (few value names: fewer characters in the head)
                break
            tail = line[h:]
            got = tget(tail)
            if got is None:  # (a tail of strings of one piece each: by its skeleton, the strings emptied)
                a = tail.find('"')  # (found, not counted: str.count reads the text a character at a time)
                b = tail.find('"', a + 1) if a >= 0 else -1
                if b < 0 or "\\" in tail:
                    break
                if tail.find('"', b + 1) < 0:  # one string: '""'.join(tail.split('"')[::2])
                    got = sget(tail[:a + 1] + tail[b:])
                elif tail.count('"') in _FEW_QUOTES:
                    got = sget('""'.join(tail.split('"')[::2]))
                if got is None:
                    break
            ind, res, name, oid, opnds = hm.groups()
            d, t_in, t_out, dist = got
        results = res[1:].split(", %") if res else ()
        one_result = len(results) == 1
        if len(t_out) != len(results):
            break
        if one_result:  # (none defined before, in any scope; none twice)
            if get(results[0]) is not None:
                break
        elif results and (len(set(results)) != len(results) or any(map(get, results))):
            break
        op = _NEW(Operation)  # (what Operation(...) makes, slot by slot: shared empty tuples where it keeps them)
        if opnds:
            if "<" in opnds:  # (no value name holds '<')
                operands: list = [None if o == "<<NULL VALUE>>" else o[1:] for o in opnds.split(", ")]
            else:
                operands = opnds[1:].split(", %")  # (no value name holds ',' or ' ')
            if len(t_in) != len(operands):
                break
            values: list = []
            k = 0
            for vname, t in zip(operands, t_in):
                if vname is None:
                    if t is not NULL_TYPE:
                        break
                    values.append(None)
                else:
                    v = get(vname)
                    if v is None:
                        break
                    if t is not v._type:
                        if v._type is NULL_TYPE and _untyped(v):
                            v._type = t  # (block arguments print no type: learnt from the first use)
                        elif t != v._type:
                            break
                    if v.uses:
                        v.uses.append((op, k))
                    else:
                        v.uses = [(op, k)]
                    values.append(v)
                k += 1
            if k != len(operands):
                for k, v in enumerate(values):  # (the uses added)
                    if v is not None:
                        v.uses.remove((op, k))
                break
            op._operands = values
        elif t_in:
            break
        else:
            op._operands = ()
        op.name = intern(name)
        op.op_id = int(oid) if oid else None
        op.operand_keywords = ()
        if one_result:  # (the common case: no loop)
            r = _NEW(OpResult)
            r._type = t_out[0]
            r.uses = ()
            r.name = rname = results[0]
            r.op = op
            scope[rname] = r
            op.results = [r]
        else:
            res_ = []
            for rname, t in zip(results, t_out):
                r = _NEW(OpResult)
                r._type = t
                r.uses = ()
                r.name = rname
                r.op = op
                res_.append(r)
                scope[rname] = r
            op.results = res_
        if extend is not None:
            extend(results)
        op._attrs = d
        op._as_read = True
        op._reader = reader
        op._dist = dist
        op._edits = None
        op.regions = ()
        if ind != indent:
            indent, col = intern(ind), len(ind) + 1
        op._line = i + 1
        op._col = col
        op.src = line
        op.indent = indent
        op.pre = ()
        op.dirty = False
        op.sig = "full"
        add(op)
        if unsorted and d is not None and id(d) in unsorted:
            out_of_order = True
        last = pos
        i += 1
        pos = e + 1
    if ops:
        block.extend(ops)
        tails.hits += len(ops) - (first is not None)
        if extend is not None:
            _numbering(builder, names)
    return pos, i, (i - 1, last) if ops else None, out_of_order, ops[-1] if ops else None


def _numbering(builder, names: list[str]) -> None:
    """Whether the results ``names`` (in order) keep ``builder``'s numbering canonical: %0, %1, ...
    in order, the others plain names."""
    n = builder.numbered
    if names == list(map(str, range(n, n + len(names)))):
        builder.numbered = n + len(names)
        return
    for rname in names:
        if rname.isdigit():
            if rname != str(n):
                builder.canonical = False
                break
            n += 1
        elif not _NAMED.fullmatch(rname):
            builder.canonical = False
            break
    builder.numbered = n
