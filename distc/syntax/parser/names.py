"""Name resolution: the :class:`Builder` both parser paths create operations through (nested
value scopes, operand/result checks, block arguments learnt at their first use); the fast path's
ordinary op lines are built in its scopes by :func:`distc.syntax.parser.runs.read_run`."""

from __future__ import annotations

import re

from ...ir.core import Block, BlockArgument, Operation, Value
from ...ir.types import NULL_TYPE
from ..diagnostics import DiagnosticError


class Builder:
    """Creates operations from parsed pieces, resolving value names in nested scopes."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Value]] = [{}]
        self.top: Block | None = None
        # the results read by runs.read_run are %0, %1, ... in order, the others plain names (the
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
_ONE_VALUE = re.compile(r"%([^\s,()\[\]{}<>=:]+)")
_ONE_OPERAND = re.compile(r"%([^\s,()\[\]{}<>=:]+)|<<NULL VALUE>>")
# one check for the whole list, not one per value; possessive (*+): no backtracking state kept per
# item (a list of 800,000 results took 30x its size in the regex engine's stack)
RESULTS = re.compile(f"{VALUE}(?:, {VALUE})*+")
OPERANDS = re.compile(f"{VALUE_OR_NULL}(?:, {VALUE_OR_NULL})*+")


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
