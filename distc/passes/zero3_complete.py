"""ZeRO stage 3: the forward and backward ops re-inferred from the sharded parameters (a helper of
``shard-optimizer``, not a pass of its own).

Paddle 3.3.1's ``ShardingStage3`` reshards each parameter over dp when the optimizer is wrapped,
*before* the program is built: every op then gets its ``op_dist_attr`` from its SPMD rule on the
types it reads, sharded parameters included.  Mostly a rule lets the dp shard of a parameter go
(the batch axis keeps dp) and the op is what it was at stage 1: the partition pass all-gathers the
parameter before it.  Not always: a matmul whose weight is ``[Shard(1), Shard(0)]`` over (dp, mp)
and whose input is ``[Shard(0), Shard(1)]`` has both free axes on dp; the rule keeps the larger one
(the weight's columns), so the product and everything after it (bias add, loss, their gradients)
is split over the features instead of the batch.

``recomplete`` re-runs the rules (:mod:`distc.dialects.spmd_compute`) in program order from the
values whose type changed: an op reading one gets the rule's ``op_dist_attr`` and result types, and
its changed results propagate.  An op with no modelled rule (or where Paddle's rule raises) keeps
its ``op_dist_attr``: the partition pass reshards what it reads, as before.
"""

from __future__ import annotations

from ..dialects import spmd_compute as R
from ..ir import attrs as A
from ..ir.builder import Maker
from ..ir.core import Operation, Program, Value
from ..ir.dist import OperationDistAttr, TensorDistAttr
from ..ir.types import DistTensorType

BINARY = {"pd_op.add", "pd_op.subtract", "pd_op.multiply", "pd_op.divide", "pd_op.maximum", "pd_op.minimum"}
UNARY = {"pd_op.relu", "pd_op.square", "pd_op.gelu", "pd_op.tanh", "pd_op.sigmoid", "pd_op.exp", "pd_op.silu",
         "pd_op.sqrt", "pd_op.rsqrt", "pd_op.abs", "pd_op.scale", "pd_op.cast", "pd_op.dropout_free"}
ELEMENTWISE_GRAD = {"pd_op.add_grad", "pd_op.subtract_grad"}
UNARY_GRAD = {"pd_op.relu_grad", "pd_op.square_grad", "pd_op.tanh_grad", "pd_op.sigmoid_grad", "pd_op.silu_grad"}
REDUCE = {"pd_op.mean": "AVG", "pd_op.sum": "SUM"}
REDUCE_GRAD = {"pd_op.mean_grad", "pd_op.sum_grad"}


def _dm(v: Value | None):
    t = v.type if v is not None else None
    return (t.shape, t.dist.dims_mapping) if isinstance(t, DistTensorType) else None


def _flag(op: Operation, name: str) -> bool:
    a = op.attr(name)
    return isinstance(a, A.BoolAttr) and a.value


def _axes(op: Operation, i: int):
    """The int list a ``full_int_array`` operand holds (None: not known)."""
    v = op.operand(i)
    src = v.owner if v is not None else None
    if src is None or src.name != "pd_op.full_int_array":
        return None
    a = src.attr("value")
    els = getattr(a, "elements", None)
    if els is None:
        els = getattr(a, "values", None)
    try:
        return [int(getattr(e, "value", e)) for e in els] if els is not None else None
    except (TypeError, ValueError):
        return None


# ops whose rule takes an operand as it comes, partial included (the loss's readers)
AS_READ = {"builtin.shadow_output", "pd_op.full_like"}  # full_like's result: x's split, not partial


def _as_read(op: Operation, od: OperationDistAttr, mk: Maker) -> OperationDistAttr | None:
    t = op.operand(0).type if op.num_operands and op.operand(0) is not None else None
    if not isinstance(t, DistTensorType) or not od.operands or not isinstance(od.operands[0], TensorDistAttr):
        return None
    results = list(od.results)
    if op.name == "pd_op.full_like":
        if len(results) != 1 or not isinstance(results[0], TensorDistAttr):
            return None
        results[0] = mk.restyle(TensorDistAttr(results[0].mesh, t.dist.dims_mapping))
    return od.with_(operands=(mk.restyle(t.dist),) + tuple(od.operands[1:]), results=tuple(results))


def infer(op: Operation, mesh_shape) -> tuple[dict[int, tuple], list, list] | None:
    """(operand index -> dims mapping, result dims mappings, result partial pairs) by the op's
    rule on its operands' types, or None (no modelled rule, or Paddle's raises)."""
    name = op.name
    ins = [_dm(op.operand(i)) for i in range(op.num_operands)]
    if name == "pd_op.matmul" and len(ins) == 2 and None not in ins:
        r = R.matmul(ins[0][0], ins[0][1], ins[1][0], ins[1][1], _flag(op, "transpose_x"), _flag(op, "transpose_y"),
                     mesh_shape)
        kinds = ["SUM"]
        operands = {0: 0, 1: 1}
    elif name == "pd_op.matmul_grad" and len(ins) == 3 and None not in ins:
        r = R.matmul_grad(ins[0][0], ins[0][1], ins[1][0], ins[1][1], _flag(op, "transpose_x"),
                          _flag(op, "transpose_y"), mesh_shape)
        kinds = ["SUM", "SUM"]
        operands = {0: 0, 1: 1, 2: 2}
    elif name == "pd_op.embedding" and len(ins) == 2 and None not in ins:
        R.embedding_conflict(ins[0][1], ins[1][1])  # (where it does not raise: not modelled, kept)
        return None
    elif name in BINARY and len(ins) == 2 and None not in ins:
        r = R.elementwise([ins[0][0], ins[1][0]], [ins[0][1], ins[1][1]], mesh_shape)
        kinds, operands = [], {0: 0, 1: 1}
    elif name in UNARY and ins and ins[0] is not None and op.num_results == 1:
        r = R.elementwise([ins[0][0]], [ins[0][1]], mesh_shape)
        kinds, operands = [], {0: 0}
    elif name in ELEMENTWISE_GRAD and len(ins) == 3 and None not in ins:
        r = R.elementwise_grad(ins[0][0], ins[1][0], ins[2][0], ins[2][1])
        kinds, operands = ["SUM", "SUM"], {0: 0, 1: 1, 2: 2}
    elif name in UNARY_GRAD and len(ins) == 2 and None not in ins:
        r = R.unary_grad(ins[0][1])
        kinds, operands = ["SUM"], {0: 0, 1: 1}
    elif name in REDUCE and len(ins) == 2 and ins[0] is not None:
        axes = _axes(op, 1)
        if axes is None:
            return None
        r = R.reduction(ins[0][0], ins[0][1], axes, _flag(op, "keepdim"))
        kinds, operands = [REDUCE[name]], {0: 0}
    elif name in REDUCE_GRAD and len(ins) == 3 and ins[0] is not None and ins[1] is not None:
        axes = _axes(op, 2)
        if axes is None:
            return None
        r = R.reduction_grad(ins[0][0], ins[1][1], axes, _flag(op, "keepdim"))
        kinds, operands = ["SUM"], {0: 0, 1: 1}
    else:
        return None
    if not R.valid(r):
        return None
    assert r is not None
    req, outs, parts = r
    if len(outs) != op.num_results:
        return None
    partial = [tuple((m, kinds[i] if i < len(kinds) else "SUM") for m in p) for i, p in enumerate(parts)]
    return {i: req[j] for i, j in operands.items()}, outs, partial


def _grad_type(op: Operation, i: int, attr: TensorDistAttr, mk: Maker) -> TensorDistAttr:
    """The type Paddle's backward gives an activation's gradient: the grad op's result as its rule
    made it, unless that splits the tensor otherwise than its forward value -- then the forward
    value's layout (partial dropped; the partition pass reshards between the two right after the
    op).  A parameter's gradient keeps the rule's result (a partial one is reduced where the update
    reads it)."""
    if not op.name.endswith("_grad"):
        return attr
    fwd = op.operand(i if op.name == "pd_op.matmul_grad" or op.name in ELEMENTWISE_GRAD else 0)
    t = fwd.type if fwd is not None else None
    if not isinstance(t, DistTensorType) or (fwd.owner is not None and fwd.owner.name == "builtin.parameter") \
            or t.dist.dims_mapping == attr.dims_mapping:
        return attr
    return mk.restyle(t.dist.with_(partial=())) if t.dist.partial else t.dist  # type: ignore[return-value]


def recomplete(prog: Program, seeds: list[Value], mk: Maker) -> tuple[list[Operation], str | None, Operation | None]:
    """Re-infer every op downstream of ``seeds`` (values whose type changed) that has a modelled
    rule; returns the ops whose ``op_dist_attr`` changed.  Where an op's rule raises in Paddle
    (Paddle 3.3.1 fails to build the stage-3 program) nothing is changed: ``([], why, that op)``."""
    undo: list[tuple[object, str, object]] = []
    try:
        return _recomplete(prog, seeds, mk, undo), None, None
    except R.Conflict as e:
        for obj, field, old in reversed(undo):
            setattr(obj, field, old)
        return [], str(e), getattr(e, "op", None)


def _recomplete(prog: Program, seeds: list[Value], mk: Maker, undo: list) -> list[Operation]:
    changed = {id(v) for v in seeds}
    touched = []
    for op in prog.block.ops:
        if not any(id(v) in changed for v in op.operands if v is not None):
            continue
        od = op.dist_attr
        if not isinstance(od, OperationDistAttr) or len(od.results) != op.num_results:
            continue
        if op.name in AS_READ:
            new = _as_read(op, od, mk)
            if new is not None and new != od:
                undo.append((op, "dist_attr", od))
                op.dist_attr = new
                touched.append(op)
                for v, e in zip(op.results, new.results):
                    if isinstance(v.type, DistTensorType) and isinstance(e, TensorDistAttr) and v.type.dist != e:
                        undo.append((v, "type", v.type))
                        v.type = v.type.with_dist(e)
                        changed.add(id(v))
            continue
        try:
            got = infer(op, od.mesh.shape)
        except R.Conflict as e:
            where = R.Conflict(f"'{op.name}': {e}")
            where.op = op  # type: ignore[attr-defined]
            raise where from None
        if got is None:
            continue
        req, outs, partial = got
        operands = list(od.operands)
        for i, dm in req.items():
            e = operands[i] if i < len(operands) else None
            if not isinstance(e, TensorDistAttr):
                break
            operands[i] = mk.restyle(TensorDistAttr(e.mesh, tuple(dm)))
        else:
            results = []
            for i, e in enumerate(od.results):
                if not isinstance(e, TensorDistAttr):
                    break
                results.append(mk.restyle(TensorDistAttr(e.mesh, tuple(outs[i]), partial[i])))
            else:
                new = od.with_(operands=tuple(operands), results=tuple(results))
                if new != od:
                    undo.append((op, "dist_attr", od))
                    op.dist_attr = new
                    touched.append(op)
                for i, (v, e) in enumerate(zip(op.results, results)):
                    t = v.type
                    want = _grad_type(op, i, e, mk)
                    if isinstance(t, DistTensorType) and t.dist != want:
                        undo.append((v, "type", t))
                        v.type = t.with_dist(want)
                        changed.add(id(v))
    return touched
