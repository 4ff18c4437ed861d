"""What the ZeRO passes (shard-optimizer, partition, shard-startup, remove-other-rank,
dist-to-dense) share: value properties Paddle keeps in op attributes, and building
``dist_op.reshard`` ops the way ``paddle._C_ops.reshard_v2`` does."""

from __future__ import annotations

from ..dialects import ops
from ..ir import attrs as A
from ..ir.builder import Maker
from ..ir.core import BlockArgument, Operation, OpResult, Value
from ..ir.dist import TensorDistAttr, merge_meshes
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


def op_role_attr(op: Operation):
    return op.attr("op_role")


def chunk_id_of(op: Operation) -> int:
    d = op.dist_attr
    if d is not None and d.chunk_id is not None:
        return d.chunk_id
    return -1


# ------------------------------------------------------------------------------ reshard ops
def make_reshard(mk: Maker, src: Value, dst: TensorDistAttr, role=None) -> Operation:
    """``dist_op.reshard(src) -> dst`` (not inserted).  ``role`` is the op_role attribute to
    carry (Paddle builds reshards under ``pir_op_role_guard`` of the op they serve)."""
    st = src.type
    if not isinstance(st, DistTensorType):
        raise fail(None, f"cannot reshard a value of non-distributed type {st}")
    dst = mk.restyle(dst)  # type: ignore[assignment]
    attrs: dict = {
        "op_dist_attr": mk.op_dist(merge_meshes(st.dist.mesh, dst.mesh), [st.dist], [dst]),
        "stop_gradient": mk.bools([stop_gradient(src)]),
    }
    if role is not None:
        attrs["op_role"] = role
    return mk.op(ops.RESHARD, [src], [mk.dist_type(st.shape, st.dtype, dst)], attrs)


def is_distributed(prog) -> bool:
    """Whether any op or value of the program carries dist attributes."""
    for op in prog.walk():
        if op.dist_attr is not None or any(isinstance(r.type, DistTensorType) for r in op.results):
            return True
    return False
