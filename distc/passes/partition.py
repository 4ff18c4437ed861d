"""``partition``: insert ``dist_op.reshard`` wherever a value's layout differs from what its
user's ``op_dist_attr`` asks, as Paddle 3.3.1's ``apply_partition_pass`` (``pir_pass.py``) does.

For every op with an ``op_dist_attr`` (sub-blocks first, combine/split and control-flow helpers
skipped), in Paddle's order:

1. in-place pairs (result i updates operand j: optimizer updates, ``assign_out_``, ``x_`` ops):
   if operand j is a persistable distributed value whose layout differs from the expected one,
   reshard it before the op; after the op reshard the result back to the value's own layout
   and ``assign_out_`` it into the value, so the persistable parameter keeps its layout (and
   takes the result's stop_gradient, as Paddle's ``assign_out_``: true after ``sgd_``);
2. every operand with a non-empty expected layout: reshard it before the op.  A value that is
   itself the result of a reshard is resharded from that reshard's input instead (or the input
   is used directly when it already fits), and the now unused reshard is erased;
   a ``builtin.combine`` operand is rebuilt from resharded inputs right before the op;
3. every result whose type disagrees with the op's result entry is retyped to the entry and
   resharded back to its old layout for its users (the op is marked
   ``replace_all_uses_with_reshard_var``).

The ``reshard`` pass then lowers the reshards to collectives for one rank.
"""

from __future__ import annotations


from ..dialects import ops
from ..dialects.optimizers import inplace_map
from ..ir import attrs as A
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Block, Operation, Program, Value
from ..ir.dist import TensorDistAttr, VecDistAttr
from ..ir.records import record
from ..ir.types import DistTensorType, VectorType
from .base import ModulePass, PassContext, register
from .paddle_api import PaddleAPI
from .sharding_util import (dist_of, fail, layout_key, layout_objects, op_role_attr, persistable,
                            stop_gradient)

# sources of dist values whose (dense) input has no dist entry; Paddle's mix2dist removes them
# before partition, distc lets them through
SOURCE_OPS = {ops.SHARD_TENSOR}


def _nonempty(e) -> bool:
    if isinstance(e, VecDistAttr):
        return bool(e.items)
    return isinstance(e, TensorDistAttr) and not e.is_empty


class _Partitioner:
    def __init__(self, prog: Program, ctx: PassContext) -> None:
        self.mk = Maker(prog.style)
        self.style = prog.style
        self.ctx = ctx
        self.inserted = 0
        # layout_key (op name; op_dist_attr, operand and result types) -> (the keyed objects,
        # *_plan(op)): what may need work; all immutable and shared, so most ops of a program fall
        # into a few such kinds; the entry keeps its key's objects (and ids) alive
        self.plans: dict = {}
        self.cache: dict = {}  # PaddleAPI's: one op_dist_attr object per kind of reshard inserted
        self._api = PaddleAPI(self.style, InsertPoint(prog.block, None), cache=self.cache)  # (see api)
        self.same: dict = {}  # (id, id) of two dist attrs -> (the two, whether equal): a few dozen layouts
        self._served: Operation | None = None  # the op served last, and its (op_role, loc) (see api)
        self._guard: tuple = (None, None)

    def block(self, block: Block) -> None:
        skip = ops.PARTITION_SKIP | SOURCE_OPS
        plans = self.plans
        for op in list(block.ops):
            if op.regions:
                for region in op.regions:
                    for b in region.blocks:
                        self.block(b)
            if op.parent is None:  # erased meanwhile (an unused reshard folded away)
                continue
            d = op.dist_attr
            if d is None or op.name in skip:
                continue
            rs = op.results
            if not op._operands and len(rs) == 1:  # (most ops: data, full, parameter; their plan is
                # their result's alone, whatever their name: by op_dist_attr and result type)
                key = (id(d), id(rs[0]._type))
            else:
                key = layout_key(op, d)
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = self.plan(op, d)
            if plan[2] or plan[3]:  # (no operand nor result to change: no in-place pair either)
                self.inplace(op, d, plan[1])
                self.operands(op, d, plan[2])
                self.results(op, d, plan[3])

    def plan(self, op: Operation, d) -> tuple:
        """(the objects :func:`layout_key` keys ``op`` by, *:func:`_plan`); its entry counts
        checked against the op's (the same for every op of its key)."""
        if len(d.operands) != len(op._operands):
            raise fail(op, f"'{op.name}' has {op.num_operands} operand(s) but its op_dist_attr has "
                           f"{len(d.operands)} operand entries")
        if len(d.results) != len(op.results):
            raise fail(op, f"'{op.name}' has {op.num_results} result(s) but its op_dist_attr has "
                           f"{len(d.results)} result entries")
        return (layout_objects(op, d), *_plan(op, d, self._equal))

    # -- reshard helpers ---------------------------------------------------------------------
    def api(self, at: InsertPoint, op: Operation) -> PaddleAPI:
        """Paddle's API at ``at``, under ``op``'s role guard; diagnostics about what it builds
        point at ``op``."""
        if op is not self._served:  # (its role and place read once an op: it has a few reshards)
            self._served, self._guard = op, (op_role_attr(op), op.loc)
        return self._api.moved(at, op_role=self._guard[0], loc=self._guard[1])  # (one builder, moved: thousands of calls)

    def _equal(self, a: TensorDistAttr, b) -> bool:
        """``a == b`` for two layouts (each pair compared once)."""
        if a is b:
            return True
        k = (id(a), id(b))
        hit = self.same.get(k)
        if hit is None:
            hit = self.same[k] = (a, b, a == b)  # (keeps a and b, so their ids, alive)
        return hit[2]

    def _reshard(self, cur: InsertPoint, src: Value, dst: TensorDistAttr, op: Operation) -> Value:
        self.inserted += 1
        return self.api(cur, op).reshard(src, dst)

    # -- 1. in-place values ------------------------------------------------------------------
    def inplace(self, op: Operation, d, pairs) -> None:
        """(``d``: its op_dist_attr; ``pairs``: the in-place pairs that may need work, :func:`_plan`)"""
        for out_idx, in_idx in pairs:
            want = d.operands[in_idx]
            prev = op.operand(in_idx)
            pd = dist_of(prev)
            if prev is None or pd is None or not isinstance(want, TensorDistAttr) or want.is_empty:
                continue
            if self._equal(pd, want) or not persistable(prev):
                continue
            # reshard the input
            rv = self._reshard(InsertPoint.before(op), prev, want, op)
            op.set_operand(in_idx, rv)
            result = op.results[out_idx]
            want_out = d.results[out_idx]
            if not isinstance(want_out, TensorDistAttr) or not self._equal(want, want_out):
                raise fail(op, f"in-place result {out_idx} of '{op.name}' is expected as {want_out} but "
                               f"its operand {in_idx} as {want}; they must agree")
            rt = result.type
            if not isinstance(rt, DistTensorType):
                continue
            old = rt.dist
            result.type = rt.with_dist(self.mk.restyle(want_out))  # type: ignore[arg-type]
            # reshard the output back and assign it into the persistable value
            cur = InsertPoint.after(op)
            rv1 = self._reshard(cur, result, pd, op)
            self.api(cur, op).assign_out_(rv1, prev, -1 if d.chunk_id is None else d.chunk_id)
            _take_stop_gradient(prev, stop_gradient(result))
            if self._equal(old, want_out):
                continue
            rv2 = rv1
            if not self._equal(old, dist_of(rv1)):
                rv2 = self._reshard(cur, result, old, op)
            result.replace_all_uses_with(rv1)
            assert rv1.owner is not None and rv2.owner is not None
            rv1.owner.set_operand(0, result)
            rv2.owner.set_operand(0, result)

    # -- 2. operands -------------------------------------------------------------------------
    def operands(self, op: Operation, d, which) -> None:
        """(``d``: its op_dist_attr; ``which``: the operands that may need work, :func:`_plan`)"""
        for i in which:
            want = d.operands[i]
            prev = op.operand(i)
            if prev is None:
                continue
            if isinstance(prev.type, VectorType) and prev.owner is not None and prev.owner.name == ops.COMBINE:
                new = self._combine(op, prev, want)
            elif isinstance(prev.type, VectorType):
                raise fail(op, f"operand {i} of '{op.name}' is a tensor list not made by builtin.combine")
            else:
                if not isinstance(want, TensorDistAttr):
                    raise fail(op, f"operand {i} of '{op.name}' has a list dist attr but is one tensor")
                new = self._single(op, prev, want)
            op.set_operand(i, new)
            po = prev.owner
            if po is not None and po.num_results == 1 and not prev.uses and po.parent is not None:
                po.erase()

    def _single(self, op: Operation, prev: Value, want: TensorDistAttr) -> Value:
        pd = dist_of(prev)
        if pd is None or self._equal(pd, want):
            return prev
        po = prev.owner
        if po is not None and po.name == ops.RESHARD:
            src = po.operand(0)
            sd, rd = dist_of(src), dist_of(po.results[0])
            if src is not None and sd is not None and rd is not None and sd.mesh.ndim == rd.mesh.ndim:
                if self._equal(sd, want):
                    return src
                return self._reshard(InsertPoint.before(op), src, want, op)
        return self._reshard(InsertPoint.before(op), prev, want, op)

    def _combine(self, op: Operation, prev: Value, want) -> Value:
        comb = prev.owner
        assert comb is not None
        items = want.items if isinstance(want, VecDistAttr) else (want,)
        if len(items) != comb.num_operands:
            raise fail(op, f"'{op.name}': the list operand has {comb.num_operands} tensors but "
                           f"{len(items)} dist entries")
        vals = []
        for v, a in zip(comb.operands, items):
            if v is None or not isinstance(a, TensorDistAttr) or a.is_empty:
                vals.append(v)
            else:
                vals.append(self._single(op, v, a))
        return self.api(InsertPoint.before(op), op).combine(vals)

    # -- 3. results --------------------------------------------------------------------------
    def results(self, op: Operation, d, which) -> None:
        """(``d``: its op_dist_attr; ``which``: the results that may need work, :func:`_plan`)"""
        for j in which:
            r, want = op.results[j], d.results[j]
            t = r.type
            if not isinstance(t, DistTensorType) or self._equal(t.dist, want):
                continue
            old = t.dist
            r.type = t.with_dist(self.mk.restyle(want))  # type: ignore[arg-type]
            rv = self._reshard(InsertPoint.after(op), r, old, op)
            r.replace_all_uses_with(rv)
            assert rv.owner is not None
            rv.owner.set_operand(0, r)
            op.set_attr("replace_all_uses_with_reshard_var", A.BoolAttr(True))


def _plan(op: Operation, d, equal) -> tuple[tuple, tuple, tuple]:
    """The in-place pairs, operands and results of ``op`` that partition may have to change: those
    whose entry in ``d`` is not their value's layout (a tensor list always), by types and entries
    alone -- the same for every op of one name and :func:`~.sharding_util.layout_key`.  The
    others need nothing, before and after the ones listed are changed (an in-place operand or
    result is changed to its entry).  ``equal``: layout equality."""
    types = [None if v is None else v._type for v in op._operands]
    pairs = []
    for out_idx, in_idx in sorted(inplace_map(op).items()):
        if in_idx >= len(types) or out_idx >= len(op.results):
            continue
        want, t = d.operands[in_idx], types[in_idx]
        if isinstance(t, DistTensorType) and isinstance(want, TensorDistAttr) and not want.is_empty \
                and not equal(t.dist, want):
            pairs.append((out_idx, in_idx))
    which = []
    for i, (want, t) in enumerate(zip(d.operands, types)):
        if t is None or not _nonempty(want):
            continue
        if isinstance(t, VectorType) or not isinstance(want, TensorDistAttr) or (
                isinstance(t, DistTensorType) and not equal(t.dist, want)):
            which.append(i)
    res = [j for j, (want, r) in enumerate(zip(d.results, op.results))
           if isinstance(want, TensorDistAttr) and not want.is_empty and isinstance(r._type, DistTensorType)
           and not equal(r._type.dist, want)]
    return tuple(pairs), tuple(which), tuple(res)


def split_truth(prog: Program, ctx: PassContext) -> int:
    """Give each ``builtin.split`` result the layout of the list element it is (Paddle's
    completion can type it with its user's wish instead: ViT's ``concat_grad`` -> ``builtin.split``
    -> ``expand_grad`` says Replicate for a Shard(0) piece, so no reshard is inserted and each rank
    sums only its own batch rows into the cls token's gradient).  Returns how many were retyped."""
    n = 0
    for op in prog.find(ops.BUILTIN_SPLIT):
        if op.num_operands != 1 or op.operand(0) is None:
            continue
        vt = op.operand(0).type
        if not isinstance(vt, VectorType) or len(vt.elements) != op.num_results:
            continue
        for r, et in zip(op.results, vt.elements):
            t = r.type
            if isinstance(t, DistTensorType) and isinstance(et, DistTensorType) and t.dist != et.dist \
                    and t.shape == et.shape:
                r.type = t.with_dist(et.dist)
                n += 1
                line = f" (line {op.loc[0]})" if op.loc else ""
                ctx.notes.append(f"partition: builtin.split{line} result {r.index} typed "
                                 f"{t.dist.short_name()} but the list holds {et.dist.short_name()} there: "
                                 "retyped to what it holds, so its users get a reshard (Paddle: none)")
    return n


@register
@record
class PartitionPass(ModulePass):
    name = "partition"
    description = "insert dist_op.reshard where layouts differ from op_dist_attr (Paddle's apply_partition_pass)"
    paddle: bool = False  # keep builtin.split results typed as Paddle's completion typed them (no repair)

    def apply(self, prog: Program, ctx: PassContext) -> None:
        if not self.paddle:
            split_truth(prog, ctx)
        p = _Partitioner(prog, ctx)
        p.block(prog.block)
        ctx.stats.reshards_inserted = p.inserted
        ctx.notes.append(f"partition: {p.inserted} dist_op.reshard inserted")


def _take_stop_gradient(v: Value, flag: bool) -> None:
    """Paddle's ``assign_out_(x, out)`` gives ``out`` the stop_gradient of ``x`` (e.g. a parameter
    updated by ``sgd_``, whose result says true); kept in the defining op's ``stop_gradient`` list."""
    owner, i = v.owner, getattr(v, "index", None)
    a = owner.attr("stop_gradient") if owner is not None else None
    if i is None or not isinstance(a, A.ArrayAttr) or i >= len(a.elements):
        return
    el = a.elements[i]
    if isinstance(el, A.BoolAttr) and el.value != flag:
        owner.set_attr("stop_gradient", A.ArrayAttr(a.elements[:i] + (A.BoolAttr(flag),) + a.elements[i + 1:]))
