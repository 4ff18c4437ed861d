"""Structural checks of a program: use-def chains, dominance, dist-attribute shapes."""

from __future__ import annotations

from ..ir.core import Block, Operation, Program, Value
from ..ir.dist import OperationDistAttr, TensorDistAttr, VecDistAttr
from ..ir.types import DistTensorType, VectorType
from ..syntax.diagnostics import DiagnosticError


def _fail(op: Operation, msg: str) -> DiagnosticError:
    line, col = op.loc if op.loc else (None, None)
    return DiagnosticError(f"'{op.name}': {msg}", line, col)


def verify(prog: Program) -> None:
    """Raise a located DiagnosticError on the first inconsistency."""
    _verify_block(prog.block, set(), set())


def _verify_block(block: Block, visible: set[int], fits: set) -> None:
    seen = set(visible)
    for a in block.args:
        seen.add(id(a))
    for op in block.ops:
        if op.parent is not block:
            raise _fail(op, "op's parent link does not point at its block")
        for i, v in enumerate(op._operands):
            if v is None:
                continue
            if id(v) not in seen:
                raise _fail(op, f"operand {i} is used before it is defined (or is not in scope)")
            if (op, i) not in v.uses:
                raise _fail(op, f"operand {i} is missing from its value's use list")
        for r in op.results:
            for user, idx in r.uses:
                if user.operand(idx) is not r:
                    raise _fail(op, f"result {r.index} has a stale use in '{user.name}'")
        for region in op.regions:
            for b in region.blocks:
                _verify_block(b, seen, fits)
        _verify_dist(op, fits)
        for r in op.results:
            seen.add(id(r))


def _verify_dist(op: Operation, fits: set) -> None:
    """``fits``: (entry, type) pairs already found to fit, by identity (entries and types are
    immutable and shared between ops: each pair is checked once)."""
    d = op.attrs.get("op_dist_attr")
    if not isinstance(d, OperationDistAttr) or "grad_merge_add" in op.attrs:
        return  # (Paddle's gradient-merge add_ carries its gradient's producer's dist attr)
    # Paddle itself writes fewer entries than operands on some ops (the slice of r->s keeps only
    # operand(0); full on non-root ranks of r->p keeps a stale operand entry), so entry counts are
    # not checked; the entries that are there must fit their values.
    for kind, entries, values in (("operand", d.operands, op._operands), ("result", d.results, op.results)):
        for i, (e, v) in enumerate(zip(entries, values)):
            if v is None:
                continue
            key = (id(e), id(v._type))
            if key not in fits:
                _check_entry(op, f"{kind}({i})", e, v)
                fits.add(key)


def _check_entry(op: Operation, where: str, e, v: Value | None) -> None:
    if v is None:
        return
    t = v.type
    if isinstance(e, VecDistAttr):
        if isinstance(t, VectorType) and len(t.elements) != len(e.items):
            raise _fail(op, f"{where} has {len(e.items)} dist entries for a vector of {len(t.elements)}")
        return
    if isinstance(e, TensorDistAttr) and not e.is_empty and isinstance(t, DistTensorType):
        if e.form != "maping" and len(e.dims_mapping) != t.rank:
            raise _fail(op, f"{where} dims_mapping {list(e.dims_mapping)} does not fit rank {t.rank}")
