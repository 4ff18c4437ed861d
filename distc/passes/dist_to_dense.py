"""``dist-to-dense{rank=R}``: the per-rank program Paddle executes, as its ``dist2dense`` pass
followed by ``remove_unuseful_comm_op_pass`` (``pir_pass.py``) make it:

* every ``pd_dist.tensor<G, attr>`` result (and kwarg) becomes a plain tensor of the local shape
  (``ceil(G / mesh size)`` on split axes; partial does not change shapes), vectors element-wise;
* ``pd_op.data``'s ``shape`` attribute becomes the local shape; a ``pd_op.reshape``'s
  ``full_int_array`` shape operand gets the local dims;
* ``op_dist_attr`` is dropped and a ``chunk_id`` attribute (the dist attr's, else -1) added;
* collectives over one-rank groups disappear (``all_gather``, ``reduce_scatter``, ``all_reduce``
  SUM/MAX), as do ``share_data_`` of a value with one use and ``cast`` to the same dtype.

The rank only matters for checks: local shapes in types are rank independent in Paddle.
"""

from __future__ import annotations


from ..dialects import collectives as C
from ..dialects import ops
from ..dialects.pir_kwargs import as_cloned
from ..ir import attrs as A
from ..ir.builder import Maker
from ..ir.core import Block, Operation, Program
from ..ir.records import record
from ..ir.types import DenseTensorType, DistTensorType, VectorType
from .base import ModulePass, PassContext, register

COMM_OPS = {C.PD_ALL_GATHER, C.PD_REDUCE_SCATTER, C.C_ALLGATHER, C.C_REDUCESCATTER}
ALLREDUCE_OPS = {C.PD_ALL_REDUCE, C.PD_ALL_REDUCE_}
C_ALLREDUCE_OPS = {C.C_ALLREDUCE_SUM_, C.C_ALLREDUCE_MAX_, C.C_ALLREDUCE_SUM, C.C_ALLREDUCE_MAX}


def local_type(t, mk: Maker):
    if isinstance(t, DistTensorType):
        return mk.dense_type(t.local_shape(None), t.dtype)
    if isinstance(t, VectorType):
        return VectorType(tuple(local_type(e, mk) for e in t.elements))
    return t


def _int_array_like(old, vals, mk: Maker):
    if isinstance(old, A.IntArrayAttr):
        return A.IntArrayAttr(tuple(int(v) for v in vals), old.tagged)
    return mk.int_array(vals)


def _group_size(op: Operation) -> int | None:
    d = op.dist_attr
    if d is not None and d.mesh.process_ids:
        return len(d.mesh.process_ids)
    n = op.attr("nranks")
    if isinstance(n, A.IntAttr):
        return n.value
    return None


def dist_to_dense_block(block: Block, mk: Maker, stats: dict) -> list[Operation]:
    """Lower one block in place; returns the one-rank collectives found (before dropping dist attrs)."""
    single = []
    for a in block.args:
        t = local_type(a.type, mk)
        if t != a.type:
            a.type = t
    for op in block.ops:
        if op.name in COMM_OPS or op.name in ALLREDUCE_OPS or op.name in C_ALLREDUCE_OPS:
            if _group_size(op) == 1:
                single.append(op)
        for r in op.results:
            t = local_type(r.type, mk)
            if t != r.type:
                r.type = t
        if op.name == ops.DATA and op.results and isinstance(op.results[0].type, DenseTensorType):
            shape = op.results[0].type.shape
            old = op.attr("shape")
            new = _int_array_like(old, shape, mk)
            if str(new) != str(old):
                op.set_attr("shape", new)
        elif op.name == ops.RESHAPE and op.num_operands > 1:
            sv = op.operand(1)
            prev = sv.owner if sv is not None else None
            rt = op.results[0].type
            if prev is not None and prev.name == ops.FULL_INT_ARRAY and isinstance(rt, DenseTensorType):
                prev.set_attr("value", mk.i64s(rt.shape))
        chunk = -1
        d = op.dist_attr
        if d is not None:
            if d.chunk_id is not None:
                chunk = d.chunk_id
            op.del_attr("op_dist_attr")
        op.set_attr("chunk_id", mk.i32(chunk))
        stats["ops"] = stats.get("ops", 0) + 1
    return single


def remove_unuseful_comm_ops(block: Block, single: list[Operation]) -> int:
    """Paddle's ``remove_unuseful_comm_op_pass`` (run on the dense program)."""
    n = 0
    one = {id(o) for o in single}
    for op in list(block.ops):
        if op.parent is None:
            continue
        if id(op) in one:
            if op.name in ALLREDUCE_OPS:
                rt = op.attr("reduce_type")
                if isinstance(rt, A.IntAttr) and rt.value not in (0, 1):  # SUM, MAX
                    continue
            op.results[0].replace_all_uses_with(op.operand(0))  # type: ignore[arg-type]
            op.erase()
            n += 1
            continue
        if op.name == ops.SHARE_DATA_:
            src = op.operand(0)
            if src is not None and len(src.uses) == 1:
                op.results[0].replace_all_uses_with(src)
                op.erase()
                n += 1
            continue
        if op.name == ops.CAST:
            src = op.operand(0)
            st, rt = (src.type if src is not None else None), op.results[0].type
            if getattr(st, "dtype", None) is not None and getattr(st, "dtype", None) == getattr(rt, "dtype", None):
                op.results[0].replace_all_uses_with(src)  # type: ignore[arg-type]
                op.erase()
                n += 1
    return n


@register
@record
class DistToDensePass(ModulePass):
    name = "dist-to-dense"
    description = "per-rank dense program: local shapes, no dist attributes (Paddle's dist2dense)"

    rank: int = 0
    keep_comm: bool = False  # keep collectives over one-rank groups

    def apply(self, prog: Program, ctx: PassContext) -> None:
        from .sharding_util import is_distributed

        if not is_distributed(prog):
            ctx.notes.append("dist-to-dense: the program has no dist attributes: it is dense already")
            return
        mk = Maker(prog.style)
        stats: dict = {}
        as_cloned(prog.block)  # Paddle lowers a clone of the dist program (its kwargs reordered)
        single = dist_to_dense_block(prog.block, mk, stats)
        removed = 0 if self.keep_comm else remove_unuseful_comm_ops(prog.block, single)
        ctx.notes.append(f"dist-to-dense: rank {self.rank}: {stats.get('ops', 0)} op(s) lowered"
                         + (f", {removed} no-op collective(s) removed" if removed else ""))
