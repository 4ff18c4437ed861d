"""Runs of ordinary top-level op lines, read by one loop with the op built in place.

A dump is mostly a run of ordinary op lines at the top level: ``(%r, ...) = "name" [id:N] (%a,
...) {attributes} : (types) -> types``, one a line, of few value names, whose attributes and types
(the line's tail after its head) were read before, by an op line of the same kind (the fast
path's tail cache, or its skeleton for lines that differ only in their strings).  This module
reads such a run without a call per op: each line is matched, its op built slot by slot (what
:meth:`Builder.build_line <distc.syntax.parser.names.Builder.build_line>` builds), linked after
the last and its results defined, in one loop.  It stops at the first line that is anything else
(a comment, a region, a line it cannot read, a use of an undefined value or a value of another
type, a name defined twice, a tail it has not seen): the fast path's line loop reads that line
with its own checks and messages, then hands over again."""

from __future__ import annotations

import re
from sys import intern

from ...ir.core import Operation, OpResult
from ...ir.types import NULL_TYPE
from .texts import CACHE_TEXT

_NEW = object.__new__
_NAMED = re.compile(r"[A-Za-z_][\w.@]*")
_FEW = 4096  # characters of value names on an op line up to which they are read as one list
_FEW_QUOTES = range(2, 34, 2)  # the quotes of an op's strings, where its attribute text is known by its skeleton


def read_run(text: str, pos: int, i: int, limit: int, head, block, builder, tails, skeletons, reader,
             unsorted: dict) -> tuple:
    """Read the ordinary top-level op lines from offset ``pos`` (line ``i``, 0-based) up to the
    first other line or offset ``limit``, appending their ops to ``block`` (the top block:
    ``builder``'s only scope).  ``head``: the fast path's op-head regex's ``match``; ``tails``,
    ``skeletons``: its caches of tails read (see :class:`~distc.syntax.parser.fast.FastParser`).
    Returns ``(offset of the line not read, its 0-based number, (line, offset) of the last op
    read or None, whether an attribute dict read has its keys out of order)``."""
    find = text.find
    scope = builder.scopes[0]
    get = scope.get
    tget = tails.get
    sget = skeletons.get
    prev = block._last
    count = 0
    names: list[str] = []
    extend = names.extend if builder.canonical else None
    out_of_order = False
    last = -1
    indent, col = "", 1
    limit = min(limit, text.rfind("\n") + 1)  # (each line read ends in a newline)
    while pos < limit:
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
            q = tail.count('"')
            if q == 2 and "\\" not in tail:  # ('""'.join(tail.split('"')[::2]) for one string)
                got = sget(tail[:tail.find('"') + 1] + tail[tail.rfind('"'):])
            elif q in _FEW_QUOTES and "\\" not in tail:
                got = sget('""'.join(tail.split('"')[::2]))
            if got is None:
                break
        ind, res, name, oid, opnds = hm.groups()
        d, t_in, t_out = got
        results = res[1:].split(", %") if res else ()
        if not opnds:
            operands: list | tuple = ()
        elif "<" in opnds:  # (no value name holds '<')
            operands = [None if o == "<<NULL VALUE>>" else o[1:] for o in opnds.split(", ")]
        else:
            operands = opnds[1:].split(", %")  # (no value name holds ',' or ' ')
        if len(t_out) != len(results) or len(t_in) != len(operands):
            break
        if results:
            if len(results) == 1:
                if results[0] in scope:
                    break
            elif not scope.keys().isdisjoint(results) or len(set(results)) != len(results):
                break
        # the op, as build_line makes it
        op = _NEW(Operation)
        values: list = []
        k = 0
        for vname, t in zip(operands, t_in):
            if vname is None:
                if t is not NULL_TYPE:
                    break
                values.append(None)
            else:
                v = get(vname)
                if v is None or t is not v._type and (v._type is NULL_TYPE or t != v._type):
                    break  # (undefined, another type, or a block argument's type learnt here: the line loop's)
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
        op.name = intern(name)
        op.op_id = int(oid) if oid else None
        op._operands = values or ()
        op.operand_keywords = ()
        res_ = []
        for rname, t in zip(results, t_out):
            r = _NEW(OpResult)
            r._type = t
            r.uses = ()
            r.name = rname
            r.op = op
            res_.append(r)
            scope[rname] = r
        if extend is not None:
            extend(results)
        op.results = res_
        op._attrs = d
        op._as_read = True
        op._reader = reader
        op._dist = None
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
        op.parent = block
        op._prev = prev
        op._next = None
        if prev is None:
            block._first = op
        else:
            prev._next = op
        prev = op
        count += 1
        if unsorted and d is not None and id(d) in unsorted:
            out_of_order = True
        last = pos
        i += 1
        pos = e + 1
    if count:
        block._last = prev
        block._len += count
        block._cache = None
        tails.hits += count
        if extend is not None:
            _numbering(builder, names)
    return pos, i, (i - 1, last) if count else None, out_of_order


def _numbering(builder, names: list[str]) -> None:
    """Whether the results ``names`` (in order) keep ``builder``'s numbering canonical: %0, %1, ...
    in order, the others plain names (what build_line checks result by result)."""
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
