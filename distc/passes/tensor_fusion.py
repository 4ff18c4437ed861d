"""``tensor-fusion{rank=R,axis,buffer_mb,overlap,release_grads}``: ZeRO-1 with tensor fusion, as
Paddle 3.3.1's ``ShardingOptimizerStage1.apply_gradients`` (``strategy.sharding.enable_tensor_fusion``)
writes it into rank R's program, before partition (the program is rank-specific from here on).

From the plain stage-0 program (every optimizer op updating a whole parameter):

* the gradients partial over the sharding mesh dim are packed, in optimizer order, into buffers
  (``buffer_mb`` per buffer and dtype, Paddle's ``assign_group_by_size``; 0: a buffer a
  parameter), each parameter padded to 256 bytes x the sharding degree (:mod:`.fusion_layout`);
* each buffer: ``coalesce_tensor_`` of its gradients (``release_grads``: ``empty`` and, around
  each gradient's backward op, a ``view_slice``/``view_shape`` it is written into by
  ``share_var``), one ``reduce_scatter`` over the sharding group, a ``view_slice`` per piece
  this rank owns;
* the rank's shard of a buffer covers whole parameters or pieces of them: each piece is a
  parameter ``slice@NAME`` (a view of the fused parameter buffer the startup program builds,
  :mod:`.fusion_startup`) updated here with its own states ``slice@NAME_moment1_0`` ...;
  parameters the rank owns no piece of have no update on it; the inner optimizer's updates come
  sorted by parameter name, the global-norm clip as Paddle's ``_pir_clip`` writes it under
  sharding (:mod:`.fusion_clip`);
* after the updates, one ``all_gather`` of the rank's shard (``%kwarg_shard@fused@-...``) into
  the fused parameter buffer (``%kwarg_fused@-...``, ``share_var``);
* ``overlap``: the reduce-scatter right after the buffer's last gradient, on the
  ``auto_parallel_sharding`` stream, and a ``nop`` there orders each all-gather after the last
  update of its buffer.

Updates whose gradient is not partial on the sharding dim keep their plain form.  What the
startup program needs (the buffers, the updates in order) is left in ``ctx.stats.fusion``.
"""

from __future__ import annotations


from ..dialects import ops
from ..dialects.collectives import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, Collective
from ..dialects.optimizers import BETA_POW, GRAD, MASTER, PARAM, SCALAR, STATE, optimizer_sig
from ..dialects.pir_kwargs import inserted
from ..ir import attrs as A
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Program, Value
from ..ir.dist import VecDistAttr
from ..ir.records import record
from ..ir.types import DistTensorType
from .base import ModulePass, PassContext, register
from .fusion_layout import (ACC_ORDER, NULL, POWS, Buffer, Piece, Update, acc_kind, coalesce_attrs, data_name,
                            dtype_bytes, dtype_name, group_by_size, local_shape, make_buffer, numel, param_name,
                            value_name)
from .fusion_stages import lr_per_run, own_mesh
from .paddle_api import PaddleAPI
from .sharding_util import fail

SHARDING_STREAM = "auto_parallel_sharding"


def role(op: Operation) -> int | None:
    v = getattr(op.attr("op_role"), "value", None)
    return v if isinstance(v, int) else None


@register
@record
class TensorFusionPass(ModulePass):
    name = "tensor-fusion"
    description = "ZeRO-1 with tensor fusion for one rank (Paddle's ShardingOptimizerStage1, before partition)"

    rank: int = 0
    axis: int = 0  # the sharding mesh dim
    buffer_mb: float = 256  # strategy.sharding.comm_buffer_size_MB (< 0: 256)
    overlap: bool = False  # strategy.sharding.enable_overlap
    release_grads: bool = False  # strategy.sharding.release_gradients
    align: int = 256  # bytes a parameter is aligned to (Paddle's alignment table: gpu, npu, xpu)
    stage3: bool = False  # beyond Paddle: the parameters too are kept as the rank's shard only
    pipeline: bool = False  # strategy.pipeline (a schedule): the gradients are not made persistable

    def apply(self, prog: Program, ctx: PassContext) -> None:
        if self.rank < 0 or self.axis < 0 or self.align < 1:
            raise fail(None, "tensor-fusion: rank and axis must be 0 or more, align 1 or more")
        f = Fusion(self, prog, ctx)
        f.run()
        ctx.stats.fusion = f


class Fusion:
    """One rank's fused ZeRO-1: the analysis (:meth:`run`) and the rewrite of the main program."""

    def __init__(self, opts: TensorFusionPass, prog: Program, ctx: PassContext) -> None:
        self.o = opts
        self.prog = prog
        self.block = prog.block
        self.ctx = ctx
        self.mk = Maker(prog.style)
        self.rings = None
        self.buffers: list[Buffer] = []
        self.todo: list = []  # (update, param, grad, piece or None) in the order the updates are written
        self.lr_name = ""

    # -- what the stage-0 program holds ---------------------------------------------------------
    def updates(self) -> list[Update]:
        out = []
        for op in self.block.ops:
            sig = optimizer_sig(op)
            if sig is None:
                continue
            if sig.spmd == "replicate":  # lamb_'s trust ratio: norms of the whole parameter and update
                raise fail(op, f"tensor-fusion: '{op.name}' needs its whole parameter and update (a norm of each), not a slice")
            roles = [r for r, _ in sig.operands]
            p, g = op.operand(roles.index(PARAM)), op.operand(roles.index(GRAD))
            if p is None or g is None or p.dist_attr is None or g.dist_attr is None:
                raise fail(op, f"tensor-fusion: '{op.name}' updates a parameter without a dist type")
            scalars = [v.owner for i, r in enumerate(roles) if r == SCALAR
                       and (v := op.operand(i)) is not None and v.owner is not None]
            states = {i: v.owner for i, r in enumerate(roles) if r in (STATE, BETA_POW, MASTER)
                      and (v := op.operand(i)) is not None and v.owner is not None and v.owner.name == ops.DATA}
            out.append(Update(op, p, self.raw_grad(g), param_name(p), scalars, states, sig, list(op.operands),
                              p.dist_attr.mesh))
        if not out:
            raise fail(None, "tensor-fusion: no optimizer update in the program")
        return out

    @staticmethod
    def raw_grad(g: Value) -> Value:
        """The gradient backward produced (before a global-norm clip's ``multiply``)."""
        op = g.owner
        if op is not None and op.name == ops.MULTIPLY and role(op) == 2:
            return op.operand(0)
        return g

    def clip_region(self, ups: list[Update]) -> list[Operation]:
        """The stage-0 global-norm clip: the optimizer-role ops the gradients come through, in order."""
        seen: dict[int, Operation] = {}
        # a gradient that is an input (its pd_op.data, optimizer role: the seed program) is no clip's
        raw = {id(g.owner) for u in ups if (g := u.grad).owner is not None and not g.owner.operands}
        todo = [u.operands[[r for r, _ in u.sig.operands].index(GRAD)].owner for u in ups]
        while todo:
            op = todo.pop()
            if op is None or id(op) in seen or id(op) in raw or role(op) != 2 or optimizer_sig(op) is not None:
                continue
            seen[id(op)] = op
            todo += [v.owner for v in op.operands if v is not None]
        return sorted(seen.values(), key=self.block.index)

    # -- the pass -------------------------------------------------------------------------------
    def run(self) -> None:
        o = self.o
        ups = self.updates()
        mesh, pp = own_mesh([u.param.dist_attr.mesh for u in ups], o.rank)  # pp: pipeline stages
        if o.axis >= mesh.ndim:
            raise fail(ups[0].op, f"tensor-fusion: the sharding mesh dim {o.axis} is not a dim of mesh "
                                  f"{list(mesh.shape)}")
        r = o.rank if o.rank in mesh.process_ids else mesh.process_ids[0]
        self.group = sorted(mesh.sub_mesh(o.axis, r).process_ids)
        # ShardingOptimizerStage1 makes the sharding group first, then (a 2-D mesh) the mp group
        self.mp_group = None
        self.ring(self.group)
        if mesh.ndim == 2:
            self.mp_group = sorted(mesh.sub_mesh(1 - o.axis, r).process_ids)
            self.ring(self.mp_group)
        plain, by_mesh = [], {}
        for u in ups:
            if not u.grad.dist_attr.is_partial(o.axis):
                plain.append(u)
                continue
            by_mesh.setdefault(u.param.dist_attr.mesh, []).append(u)
            if self.is_dist(u):  # a fused parameter sharded on another dim: Paddle marks it
                u.param.owner.set_attr("is_distributed", self.mk.bools([True]))
        limit = int((o.buffer_mb if o.buffer_mb >= 0 else 256) * 1024 * 1024)
        at = self.group.index(r)
        for m, us in by_mesh.items():  # a sub-mesh (MoE experts): its own group (without the rank: at its place)
            gm = self.group if m == mesh else sorted(m.sub_mesh(o.axis, o.rank if o.rank in m.process_ids
                                                                else m.process_ids[0]).process_ids)
            i, _ = (gm.index(o.rank) if o.rank in gm else min(at, len(gm) - 1)), self.ring(gm)
            for gi, idx in enumerate(group_by_size(us, limit)):
                self.buffers.append(make_buffer(gi, m, [us[k] for k in idx], o.align, gm, i))
                if pp and m != mesh:  # another stage's buffer: with this rank's communicator, as Paddle
                    self.buffers[-1].ring = self.group
        self.ups = ups
        self.ctx.notes.append(f"tensor-fusion: rank {o.rank}: {len(self.buffers)} buffer(s) over sharding group "
                              f"{self.group}; updates {sum(len(b.pieces) for b in self.buffers)} parameter "
                              f"piece(s) of {sum(len(b.updates) for b in self.buffers)} fused, "
                              f"{len(plain)} plain update(s)")
        self.rewrite(ups, plain)

    def is_dist(self, u: Update) -> bool:
        """Sharded on another mesh dim than the sharding one (Paddle's ``is_distributed``)."""
        return any(d >= 0 and d != self.o.axis for d in u.param.dist_attr.dims_mapping)

    # -- rewriting ------------------------------------------------------------------------------
    def rewrite(self, ups: list[Update], plain: list[Update]) -> None:
        from .fusion_clip import write_clip

        blk = self.block
        lr = ups[0].operands[[r for r, _ in ups[0].sig.operands].index("lr")]
        lr_op = lr.owner if lr is not None else None
        self.lr_name = value_name(lr)
        clip = self.clip_region(ups)
        # the stage-0 optimizer section goes (written again below)
        states = {id(d): d for u in ups for d in u.states.values()}
        for u in ups:
            if not any(r.uses for r in u.op.results):
                u.op.erase()
            for f in u.scalars:
                if f.parent is not None and not any(r.uses for r in f.results):
                    f.erase()
        dead = [d for d in states.values() if not any(r.uses for r in d.results)]
        for d in dead:
            d.erase()
        tpl = {}
        for op in clip:
            tpl.setdefault(op.name, op)
        mx = tpl.get("pd_op.maximum")
        if mx is not None and mx.operand(1) is not None and mx.operand(1).owner is not None:
            tpl["clip_norm"] = mx.operand(1).owner  # the pd_op.full of clip_norm
        for op in reversed(clip):
            if op.parent is not None and not any(r.uses for r in op.results):
                op.erase()
        self.add_kwargs()
        slices = {id(pc): self.slice_param(pc, b) for b in self.buffers for pc in b.pieces}
        lr_late = lr_op is not None and lr_op.name == ops.PARAMETER  # an LR scheduler's value: made later
        if lr_op is not None and lr_op.parent is blk:
            blk.remove(lr_op)
            if not lr_late:
                blk.prepend(lr_op)
        grads = {}
        for b in self.buffers:
            for pc, g in zip(b.pieces, self.fuse_grads(b)):
                grads[id(pc)] = g
        todo = [(u, u.param, u.grad, None) for u in plain]
        todo += [(pc.update, slices[id(pc)], grads[id(pc)], pc) for b in self.buffers for pc in b.pieces]
        # the inner optimizer's apply_gradients sorts its (param, grad) pairs by parameter name
        todo.sort(key=lambda t: ("slice@" if t[3] is not None else "") + t[0].name)
        self.todo = todo
        runs = lr_per_run(todo, [r for r, _ in ups[0].sig.operands].index("lr")) if lr_late else None
        self.lr_of = runs[1] if runs else {}
        if clip:
            todo = write_clip(self, todo, tpl)
        for op in (runs[0] if runs else [lr_op] if lr_late else []):
            blk.append(op)
        made = [self.states(u, pc) for u, _, _, pc in todo]
        last = {id(pc): self.update(u, p, g, st, pc) for (u, p, g, pc), st in zip(todo, made)}
        if self.o.stage3:
            self.gather_first()
            return
        for b in self.buffers:
            self.gather(b, [last[id(pc)] for pc in b.pieces])

    def gather_first(self) -> None:
        """Stage 3 (not Paddle's): each buffer's shards are all-gathered into the fused parameter
        buffer at the start of the step, before anything reads a parameter, and every fused
        parameter is read as a view of it (``view_slice`` + ``view_shape``, its own type): the
        rank keeps only its shard between steps; no all-gather after the update."""
        blk, mk, head = self.block, self.mk, None
        for op in blk.ops:
            if op.name not in (ops.PARAMETER, ops.DATA):
                break
            head = op
        at = InsertPoint.after(head) if head is not None else InsertPoint.at_start(blk)
        api = self.api(at, op_role=0)
        for b in self.buffers:
            shard, fused = self.kw["shard@" + b.name], self.kw[b.name]
            ag = self.collective(api, "pd_op.all_gather", ALL_GATHER, shard, b.group, [b.size], ring=b.ring)
            api.insert("pd_op.share_var", [fused, ag], [], {}, mk.op_dist(b.mesh, [fused.type.dist, ag.type.dist], []),
                       with_stop_gradient=False)
            begin = 0
            for u, n in zip(b.updates, b.padded):
                p = u.param
                local = list(local_shape(p))
                size = numel(local)
                flat = self.view_slice(api, fused, begin, begin + size, self.vtype([size], p.type.dtype, b.mesh))
                view = api.insert("pd_op.view_shape", [flat], [p.type], {"dims": mk.i64s(local)},
                                  mk.op_dist(b.mesh, [flat.type.dist], [p.type.dist])).result
                p.replace_all_uses_with(view)
                p.owner.erase()
                begin += n
        self.ctx.notes.append(f"tensor-fusion: stage 3 (not Paddle's): the parameters of {len(self.buffers)} buffer(s) "
                              "all-gathered at the step's start and read as views; the rank keeps its shard only")

    def add_kwargs(self) -> None:
        """``%kwarg_fused@-...`` and ``%kwarg_shard@fused@-...`` per buffer, in the order Paddle's
        block prints its keyword arguments (a ``std::unordered_map``)."""
        blk = self.block
        self.kw: dict[str, Value] = {}
        keys = []
        for b in self.buffers:
            for key, n in ((b.name, b.size), ("shard@" + b.name, b.shard)):
                a = blk.add_argument(self.vtype([n], b.updates[0].param.type.dtype, b.mesh), keyword=key)
                a.attrs = {"persistable": A.BoolAttr(True), "place": self.mk.place("Place(cpu)")}
                self.kw[key] = a
                keys.append(key)
        by = {a.keyword: a for a in blk.args if a.keyword is not None}
        old = [a.keyword for a in blk.args if a.keyword is not None and a.keyword not in keys]
        blk.args = [a for a in blk.args if a.keyword is None] + [by[k] for k in inserted(old + keys)]
        for i, a in enumerate(blk.args):
            a.index = i
        blk.dirty = True

    def vtype(self, shape, dtype: str, mesh, partial=()) -> DistTensorType:
        """A type replicated on ``mesh`` (``create_tensor_dist_attribute(mesh, [-1...], partial)``)."""
        return self.mk.dist_type(list(shape), dtype, self.mk.tensor_dist(mesh, (-1,) * len(shape), partial))

    def api(self, at: InsertPoint, op_role: int = 2) -> PaddleAPI:
        return PaddleAPI(self.prog.style, at, op_role=self.mk.i32(op_role))

    def ring(self, ranks) -> int:
        from .reshard import ring_allocator

        if self.rings is None:
            self.rings = ring_allocator(self.ctx)
        return self.rings.get(sorted(ranks))

    def record(self, kind: str, op: Operation, ranks, shape, dtype: str) -> None:
        """The collective as a record (summaries count what a rank sends)."""
        rid = getattr(op.attr("ring_id"), "value", None)
        self.ctx.collectives.append(Collective.of(kind, op.name, rid, tuple(ranks), self.o.rank, dtype, tuple(shape),
                                                  function="tensor-fusion"))

    def collective(self, api: PaddleAPI, name: str, kind: str, x: Value, ranks, out_shape, extra=None,
                   stream: bool = False, ring=None) -> Value:
        mk = self.mk
        attrs = {"ring_id": mk.i32(self.ring(ring or ranks))}
        if kind != ALL_REDUCE:
            attrs["nranks"] = mk.i32(len(ranks))
        attrs.update(extra or {})
        if stream:
            attrs["execution_stream"] = mk.str(SHARDING_STREAM)
        t = self.vtype(out_shape, x.type.dtype, x.type.dist.mesh) if list(out_shape) != list(x.type.shape) else x.type
        op = api.insert(name, [x], [t], attrs, mk.op_dist(x.type.dist.mesh, [x.type.dist], [t.dist]))
        self.record(kind, op, ranks, local_shape(x), x.type.dtype)
        return op.result

    def slice_param(self, pc: Piece, b: Buffer) -> Value:
        """``builtin.parameter "slice@NAME"`` at the block start, typed as its piece."""
        src = pc.update.param.owner
        t = self.vtype([pc.end - pc.begin], pc.update.param.type.dtype, b.mesh)
        attrs = dict(src.attrs)
        attrs["parameter_name"] = self.mk.str("slice@" + pc.update.name)
        attrs["is_distributed"] = self.mk.bools([self.is_dist(pc.update)])
        attrs["op_dist_attr"] = self.mk.op_dist(b.mesh, [], [t.dist])
        op = Operation(ops.PARAMETER, [], [t], attrs)
        self.block.prepend(op)
        return op.result

    @staticmethod
    def set_persistable(v: Value) -> None:
        """``value.persistable = True`` on a result whose op had no such list (others: null)."""
        op = v.owner
        a = op.attr("persistable")
        els = list(a.elements) if isinstance(a, A.ArrayAttr) and len(a.elements) == op.num_results \
            else [NULL] * op.num_results
        els[v.index] = A.BoolAttr(True)
        op.set_attr("persistable", A.ArrayAttr(tuple(els)))

    def fuse_grads(self, b: Buffer) -> list[Value]:
        """The buffer's gradients fused, reduce-scattered, a ``view_slice`` per owned piece."""
        grads = [u.grad for u in b.updates]
        last = max((g.owner for g in grads), key=self.block.index)
        # Paddle: at the block end, or (overlap) right after the buffer's last gradient
        at = InsertPoint.after(last) if self.o.overlap else InsertPoint.at_end(self.block)
        if self.o.release_grads:
            fused, after = self.released(b, grads)
            if self.o.overlap:
                at = after
        else:
            fused = self.coalesced(b, grads, at)
        return self.scatter(b, fused, at)

    def coalesced(self, b: Buffer, grads: list[Value], at: InsertPoint) -> Value:
        mk = self.mk
        api = self.api(at)
        for g in grads if not self.o.pipeline else ():
            self.set_persistable(g)
        vec = api.combine(grads)
        gvec = VecDistAttr(tuple(g.dist_attr for g in grads))
        ft = self.vtype([b.size], grads[0].type.dtype, b.mesh)
        co = api.insert(ops.COALESCE_TENSOR_, [vec], [vec.type, ft], coalesce_attrs(mk, b.align, grads[0].type.dtype),
                        mk.op_dist(b.mesh, [gvec], [gvec, ft.dist]))
        api.insert(ops.BUILTIN_SPLIT, [co.results[0]], [g.type for g in grads], {})
        return co.results[1]

    def released(self, b: Buffer, grads: list[Value]) -> tuple[Value, InsertPoint]:
        """``release_grads``: an ``empty`` buffer before the first gradient's op; each gradient
        written into its view (``view_slice`` + ``view_shape`` before its op, ``share_var``
        after it).  Returns the buffer and the point after the last ``share_var``."""
        mk = self.mk
        dtype = grads[0].type.dtype
        nb = dtype_bytes(dtype)
        first = min((g.owner for g in grads), key=self.block.index)
        api = self.api(InsertPoint.before(first))
        it = self.vtype([1], "i64", b.mesh)
        shape = api.insert(ops.FULL_INT_ARRAY, [], [it], {"dtype": mk.dtype("int64"), "place": mk.place("Place(cpu)"),
                                                           "value": mk.i64s([b.size])},
                           mk.op_dist(b.mesh, [], [it.dist])).result
        ft = self.vtype([b.size], dtype, b.mesh)
        fused = api.insert("pd_op.empty", [shape], [ft], {"dtype": mk.dtype(dtype_name(dtype)),
                                                          "place": mk.place("Place(cpu)")},
                           mk.op_dist(b.mesh, [it.dist], [ft.dist])).result
        begin, after = 0, InsertPoint.at_end(self.block)
        for g in grads:
            local = list(local_shape(g))
            size = numel(local)
            api = self.api(InsertPoint.before(g.owner))
            view = self.view_slice(api, fused, begin, begin + size, self.vtype([size], dtype, b.mesh))
            vt = self.vtype(local, dtype, b.mesh)
            view = api.insert("pd_op.view_shape", [view], [vt], {"dims": mk.i64s(local)},
                              mk.op_dist(b.mesh, [view.type.dist], [vt.dist])).result
            sv = self.api(InsertPoint.after(g.owner)).insert(
                "pd_op.share_var", [g, view], [], {}, mk.op_dist(b.mesh, [g.dist_attr, vt.dist], []),
                with_stop_gradient=False)
            after = InsertPoint.after(sv)
            begin += -(-size * nb // b.align) * b.align // nb
        return fused, after

    def scatter(self, b: Buffer, fused: Value, at: InsertPoint) -> list[Value]:
        mk = self.mk
        api = self.api(at)
        begin = b.rank_index * b.shard
        st = self.vtype([b.shard], fused.type.dtype, b.mesh)
        view = self.view_slice(api, fused, begin, begin + b.shard, st)
        rs = self.collective(api, "pd_op.reduce_scatter", REDUCE_SCATTER, fused, b.group, [b.shard],
                             stream=self.o.overlap, ring=b.ring)
        api.insert("pd_op.share_var", [view, rs], [], {}, mk.op_dist(b.mesh, [st.dist, st.dist], []),
                   with_stop_gradient=False)
        api = self.api(InsertPoint.at_end(self.block))
        out = []
        for pc in b.pieces:
            partial = tuple((d, r) for d, r in pc.update.grad.dist_attr.printed_partial if d != self.o.axis)
            out.append(self.view_slice(api, rs, pc.begin, pc.end,
                                       self.vtype([pc.end - pc.begin], fused.type.dtype, b.mesh, partial)))
        return out

    def view_slice(self, api: PaddleAPI, x: Value, lo: int, hi: int, t: DistTensorType) -> Value:
        return api.insert("pd_op.view_slice", [x], [t], {"begin_idx": self.mk.i64(lo), "end_idx": self.mk.i64(hi)},
                          self.mk.op_dist(t.dist.mesh, [x.type.dist], [t.dist])).result

    def states(self, u: Update, pc: Piece | None) -> dict[int, Value]:
        """The update's states made anew (at the block start) as the inner optimizer creates its
        accumulators: moment1, moment2, beta1_pow, beta2_pow; a piece's are ``slice@NAME...``,
        of its length (the beta pows keep their shape)."""
        out = {}
        for i, d in sorted(u.states.items(), key=lambda kv: ACC_ORDER.get(acc_kind(data_name(kv[1])), 9)):
            attrs = dict(d.attrs)
            t = d.results[0].type
            if pc is not None:
                attrs["name"] = self.mk.str("slice@" + data_name(d))
                shape = list(t.shape) if acc_kind(data_name(d)) in POWS else [pc.end - pc.begin]
                t = self.vtype(shape, t.dtype, t.dist.mesh if isinstance(t, DistTensorType) else
                               pc.update.param.dist_attr.mesh)
                attrs["shape"] = self.mk.int_array(shape)
                attrs["op_dist_attr"] = self.mk.op_dist(t.dist.mesh, [], [t.dist])
            op = Operation(ops.DATA, [], [t], attrs)
            self.block.prepend(op)
            out[i] = op.result
        return out

    def update(self, u: Update, p: Value, g: Value, st: dict[int, Value], pc: Piece | None) -> Operation:
        """The optimizer op (and its scalar fulls) at the block end, on ``p``, ``g``, ``st``."""
        at = InsertPoint.at_end(self.block)
        roles = [r for r, _ in u.sig.operands]
        operands = list(u.operands)
        fulls = {}
        for f in u.scalars:
            nf = Operation(f.name, [], [r.type for r in f.results], dict(f.attrs))
            at.insert(nf)
            fulls[id(f)] = nf.result
        for i, r in enumerate(roles):
            v = operands[i]
            if r == PARAM:
                operands[i] = p
            elif r == GRAD:
                operands[i] = g
            elif r == "lr" and id(u) in self.lr_of:
                operands[i] = self.lr_of[id(u)]
            elif i in st:
                operands[i] = st[i]
            elif r == SCALAR and v is not None and id(v.owner) in fulls:
                operands[i] = fulls[id(v.owner)]
        attrs = dict(u.op.attrs)
        if pc is None:
            types = [r.type for r in u.op.results]
        else:
            types = [operands[src].type if operands[src] is not None else r.type
                     for r, src in zip(u.op.results, u.sig.inplace)]
            od = u.op.dist_attr
            ents = [o.dist_attr if o is not None and o.dist_attr is not None else e for o, e in zip(operands, od.operands)]
            res = [t.dist if isinstance(t, DistTensorType) else e for t, e in zip(types, od.results)]
            attrs["op_dist_attr"] = self.mk.op_dist(od.mesh, ents, res)
        op = Operation(u.op.name, operands, types, attrs)
        at.insert(op)
        return op

    def gather(self, b: Buffer, last: list[Operation]) -> None:
        mk = self.mk
        api = self.api(InsertPoint.at_end(self.block))
        shard, fused = self.kw["shard@" + b.name], self.kw[b.name]
        if self.o.overlap and last:
            v = last[-1].results[0]
            api.insert("pd_op.nop", [v], [v.type], {"execution_stream": mk.str(SHARDING_STREAM)},
                       mk.op_dist(b.mesh, [v.dist_attr], [v.dist_attr]))
        ag = self.collective(api, "pd_op.all_gather", ALL_GATHER, shard, b.group, [b.size], stream=self.o.overlap,
                             ring=b.ring)
        api.insert("pd_op.share_var", [fused, ag], [], {}, mk.op_dist(b.mesh, [fused.type.dist, ag.type.dist], []),
                   with_stop_gradient=False)
