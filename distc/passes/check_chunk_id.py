"""``check-chunk-id``: every forward and backward op of a rank's VPP dist program gets a chunk id,
as Paddle 3.3.1's ``check_chunk_id`` (``pir_pass.py``) gives them after gradient merge: data and
parameters chunk 0; ``full``/``full_int_array`` the chunk of their first user that has one;
others their neighbours' (``infer_chunk_id``: the op before and after agreeing, else the two
after; a ``builtin.combine``/``split`` feeding an op with a chunk id gets 1 — Paddle returns
``chunk_id != -1``, a bool, there).  Ops are visited in order, each seeing the ids already set."""

from __future__ import annotations


from ..dialects import ops
from ..ir import attrs as A
from ..ir.core import Operation, Program
from ..ir.records import record
from .base import ModulePass, PassContext, register
from .sharding_util import fail

SKIP = {"builtin.combine", "builtin.split", "cf.yield", "cf.tuple_push", "cf.tuple_pop", "cf.stack_create",
        "pd_op.pylayer"}
LOCAL = {"dist_op.dtensor_from_local", "dist_op.dtensor_to_local"}


def _role(op: Operation) -> int:
    a = op.attr("op_role")
    return a.value if isinstance(a, A.IntAttr) else -1


def chunk_of(op: Operation, with_dist: bool = True) -> int:
    if with_dist:
        d = op.dist_attr
        return d.chunk_id if d is not None and d.chunk_id is not None else -1
    a = op.attr("chunk_id")
    return a.value if isinstance(a, A.IntAttr) else -1


def infer_chunk_id(idx: int, all_ops: list[Operation], with_dist: bool = True) -> int:
    """Paddle's ``infer_chunk_id``."""
    def get(i: int) -> int:
        return chunk_of(all_ops[i], with_dist) if 0 <= i < len(all_ops) else -1

    prev, nxt = get(idx - 1), get(idx + 1)
    if prev == nxt:
        return prev
    if nxt == get(idx + 2):
        return nxt
    op = all_ops[idx]
    if op.name in (ops.COMBINE, ops.BUILTIN_SPLIT) and op.results:
        for u in op.results[0].users:
            if u.dist_attr is not None and chunk_of(u) != -1:
                return 1  # (Paddle: `return used_op.dist_attr.chunk_id != -1`)
            if chunk_of(u, False) != -1:
                return chunk_of(u, False)
    return -1


def check_chunk_id(prog: Program) -> int:
    """Returns how many ops got a chunk id."""
    all_ops = prog.block.ops
    n = 0
    for idx, op in enumerate(all_ops):
        if _role(op) not in (0, 1) or op.name in SKIP or "chunk_id" in op.attrs or op.name in LOCAL:
            continue
        d = op.dist_attr
        if d is None:
            continue
        if chunk_of(op) == -1:
            if op.name in (ops.DATA, ops.PARAMETER):
                new = 0
            elif op.name in (ops.FULL, ops.FULL_INT_ARRAY):
                new = -1
                for u in op.results[0].users:
                    if chunk_of(u) != -1:
                        new = chunk_of(u)
                        break
            else:
                new = infer_chunk_id(idx, all_ops)
            if new != -1:
                op.dist_attr = d.with_(chunk_id=new)
                n += 1
        if chunk_of(op) == -1:
            raise fail(op, f"the chunk_id of op '{op.name}' is not set (Paddle: 'Please check the chunk_id setting')")
    return n


@register
@record
class CheckChunkIdPass(ModulePass):
    name = "check-chunk-id"
    description = "give every forward/backward op of a VPP program a chunk id (Paddle's check_chunk_id)"

    def apply(self, prog: Program, ctx: PassContext) -> None:
        n = check_chunk_id(prog)
        ctx.notes.append(f"check-chunk-id: {n} op(s) given a chunk id")
