"""ZeRO stage 3 (parameters sharded too), a helper of ``shard-optimizer``.

Paddle 3.3.1's ``ShardingStage3`` on a static program: every parameter ZeRO shards is *retyped*
at its ``builtin.parameter`` to the layout of its optimizer states (``Shard`` on the sharding mesh
dim), while the ops that read it keep their op_dist_attr (the whole parameter): the partition
pass then puts an all-gather before every use.  The parameter's gradient is retyped the same way
(its producer still says partial), so the partition pass reduce-scatters it right after the
backward op; the global-norm clip and the update work on shards, and nothing writes the whole
parameter back.  The optimizer states' ``pd_op.data`` get the local shape in their ``shape``
attribute.

Paddle refuses stage 3 when mp already shards a parameter (``Tensor Axis[c] is Sharded by two
different mesh dimension``).  distc shards *another* tensor axis over dp instead (``[R,S1]`` ->
``[S0,S1]``): exactly the layout ZeRO gives the optimizer states, so the update needs no
communication, and every use gathers over dp only.  It says so per parameter.
"""

from __future__ import annotations

from ..dialects import ops
from ..ir import attrs as A
from ..ir.builder import Maker
from ..ir.core import Operation, Program
from ..ir.dist import TensorDistAttr, placements_name
from ..ir.types import DistTensorType
from ..syntax.diagnostics import DiagnosticError
from .base import PassContext
from .paddle_api import set_result_dist
from .zero_clip import reshard_grads_before_clip


def _pl(d: TensorDistAttr) -> str:
    return placements_name(d).upper()


def shard_parameters(prog: Program, targets: list[tuple[Operation, int, TensorDistAttr]], mk: Maker,
                     ctx: PassContext, dim_name: str, grads: bool = True) -> None:
    """Retype each parameter (and, unless AMP already resharded them, its gradient)."""
    changed = []
    seeds = []  # the parameters whose type changed: the ops reading them are inferred again
    retyped = []  # the targets whose parameter takes another layout (their gradients follow)
    for op, _gi, want in targets:
        p = op.operand(0)
        owner = p.owner if p is not None else None
        pt = p.type if p is not None else None
        if owner is None or not isinstance(pt, DistTensorType):
            continue
        before = pt.dist
        want = mk.restyle(want)  # type: ignore[assignment]
        set_result_dist(p, want, mk, retype=True)
        name = owner.attr("parameter_name") or owner.attr("name")
        pname = str(getattr(name, "value", name)) if name is not None else f"%{p.name}"
        changed.append(pname)
        other = [p_ for md, p_ in enumerate(before.placements) if p_.is_shard()]
        if want.placements == before.placements:  # e.g. a 1-D parameter mp already shards
            ctx.notes.append(f"shard-optimizer: stage 3: {pname} {_pl(before)}: no other tensor axis to "
                             f"shard over {dim_name}; kept as it is (as its states, as Paddle; its "
                             f"gradient stays partial until the update reads it)")
            continue
        retyped.append((op, _gi, want))
        seeds.append(p)
        if other:
            ctx.notes.append(f"shard-optimizer: stage 3: {pname} is {_pl(before)}: another mesh dim already "
                             f"shards tensor axis {other[0].dim}; distc shards axis "
                             f"{[p_.dim for p_ in want.placements if p_.is_shard() and p_ not in other][0]} "
                             f"over {dim_name} -> {_pl(want)} (the layout of its ZeRO states, so the update "
                             f"stays local, as Paddle's ShardingStage3; Paddle 3.3.1 then fails where an "
                             f"op's rule meets one tensor axis split over two mesh dims: 'Tensor Axis is "
                             f"Sharded by two different mesh dimension')")
        else:
            ctx.notes.append(f"shard-optimizer: stage 3: {pname} {_pl(before)} -> {_pl(want)} "
                             f"(all-gathered before each use, gradient reduce-scattered)")
    from .zero3_complete import recomplete  # stage 3 only: a stage-1 run does not import the SPMD rules

    crash = _foreign_mesh(prog, targets)
    if crash is not None:  # (surprising, so said without --explain too; the exit status unchanged)
        ctx.notes.append(f"shard-optimizer: stage 3: {crash.message}")
        ctx.warn(crash)
    relaid, why, where = recomplete(prog, seeds, mk)
    if why:
        ctx.notes.append(f"shard-optimizer: stage 3: Paddle 3.3.1 fails to build this program ({why}, "
                         f"once the parameters are sharded); distc keeps the stage-1 forward and gathers "
                         f"each sharded parameter before use")
        # at the op whose SPMD rule raises in Paddle
        ctx.warn(_warning(prog, where, f"ZeRO stage 3: Paddle 3.3.1 fails to build this program ({why}); distc's "
                          "program is its own: the stage-1 forward, each sharded parameter gathered before use "
                          "(--verify proves it, --explain says more)"))
    if any(op.name == "pd_op.matmul" for op in relaid):
        ctx.notes.append(f"shard-optimizer: stage 3: {len(relaid)} op(s) inferred again from the sharded "
                         f"parameters (Paddle's SPMD rules: a matmul keeps the larger free axis on a mesh "
                         f"dim both want), the activations after them laid out otherwise")
    if grads:  # a kept parameter's gradient keeps its partial type: all-reduced before the update
        reshard_grads_before_clip(prog, retyped, mk, retype=True)
    ctx.stats.zero3_params = changed


def _warning(prog: Program, op: Operation | None, message: str) -> DiagnosticError:
    """``message`` as a warning at ``op``'s line (the file's, if it has none): FILE:LINE:COL, the line, a caret."""
    line, col = (op.loc if op is not None and op.loc is not None else (None, None))
    src = op.src.split("\n", 1)[0] if op is not None and op.src and line is not None else None
    return DiagnosticError(message, line, col, filename=prog.filename or "<input>", severity="warning",
                           source=None if src is None else "\n" * (line - 1) + src)


def _foreign_mesh(prog: Program, targets) -> DiagnosticError | None:
    """Paddle 3.3.1's ShardingStage3 reshards every parameter of the optimizer in eager mode, on
    every rank, before the program is built; on a rank outside the parameter's mesh (a pipeline
    stage's parameters, an MoE expert's) that reshard is a segmentation fault (checked: one
    ``dist.reshard`` of a parameter on ``[[1],[3]]`` or ``[2,3]`` on rank 0, to its own placements
    too; ``tests/data/oracle`` stores it for the MoE and the pp2 x dp2 LLaMA at stage 3).  The
    warning at the first such parameter, naming the ranks Paddle crashes on."""
    params = []
    for op, _gi, _want in targets:
        p = op.operand(0)
        t = p.type if p is not None else None
        if p is not None and p.owner is not None and isinstance(t, DistTensorType):
            params.append((p.owner, tuple(t.dist.mesh.process_ids)))
    world = sorted({r for _, ids in params for r in ids})
    outside = [(owner, ids) for owner, ids in params if len(set(ids)) < len(world)]
    if not outside:
        return None
    outside.sort(key=lambda x: x[0].loc or (0, 0))
    owner, ids = outside[0]
    crash = sorted({r for _, m in outside for r in world if r not in m})
    name = owner.attr("parameter_name") or owner.attr("name")
    name = str(getattr(name, "value", name)) if name is not None else "a parameter"
    shown = ",".join(map(str, crash)) if len(crash) <= 16 else f"{crash[0]}-{crash[-1]} ({len(crash)} ranks)"
    return _warning(prog, owner, f"ZeRO stage 3: Paddle 3.3.1 crashes on rank(s) {shown} (a segmentation fault: "
                    f"ShardingStage3 reshards each parameter eagerly on every rank, and {name} is on mesh "
                    f"{list(ids)}, without rank {next(r for r in crash if r not in ids)}); distc's program is its "
                    "own (--verify proves it)")


def local_state_shapes(decisions) -> None:
    """Stage 3: a state's ``pd_op.data`` carries its local shape in ``shape``."""
    for dec in decisions:
        for _name, v, _before, after in dec.states:
            owner = v.owner if v is not None else None
            t = v.type if v is not None else None
            if owner is None or owner.name != ops.DATA or not isinstance(t, DistTensorType):
                continue
            a = owner.attr("shape")
            if a is None:
                continue
            local = after.local_shape(t.shape)
            owner.set_attr("shape", like_int_array(a, local))


def like_int_array(a, vals):
    """``vals`` spelt like the attribute ``a`` it replaces."""
    if isinstance(a, A.IntArrayAttr):
        return A.IntArrayAttr(tuple(int(v) for v in vals), a.tagged)
    tag = a.elements[0].tag if isinstance(a, A.ArrayAttr) and a.elements and isinstance(a.elements[0], A.IntAttr) else None
    return A.ArrayAttr(tuple(A.IntAttr(int(v), tag) for v in vals))
