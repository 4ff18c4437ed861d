"""Value facts Paddle keeps in op attributes (``stop_gradient``, ``persistable``, ``op_role``,
``chunk_id``, a value's dist attr) and located failures: what the passes and the op builder
(:mod:`.paddle_api`, which builds every new op, ``dist_op.reshard`` included) share."""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter

from ..ir import attrs as A
from ..ir.core import BlockArgument, Operation, OpResult, Value
from ..ir.dist import TensorDistAttr
from ..ir.types import DistTensorType
from ..syntax.diagnostics import DiagnosticError


def fail(op: Operation | None, msg: str) -> DiagnosticError:
    """A diagnostic located at ``op``'s source line (if it came from the input)."""
    if op is not None and op.loc is not None:
        return DiagnosticError(msg, op.loc[0], op.loc[1])
    return DiagnosticError(msg)


# ------------------------------------------------------------------------------ value facts
def _bool_at(op: Operation, key: str, index: int) -> bool | None:
    a = op.attr(key)
    if isinstance(a, A.ArrayAttr):
        els = a.elements
        if index < len(els) and isinstance(els[index], A.BoolAttr):
            return els[index].value
    return None


def _arg_flag(v: BlockArgument, key: str) -> bool | None:
    """A block argument's flag from its ``{key:true}`` or ``{key:[true]}`` attribute."""
    b = v.attrs.get(key)
    if isinstance(b, A.BoolAttr):
        return b.value
    if isinstance(b, A.ArrayAttr) and b.elements and isinstance(b.elements[0], A.BoolAttr):
        return b.elements[0].value
    return None


def stop_gradient(v: Value | None) -> bool:
    """A value's stop_gradient flag (kept in its defining op's ``stop_gradient`` list); True when
    nothing says otherwise."""
    if isinstance(v, OpResult):
        b = _bool_at(v.op, "stop_gradient", v.index)
        return True if b is None else b
    if isinstance(v, BlockArgument):
        b = _arg_flag(v, "stop_gradient")
        return True if b is None else b
    return True


def persistable(v: Value | None) -> bool:
    """Whether a value is persistable (its defining op's ``persistable`` list says so)."""
    if isinstance(v, OpResult):
        return bool(_bool_at(v.op, "persistable", v.index))
    if isinstance(v, BlockArgument):
        return bool(_arg_flag(v, "persistable"))
    return False


def set_persistable(v: OpResult, flag: bool) -> None:
    """Paddle's ``value.persistable = flag``: writes the defining op's ``persistable`` list
    (creating it, one entry a result, if the op had none)."""
    op = v.op
    a = op.attr("persistable")
    if isinstance(a, A.ArrayAttr) and len(a.elements) == op.num_results:
        els = list(a.elements)
    else:
        els = [A.BoolAttr(False)] * op.num_results
    els[v.index] = A.BoolAttr(flag)
    op.set_attr("persistable", A.ArrayAttr(tuple(els)))


def dist_of(v: Value | None) -> TensorDistAttr | None:
    if v is None:
        return None
    t = v.type
    return t.dist if isinstance(t, DistTensorType) else None


def layout_key(op: Operation, head: object, extra: object = None) -> tuple:
    """A key to memoise an answer about ``op``: its name, and by identity ``head`` (its
    op_dist_attr), ``extra`` (an optimizer signature ...) and its operand and result types --
    immutable objects shared by every op of one kind (``DistTensorType.with_dist`` gives one object
    per layout), so most ops of a program fall into a few keys.  The memo's entry must hold
    :func:`layout_objects` of the op it was made for, so that no keyed object dies and lends its
    id to another.  (Thousands of ops a pass: a flat tuple of ids, no list, no lookup per object.)"""
    ov, rs = op._operands, op.results
    if not ov and len(rs) == 1:  # (most ops of a program: data, full, parameter)
        return op.name, id(head), id(extra), -1, id(rs[0]._type)
    if None in ov:  # (an absent operand, e.g. an optimizer's master weight: keyed as None)
        return (op.name, id(head), id(extra), *map(id, map(getattr, ov, _TYPE_NAME, _NONE)), -1,
                *map(id, map(_TYPE, rs)))
    return (op.name, id(head), id(extra), *map(id, map(_TYPE, ov)), -1, *map(id, map(_TYPE, rs)))


def layout_objects(op: Operation, head: object, extra: object = None) -> tuple:
    """The objects :func:`layout_key` keys ``op`` by (for the memo entry to keep alive)."""
    return head, extra, [None if v is None else v._type for v in op._operands], [r._type for r in op.results]


_TYPE = attrgetter("_type")
_TYPE_NAME, _NONE = repeat("_type"), repeat(None)  # (getattr(v, "_type", None): None for an absent operand)


def op_role_attr(op: Operation):
    return op.attr("op_role")


def chunk_id_of(op: Operation) -> int:
    d = op.dist_attr
    if d is not None and d.chunk_id is not None:
        return d.chunk_id
    return -1


def is_distributed(prog) -> bool:
    """Whether any op or value of the program carries dist attributes."""
    for op in prog.walk():
        if op.dist_attr is not None or any(isinstance(r.type, DistTensorType) for r in op.results):
            return True
    return False

