"""What ZeRO sharding a program already carries.

``distc shard --stage N`` (and ``--tensor-fusion``) takes the plain stage-0 program: given one that
Paddle (or distc) has already sharded, sharding it again would slice already-sliced states without a
word.  :func:`zero_found` names what is there, with the op that shows it:

* **fused ZeRO-1** (``strategy.sharding.enable_tensor_fusion``): parameters ``slice@NAME`` (each
  rank's piece of a fused buffer), ``coalesce_tensor_`` / ``view_slice`` buffers, ``share_var``;
* **ZeRO-3**: a parameter that is ``Shard`` on a mesh dim where an op using it (not the optimizer)
  wants it ``Replicate`` (it is gathered before use: Paddle's ``ShardingStage3``); or, given the
  mesh dim ZeRO shards over (``axis``), every parameter ``Shard`` there that has a tensor dim left
  to shard (Paddle's ``ShardingStage3`` shards each one so; a stage-0 program has them
  ``Replicate`` there, as Paddle requires).  Where Paddle's rules re-lay every op reading a
  parameter (the mp-first mesh) nothing is gathered and only this sign is left;
* **lowered**: an optimizer op that updates a slice / gather of its parameter (a program after
  partition and reshard);
* **ZeRO-1/2**: an optimizer state (or master weight) that is ``Shard`` on a mesh dim where its
  parameter is not (Paddle's ``ShardingStage1``/``2``), or an optimizer op that reads its parameter
  sharded on a mesh dim where the parameter value is replicated.
"""

from __future__ import annotations


from ..dialects import ops
from ..dialects.collectives import collective_kind
from ..dialects.optimizers import MASTER, PARAM, STATE, optimizer_sig
from ..ir.core import Operation, Program, Value
from ..ir.dist import TensorDistAttr
from ..ir.records import record
from ..ir.types import DistTensorType

FUSED, STAGE3, STAGE1 = "fused ZeRO-1 (tensor fusion)", "ZeRO-3", "ZeRO-1/2"
LOWERED = "lowered"


@record(frozen=True)
class ZeroFound:
    kind: str  # FUSED, STAGE3, STAGE1 or LOWERED
    what: str  # what shows it, in words
    op: Operation | None  # where

    def head(self) -> str:
        """``MAIN already carries ...: what``."""
        if self.kind == LOWERED:
            return f"MAIN was already partitioned and lowered (Paddle's partition and reshard passes): {self.what}"
        return f"MAIN already carries {self.kind}: {self.what}"


def _dist(v: Value | None) -> TensorDistAttr | None:
    t = v.type if v is not None else None
    return t.dist if isinstance(t, DistTensorType) else None


def _name(v: Value) -> str:
    op = v.owner
    if op is not None:
        for key in ("parameter_name", "name"):
            a = op.attr(key)
            if a is not None and isinstance(getattr(a, "value", None), str):
                return a.value
    return f"%{v.name}" if v.name else "a value"


def _extra_shard(a: TensorDistAttr | None, b: TensorDistAttr | None) -> int | None:
    """The first mesh dim where ``a`` is Shard and ``b`` is not (same mesh), else None."""
    if a is None or b is None or a.mesh != b.mesh:
        return None
    pa, pb = a.placements, b.placements
    for d, p in enumerate(pa):
        if p.is_shard() and d < len(pb) and not pb[d].is_shard():
            return d
    return None


def _updates(prog: Program, index):
    """(op, optimizer signature) of every optimizer update, in program order."""
    if index is not None:
        return index.updates()
    return [(op, sig) for op in prog.walk() if (sig := optimizer_sig(op)) is not None]


def _fused(prog: Program, index=None) -> ZeroFound | None:
    params = index.named(ops.PARAMETER) if index is not None else (op for op in prog.walk() if op.name == ops.PARAMETER)
    # (a clean op's attributes are its source line's: a line without 'slice@' names no such parameter,
    # and its attribute dict is not read for it)
    slices = [op for op in params if (op.dirty or op.src is None or "slice@" in op.src)
              and str(getattr(op.attr("parameter_name"), "value", "")).startswith("slice@")]
    if slices:
        names = [str(op.attr("parameter_name").value) for op in slices]
        more = f" and {len(names) - 2} more" if len(names) > 2 else ""
        return ZeroFound(FUSED, f"parameter{'s' * (len(names) > 1)} {', '.join(repr(n) for n in names[:2])}{more} "
                                f"(each rank's piece of a fused buffer)", slices[0])
    for op in (index.named("pd_op.coalesce_tensor_") if index is not None else prog.walk()):
        if op.name == "pd_op.coalesce_tensor_":
            return ZeroFound(FUSED, f"'pd_op.coalesce_tensor_' packs {op.num_operands and _count(op)} "
                                    f"tensors into one buffer", op)
    return None


def _count(op: Operation) -> int:
    v = op.operand(0)
    return v.owner.num_operands if v is not None and v.owner is not None and v.owner.name == ops.COMBINE else 1


def _parameter_behind(v: Value | None, depth: int = 6) -> Value | None:
    """The ``builtin.parameter`` value that ``v`` is, or is a slice / reshard / copy of (following
    first operands), else None."""
    for _ in range(depth):
        op = v.owner if v is not None else None
        if op is None:
            return None
        if op.name == ops.PARAMETER:
            return v
        if op.name == ops.DATA or not op.num_operands:
            return None
        v = op.operand(0)
    return None


def _stage3(p: Value, pd: TensorDistAttr, opt: Operation, extra, shardy) -> ZeroFound | None:
    """ZeRO-3: ``p`` is Shard on a mesh dim where an op using it wants it whole (or gathers it:
    a lowered program), and the backward gives its gradient Partial on that dim (a data-parallel
    dim; a tensor-parallel parameter gathered before use, e.g. a vocab-parallel embedding, has
    no partial gradient there).  ``extra``: :func:`_extra_shard`, memoized; ``shardy(pd)``: a
    placement of ``pd`` is Shard, memoized.

    The first user (not an optimizer update, not a backward op) that wants ``p`` whole on a dim
    where it is Shard is the gathering one; only then are the backward users' gradients read (a
    user's ``op_role`` is read only where its layout already says it could gather)."""
    if not shardy(pd):
        return None  # (nothing Shard: nothing to gather)
    gathers = [u.results[0] for u, _ in p.uses if u.name in _GATHERS and u.results]
    uses = [use for v in [p] + gathers for use in v.uses] if gathers else p.uses
    gathered: tuple[int, Operation] | None = None
    for user, idx in uses:
        if user is opt:
            continue
        if user.name in _GATHERS:
            d = next((d for d, q in enumerate(pd.placements) if q.is_shard()), None)
        else:
            da = user.dist_attr
            entries = da.operands if da is not None else ()
            want = entries[idx] if idx < len(entries) else None
            d = extra(pd, want) if isinstance(want, TensorDistAttr) else None
        if d is None or optimizer_sig(user) is not None or _backward(user):
            continue
        gathered = (d, user)
        break
    if gathered is None:
        return None
    d, user = gathered
    shape = getattr(p.type, "shape", None)
    for u, _ in uses:  # the backward: the gradient's layout
        if u is opt or not _backward(u) or optimizer_sig(u) is not None:
            continue
        entries = u.dist_attr.results if u.dist_attr is not None else ()
        for k, r in enumerate(u.results):
            if getattr(r.type, "shape", None) != shape:
                continue
            for rd in (_dist(r), entries[k] if k < len(entries) else None):
                if isinstance(rd, TensorDistAttr) and d < len(rd.placements) and rd.placements[d].is_partial():
                    return ZeroFound(STAGE3, f"parameter '{_name(p)}' is {pd.placements[d]} on mesh dim {d} and "
                                             f"'{user.name}' (line {user.loc[0] if user.loc else '?'}) gathers it "
                                             f"before use", p.owner or opt)
    return None


_GATHERS = ("pd_op.all_gather", "pd_op.c_allgather")


def _backward(op: Operation) -> bool:
    return str(getattr(op.attr("op_role"), "value", "")) == "1"


def _param_dim(op: Operation, sig) -> tuple[Value | None, int]:
    for i, (role, _) in enumerate(sig.operands):
        if role == PARAM and i < op.num_operands:
            return op.operand(i), i
    return None, -1


def _sharded_over(prog: Program, axis: int, index=None) -> ZeroFound | None:
    """ZeRO-3 by its parameters: each updated parameter with a tensor dim not yet sharded is
    ``Shard`` on mesh dim ``axis`` (Paddle's ``get_placement_with_sharding``), at least two are
    (one parameter sharded there is as likely a tensor-parallel one and a wrong ``axis``: the
    pass's own error says that)."""
    first: Value | None = None
    count = 0
    for op, sig in _updates(prog, index):
        p, _ = _param_dim(op, sig)
        pd, rank = _dist(p), getattr(getattr(p, "type", None), "rank", 0)
        if p is None or pd is None or axis >= len(pd.placements):
            continue
        if pd.placements[axis].is_shard():
            first, count = p if first is None else first, count + 1
        elif set(range(rank)) - {q.dim for q in pd.placements if q.is_shard()}:
            return None  # a parameter ZeRO-3 would still shard: not sharded yet
    if first is None or count < 2:
        return None
    pd = _dist(first)
    assert pd is not None
    return ZeroFound(STAGE3, f"all {count} parameters that can be are Shard on mesh dim {axis}, the mesh dim ZeRO "
                             f"shards over: parameter '{_name(first)}' is {pd.placements[axis]} there (Paddle's "
                             f"ShardingStage3 program; ZeRO needs a stage-0 program's parameters Replicate there)",
                     first.owner)


def zero_found(prog: Program, axis: int | None = None, index=None) -> ZeroFound | None:
    """The ZeRO sharding ``prog`` already carries (the first sign found), or None.  ``axis``: the
    mesh dim ZeRO would shard over, if known (one more ZeRO-3 sign: :func:`_sharded_over`);
    ``index``: the program's :class:`~distc.analysis.op_index.OpIndex`, if one is at hand."""
    found = _fused(prog, index)
    if found is not None:
        return found
    stage1: ZeroFound | None = None
    memo: dict = {}  # (id(a), id(b)) -> (a, b, _extra_shard(a, b)): layouts are shared, immutable objects
    states: dict = {}  # id(signature) -> (it, the indices of its state and master-weight operands, of its parameter)

    def extra(a: TensorDistAttr | None, b: TensorDistAttr | None) -> int | None:
        hit = memo.get((id(a), id(b)))
        if hit is None:
            hit = memo[(id(a), id(b))] = (a, b, _extra_shard(a, b))
        return hit[2]

    def shardy(pd: TensorDistAttr) -> bool:
        hit = memo.get(id(pd))
        if hit is None:
            hit = memo[id(pd)] = (pd, any(q.is_shard() for q in pd.placements))
        return hit[1]

    for op, sig in _updates(prog, index):
        held = states.get(id(sig))
        if held is None:
            held = states[id(sig)] = (sig, [i for i, (role, _) in enumerate(sig.operands) if role in (STATE, MASTER)],
                                      next((i for i, (role, _) in enumerate(sig.operands) if role == PARAM), -1))
        pi = held[2]
        p = op._operands[pi] if 0 <= pi < len(op._operands) else None
        if p is None:
            continue
        pd = _dist(p)
        if pd is None:
            continue
        z3 = _stage3(p, pd, op, extra, shardy)
        if z3 is not None:
            return z3
        if stage1 is not None:
            continue
        root = _parameter_behind(p)
        if root is not None and root is not p:
            stage1 = ZeroFound(LOWERED, f"'{op.name}' updates a '{p.owner.name}' of parameter '{_name(root)}', "
                                        f"not the parameter itself", op)
            continue
        operands = op._operands
        for i in held[1]:
            if i >= len(operands):
                continue
            s = operands[i]
            sd = _dist(s)
            d = extra(sd, pd)
            if d is not None:
                assert sd is not None
                stage1 = ZeroFound(STAGE1, f"optimizer state '{_name(s)}' is {sd.placements[d]} on mesh dim {d} "
                                           f"where its parameter '{_name(p)}' is {pd.placements[d]}", op)
                break
        da = op.dist_attr if stage1 is None else None
        if da is not None and pi < len(da.operands):
            want = da.operands[pi]
            d = extra(want, pd) if isinstance(want, TensorDistAttr) else None
            if d is not None:
                stage1 = ZeroFound(STAGE1, f"'{op.name}' updates parameter '{_name(p)}' as {want.placements[d]} "
                                           f"on mesh dim {d} where the parameter is {pd.placements[d]}", op)
    return stage1 or _lowered(prog, index) or (_sharded_over(prog, axis, index) if axis is not None else None)


def _lowered(prog: Program, index=None) -> ZeroFound | None:
    """A communication op (all_reduce, all_gather ...): only Paddle's reshard pass inserts them, so
    the program is after partition and reshard even where no optimizer shows it (plain data
    parallel: the gradients' all_reduce)."""
    if index is not None and not any(collective_kind(n) is not None for n in index.names):
        return None  # (no communication op at all)
    for op in prog.walk():  # (a dense program is another mistake, said as such)
        if collective_kind(op.name) is not None and any(_dist(r) is not None for r in op.results):
            return ZeroFound(LOWERED, f"it holds '{op.name}', communication that Paddle's reshard pass inserts", op)
    return None
