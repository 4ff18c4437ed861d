"""``remove-other-rank{rank=R}``: keep what rank R runs, as Paddle 3.3.1's
``RemovePasses.apply_all`` does to the main program (``pir_pass.py``):

1. ``_complete_op_dist_attr``: every op without an ``op_dist_attr`` (the helpers the reshard pass
   inserts, e.g. ``full_int_array``) gets one: the mesh of its operands/results (merged when they
   differ), operand entries from the operand types (empty for dense operands), result entries
   from the result types;
2. ``remove_other_rank_op_pass``: walking the block backwards, erase ops whose op mesh does not
   hold R, leftover (unused) ``dist_op.reshard`` ops, unused combine/split helpers; replace the MoE
   ops by a ``share_data_`` of R's own piece (``dist_op.moe_sub_mesh_tensors``: the input, typed as
   the result on R's expert mesh; ``dist_op.moe_global_mesh_tensor``: the operand on R's expert
   mesh, typed as the global result); then merge several ``learning_rate`` data ops (or
   parameters) into one and drop unused kwargs.
"""

from __future__ import annotations


from ..dialects import ops
from ..ir.builder import Maker
from ..ir.core import Block, Operation, Program
from ..ir.dist import ProcessMesh, TensorDistAttr, VecDistAttr, empty_dist_attr, merge_meshes
from ..ir.records import record
from ..ir.types import DistTensorType, VectorType
from .base import ModulePass, PassContext, register
from .sharding_util import fail


def _value_entry(v):
    t = v.type if v is not None else None
    if isinstance(t, DistTensorType):
        return t.dist
    if isinstance(t, VectorType) and t.elements and all(isinstance(e, DistTensorType) for e in t.elements):
        return VecDistAttr(tuple(e.dist for e in t.elements))  # type: ignore[union-attr]
    return None


def complete_op_dist_attr(block: Block, mk: Maker) -> int:
    """Paddle's ``_complete_op_dist_attr``; returns how many ops got one."""
    n = 0
    for op in block.ops:
        for region in op.regions:
            for b in region.blocks:
                n += complete_op_dist_attr(b, mk)
        if op.name in ops.PARTITION_SKIP or op.dist_attr is not None:
            continue
        meshes: list[ProcessMesh] = []
        operands = []
        for v in op.operands:
            e = _value_entry(v)
            if e is None:
                operands.append(empty_dist_attr())
                d = v.owner.dist_attr if v is not None and v.owner is not None else None
                m = d.mesh if d is not None else None
            else:
                operands.append(e)
                m = e.mesh if isinstance(e, TensorDistAttr) else (e.items[0].mesh if e.items else None)
            if m is not None and m not in meshes:
                meshes.append(m)
        results = []
        for r in op.results:
            e = _value_entry(r)
            if e is None:
                results.append(empty_dist_attr())
            else:
                results.append(e)
                m = e.mesh if isinstance(e, TensorDistAttr) else (e.items[0].mesh if e.items else None)
                if m is not None and m not in meshes:
                    meshes.append(m)
        if meshes:
            op.dist_attr = mk.op_dist(merge_meshes(*meshes), operands, results)
            n += 1
    return n


class _Pruner:
    def __init__(self, rank: int, style) -> None:
        self.rank = rank
        self.style = style
        self.erased = 0
        self.moe = 0

    def _share(self, op: Operation, src, out, operand_entry, result_entry) -> None:
        """Paddle's ``replace_moe_*``: ``share_data_(src)`` typed as ``out``, on the op's mesh,
        replaces ``out``; the MoE op goes."""
        from ..ir.builder import InsertPoint
        from .paddle_api import PaddleAPI

        api = PaddleAPI(self.style, InsertPoint.before(op))
        d = op.dist_attr
        new = api.insert(ops.SHARE_DATA_, [src], [out.type], {},
                         api.op_attr(d.mesh, [operand_entry], [result_entry], chunk_id=d.chunk_id or -1)).result
        out.replace_all_uses_with(new)
        if any(r.uses for r in op.results):
            raise fail(op, f"'{op.name}': a result for another rank is still used on rank {self.rank}")
        op.erase()
        self.moe += 1

    def _mine(self, op: Operation, values, what: str) -> int:
        hit = [i for i, v in enumerate(values) if (d := v.dist_attr) is not None and self.rank in d.mesh.process_ids]
        if len(hit) != 1:
            raise fail(op, f"'{op.name}' has {len(hit)} {what} on rank {self.rank} (Paddle needs exactly one)")
        return hit[0]

    def moe_sub(self, op: Operation) -> None:
        i = self._mine(op, op.results, "results")
        d = op.dist_attr
        self._share(op, op.operand(0), op.results[i], d.operands[0], d.results[i])

    def moe_global(self, op: Operation) -> None:
        i = self._mine(op, op.operands, "operands")
        d = op.dist_attr
        self._share(op, op.operand(i), op.results[0], d.operands[i], d.results[0])

    def _erase(self, op: Operation) -> None:
        if any(r.uses for r in op.results):
            users = sorted({u.name for r in op.results for u, _ in r.uses})
            raise fail(op, f"'{op.name}' is not on rank {self.rank} but its result is used by "
                           f"{', '.join(users)} on this rank")
        op.erase()
        self.erased += 1

    def prune(self, block: Block) -> None:
        for op in list(reversed(block.ops)):
            if op.parent is None:
                continue
            name = op.name
            if name == ops.CF_TUPLE_PUSH:
                src = op.operand(0)
                stack = src.owner if src is not None else None
                if stack is not None and stack.num_results > 2 and not stack.results[2].uses:
                    self._erase(op)
                continue
            if name == ops.CF_YIELD:
                continue
            if name == ops.MOE_SUB_MESH_TENSORS and op.dist_attr is not None:
                self.moe_sub(op)
                continue
            if name == ops.MOE_GLOBAL_MESH_TENSOR and op.dist_attr is not None:
                self.moe_global(op)
                continue
            if name == ops.PYLAYER:
                meshes = [o.dist_attr.mesh for region in op.regions for b in region.blocks for o in b.ops
                          if o.dist_attr is not None]
                # a region with no dist attrs at all (a dense program) stays where it is
                if meshes and not any(self.rank in m.process_ids for m in meshes):
                    self._erase(op)
                    continue
                for region in reversed(op.regions):
                    for b in region.blocks:
                        self.prune(b)
                continue
            if name in ops.PARTITION_SKIP:
                if all(not r.uses for r in op.results):
                    self._erase(op)
                continue
            d = op.dist_attr
            if d is not None and d.mesh.process_ids and self.rank not in d.mesh.process_ids:
                self._erase(op)
            elif name == ops.RESHARD:
                if op.results[0].uses:
                    raise fail(op, "a dist_op.reshard is still used; run the reshard pass before "
                                   "remove-other-rank")
                self._erase(op)


def merge_learning_rates(prog: Program) -> int:
    """Several ``learning_rate`` data ops (or parameters) become the last one."""
    n = 0
    for opname, key in ((ops.DATA, "name"), (ops.PARAMETER, "parameter_name")):
        found = []
        for op in reversed(prog.block.ops):
            if op.name == opname:
                a = op.attr(key)
                if a is not None and "learning_rate" in str(getattr(a, "value", "")):
                    found.append(op)
        if len(found) > 1:
            keep = found[0].results[0]
            for op in found[1:]:
                op.results[0].replace_all_uses_with(keep)
                op.erase()
                n += 1
    return n


def drop_unused_kwargs(block: Block) -> int:
    keep = [a for a in block.args if a.keyword is None or a.uses]
    n = len(block.args) - len(keep)
    if n:
        block.args = keep
        for i, a in enumerate(keep):
            a.index = i
        block.dirty = True
    return n


@register
@record
class RemoveOtherRankPass(ModulePass):
    name = "remove-other-rank"
    description = "keep only rank R's ops (Paddle's RemovePasses on the main program)"

    rank: int = 0

    def apply(self, prog: Program, ctx: PassContext) -> None:
        from .sharding_util import is_distributed

        if not is_distributed(prog):
            ctx.notes.append("remove-other-rank: the program has no dist attributes: nothing to do")
            return
        mk = Maker(prog.style)
        done = complete_op_dist_attr(prog.block, mk)
        p = _Pruner(self.rank, prog.style)
        p.prune(prog.block)
        merged = merge_learning_rates(prog)
        drop_unused_kwargs(prog.block)
        ctx.notes.append(f"remove-other-rank: rank {self.rank}: {p.erased} op(s) removed, "
                         f"{done} op dist attr(s) completed" + (f", {merged} learning rate(s) merged" if merged else "")
                         + (f", {p.moe} MoE op(s) -> share_data_" if p.moe else ""))
