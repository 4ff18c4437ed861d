"""Paddle's AMP optimizer path under ZeRO: gradients resharded to their ZeRO layout *before* the
global-norm clip (a helper of ``shard-optimizer``, not a pass of its own).

With ``strategy.amp`` on, Paddle 3.3.1's optimizer runs ``apply_gradients`` through the sharding
optimizer, which reshards every gradient to the layout of its (ZeRO-sharded) optimizer states
first, and only then builds ``ClipGradByGlobalNorm``.  In the program that means: one
``dist_op.reshard`` per gradient, all of them just before the first ``squared_l2_norm``, in the
order of the norms; the norm of a sharded gradient is partial over every mesh dim that shards it;
``stack`` keeps only the partial mesh dims all its inputs share (the others are made replicated
first); the scaled gradient keeps the sharded layout.

How a program shows it was built under AMP (``detect_amp``): low-precision casts, the loss-scaling
ops ``check_finite_and_unscale_`` / ``update_loss_scaling_``, or master weights (``multi_precision``
optimizer ops with a master-weight operand).  On Paddle's CPU wheel none of these appear (its
``amp/`` programs look like plain ones): there ``--amp`` asks for the path explicitly.
"""

from __future__ import annotations

from ..analysis.op_index import OpIndex
from ..dialects import ops
from ..ir.builder import InsertPoint, Maker
from ..ir.core import Operation, Program, Value, ops_with_attr
from ..ir.dist import TensorDistAttr, VecDistAttr
from ..ir.types import DistTensorType, VectorType
from .paddle_api import PaddleAPI
from .sharding_util import dist_of, op_role_attr

LOW_PRECISION = ("bf16", "f16", "bfloat16", "float16")
PER_TENSOR_CLIPS = (ops.CLIP_BY_NORM, ops.CLIP)  # ClipGradByNorm, ClipGradByValue


def detect_amp(prog: Program, index=None) -> list[str]:
    """Reasons the program looks built under AMP (empty: no sign of it).  ``index``: the
    program's :class:`~distc.analysis.op_index.OpIndex`, if one is at hand (and fresh; else one is built)."""
    why: list[str] = []
    if index is None:
        index = OpIndex(prog)
    for n in (ops.CHECK_FINITE_AND_UNSCALE_, ops.UPDATE_LOSS_SCALING_):
        if n in index.names:
            why.append(f"'{n}' (dynamic loss scaling)")
    for op in index.named(ops.CAST):
        dt = op.attr("dtype")
        if dt is not None and any(str(dt).endswith(p) for p in LOW_PRECISION):
            why.append(f"low-precision casts (pd_op.cast to {dt})")
            break
    for op, mp in ops_with_attr(prog.all_ops(), "multi_precision"):  # (most ops have none: found in C)
        if str(mp) == "true":
            why.append(f"master weights ('{op.name}' with multi_precision:true)")
            break
    return why


def _grad_source(opt: Operation, grad_index: int) -> tuple[Value, Operation] | None:
    """The clip's input gradient g and the ``multiply(g, scale)`` feeding the optimizer."""
    g = opt.operand(grad_index)
    mul = g.owner if g is not None else None
    if mul is None or mul.name != ops.MULTIPLY:
        return None
    src = mul.operand(0)
    if src is None or not any(u.name == ops.SQUARED_L2_NORM for u in src.users):
        return None
    return src, mul


def reshard_grads_before_clip(prog: Program, targets: list[tuple[Operation, int, TensorDistAttr]],
                              mk: Maker, retype: bool = False) -> int:
    """``targets``: (optimizer op, grad operand index, ZeRO layout of its states).  Insert the
    gradient reshards before the clip and re-infer the clip ops' layouts.  Returns how many
    gradients were resharded (0: none to reshard).  A per-tensor clip (``ClipGradByNorm``:
    ``clip_by_norm``) gets the same reshards, before the first clip op; without a clip they come
    before the optimizer section.

    ``retype`` (ZeRO-3 without AMP): no reshard op; the gradient's *type* takes the ZeRO layout
    while its producer's op_dist_attr keeps the partial result, so the partition pass lowers the
    difference right after the backward op (a reduce-scatter), as Paddle's stage 3 does.  Under a
    per-tensor clip (``clip_by_norm``, ``clip``) that is the clip's input: the clip keeps its
    replicated layout (an all-gather before it), the update slices the clipped gradient."""
    jobs, per_tensor = [], []
    for opt, gi, want in targets:
        found = _grad_source(opt, gi)
        if found is None:
            g = opt.operand(gi)
            clip = g.owner if g is not None and g.owner is not None and g.owner.name in PER_TENSOR_CLIPS else None
            if clip is not None:
                g = clip.operand(0)  # Paddle reshards (stage 3: retypes) the gradient it clips
            if retype and isinstance(g.type if g is not None else None, DistTensorType):
                retype_grad(g, want, mk)
            elif not retype and isinstance(g.type if g is not None else None, DistTensorType):
                per_tensor.append((clip, opt, gi, g, want))
            continue
        g, mul = found
        norm = next(u for u in g.users if u.name == ops.SQUARED_L2_NORM)
        jobs.append((norm, g, mul, want))
    if not jobs:
        return _reshard_before(prog, per_tensor, mk)
    order = {id(op): i for i, op in enumerate(prog.block.ops)}
    jobs.sort(key=lambda j: order.get(id(j[0]), 0))
    cur = InsertPoint.before(jobs[0][0])
    stacks: dict[int, Operation] = {}
    for norm, g, mul, want in jobs:
        if retype:
            retype_grad(g, want, mk)
            r = g
        else:
            r = PaddleAPI(mk.style, cur, op_role=op_role_attr(norm)).reshard(g, want)
        for op in (norm, mul):
            for i, v in enumerate(op.operands):
                if v is g:
                    op.set_operand(i, r)
        _norm(norm, want, mk)
        _same_as_operand0(mul, want, mk)
        for u in _through_cross_mesh(norm, mk):
            if u.name == ops.COMBINE:
                _combine(u)
                for s in u.result.users:
                    if s.name == ops.STACK:
                        stacks[id(s)] = s
    for s in stacks.values():
        _stack(s, mk)
    return len(jobs)


def retype_grad(g: Value, want: TensorDistAttr, mk: Maker) -> None:
    """ZeRO-3: the gradient ``g`` takes the ZeRO layout as its type.  A gradient summed from
    several contributions (a tied weight: the lm head reuses the token embedding, ``add_n`` of a
    ``combine``) is retyped at each contribution, and the sum is computed on shards, as Paddle's
    backward types every gradient of a (sharded) parameter like the parameter: the partition pass
    then reduce-scatters each contribution right after its backward op, before the add."""
    want = mk.restyle(want)  # type: ignore[assignment]
    g.type = g.type.with_dist(want)  # type: ignore[union-attr]
    add = g.owner
    comb = add.operand(0).owner if add is not None and add.name == ops.ADD_N and add.operand(0) is not None else None
    if comb is None or comb.name != ops.COMBINE or len(add.results) != 1:
        return
    parts = [v for v in comb.operands if v is not None and isinstance(v.type, DistTensorType)
             and v.type.shape == g.type.shape]  # type: ignore[union-attr]
    if len(parts) != len(comb.operands):
        return
    for v in parts:
        v.type = v.type.with_dist(want)  # type: ignore[union-attr]
    _combine(comb)
    d = add.dist_attr
    if d is not None:
        add.dist_attr = d.with_(operands=(VecDistAttr(tuple(want for _ in parts)),), results=(want,))


def _reshard_before(prog: Program, jobs: list, mk: Maker) -> int:
    """No global-norm clip under AMP: every gradient resharded to its ZeRO layout in one run, in
    the order of the updates, before the first per-tensor clip op (``clip_by_norm``, which keeps its
    own replicated layout), or without any clip before the optimizer section (the first op of
    role 2); each clip or update then reads the resharded gradient.  Returns how many."""
    if not jobs:
        return 0
    jobs = [j for j in jobs if j[0] is not None] or jobs
    order = {id(op): i for i, op in enumerate(prog.block.ops)}
    first = min((op for op in prog.block.ops if getattr(op.attr("op_role"), "value", None) == 2),
                key=lambda op: order[id(op)], default=None)
    jobs.sort(key=lambda j: order.get(id(j[0] if j[0] is not None else j[1]), 0))
    anchor = jobs[0][0] if jobs[0][0] is not None else first
    if anchor is None:
        return 0
    cur = InsertPoint.before(anchor)
    for clip, opt, gi, g, want in jobs:
        user, i = (clip, 0) if clip is not None else (opt, gi)
        user.set_operand(i, PaddleAPI(mk.style, cur, op_role=op_role_attr(user)).reshard(g, want))
    return len(jobs)


def _set_result(op: Operation, i: int, d: TensorDistAttr, mk: Maker) -> None:
    t = op.results[i].type
    if isinstance(t, DistTensorType):
        op.results[i].type = t.with_dist(mk.restyle(d))  # type: ignore[arg-type]


def _norm(op: Operation, src: TensorDistAttr, mk: Maker) -> None:
    """squared_l2_norm: the operand without partial; the scalar partial on every sharding dim."""
    parts = sorted({m for m in src.dims_mapping if m >= 0})
    res = mk.tensor_dist(src.mesh, (-1,), [(m, "SUM") for m in parts])
    d = op.dist_attr
    if d is not None:
        op.dist_attr = d.with_(operands=(mk.restyle(src.with_(partial=())),), results=(mk.restyle(res),))
    _set_result(op, 0, res, mk)


def _through_cross_mesh(norm: Operation, mk: Maker) -> list[Operation]:
    """The norm's users, looking through the ``dist_op.reshard`` that moves it to another mesh
    (pipeline stages: each stage's squared norms go to the first stage's mesh): that reshard
    now carries the partial norm as it is (partial on the destination mesh too, as Paddle
    re-infers it), and the combine after it is the user."""
    out: list[Operation] = []
    src = dist_of(norm.result)
    for u in norm.result.users:
        dst = dist_of(u.results[0]) if u.name == ops.RESHARD and u.results else None
        if src is None or dst is None or dst.mesh == src.mesh:
            out.append(u)
            continue
        res = mk.tensor_dist(dst.mesh, dst.dims_mapping, [(m, "SUM") for m in src.partial_dims])
        d = u.dist_attr
        if d is not None:
            u.dist_attr = d.with_(operands=(mk.restyle(src),), results=(mk.restyle(res),))
        _set_result(u, 0, res, mk)
        out += list(u.results[0].users)
    return out


def _same_as_operand0(op: Operation, src: TensorDistAttr, mk: Maker) -> None:
    """An elementwise op whose result takes its first operand's layout (the clip's multiply)."""
    d = op.dist_attr
    if d is not None:
        ops = list(d.operands)
        ops[0] = mk.restyle(src)
        op.dist_attr = d.with_(operands=tuple(ops), results=(mk.restyle(src),))
    _set_result(op, 0, src, mk)


def _combine(op: Operation) -> None:
    op.results[0].type = VectorType(tuple(v.type for v in op.operands if v is not None))


def _stack(op: Operation, mk: Maker) -> None:
    """stack: partial kept only on the mesh dims every input is partial on."""
    vec = op.operand(0)
    comb = vec.owner if vec is not None else None
    if comb is None or comb.name != ops.COMBINE:
        return
    ins = [dist_of(v) for v in comb.operands]
    if not ins or any(d is None for d in ins):
        return
    common = set(ins[0].partial_dims)  # type: ignore[union-attr]
    for d in ins[1:]:
        common &= set(d.partial_dims)  # type: ignore[union-attr]
    part = [(m, "SUM") for m in sorted(common)]
    mesh = ins[0].mesh  # type: ignore[union-attr]
    entry = [mk.tensor_dist(mesh, d.dims_mapping, part) for d in ins]  # type: ignore[union-attr]
    t = op.results[0].type
    res = mk.tensor_dist(mesh, (-1,) * (t.rank if isinstance(t, DistTensorType) else 2), part)
    d = op.dist_attr
    if d is not None:
        op.dist_attr = d.with_(operands=(VecDistAttr(tuple(mk.restyle(e) for e in entry)),),  # type: ignore[misc]
                               results=(mk.restyle(res),))
    _set_result(op, 0, res, mk)
