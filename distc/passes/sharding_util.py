"""Value facts Paddle keeps in op attributes (``stop_gradient``, ``persistable``, ``op_role``,
``chunk_id``, a value's dist attr) and located failures: what the passes and the op builder
(:mod:`.paddle_api`, which builds every new op, ``dist_op.reshard`` included) share."""

from __future__ import annotations

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
    if isinstance(a, A.ArrayAttr) and index < len(a.elements):
        e = a.elements[index]
        if isinstance(e, A.BoolAttr):
            return e.value
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


def layout_key(op: Operation, *head: object) -> tuple[tuple, tuple]:
    """A key to memoise an answer about ``op`` by identity: of ``head`` (its op_dist_attr, an
    optimizer signature ...) and of its operand and result types — immutable objects shared by
    every op of one kind (``DistTensorType.with_dist`` gives one object per layout), so most ops
    of a program fall into a few keys.  Returns (key, the objects keyed): the memo's entry must
    hold the second, so that no keyed object dies and lends its id to another."""
    ov = op._operands
    types = list(map(_TYPE, ov)) if None not in ov else [None if v is None else v._type for v in ov]
    n = len(types)
    types += map(_TYPE, op.results)
    return (*map(id, head), n, *map(id, types)), (head, types)


_TYPE = attrgetter("_type")


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
