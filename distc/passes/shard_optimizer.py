"""``shard-optimizer{stage=1,axis=...,mesh_dims=...}``: ZeRO stage 1 as Paddle's
``dist.shard_optimizer(opt, dist.ShardingStage1(...))`` leaves a PIR program.

What Paddle 3.3.1 does (``api.py``: ``_ShardOptimizer._shard_accumulator``,
``ShardingStage1.__call__``, ``get_placement_with_sharding``; the optimizer's SPMD rule):

* every optimizer state but the beta-power accumulators (moments, velocity, master weight...)
  takes the parameter's placements plus ``Shard(k)`` on the sharding mesh dim, ``k`` the lowest
  tensor axis the parameter is not already split on; beta-pow accumulators are replicated on the
  parameter's mesh.  A state produced by ``pd_op.data`` is retyped in place (its ``shape``
  attribute is left alone) and gets ``op_dist_attr {mesh, result(0)}``; any other state is
  resharded with a ``dist_op.reshard`` before the update;
* parameters whose first dim is 1 keep replicated states (Paddle skips them);
* the update op is created after that, so its SPMD rule sees sharded moments: param, grad,
  moments and master weight all take the merged dims mapping (no partial), and so do the
  in-place results (their types change too).  No reshard is inserted yet: the partition pass
  does that from the op's ``op_dist_attr``.

The optimizer table (operand roles per op and arity, in-place results) is
:mod:`distc.dialects.optimizers`.  Paddle accepts only AdamW and SGD in ``shard_optimizer``;
distc shards the other stateful optimizers the same way.
"""

from __future__ import annotations


from ..analysis.op_index import OpIndex
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Program, Value
from ..ir.dist import REPLICATE, Placement, ProcessMesh, Shard, TensorDistAttr
from ..ir.records import record
from ..ir.types import DistTensorType
from ..syntax.diagnostics import DiagnosticError
from ..dialects import ops
from ..dialects.optimizers import (  # noqa: F401 (OPTIMIZERS, inplace_map, optimizer_sig: re-exported)
    BETA_POW, GRAD, MASTER, OPTIMIZERS, PARAM, STATE, OptSig, inplace_map, looks_like_optimizer,
    optimizer_sig, param_name,
)
from .base import ModulePass, PassContext, register
from .zero_clip import detect_amp, reshard_grads_before_clip
from .paddle_api import PaddleAPI
from .sharding_util import dist_of, fail, layout_key, layout_objects, op_role_attr


# ------------------------------------------------------------------------------ placements
def placements_with_sharding(param: TensorDistAttr, ndim: int, axis: int,
                             op: Operation | None = None) -> tuple[Placement, ...]:
    """Paddle's ``get_placement_with_sharding``: Shard(k) on mesh dim ``axis``, ``k`` the lowest
    tensor axis other than the one the parameter is already sharded on."""
    pl = list(param.placements)
    shard_axis = -1
    for p in pl:
        if p.is_shard():
            if shard_axis != -1:
                raise fail(op, "a parameter sharded on two tensor axes cannot be sharded again by "
                               "the sharding strategy (Paddle: \"The parameter can't be shard twice\")")
            shard_axis = p.dim
    for d in range(ndim):
        if d != shard_axis:
            pl[axis] = Shard(d)
            break
    return tuple(pl)


def resolve_axis(axis: str | None, mesh_dims: tuple[str, ...], ndim: int, where: str = "") -> int | None:
    """``axis`` given as an index or a mesh-dim name (names from ``mesh_dims``)."""
    if axis is None or axis == "":
        return None
    a = str(axis).strip()
    if a.lstrip("-").isdigit():
        k = int(a)
    elif a in mesh_dims:
        k = list(mesh_dims).index(a)
    else:
        names = ",".join(mesh_dims) if mesh_dims else "none given (distc shard --mesh-dims dp,mp; mesh_dims=dp,mp in a pipeline)"
        raise DiagnosticError(f"{where}unknown sharding mesh dim '{a}' (mesh dim names: {names})")
    if not 0 <= k < max(ndim, 1):
        raise DiagnosticError(f"{where}sharding mesh dim {k} is out of range for a {ndim}-D mesh")
    return k


# ------------------------------------------------------------------------------ SPMD
def _merge_elementwise(a: tuple[int, ...], b: tuple[int, ...]) -> list[int]:
    out = []
    for x, y in zip(a, b):
        if x == y or y == -1:
            out.append(x)
        elif x == -1:
            out.append(y)
        else:
            out.append(-1)
    seen: set[int] = set()
    for i, m in enumerate(out):  # a mesh dim splits one tensor axis only
        if m >= 0:
            if m in seen:
                out[i] = -1
            seen.add(m)
    return out


def merged_dims_mapping(sig: OptSig, op: Operation) -> list[int] | None:
    """The dims mapping Paddle's optimizer SPMD rule gives param, grad, moments and master."""
    vals = {role_i: op.operand(i) for i, (role_i, _) in enumerate(sig.operands) if role_i in (PARAM, GRAD)}
    p, g = dist_of(vals.get(PARAM)), dist_of(vals.get(GRAD))
    if p is None:
        return None
    pg = _merge_elementwise(p.dims_mapping, g.dims_mapping) if g is not None else list(p.dims_mapping)
    if sig.spmd == "replicate":
        return [-1] * len(pg)
    if sig.spmd == "sgd":
        return pg
    states = [dist_of(op.operand(i)) for i, (r, _) in enumerate(sig.operands) if r == STATE]
    cands = [pg, pg] + [list(s.dims_mapping) for s in states if s is not None]
    out = []
    for i in range(len(pg)):
        dst = -1
        for c in cands:
            st = c[i] if i < len(c) else -1
            if st == -1:
                continue
            if dst == -1:
                dst = st
            elif dst != st:
                dst = -1
                break
        out.append(dst)
    return out


def respmd(op: Operation, sig: OptSig, mk: Maker, memo: dict | None = None) -> bool:
    """Recompute the optimizer op's op_dist_attr entries for param, grad, states and master from
    the current operand layouts, and retype the in-place results.  True if anything changed.
    ``memo``: answers by (op_dist_attr, signature, operand and result types), all immutable and
    shared between ops (a program's optimizer updates fall into a few such kinds)."""
    d = op.dist_attr
    if memo is None:
        plan = _respmd_plan(op, sig, mk, d)
    else:
        key = layout_key(op, d, sig)
        hit = memo.get(key)
        if hit is None:  # (the entry keeps the keyed objects alive: their ids stay theirs)
            hit = memo[key] = (layout_objects(op, d, sig), _respmd_plan(op, sig, mk, d))
        plan = hit[1]
    if plan is None:
        return False
    new, retypes = plan
    changed = new is not d
    if changed:
        op.dist_attr = new
    for r, t in retypes:
        op.results[r].retype(t)  # (the plan's types differ from the results' it was made for)
        changed = True
    return changed


def _respmd_plan(op: Operation, sig: OptSig, mk: Maker, d) -> tuple | None:
    """What :func:`respmd` does to ``op``: (its new op_dist_attr, or ``d`` itself when equal;
    [(result index, new type)]), or None for nothing."""
    dm = merged_dims_mapping(sig, op)
    if d is None or dm is None:
        return None
    pdist = dist_of(op.operand(0))
    assert pdist is not None
    merged = mk.tensor_dist(pdist.mesh, dm)
    operands = list(d.operands)
    for i, (role, _) in enumerate(sig.operands):
        if i >= len(operands):
            break
        v = op.operand(i)
        if role in (PARAM, GRAD) or (role in (STATE, MASTER) and v is not None):
            operands[i] = mk.restyle(merged.with_(mesh=_entry_mesh(operands[i], pdist.mesh)))
    results = list(d.results)
    for r, oi in enumerate(sig.inplace):
        if r >= len(results) or r >= op.num_results:
            break
        role = sig.operands[oi][0]
        if role in (PARAM, STATE, MASTER) and op.operand(oi) is not None:
            results[r] = mk.restyle(merged.with_(mesh=_entry_mesh(results[r], pdist.mesh)))
    new = d.with_(operands=tuple(operands), results=tuple(results))
    retypes = []
    for r, e in enumerate(results):
        if r >= op.num_results:
            break
        t = op.results[r].type
        if isinstance(t, DistTensorType) and isinstance(e, TensorDistAttr) and not e.is_empty:
            if t.dist != e:
                retypes.append((r, t.with_dist(e)))
    return (d if new == d else new), retypes


def _entry_mesh(e, default: ProcessMesh) -> ProcessMesh:
    if isinstance(e, TensorDistAttr) and not e.is_empty:
        return e.mesh
    return default


# ------------------------------------------------------------------------------ the pass
@record
class ShardingDecision:
    op: Operation
    param_name: str
    states: list[tuple[str, Value, TensorDistAttr, TensorDistAttr]]  # (name, value, before, after)


@register
@record
class ShardOptimizerPass(ModulePass):
    name = "shard-optimizer"
    description = "ZeRO: shard optimizer states over a mesh dim, as Paddle's ShardingStage1"

    stage: int = 1
    axis: str = ""  # mesh dim index or name; "" = Paddle's rule (0, or the last Replicate dim)
    mesh_dims: tuple = ()  # mesh dim names, e.g. dp,mp (PIR text does not print them)
    amp: bool = False  # Paddle's AMP optimizer path (also taken when the program shows AMP)

    def apply(self, prog: Program, ctx: PassContext) -> None:
        if self.stage not in (0, 1, 2, 3):
            raise DiagnosticError(f"shard-optimizer: stage {self.stage} is not supported (0 to 3)")
        if self.stage == 2:
            ctx.notes.append("shard-optimizer: stage 2 = stage 1: in Paddle 3.3.1's static mode ZeRO-2 "
                             "gives the stage-1 program byte for byte (the gradient reduce-scatter "
                             "stage 1 already inserts is the gradient sharding)")
        if self.stage == 0:
            ctx.notes.append("shard-optimizer: stage 0, optimizer states left as they are")
            return
        mk = Maker(prog.style)
        # (the pipeline's index, from its input checks, while the program is as it was; else one walk)
        index = ctx.op_index if ctx.op_index is not None and ctx.op_index.fresh(prog) else OpIndex(prog)
        opt_ops = index.updates()
        unknown = sorted({op.name for op, sig in index.optimizers if sig is None and op.name.endswith("_")
                          and looks_like_optimizer(op)})
        for name in unknown:
            ctx.notes.append(f"shard-optimizer: '{name}' with this operand count is not in the "
                             f"optimizer table; left unsharded")
        params = []
        for op, sig in opt_ops:
            p = op.operand(0)
            pd = dist_of(p)
            if pd is not None:
                params.append((op, pd))
        if not params:
            ctx.notes.append("shard-optimizer: no distributed optimizer update found; nothing to shard")
            return
        ndim = max(pd.mesh.ndim for _, pd in params)
        if self.mesh_dims and len(self.mesh_dims) != ndim:
            raise DiagnosticError(f"shard-optimizer: mesh_dims names {len(self.mesh_dims)} dim(s) "
                                  f"({','.join(self.mesh_dims)}) but the mesh has {ndim}")
        axis = resolve_axis(self.axis, tuple(self.mesh_dims), ndim, "shard-optimizer: ")
        if axis is None:
            axis = _paddle_axis(params)
            how = "Paddle's rule"
            if "dp" in self.mesh_dims and self.mesh_dims.index("dp") != axis:
                ctx.notes.append(f"shard-optimizer: note: Paddle's rule picks mesh dim {axis}, not the one "
                                 f"named dp; pass axis=dp to shard over dp")
                ctx.warn(f"{prog.filename or '<input>'}: warning: ZeRO shards over mesh dim {axis} "
                         f"({self.mesh_dims[axis]}): Paddle's rule picks it, not mesh dim "
                         f"{self.mesh_dims.index('dp')} named dp; --axis dp shards over dp")
        else:
            how = "given"
        dim_name = self.mesh_dims[axis] if axis < len(self.mesh_dims) else f"mesh dim {axis}"
        ctx.stats.sharding_axis = axis
        ctx.notes.append(f"shard-optimizer: sharding mesh dim {axis} ({dim_name}, {how})")
        memo: dict = {}  # (see respmd; and "place", "spmd" layouts: one object per kind)
        targets = self._grad_targets(opt_ops, axis, mk, memo)
        if self.stage != 3:
            self._amp_path(prog, targets, mk, ctx, index)
        decisions: list[ShardingDecision] = []
        for op, sig in opt_ops:
            dec = self._shard_one(op, sig, axis, mk, ctx, memo)
            if dec is not None:
                decisions.append(dec)
        if self.stage in (1, 2) and not any(d.states for d in decisions):
            names = ", ".join(sorted({f"'{op.name}'" for op, _ in opt_ops}))
            ctx.warn(f"{prog.filename or '<input>'}: warning: the optimizer ({names}) keeps no optimizer states "
                     f"(moments, master weights): ZeRO-{self.stage} has nothing to shard and saves no memory "
                     f"(the program is Paddle's stage-{self.stage} program all the same); "
                     f"--stage 3 shards parameters and gradients")
        if self.stage == 3:
            from .zero3 import local_state_shapes, shard_parameters  # (stage 3 only: not loaded at stages 0-2)

            # Paddle's stage 3 retypes the gradients too; under AMP it then reshards them as well
            # (a reshard to the layout they already have)
            shard_parameters(prog, targets, mk, ctx, dim_name)
            self._amp_path(prog, targets, mk, ctx)
            local_state_shapes(decisions)
            for op, sig in opt_ops:
                respmd(op, sig, mk, memo)
        ctx.stats.sharded_states = decisions

    def _shard_one(self, op: Operation, sig: OptSig, axis: int, mk: Maker,
                   ctx: PassContext, memo: dict) -> ShardingDecision | None:
        param = op.operand(0)
        pd = dist_of(param)
        if pd is None or param is None:
            return None
        pt = param.type
        assert isinstance(pt, DistTensorType)
        pname = param_name(param)
        if axis >= pd.mesh.ndim:
            raise fail(op, f"sharding mesh dim {axis} does not exist on the {pd.mesh.ndim}-D mesh of "
                           f"parameter '{pname}'")
        if not pd.placements[axis].is_replicate():
            raise fail(op, f"parameter '{pname}' is {pd.placements[axis]} on sharding mesh dim {axis}; "
                           f"Paddle requires Replicate there (\"The placement on sharding_axis should be "
                           f"Replicate\")")
        if pt.rank == 0 or pt.shape[0] == 1:
            ctx.notes.append(f"shard-optimizer: '{pname}' has first dim {pt.shape[0] if pt.rank else '(0-D)'}; "
                             f"its states stay replicated (as Paddle)")
            return None
        zk = ("zero", id(pd), pt.rank)  # (the parameter's layout: one object a kind, kept by the entry)
        z = memo.get(zk)
        if z is None:
            sharded = placements_with_sharding(pd, pt.rank, axis, op)
            z = memo[zk] = (pd, sharded, tuple(REPLICATE for _ in range(pd.mesh.ndim)),
                            "[" + ", ".join(str(p) for p in sharded) + "]")
        _, sharded, replicated, pl = z
        dec = ShardingDecision(op, pname, [])
        for i, (role, name) in enumerate(sig.operands):
            if role not in (STATE, MASTER, BETA_POW):
                continue
            v = op.operand(i)
            if v is None:
                continue
            t = v.type
            if not isinstance(t, DistTensorType):
                continue
            want = sharded if role != BETA_POW else replicated
            # (by want's identity: one object a parameter layout, which z keeps; else by value)
            attr = memo.get(("layout of", id(want), t.rank))
            if attr is None:
                key = ("layout", pd.mesh, pd.mesh.dim_names, want, t.rank)
                attr = memo.get(key)
                if attr is None:
                    attr = memo[key] = mk.from_placements(pd.mesh, want, t.rank)
                memo[("layout of", id(want), t.rank)] = attr
            before = t.dist
            self._place(op, i, v, attr, mk, memo)
            if role != BETA_POW:
                dec.states.append((name, op.operand(i), before, attr))  # type: ignore[arg-type]
        respmd(op, sig, mk, memo)
        if dec.states:
            names = ", ".join([n for n, *_ in dec.states])
            ctx.notes.append(f"shard-optimizer: {pname} ({op.name}): {names} -> {pl}")
            if sig.spmd == "replicate":
                ctx.notes.append(f"shard-optimizer: {pname} ({op.name}): the update reads whole tensors (its trust "
                                 f"ratio takes the norms of the whole parameter and update): the states are "
                                 f"kept sharded and all-gathered for the update, which runs on every rank")
        return dec

    @staticmethod
    def _grad_targets(opt_ops, axis: int, mk: Maker, memo: dict) -> list[tuple[Operation, int, TensorDistAttr]]:
        """(optimizer op, grad operand index, ZeRO layout) of every parameter ZeRO shards
        (``memo``: the layout by the parameter's, one object a kind)."""
        targets = []
        for op, sig in opt_ops:
            p = op.operand(0)
            pd, pt = dist_of(p), p.type if p is not None else None
            if pd is None or not isinstance(pt, DistTensorType) or pt.rank == 0 or pt.shape[0] == 1:
                continue
            # (whether ZeRO shards it and its grad operand: by the parameter's layout and the
            # optimizer signature, one object a kind each, which the entry keeps)
            g = memo.get(("grad of", id(pd), id(sig)))
            if g is None:
                gi = None if axis >= pd.mesh.ndim or not pd.placements[axis].is_replicate() else next(
                    (i for i, (role, _) in enumerate(sig.operands) if role == GRAD), None)
                g = memo[("grad of", id(pd), id(sig))] = (pd, sig, gi)
            gi = g[2]
            if gi is None:
                continue
            hit = memo.get(("target", id(pd), pt.rank))
            if hit is None:
                hit = memo[("target", id(pd), pt.rank)] = (
                    pd, mk.from_placements(pd.mesh, placements_with_sharding(pd, pt.rank, axis, op), pt.rank))
            targets.append((op, gi, hit[1]))
        return targets

    def _amp_path(self, prog: Program, targets, mk: Maker, ctx: PassContext, index=None) -> bool:
        why = detect_amp(prog, index)
        if not self.amp and not why:
            return False
        ctx.stats.amp = True
        ctx.notes.append("shard-optimizer: AMP optimizer path (" + ("--amp" if self.amp else "detected: ")
                         + "; ".join(why) + "): gradients resharded to the ZeRO layout before the "
                         "clip (a global-norm clip sums the norms of the sharded gradients), or before the "
                         "optimizer section without one")
        n = reshard_grads_before_clip(prog, targets, mk)
        if n == 0:
            ctx.notes.append("shard-optimizer: AMP path: no gradient has a ZeRO layout to reshard to")
        return True

    @staticmethod
    def _place(op: Operation, i: int, v: Value, attr: TensorDistAttr, mk: Maker, memo: dict) -> None:
        """Paddle's ``_apply_placement``: retype a ``pd_op.data`` state, reshard any other."""
        t = v.type
        assert isinstance(t, DistTensorType)
        owner = v.owner
        if owner is not None and owner.name == ops.DATA:
            od = owner.dist_attr
            # (what to do, by the identity of the type, layout and op_dist_attr: one object a kind)
            k = ("data", id(t), id(attr), id(od))
            hit = memo.get(k)
            if hit is None:
                new_d = memo.get(("data", id(attr)))  # (attr: one object per layout, kept by the memo)
                if new_d is None:
                    new_d = memo[("data", id(attr))] = mk.op_dist(attr.mesh, [], [attr])
                hit = memo[k] = (t, od, None if t.dist is attr or t.dist == attr else t.with_dist(attr),
                                 None if od is new_d or od == new_d else new_d)
            if hit[2] is not None:
                v.retype(hit[2])  # (t retyped to attr: not equal to t)
            if hit[3] is not None:
                owner.dist_attr = hit[3]
            return
        if t.dist is attr or t.dist == attr:
            return
        api = PaddleAPI(mk.style, InsertPoint.before(op), op_role=op_role_attr(op))
        op.set_operand(i, api.reshard(v, attr))


def sharding_axis(prog: Program, axis: str | int | None, mesh_dims: tuple[str, ...] = (), index=None) -> int | None:
    """The mesh dim ``shard-optimizer`` shards ``prog`` over: ``axis`` (an index or a name of
    ``mesh_dims``), else Paddle's rule; None where there is no distributed update or ``axis`` is
    not a mesh dim (the pass says so)."""
    updates = (index if index is not None else OpIndex(prog)).updates()
    params = [(op, pd) for op, _ in updates if (pd := dist_of(op.operand(0)))]
    if not params:
        return None
    try:
        k = resolve_axis(None if axis is None else str(axis), tuple(mesh_dims), max(pd.mesh.ndim for _, pd in params))
    except DiagnosticError:
        return None
    return _paddle_axis(params) if k is None else k


def _paddle_axis(params: list[tuple[Operation, TensorDistAttr]]) -> int:
    """``_set_and_check_sharding_prop_from_param``: 0, unless a parameter is not Replicate there;
    then the last Replicate mesh dim of that parameter (and so on, over all parameters)."""
    axis = 0
    for _, pd in params:
        pl = pd.placements
        if axis < len(pl) and not pl[axis].is_replicate():
            for dim, p in enumerate(pl):
                if p.is_replicate():
                    axis = dim
    return axis
