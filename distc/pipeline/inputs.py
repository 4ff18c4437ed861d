"""What the shard pipeline (``distc shard``, :func:`distc.shard`) checks about its inputs before it works: wrong input is never a silent
success ("saving 0 bytes", exit 0).

* MAIN must be dist-typed (not a rank's dense program; at stage 0 a warning).
* MAIN must hold an optimizer update (``pd_op.adamw_``, ``sgd_`` ...): without one there is
  nothing for ZeRO to shard.  If MAIN looks like a startup program (it sets parameters, has no
  backward or optimizer op) the message says MAIN and ``--startup`` are probably swapped.
* ``--startup`` must not hold optimizer updates (then it is a main program: swapped).
* ``--startup`` must initialise the optimizer states MAIN reads: none of them -> an error (it is
  e.g. Paddle's ``startup.before`` dump, taken before the optimizer created its states; the input
  is ``startup_after_remove``); some of them -> a warning naming the missing ones.
* MAIN must not already carry ZeRO (fused or not, see :mod:`..analysis.zero_found`): an error
  naming what was found (sharding it again would slice sliced states), a warning where the
  sharding asked for keeps the program's (stage 0: lowered as it is; unfused ZeRO-1/2 at stage 1
  or 2: the states are already sharded, the result is Paddle's program).
* ZeRO (stage 1 to 3) over a mesh dim of one rank shards nothing: a warning (Paddle's program is
  still printed: it annotates the states ``Shard`` on that dim all the same).
"""

from __future__ import annotations

from ..dialects import ops
from ..dialects.optimizers import BETA_POW, MASTER, STATE, looks_like_optimizer, optimizer_sig
from ..ir.core import Program
from ..passes.shard_optimizer import sharding_axis
from ..passes.sharding_util import dist_of, fail
from ..syntax.diagnostics import DiagnosticError


def _opt_ops(prog: Program) -> list:
    return [op for op in prog.walk() if optimizer_sig(op) is not None or looks_like_optimizer(op)]


def _looks_like_startup(prog: Program) -> bool:
    every = list(prog.walk())
    sets = any(op.name == ops.SET_PARAMETER for op in every)
    backward = any(str(getattr(op.attr("op_role"), "value", "")) in ("1", "2") for op in every)
    return sets and not backward


def _str_attr(op, key: str) -> str:
    a = op.attr(key)
    return str(getattr(a, "value", "")) if a is not None else ""


def state_names(prog: Program, rank: int | None = None) -> list[str]:
    """Names of the ``pd_op.data`` values the optimizer ops read as states (``rank``: on a mesh
    holding that rank)."""
    out: list[str] = []
    for op in prog.walk():
        sig = optimizer_sig(op)
        if sig is None:
            continue
        for i, (role, _) in enumerate(sig.operands):
            v = op.operand(i) if i < op.num_operands else None
            if role in (STATE, BETA_POW, MASTER) and v is not None and v.owner is not None \
                    and v.owner.name == ops.DATA:
                n = _str_attr(v.owner, "name")
                d = dist_of(v)
                if rank is not None and d is not None and d.mesh.process_ids and rank not in d.mesh.process_ids:
                    continue
                if n and n not in out:
                    out.append(n)
    return out


def check_main(prog: Program, path: str, stage: int, warn, asked: str | None = None,
               axis: str | int | None = None, mesh_dims: tuple[str, ...] = (), index=None) -> None:
    """``axis``, ``mesh_dims``: as the shard options give them (the mesh dim ZeRO shards over);
    ``index``: the program's :class:`~distc.analysis.op_index.OpIndex`, if one is at hand."""
    check_not_sharded(prog, path, stage, warn, asked, sharding_axis(prog, axis, mesh_dims, index), index)
    if not any(r.dist_attr is not None for op in prog.walk() for r in op.results):
        dense = ("MAIN has no dist types: it is a dense program (a rank's program after dist-to-dense, or not "
                 "auto-parallel); MAIN is the dist-typed program Paddle dumps just before apply_partition_pass")
        if stage >= 1:
            raise DiagnosticError(dense, filename=path)
        warn(f"{path}: warning: {dense}")
    if (index.optimizers if index is not None else _opt_ops(prog)):
        return
    if _looks_like_startup(prog):
        raise DiagnosticError("MAIN looks like a startup program (it sets parameters and has no backward or "
                              "optimizer op): are MAIN and --startup swapped?", filename=path)
    msg = ("MAIN has no optimizer update op (pd_op.adamw_, pd_op.sgd_, ...): nothing for ZeRO to shard; "
           "MAIN is the training program Paddle dumps just before apply_partition_pass")
    if stage >= 1:
        raise DiagnosticError(msg, filename=path)
    warn(f"{path}: warning: {msg}")


def check_not_sharded(prog: Program, path: str, stage: int, warn, asked: str | None = None,
                      axis: int | None = None, index=None) -> None:
    """A MAIN that already carries ZeRO: an error at stages 1-3 (``asked``: the option that asks
    for sharding, default ``--stage N``), a warning at stage 0.  ``axis``: the mesh dim ZeRO
    shards over (a ZeRO-3 program has every parameter it can shard Shard there)."""
    from ..analysis.zero_found import FUSED, LOWERED, STAGE1, zero_found

    found = zero_found(prog, axis, index)
    if found is None:
        return
    asked = asked or f"--stage {stage}"
    per_rank = (" Paddle writes fused ZeRO into each rank's program before partition: this is one rank's."
                if found.kind == FUSED else "")
    if found.kind == LOWERED:  # partition would fail on it at every stage: no lowering twice
        again = f"; {asked} would shard it a second time" if stage >= 1 else ""
        raise _at(found.op, f"{found.head()}: this program is already partitioned{again}. MAIN is the program "
                            f"Paddle dumps just before apply_partition_pass ('before_partition'), not one after "
                            f"it ('after_reshard'){per_rank}", path, "error")
    if found.kind == STAGE1 and stage in (1, 2) and asked.startswith("--stage"):
        # sharding states that are already sharded keeps them as they are (Paddle's own stage-1
        # program comes out as Paddle lowers it): say so, nothing is sharded twice
        warn(_at(found.op, f"{found.head()}; {asked} keeps that sharding (nothing is sharded twice) and "
                           f"lowers the program as Paddle does", path, "warning").render())
        return
    if stage >= 1:
        msg = (f"{found.head()}; {asked} would shard it a second time. "
               f"MAIN is the stage-0 program (Paddle's dump with dist.shard_optimizer(opt): no shard function, "
               f"no tensor fusion); --stage 0 lowers this one as it is.{per_rank}")
        raise _at(found.op, msg, path, "error")
    warn(_at(found.op, f"{found.head()}; --stage 0 lowers it as it is (no second sharding).{per_rank}",
             path, "warning").render())


def _at(op, msg: str, path: str, severity: str) -> DiagnosticError:
    """A diagnostic at ``op``'s source line, with that line (ops keep their source text)."""
    line, col = op.loc if op is not None and op.loc is not None else (None, None)
    src = op.src.split("\n", 1)[0] if op is not None and op.src else None
    return DiagnosticError(msg, line, col, filename=path, severity=severity,
                           source=None if src is None or line is None else "\n" * (line - 1) + src)


def check_startup(prog: Program, startup: Program, path: str, warn, rank: int | None = None) -> None:
    """``rank``: check what that rank reads (its meshes: pipeline stages have their own states,
    and Paddle's ``startup_after_remove`` of a rank holds only its own)."""
    opt = _opt_ops(startup)
    if opt:
        raise fail(opt[0], f"--startup holds an optimizer update ('{opt[0].name}'): it is a main program; "
                           "are MAIN and --startup swapped?").located(path, None)
    states = state_names(prog, rank)
    if not states:
        return
    from ..passes.shard_startup import SINKS  # (here: a run without a startup program never loads it)

    sinks = [(op, key) for op in startup.walk() if (key := SINKS.get(op.name))]
    given = {_str_attr(op, key) for op, key in sinks
             if rank is None or (d := dist_of(op.operand(0))) is None or not d.mesh.process_ids
             or rank in d.mesh.process_ids}
    missing = [n for n in states if n not in given]
    every = states if rank is None else state_names(prog)
    who = "MAIN reads" if states == every else f"rank {rank} reads"  # rank: a pipeline stage's states
    if len(missing) == len(states):
        other = sorted({str(list(d.mesh.process_ids)) for op, key in sinks
                        if _str_attr(op, key) in every and (d := dist_of(op.operand(0))) is not None})
        why = (f"it initialises only states of other ranks (mesh {', '.join(other)}): Paddle's "
               f"'startup_after_remove' is per rank, and a pipeline stage's holds only that stage's states; "
               f"give each rank its own (--startup 'FILE{{rank}}...')") if other and rank is not None else (
               "it was dumped before the optimizer created them (Paddle's 'startup.before'); the startup "
               "input is the 'startup_after_remove' dump")
        raise DiagnosticError(
            f"the startup program initialises none of the {len(states)} optimizer states {who} "
            f"(e.g. '{states[0]}'): {why}", filename=path)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        warn(f"{path}: warning: the startup program does not initialise {len(missing)} of the "
             f"{len(states)} optimizer states {who} ({', '.join(repr(m) for m in missing[:3])}{more}); "
             f"they would start uninitialised")


def check_sharding_degree(prog: Program, axis: int | None, dims: tuple[str, ...], path: str, warn,
                          opt_ops: list | None = None) -> None:
    """A sharding mesh dim of size 1: ZeRO saves nothing, say so (never a silent 'saving 0 bytes').
    ``opt_ops``: the program's optimizer ops in program order, if known (an index's)."""
    if axis is None:
        return
    for op in (_opt_ops(prog) if opt_ops is None else opt_ops):
        d = dist_of(op.operand(0)) if op.num_operands else None
        if d is not None and axis < d.mesh.ndim:
            if d.mesh.shape[axis] == 1:
                name = f" ({dims[axis]})" if axis < len(dims) else ""
                warn(f"{path}: warning: the sharding mesh dim {axis}{name} has 1 rank (mesh shape "
                     f"{list(d.mesh.shape)}): ZeRO shards nothing and saves no memory (the program is "
                     f"Paddle's, which annotates the states Shard on that dim all the same)")
            return


def format_ranks(ranks) -> str:
    """[0, 1, 2, 3, 6] -> '0-3,6' (the inverse of ``--ranks``)."""
    out: list[str] = []
    rs = sorted(set(ranks))
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def check_startups(prog: Program, startups: dict[int, Program], warn, located) -> None:
    """Check that the startup program of each rank (``startups``: rank -> program, one object
    shared by ranks that share one) initialises what the rank reads; the same warning for several
    ranks is said once, naming them.  ``located(e, filename)`` places an error in its file."""
    import re

    seen: dict[str, list[int]] = {}
    for r, sprog in startups.items():
        path = sprog.filename or "<startup>"
        try:
            check_startup(prog, sprog, path, lambda m, r=r: seen.setdefault(
                re.sub(rf"\brank {r} reads\b", "{who} read", m), []).append(r), rank=r)
        except DiagnosticError as e:
            raise located(e, path) from None
    for m, rs in seen.items():
        warn(m.replace("{who}", f"rank{'s' * (len(rs) > 1)} {format_ranks(rs)}"))
