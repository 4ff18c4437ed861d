"""The global-norm gradient clip of fused ZeRO-1: Paddle's ``ClipGradByGlobalNorm._pir_clip`` as
``ShardingOptimizerStage1`` sets it up (``should_comm_on_shard_dim``, the sharding and mp groups,
``has_dist_param`` / ``has_not_dist_param`` over every fused parameter).

The squared norm of each gradient (a piece's, for the fused updates) in the updates' order, summed
(``stack`` + ``sum``) per kind: plain updates, pieces of parameters sharded on another mesh dim
("dist"), the other pieces; each kind summed once more; the dist sum all-reduced over the sharding
group and the mp group, the other pieces' sum over the sharding group (a rank without such pieces
all-reduces a zero, as every rank must); the parts added, ``sqrt``, the scale
``clip_norm / max(norm, clip_norm)`` and a ``multiply`` per gradient.  The attributes of each op are
the stage-0 clip's (``tpl``: op name -> an op of it; ``clip_norm``: its ``pd_op.full`` of the norm).
"""

from __future__ import annotations

from ..dialects import ops
from ..dialects.collectives import ALL_REDUCE
from ..ir import attrs as A
from ..ir.builder import InsertPoint
from ..ir.core import Operation, Value
from ..ir.dist import VecDistAttr
from ..ir.types import VectorType
from .fusion_stages import clip_mesh
from .sharding_util import fail


def need_clip(p: Value) -> bool:
    a = p.owner.attr("need_clip") if p.owner is not None else None
    els = getattr(a, "elements", None)
    return not (els and isinstance(els[0], A.BoolAttr) and els[0].value is False)


def write_clip(f, todo: list, tpl: dict[str, Operation]) -> list:
    """Append the clip for ``todo`` ((update, param, grad, piece)) to ``f``'s program (a
    :class:`~distc.passes.tensor_fusion.Fusion`); the same list with the clipped gradients."""
    for name in (ops.SQUARED_L2_NORM, ops.STACK, ops.FULL_INT_ARRAY, "pd_op.sum", "pd_op.sqrt", "pd_op.maximum",
                 ops.DIVIDE, ops.MULTIPLY, "clip_norm"):
        if name not in tpl:
            raise fail(None, f"tensor-fusion: the gradient clip of the program has no '{name}': only Paddle's "
                             "ClipGradByGlobalNorm is rewritten for fusion")
    mk = f.mk
    api = f.api(InsertPoint.at_end(f.block))
    mesh, pp = clip_mesh([p.dist_attr.mesh for _, p, _, _ in todo])  # pp: norms to the first stage and back
    dtype = todo[0][2].type.dtype
    clip_norm = tpl["clip_norm"]
    fused = [u for b in f.buffers for u in b.updates]
    has_dist = any(f.is_dist(u) for u in fused)
    has_not_dist = any(not f.is_dist(u) for u in fused)

    def clone(op: Operation, operands, types, attrs=None, on=None) -> Value:
        def ent(v):
            t = v.type
            return VecDistAttr(tuple(e.dist for e in t.elements)) if isinstance(t, VectorType) else t.dist

        a = {k: v for k, v in op.attrs.items() if k not in ("op_dist_attr", "op_role", "stop_gradient")}
        a.update(attrs or {})
        return api.insert(op.name, list(operands), list(types), a,
                          mk.op_dist(on or mesh, [ent(v) for v in operands], [t.dist for t in types])).result

    def moved(v: Value, to) -> Value:  # Paddle's paddle.distributed.reshard(v, to, [Replicate()])
        return api.reshard(v, mk.tensor_dist(to, (-1,) * len(v.type.shape))) if pp and v.type.dist.mesh != to else v

    def add_n(vs: list[Value]) -> Value:  # paddle.stack(vs).sum()
        st = clone(tpl[ops.STACK], [api.combine(vs)], [f.vtype([len(vs)] + list(vs[0].type.shape), dtype, mesh)])
        axes = clone(tpl[ops.FULL_INT_ARRAY], [], [f.vtype([0], "i64", mesh)])
        return clone(tpl["pd_op.sum"], [st, axes], [f.vtype([], dtype, mesh)])

    kinds: list[list[Value]] = [[], [], []]  # plain, dist pieces, other pieces
    for u, p, g, pc in todo:
        if need_clip(p):
            gm = g.type.dist.mesh if pp else mesh
            n = moved(clone(tpl[ops.SQUARED_L2_NORM], [g], [f.vtype([1], g.type.dtype, gm)], on=gm), mesh)
            kinds[0 if pc is None else 1 if f.is_dist(u) else 2].append(n)
    sums = [add_n(k) if k else None for k in kinds]
    norm = add_n([sums[0]]) if sums[0] is not None else None
    for k, (flag, groups) in ((1, (has_dist, [f.group, f.mp_group])), (2, (has_not_dist, [f.group]))):
        if sums[k] is not None:
            part = add_n([sums[k]])
        elif flag:
            part = clone(clip_norm, [], [f.vtype([1], dtype, mesh)], {"value": mk.fill_value(0.0)})
        else:
            continue
        if flag:
            for grp in groups:
                if grp is not None:
                    part = f.collective(api, "pd_op.all_reduce", ALL_REDUCE, part, grp, part.type.shape,
                                        extra={"reduce_type": mk.i32(0)})
        norm = part if norm is None else api.insert(
            "pd_op.add", [norm, part], [part.type], {},
            mk.op_dist(mesh, [norm.type.dist, part.type.dist], [part.type.dist])).result
    if norm is None:
        return todo
    norm = clone(tpl["pd_op.sqrt"], [norm], [norm.type])
    mx = clone(clip_norm, [], [f.vtype([1], dtype, mesh)])
    big = clone(tpl["pd_op.maximum"], [norm, mx], [f.vtype([1], dtype, mesh)])
    scale = clone(tpl[ops.DIVIDE], [mx, big], [f.vtype([1], dtype, mesh)])
    return [(u, p, clone(tpl[ops.MULTIPLY], [g, moved(scale, g.type.dist.mesh)], [g.type],
                         on=g.type.dist.mesh if pp else mesh) if need_clip(p) else g, pc) for u, p, g, pc in todo]
