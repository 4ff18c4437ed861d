"""``gradient-merge{k_steps=K}``: accumulate the gradients of K micro-batches before one
optimizer step, as Paddle 3.3.1's ``auto_parallel_gradient_merge_pass`` (PIR) does to a rank's
dist program after ``RemovePasses`` (``strategy.gradient_merge``, and ``strategy.pipeline``, which
turns it on with ``k_steps = accumulate_steps`` and ``avg``):

* each gradient gets a persistable accumulator, the kwarg ``%kwarg_<param>@GRAD@MERGE`` (the
  gradient's type; created in the startup program as zeros of its local shape), and
  ``pd_op.add_(acc, grad) {grad_merge_add:true}`` right after the op that makes the gradient
  (Paddle gives it that op's role and ``op_dist_attr``, arity and all);
* the gradient's users with the optimizer role (the gradient collectives the partition put
  there among them) read the accumulator instead; one-operand users that feed only such ops are
  moved to the optimizer role first (Paddle's ``_move_used_grad_op``);
* ``avg``: ``scale_`` by 1/K of the gradient operand of each AdamW/Adam/SGD update;
* at the end of the block the accumulators are reset: ``set_value_with_tensor_(acc, 0)``.

The gradients are found from the updates: a parameter's gradient is what its update's gradient
operand comes from, back through the optimizer-role ops (clip, collectives), to the backward op
that made it; parameters in the order of their updates (Paddle's ``params_grads``).
"""

from __future__ import annotations


from ..dialects import ops
from ..dialects.grads import grad_operand as _grad_operand, params_grads, role
from ..dialects.pir_kwargs import cloned, inserted
from ..ir import attrs as A
from ..ir.builder import InsertPoint, Maker
from ..ir.core import BlockArgument, Operation, Program, Value
from ..ir.dist import OperationDistAttr, TensorDistAttr
from ..ir.records import record
from ..ir.types import DTYPE_SUFFIX_TO_NAME, DistTensorType
from .base import ModulePass, PassContext, register

OPTIMIZE, BACKWARD = 2, 1


def _plain(d: TensorDistAttr) -> TensorDistAttr:
    return d.with_(partial=()) if d.partial else d


def _move_used_grad_op(user: Operation, grad: Value) -> None:
    """Paddle's ``_move_used_grad_op``: one-operand users (and slices) of the gradient that feed
    only optimizer ops go to the optimizer role."""
    moved: list[Operation] = []
    ok = True

    def visit(op: Operation) -> None:
        nonlocal ok
        if not ok or op in moved:
            return
        if op.name in ("pd_op.send_v2", "pd_op.send"):
            ok = False
            return
        if op.num_operands == 1:
            moved.append(op)
        elif op.name == ops.SLICE:
            moved.append(op)
            for v in op.operands:
                if v is not grad and v is not None and v.owner is not None:
                    moved.append(v.owner)
        else:
            ok = False
            return
        for r in op.results:
            for nxt in r.users:
                if role(nxt) != OPTIMIZE:
                    visit(nxt)

    visit(user)
    if ok:
        for op in moved:
            op.set_attr("op_role", A.IntAttr(OPTIMIZE))


@record
class MergeVar:
    param: str
    grad: Value
    acc: BlockArgument

    @property
    def name(self) -> str:
        return self.param + "@GRAD@MERGE"


def _dist_value(mk: Maker, mesh, shape, dtype: str):
    return mk.dist_type(shape, dtype, mk.tensor_dist(mesh, [-1] * len(shape)))


def _insert(at: InsertPoint, name: str, operands, result_types, attrs: dict) -> Operation:
    op = Operation(name, list(operands), list(result_types), attrs)
    return at.insert(op)


def _full(at: InsertPoint, mk: Maker, mesh, value: float, place: str) -> Value:
    attrs = {"dtype": mk.dtype("float32"), "op_role": A.IntAttr(OPTIMIZE), "place": mk.place(place),
             "shape": mk.int_array([1]), "stop_gradient": mk.bools([True]), "value": mk.fill_value(value)}
    return _insert(at, ops.FULL, [], [_dist_value(mk, mesh, [1], "f32")], attrs).result


def _scale_updates(prog: Program, mk: Maker, k: int) -> int:
    n = 0
    for op in list(prog.block.ops):
        i = _grad_operand(op)
        if i is None or role(op) != OPTIMIZE:
            continue
        target = op.operand(i)
        assert target is not None
        prev = target.owner if target.owner is not None else op.prev
        at = InsertPoint.after(prev) if prev is not None else InsertPoint.at_start(prog.block)
        t = target.type
        d = t.dist if isinstance(t, DistTensorType) else None
        mesh = d.mesh if d is not None else op.dist_attr.mesh  # type: ignore[union-attr]
        s = _full(at, mk, mesh, 1.0 / k, "Place(cpu)")
        od = OperationDistAttr(mesh, (_plain(d), s.dist_attr), (_plain(d),), op.dist_attr.chunk_id)  # type: ignore[arg-type,union-attr]
        scaled = _insert(at, "pd_op.scale_", [target, s], [t], {
            "bias": mk.f32(0.0), "bias_after_scale": A.BoolAttr(False), "op_dist_attr": od,
            "op_role": A.IntAttr(OPTIMIZE), "stop_gradient": mk.bools([_sg(target)])}).result
        op.set_operand(i, scaled)
        n += 1
    return n


def _sg(v: Value) -> bool:
    from .sharding_util import stop_gradient

    return stop_gradient(v)


def _reset(prog: Program, mk: Maker, mv: MergeVar) -> None:
    at = InsertPoint.at_end(prog.block)
    d = mv.acc.dist_attr
    assert d is not None
    mesh = d.mesh
    z = _full(at, mk, mesh, 0.0, "Place(undefined:0)")
    arrays = []
    for _ in range(3):
        attrs = {"dtype": mk.dtype("int64"), "op_role": A.IntAttr(OPTIMIZE), "place": mk.place("Place(cpu)"),
                 "stop_gradient": mk.bools([True]), "value": A.ArrayAttr(())}
        arrays.append(_insert(at, ops.FULL_INT_ARRAY, [], [_dist_value(mk, mesh, [0], "i64")], attrs).result)
    rep = mk.tensor_dist(mesh, [-1])
    plain = mk.tensor_dist(mesh, [-1] * len(d.dims_mapping))  # (its SPMD rule replicates everything)
    od = OperationDistAttr(mesh, (plain, rep, rep, rep, rep), (plain,), -1)
    t = mv.acc.type
    _insert(at, "pd_op.set_value_with_tensor_", [mv.acc, z] + arrays,
            [DistTensorType(t.shape, t.dtype, plain)], {  # type: ignore[union-attr]
                "axes": A.ArrayAttr(()), "decrease_axes": A.ArrayAttr(()), "none_axes": A.ArrayAttr(()),
                "op_dist_attr": od, "op_role": A.IntAttr(OPTIMIZE), "stop_gradient": mk.bools([True])})


def _chunk(v: Value) -> int | None:
    d = v.owner.dist_attr if v.owner is not None else None
    return d.chunk_id if d is not None else -1


CLIP_OPS = ("pd_op.squared_l2_norm", "pd_op.clip_by_norm")


def has_global_clip(prog: Program) -> bool:
    """Whether the update reads a norm of the gradients (a global-norm clip)."""
    return any(op.name in CLIP_OPS for op in prog.block.ops)


def clip_warning(prog: Program, k_steps: int, paddle: bool):
    """The warning a gradient merge over ``k_steps`` micro-batches needs where a clip reads the
    gradients' norm (``prog``: the global or a rank's program; None where none does): distc's
    default and Paddle 3.3.1's program differ there, and how.  Located at the first clip op."""
    from ..syntax.diagnostics import DiagnosticError

    op = next((o for o in prog.block.ops if o.name in CLIP_OPS), None)
    if k_steps <= 1 or op is None:
        return None
    what = "global-norm" if op.name == "pd_op.squared_l2_norm" else "per-tensor norm"
    if paddle:
        msg = (f"gradient merge over {k_steps} micro-batches, as Paddle 3.3.1 (--paddle): the {what} clip sees the "
               f"sum of the gradients and the update {k_steps}x less of the clipped sum, so whenever the clip acts "
               f"the step is not the global batch's (as if the clip norm were {k_steps}x smaller); without --paddle "
               "distc averages before the clip")
    else:
        msg = (f"gradient merge over {k_steps} micro-batches under a {what} clip: distc averages the accumulated "
               "gradients before the clip, so the step is the global batch's (--verify proves it); Paddle 3.3.1 clips "
               f"their sum and averages after (as if the clip norm were {k_steps}x smaller), so its program differs "
               "here: --paddle gives Paddle's program")
    line, col = op.loc or (None, None)
    src = op.src.split("\n", 1)[0] if op.src else None
    return DiagnosticError(msg, line, col, filename=prog.filename, severity="warning",
                           source=None if src is None or line is None else "\n" * (line - 1) + src)


def _scale_accumulators(prog: Program, mk: Maker, made: list[MergeVar], k: int) -> None:
    """The mean instead of the sum wherever the optimizer section reads an accumulator:
    ``scale_(acc, 1/K)`` right before its first optimizer-role user, read by all of them."""
    pos = {id(op): i for i, op in enumerate(prog.block.ops)}
    for mv in made:
        d = mv.acc.dist_attr
        assert d is not None
        users = [u for u in mv.acc.users if role(u) == OPTIMIZE]
        if not users:
            continue
        at = InsertPoint.before(min(users, key=lambda u: pos[id(u)]))
        s = _full(at, mk, d.mesh, 1.0 / k, "Place(cpu)")
        od = OperationDistAttr(d.mesh, (d, s.dist_attr), (d,), -1)  # type: ignore[arg-type]
        ids = {id(u) for u in users}
        scaled = _insert(at, "pd_op.scale_", [mv.acc, s], [mv.acc.type], {
            "bias": mk.f32(0.0), "bias_after_scale": A.BoolAttr(False), "op_dist_attr": od,
            "op_role": A.IntAttr(OPTIMIZE), "stop_gradient": mk.bools([False])}).result
        mv.acc.replace_all_uses_with(scaled, where=lambda u: id(u) in ids)


def merge_gradients(prog: Program, k_steps: int, avg: bool = True, paddle: bool = True,
                    resharded: set[str] = frozenset(), pairs=None) -> list[MergeVar]:  # type: ignore[assignment]
    """The pass on ``prog`` (a rank's dist program); returns the accumulators made.  ``paddle``:
    average as Paddle 3.3.1 does, at each update (after a global-norm clip of the sum); else,
    where a global-norm clip reads the gradients, average the accumulators before it.  ``pairs``:
    (parameter name, gradient) to merge, if not the updates' (tensor fusion: every fused
    parameter's whole gradient, as backward made it, before its buffer)."""
    mk = Maker(prog.style)
    block = prog.block
    made: list[MergeVar] = []
    for param, grad in (params_grads(prog, resharded) if pairs is None else pairs):
        gdef = grad.owner
        assert gdef is not None
        acc = block.add_argument(grad.type, keyword=param + "@GRAD@MERGE")
        acc.attrs = {"place": mk.place("Place(cpu)"), "persistable": A.BoolAttr(True)}  # (set in the other order)
        gd = gdef.dist_attr
        rt = grad.type
        if isinstance(rt, DistTensorType):
            rt = DistTensorType(rt.shape, rt.dtype, _plain(rt.dist))
        attrs: dict = {"grad_merge_add": A.BoolAttr(True)}
        if gd is not None:
            attrs["op_dist_attr"] = gd
        attrs["op_role"] = gdef.attr("op_role")
        attrs["stop_gradient"] = mk.bools([False])
        add = Operation("pd_op.add_", [acc, grad], [rt], attrs)
        InsertPoint.after(gdef).insert(add)
        for user in list(grad.users):
            if user is not add:
                _move_used_grad_op(user, grad)
        opt_users = {id(u) for u in grad.users if u is not add and role(u) == OPTIMIZE}
        grad.replace_all_uses_with(acc, where=lambda u: id(u) in opt_users)
        made.append(MergeVar(param, grad, acc))
    if avg and made:
        if paddle or not has_global_clip(prog):
            _scale_updates(prog, mk, k_steps)
        else:
            _scale_accumulators(prog, mk, made, k_steps)
    for mv in made:
        _reset(prog, mk, mv)
    keys = [a.keyword for a in block.args if a.keyword is not None]
    if pairs is not None:  # tensor fusion: its buffers' kwargs come as a clone of the program has them
        old = [k for k in keys if not k.endswith("@GRAD@MERGE")]
        keys = cloned(old) + [k for k in keys if k.endswith("@GRAD@MERGE")]
    order = inserted(keys)
    by_key = {a.keyword: a for a in block.args if a.keyword is not None}
    block.args = [a for a in block.args if a.keyword is None] + [by_key[k] for k in order]
    for i, a in enumerate(block.args):
        a.index = i
    block.dirty = True
    return made


@register
@record
class GradientMergePass(ModulePass):
    name = "gradient-merge"
    description = "accumulate K micro-batches' gradients before one update (Paddle's gradient merge)"

    k_steps: int = 1
    avg: bool = True
    paddle: bool = False  # Paddle 3.3.1's averaging after a global-norm clip of the sum

    def apply(self, prog: Program, ctx: PassContext) -> None:
        if self.k_steps < 1:
            from ..syntax.diagnostics import DiagnosticError

            raise DiagnosticError(f"gradient-merge: k_steps must be 1 or more, not {self.k_steps}")
        clip = has_global_clip(prog)
        fused = ctx.stats.fusion  # tensor fusion: the gradients before their buffers (Paddle's params_grads)
        pairs = None if fused is None else [(u.name, u.grad) for u in fused.ups if u.grad.owner is not None
                                            and u.grad.owner.parent is prog.block]
        made = merge_gradients(prog, self.k_steps, self.avg, self.paddle, ctx.stats.resharded_grads, pairs)
        ctx.stats.merged_grads = [(m.name, m.acc.type) for m in made]
        ctx.notes.append(f"gradient-merge: {len(made)} gradient(s) accumulated over {self.k_steps} micro-batches"
                         + (", averaged" if self.avg else ""))
        if self.avg and clip and made:
            ctx.notes.append(
                "gradient-merge: " + ("as Paddle 3.3.1: the global-norm clip sees the sum of the micro-batch "
                                      "gradients, the update a K-th of the clipped sum (a step unlike the global "
                                      "batch's whenever the clip acts)" if self.paddle else
                                      "the accumulated gradients are averaged before the global-norm clip, so the "
                                      "step is the global batch's (Paddle 3.3.1 clips their sum, then averages; "
                                      "paddle=true gives its program)"))


@record
class ZeroAccumulatorsPass(ModulePass):
    """The startup program's side of ``gradient-merge``: the accumulators the pass made in the main
    program of the same run (``ctx.stats.merged_grads``), zero (:func:`zero_accumulators`; none
    made: nothing).  A stage of the shard pipeline's startup passes, not a name for ``-p``."""

    name = "zero-accumulators"
    description = "the gradient-merge accumulators, made as zeros (startup program)"

    def apply(self, prog: Program, ctx: PassContext) -> None:
        if ctx.stats.merged_grads:
            zero_accumulators(prog, ctx.stats.merged_grads)


def zero_accumulators(startup: Program, merged: list[tuple[str, object]]) -> None:
    """What the pass adds to the startup program, as Paddle's executed (dense) startup program
    shows it: each accumulator made as zeros of its gradient's local shape and kept by name, at the
    end, in the pass's order. ``merged``: (accumulator name, its dist type) from ``ctx.stats``."""
    from .dist_to_dense import local_type

    mk = Maker(startup.style)
    at = InsertPoint.at_end(startup.block)
    for name, t in merged:
        lt = local_type(t, mk)
        attrs = {"chunk_id": mk.i32(-1), "dtype": mk.dtype(DTYPE_SUFFIX_TO_NAME.get(lt.dtype, lt.dtype)),  # type: ignore[union-attr]
                 "op_role": A.IntAttr(0), "persistable": mk.bools([True]), "place": mk.place("Place(undefined:0)"),
                 "shape": mk.int_array(list(lt.shape)), "stop_gradient": mk.bools([True]),  # type: ignore[union-attr]
                 "value": mk.fill_value(0.0)}
        z = _insert(at, ops.FULL, [], [lt], attrs).result
        _insert(at, ops.SHADOW_OUTPUT, [z], [], {"chunk_id": mk.i32(-1), "op_role": A.IntAttr(0),
                                                 "output_name": A.StrAttr.of(name)})
