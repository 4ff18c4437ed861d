"""Which value is a parameter's gradient (Paddle's ``params_grads``), in a program with its
optimizer ops: a parameter's gradient is what its update's gradient operand comes from, back
through the optimizer-role ops (clip, collectives) and the ops a reshard lowering puts after a
gradient, to the backward op that made it; parameters in the order of their updates."""

from __future__ import annotations

from ..ir import attrs as A
from ..ir.core import Operation, Program, Value
from . import ops
from .collectives import collective_kind

OPTIMIZE, BACKWARD = 2, 1


def role(op: Operation | None) -> int | None:
    a = op.attr("op_role") if op is not None else None
    return a.value if isinstance(a, A.IntAttr) else None


def grad_operand(op: Operation) -> int | None:
    """Where Paddle's ``_append_scale_op_after_comm`` finds the gradient of an update."""
    if "adam" in op.name:
        return 1
    if "sgd" in op.name:
        return 2
    return None


def param_name(v: Value | None) -> str | None:
    seen = 0
    while v is not None and v.owner is not None and seen < 64:
        op = v.owner
        if op.name == ops.PARAMETER:
            a = op.attr("parameter_name")
            return a.value if isinstance(a, A.StrAttr) else None
        v = op.operand(0) if op.num_operands else None
        seen += 1
    return None


_HELPERS = {ops.SPLIT, ops.SPLIT_WITH_NUM, ops.CONCAT, ops.COMBINE, ops.BUILTIN_SPLIT, ops.BUILTIN_SLICE, ops.SLICE,
            ops.TRANSPOSE, ops.RESHAPE}


def reshard_made(op: Operation) -> bool:
    """An op the reshard lowering puts after a gradient (a collective, or its split/concat/slice
    helpers): not the op that makes the gradient (Paddle's ``params_grads`` are from before it)."""
    return collective_kind(op.name) is not None or op.name in _HELPERS


def params_grads(prog: Program, resharded: frozenset[str] | set[str] = frozenset()) -> list[tuple[str, Value]]:
    """(parameter name, its gradient value) for each update, in the updates' order.  ``resharded``:
    parameters whose gradient the input program already reshards in the backward (a
    ``dist_op.reshard`` the partition did not insert): their gradient is that reshard's result,
    i.e. the last backward value, collectives included."""
    out = []
    for op in prog.block.ops:
        i = grad_operand(op)
        if i is None or role(op) != OPTIMIZE or op.num_operands <= i:
            continue
        name = param_name(op.operand(0))
        g = op.operand(i)
        while g is not None and g.owner is not None and g.owner.num_operands and \
                (role(g.owner) != BACKWARD or (reshard_made(g.owner) and name not in resharded)):
            g = g.owner.operand(0)
        if name is None or g is None or g.owner is None or role(g.owner) != BACKWARD:
            continue
        out.append((name, g))
    return out


def resharded_in_backward(prog: Program) -> set[str]:
    """Parameters whose gradient is the result of a ``dist_op.reshard`` in the (not yet
    partitioned) program: Paddle's ``params_grads`` then follow that reshard's lowering."""
    return {name for name, g in params_grads(prog) if g.owner is not None and g.owner.name == ops.RESHARD}
