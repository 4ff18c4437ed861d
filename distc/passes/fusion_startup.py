"""The startup program of fused ZeRO-1 for one rank: what Paddle's ``_fuse_group_param`` and the
inner optimizer leave in it (its ``startup_after_remove``), from the stage-0 startup program and
the rank's :class:`~distc.passes.tensor_fusion.Fusion`:

* for each buffer: ``coalesce_tensor_`` of its parameters' initial values (made dist values
  replicated on the mesh where they were dense), the fused parameter (``shadow_output
  "fused@-..."``), this rank's shard of it (``view_slice``, ``shadow_output "shard@fused@-..."``) and
  a ``view_slice`` of the shard per owned piece (``set_parameter "slice@NAME"``);
* then the learning rate, then the states of the updates the rank runs, in their order (a
  piece's moments of the piece's length, beta pows as they were; ``slice@`` names).

``shard-startup`` then lowers it as any startup program (Paddle's ``startup_final``).
"""

from __future__ import annotations


from ..dialects import ops
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Program, Value
from ..ir.dist import VecDistAttr
from ..ir.records import record
from ..ir.types import DistTensorType
from .fusion_layout import ACC_ORDER, POWS, acc_kind, coalesce_attrs, data_name
from .base import ModulePass, PassContext
from .paddle_api import PaddleAPI
from .sharding_util import fail

SINKS = (ops.SET_PARAMETER, ops.SHADOW_OUTPUT)


@record
class FuseStartupPass(ModulePass):
    """The rank's fused startup program (:func:`fuse_startup`) for the plan the ``tensor-fusion``
    pass of the same run made (``ctx.stats.fusion``): a stage of the shard pipeline's startup
    passes, not a name for ``-p`` (alone it has no plan to follow)."""

    name = "fuse-startup"
    description = "the fused ZeRO-1 startup program of the rank tensor-fusion planned (startup program)"

    def apply(self, prog: Program, ctx: PassContext) -> None:
        if ctx.stats.fusion is None:
            raise fail(None, "fuse-startup follows the tensor-fusion pass's plan: run tensor-fusion on the main "
                             "program first")
        fuse_startup(prog, ctx.stats.fusion)


def _sink_name(op: Operation) -> str:
    key = "parameter_name" if op.name == ops.SET_PARAMETER else "output_name"
    return str(getattr(op.attr(key), "value", ""))


def fuse_startup(startup: Program, f) -> None:
    """Rewrite ``startup`` (the stage-0 ``startup_after_remove``) for ``f``'s rank."""
    mk = Maker(startup.style)
    blk = startup.block
    sinks: dict[str, Operation] = {}
    for op in blk.ops:
        if op.name in SINKS:
            sinks.setdefault(_sink_name(op), op)
    inits = _take_states(f, sinks)
    lr_ops: list[Operation] = []
    lr_sink = sinks.get(f.lr_name)
    if lr_sink is not None:
        v = lr_sink.operand(0)
        lr_ops = ([v.owner] if v.owner is not None else []) + [o for o in blk.ops if o.name in SINKS
                                                                and o.operand(0) is v]
        for o in lr_ops:
            blk.remove(o)
    api = PaddleAPI(startup.style, InsertPoint.at_end(blk))
    here = [b for b in f.buffers if f.o.rank in b.mesh.process_ids]  # (a MoE expert's elsewhere: not here)
    for b in here:
        _buffer(f, b, sinks, api, mk)
    if f.o.stage3:  # the fused parameters are no parameters of the main program any more: not kept
        for b in here:
            for u in b.updates:
                s = sinks.get(u.name)
                if s is not None and s.parent is not None:
                    s.erase()
    for o in lr_ops:
        blk.append(o)
    for u, _, _, pc in f.todo:
        if f.o.rank not in u.mesh.process_ids:
            continue
        for _, d in sorted(u.states.items(), key=lambda kv: ACC_ORDER.get(acc_kind(data_name(kv[1])), 9)):
            _state(f, blk, mk, data_name(d), inits, pc)


def _take_states(f, sinks: dict[str, Operation]) -> dict[str, Operation]:
    """Remove every state's initializer and sink; name -> the initializer op (a template)."""
    inits: dict[str, Operation] = {}
    for u in f.ups:
        for d in u.states.values():
            name = data_name(d)
            sink = sinks.get(name)
            if sink is None or sink.parent is None:
                continue
            src = sink.operand(0).owner
            sink.erase()
            if src is not None and not any(r.uses for r in src.results):
                src.erase()
                inits[name] = src
    return inits


def _buffer(f, b, sinks: dict[str, Operation], api: PaddleAPI, mk: Maker) -> None:
    vals: list[Value] = []
    for u in b.updates:
        s = sinks.get(u.name)
        if s is None:
            raise fail(None, f"tensor-fusion: the startup program does not set parameter '{u.name}'")
        v = s.operand(0)
        if not isinstance(v.type, DistTensorType):  # (coalesce_tensor_'s inputs become dist values)
            v.type = f.vtype(list(v.type.shape), v.type.dtype, b.mesh)
        vals.append(v)
    vec = api.combine(vals)
    vd = VecDistAttr(tuple(v.dist_attr for v in vals))
    dtype = vals[0].type.dtype
    ft = f.vtype([b.size], dtype, b.mesh)
    fused = api.insert(ops.COALESCE_TENSOR_, [vec], [vec.type, ft], coalesce_attrs(mk, b.align, dtype),
                       mk.op_dist(b.mesh, [vd], [vd, ft.dist])).results[1]
    api.insert(ops.SHADOW_OUTPUT, [fused], [], {"output_name": mk.str(b.name)}, mk.op_dist(b.mesh, [ft.dist], []),
               with_stop_gradient=False)

    def view(x: Value, lo: int, hi: int) -> Value:
        t = f.vtype([hi - lo], dtype, b.mesh)
        v = api.insert("pd_op.view_slice", [x], [t], {"begin_idx": mk.i64(lo), "end_idx": mk.i64(hi)},
                       mk.op_dist(b.mesh, [x.type.dist], [t.dist])).result
        v.owner.set_attr("persistable", mk.bools([True]))
        return v

    begin = b.rank_index * b.shard
    shard = view(fused, begin, begin + b.shard)
    api.insert(ops.SHADOW_OUTPUT, [shard], [], {"output_name": mk.str("shard@" + b.name)},
               mk.op_dist(b.mesh, [shard.type.dist], []), with_stop_gradient=False)
    for pc in b.pieces:
        api.insert(ops.SET_PARAMETER, [view(shard, pc.begin, pc.end)], [],
                   {"parameter_name": mk.str("slice@" + pc.update.name)}, with_stop_gradient=False)


def _state(f, blk, mk: Maker, name: str, inits: dict[str, Operation], pc) -> None:
    src = inits.get(name)
    if src is None:
        return
    attrs = dict(src.attrs)
    t = src.results[0].type
    out = name
    if pc is not None:
        out = "slice@" + name
        if acc_kind(name) not in POWS:
            shape = [pc.end - pc.begin]
            mesh = t.dist.mesh if isinstance(t, DistTensorType) else pc.update.mesh
            t = f.vtype(shape, t.dtype, mesh)
            attrs["shape"] = mk.int_array(shape)
            attrs["op_dist_attr"] = mk.op_dist(mesh, [], [t.dist])
    init = Operation(src.name, [], [t], attrs)
    blk.append(init)
    sattrs = {"output_name": mk.str(out)}
    if isinstance(t, DistTensorType):
        sattrs["op_dist_attr"] = mk.op_dist(t.dist.mesh, [t.dist], [])
    blk.append(Operation(ops.SHADOW_OUTPUT, [init.result], [], sattrs))
