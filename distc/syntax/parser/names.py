"""Name resolution: the one :class:`Builder` both parser paths create operations through (nested
value scopes, operand/result checks, block arguments learnt at their first use)."""

from __future__ import annotations

from ...ir import attrs as A
from ...ir.core import BlockArgument, Block, Operation, Value
from ...ir.dist import TensorDistAttr
from ...ir.types import NULL_TYPE, DistTensorType
from ..diagnostics import DiagnosticError


class Builder:
    """Creates operations from parsed pieces, resolving value names in nested scopes."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Value]] = [{}]
        self.top: Block | None = None
        # (op dist attr, operand types, result types) by identity, found to fit: a dump repeats
        # the same attribute and type objects (the parser caches them by spelling) thousands of times
        self._fits: dict[tuple, tuple] = {}

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
        od = attrs.get("op_dist_attr")
        # Paddle's gradient-merge add_ carries its gradient's defining op's dist attr (other arities)
        if od is not None and not isinstance(od, A.IdentAttr) and "grad_merge_add" not in attrs:
            key = (id(od), id(out_types), *[id(v._type) if v is not None else 0 for v in values])
            if key not in self._fits:
                _check_op_dist(name, od, values, out_types, line, col)
                # the objects are kept with the key so that their ids stay theirs
                self._fits[key] = (od, out_types, [v._type for v in values if v is not None])
        op = Operation(name, values, out_types, attrs, regions, op_id=op_id,
                       operand_keywords=tuple(kws), sig=sig)
        op.loc = (line, col)
        for r, (rname, rl, rc) in zip(op.results, results):
            self.define(rname, r, rl, rc)
        return op


def _untyped(v: Value) -> bool:
    """A value whose type the text does not print: a block argument, or a result of an op that
    prints no types (``pd_op.while`` carrying a block argument of an enclosing loop)."""
    if isinstance(v, BlockArgument):
        return True
    owner = v.owner
    return owner is not None and owner.sig == "none"


def _check_op_dist(name, od, values, out_types, line, col) -> None:
    """Each op_dist_attr entry must fit the rank of its value (the entry counts may differ:
    Paddle's own dumps leave some entries out)."""
    for kind, entries, types in (("operand", od.operands, [v.type if v is not None else None for v in values]),
                                 ("result", od.results, out_types)):
        for i, (e, t) in enumerate(zip(entries, types)):
            if isinstance(e, TensorDistAttr) and not e.is_empty and e.form != "maping" \
                    and isinstance(t, DistTensorType) and len(e.dims_mapping) != t.rank:
                raise DiagnosticError(
                    f"'{name}': op_dist_attr {kind}({i}) has dims_mapping {list(e.dims_mapping)} for a "
                    f"tensor of rank {t.rank}", line, col)

