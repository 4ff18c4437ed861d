"""Paddle's ``ReshardPasses.apply_reshard_pass`` for one rank: decompose, fold, lower.

1. **decompose**: a reshard between two different meshes of the same rank (ndim) whose placements
   also differ becomes two reshards: a copy to the destination mesh with the source placements,
   then a same-mesh reshard.
2. **fold**: a reshard whose result type equals its input type is removed; reshards of one value
   to one type are merged.
3. **lower** every ``dist_op.reshard`` (nested blocks first): equal layouts are just removed;
   otherwise the first suitable reshard function inserts ops before it, the reshard's uses move to
   the function's value, and the reshard is erased once unused.  (Placeholders that functions
   leave for other ranks stay, as in Paddle, until other-rank ops are removed.)
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter

from ...ir.core import Block, Operation, Program, Value
from ...ir.dist import TensorDistAttr
from ...ir.records import field, record
from ...syntax.diagnostics import DiagnosticError
from . import registry
from ...dialects import ops
from ...dialects.collectives import Collective
from ...ir.builder import InsertPoint
from ..paddle_api import Decline, PaddleAPI
from .context import ReshardContext, retire
from .groups import RingAllocator
from .replay import Replayer
from .util import describe, mesh_text

RESHARD = ops.RESHARD



@record
class ReshardStep:
    """How one ``dist_op.reshard`` was lowered (``--explain``)."""

    src: TensorDistAttr
    dst: TensorDistAttr
    function: str  # the reshard function, or "(same layout: removed)"
    loc: tuple[int, int] | None
    ops: list[str] = field(default_factory=list)  # names of the ops inserted
    tried: list[str] = field(default_factory=list)  # why earlier functions did not lower it
    paddle: bool | None = None  # whether the function is Paddle's (None: nothing lowered)
    fixed: list[str] = field(default_factory=list)  # where distc departs from Paddle to fix it


@record
class Lowering:
    """What lowering a program (or one op) for one rank did."""

    rank: int
    rings: RingAllocator
    records: list[Collective] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[ReshardStep] = field(default_factory=list)
    attrs: dict = field(default_factory=dict, repr=False)  # the dist attrs built so far (one object each)
    # reshards made by ``decompose`` -> the layouts of the reshard they replace (for error messages)
    origins: dict = field(default_factory=dict, repr=False)


def _attrs_of(op: Operation) -> tuple[TensorDistAttr, TensorDistAttr]:
    src, dst = _given_attrs(op)
    rank = len(op.operand(0).type.shape)
    for what, a in (("operand", src), ("result", dst)):
        if len(a.dims_mapping) != rank:
            raise DiagnosticError(f"dims_mapping {list(a.dims_mapping)} does not fit a rank-{rank} value (the {what} "
                                  "of a dist_op.reshard, here or made for this op)", *(op.loc or (None, None)))
    return src, dst


def _arity(op: Operation) -> None:
    if op.num_operands != 1 or len(op.results) != 1:
        raise DiagnosticError(f"'dist_op.reshard' takes one operand and gives one result (here {op.num_operands} "
                              f"and {len(op.results)})", *(op.loc or (None, None)))


def _given_attrs(op: Operation) -> tuple[TensorDistAttr, TensorDistAttr]:
    od = op.dist_attr
    if od is None or not od.operands or not od.results:
        v = op.operand(0)
        r = op.results[0]
        if v is not None and v.dist_attr is not None and r.dist_attr is not None:
            return v.dist_attr, r.dist_attr
        raise DiagnosticError("'dist_op.reshard' has no op_dist_attr with operand(0) and result(0)",
                              *(op.loc or (None, None)))
    return od.operands[0], od.results[0]  # type: ignore[return-value]


# ------------------------------------------------------------------------------------ decompose
def work_in(block: Block) -> list[Operation]:
    """The ops of ``block`` the lowering visits, in order: reshards and ops holding regions."""
    ops = block.ops
    if any(map(_REGIONS, ops)):
        return [o for o in ops if o.regions or o.name == RESHARD]
    return list(compress(ops, map(RESHARD.__eq__, map(_NAME, ops))))  # (no regions: the names compared in C)


_NAME, _REGIONS = attrgetter("name"), attrgetter("regions")


def decompose(prog: Program, block: Block, result: Lowering, coshard: bool = False,
              todo: list[Operation] | None = None) -> list[Operation]:
    """(``coshard``: placements as given count, ``[S0, S0]`` is not ``[R, S0]``.)  Notes, the dist
    attrs built and the origin of each new reshard go to ``result``.  ``todo``: :func:`work_in`
    ``block``; returns it as it is after (each reshard decomposed in its two's place)."""
    same_mesh: dict = {}  # (id, id) of the two types -> (the two, whether nothing to do): a few dozen
    out: list[Operation] = []
    for op in work_in(block) if todo is None else todo:
        out.append(op)
        if op.name != RESHARD:
            continue
        _arity(op)
        x, r = op.operand(0), op.results[0]
        if x is None:
            continue
        k = (id(x._type), id(r._type))
        hit = same_mesh.get(k)
        if hit is None:
            a, b = x.dist_attr, r.dist_attr
            hit = same_mesh[k] = (x._type, r._type, a is None or b is None or a.mesh is b.mesh)
        if hit[2]:  # (most reshards: one mesh object)
            continue
        a, b = x.dist_attr, r.dist_attr
        if a.mesh != b.mesh and a.mesh.ndim == b.mesh.ndim and (
                a.placements != b.placements if coshard else a.derived_placements() != b.derived_placements()):
            api = PaddleAPI(prog.style, InsertPoint.before(op), op_role=op.attr("op_role"), loc=op.loc,
                            cache=result.attrs)
            mid = api.tattr(b.mesh, a.dims_mapping, a.printed_partial)
            if coshard and a.given is not None:
                mid = mid.with_(given=a.given)
            w = api.reshard(api.reshard(x, mid), b)
            for o in api.created:
                result.origins[o] = result.origins.get(op, (a, b))
            where = f"line {op.loc[0]}: " if op.loc else ""
            result.notes.append(f"{where}reshard between two meshes with other placements: decomposed into "
                                f"a copy to mesh {mesh_text(b.mesh)} and a reshard on it")
            r.replace_all_uses_with(w)
            op.erase()
            out[-1:] = api.created
    return out


def fold(block: Block, todo: list[Operation] | None = None) -> list[Operation]:
    """Reshards to their input's own type removed, and reshards of one value to one type merged
    (``todo``: :func:`work_in` ``block``; returned, the ops removed in it no longer in a block)."""
    seen: dict[int, tuple | list] = {}  # id(input) -> its first (result type, result), or a list of them
    same: dict = {}  # (id, id) of two types -> (the two, whether equal): a program has a few dozen types
    todo = work_in(block) if todo is None else todo
    for op in todo:
        if op.name != RESHARD:
            continue
        x, r = op.operand(0), op.results[0]
        if x is None:
            continue
        xt, rt = x._type, r._type
        if xt is rt or _equal(xt, rt, same):
            r.replace_all_uses_with(x)
            op.erase()
            continue
        got = seen.get(id(x))
        if got is None:  # (most inputs: one reshard)
            seen[id(x)] = (rt, r)
            continue
        lst = [got] if isinstance(got, tuple) else got
        for t, val in lst:
            if t is rt or _equal(t, rt, same):
                r.replace_all_uses_with(val)
                op.erase()
                break
        else:
            lst.append((rt, r))
            seen[id(x)] = lst
    return todo


def _equal(a, b, memo: dict) -> bool:
    k = (id(a), id(b))
    hit = memo.get(k)
    if hit is None:
        hit = memo[k] = (a, b, a == b)  # (keeps a and b, so their ids, alive)
    return hit[2]


# ---------------------------------------------------------------------------------------- lower
def no_function_error(op: Operation, src: TensorDistAttr, dst: TensorDistAttr, reasons: list[str],
                      origin: tuple[TensorDistAttr, TensorDistAttr] | None = None) -> DiagnosticError:
    line, col = op.loc or (None, None)
    msg = (f"There is no reshard function that matches src_dist_attr: {describe(src)} and "
           f"dst_dist_attr: {describe(dst)}")
    if origin is not None:
        msg += (f" (a step of the reshard from {describe(origin[0])} to {describe(origin[1])}, split in"
                " two because both the mesh and the placements change)")
    e = DiagnosticError(msg, line, col)
    for r in reasons:
        e.notes.append(r)
    return e


def lower_reshard(prog: Program, op: Operation, rank: int, *, rings: RingAllocator | None = None,
                  result: Lowering | None = None, paddle_only: bool = False, enable=(),
                  disable=()) -> Value | None:
    """Lower one ``dist_op.reshard`` for ``rank`` (ops go right before it); returns the value that
    replaced its result (``None`` if the function gave none).  The op is erased if unused."""
    rings = rings if rings is not None else (result.rings if result else RingAllocator())
    result = result or Lowering(rank, rings)
    x = op.operand(0)
    src, dst = _attrs_of(op)
    r = op.results[0]
    if src.paddle_equal(dst) and not (registry.coshard_on(paddle_only, disable) and src.placements != dst.placements):
        # (Paddle's equality ignores printed placements; with co-sharding on, [R,S0] -> [S0,S0] is a change)
        r.replace_all_uses_with(x)
        op.erase()
        result.steps.append(ReshardStep(src, dst, "(same layout: removed)", op.loc))
        return x
    ctx = ReshardContext(prog, op, rank, rings, records=result.records, notes=result.notes, cache=result.attrs)
    ctx.layouts = (src, dst)
    ctx.paddle_only = paddle_only
    chosen, reasons = registry.select(src, dst, tuple(x.type.shape), paddle_only=paddle_only, enable=enable,
                                      disable=disable)
    out = None
    if chosen is not None:
        ctx.function = chosen.name
        try:
            out = chosen.reshard(ctx, src, dst, x, r.type)
        except Decline as d:  # matching decides: a function that accepted a case lowers it
            line, col = op.loc or (None, None)
            raise DiagnosticError(f"internal error: reshard function '{chosen.name}' accepted "
                                  f"{describe(src)} -> {describe(dst)}, then declined: {d}", line, col) from None
    if chosen is None:
        raise no_function_error(op, src, dst, reasons, result.origins.get(op))
    result.steps.append(ReshardStep(src, dst, chosen.name, op.loc, [o.name for o in ctx.api.created], reasons,
                                    chosen.paddle, list(ctx.fixes)))
    return retire(op, out)


def lower_block(prog: Program, block: Block, result: Lowering, paddle_only: bool = False, enable=(),
                disable=(), lower_one=lower_reshard, todo: list[Operation] | None = None) -> None:
    """Lower the reshards of ``block`` (``todo``: :func:`work_in` it, if known; ops no longer in
    the block skipped)."""
    rank, rings = result.rank, result.rings
    for op in work_in(block) if todo is None else todo:
        for region in op.regions:
            for b in region.blocks:
                lower_block(prog, b, result, paddle_only, enable, disable, lower_one)
        if op.name == RESHARD and op.parent is block:
            lower_one(prog, op, rank, rings=rings, result=result, paddle_only=paddle_only,
                      enable=enable, disable=disable)


def lower_program(prog: Program, rank: int, *, rings: RingAllocator | None = None,
                  paddle_only: bool = False, enable=(), disable=(), replay: bool | Replayer = True) -> Lowering:
    """``ReshardPasses.apply_reshard_pass`` for ``rank``: decompose, fold, lower every reshard
    (each distinct one once, the others replayed: :mod:`.replay`, or by the given
    :class:`~.replay.Replayer`; ``replay=False``: one by one)."""
    rings = rings if rings is not None else RingAllocator()
    result = Lowering(rank, rings)
    todo = fold(prog.block, decompose(prog, prog.block, result, registry.coshard_on(paddle_only, disable)))
    lower_block(prog, prog.block, result, paddle_only, enable, disable,
                replay if not isinstance(replay, bool) else Replayer(lower_reshard) if replay else lower_reshard, todo)
    return result
