"""Reshard lowering for one rank as a library call: every ``dist_op.reshard`` of a program lowered
as Paddle 3.3.1's ``ReshardPasses.apply_reshard_pass`` does -- what ``distc reshard FILE --rank R``
runs (and ``distc opt -p 'reshard{rank=R}'``)."""

from __future__ import annotations

from ..ir.core import Program
from ..passes.base import PassContext, PassManager
from ..passes.reshard_pass import ReshardPass
from ..syntax.diagnostics import Diagnostics
from .results import RankResult


def reshard(program: Program, rank: int = 0, *, paddle: bool = False, coshard: bool = True, copy: bool = True,
            diagnostics: Diagnostics | None = None) -> RankResult:
    """Lower ``program``'s reshards for ``rank``: a :class:`RankResult` with the program, the
    collective records (those of groups without the rank included, ``runs`` false), the notes, how
    each reshard was lowered (``steps``) and the ring ids (``rings``: ring id -> group, a fresh numbering, as each
    rank is a process of its own).  ``paddle``: Paddle's reshard functions only (fails where
    Paddle fails); ``coshard``: co-sharded placements as nested splits.  ``program`` is left as
    it is unless ``copy=False``."""
    prog = program.clone() if copy else program
    ctx = PassContext(diagnostics=diagnostics if diagnostics is not None else Diagnostics())
    p = ReshardPass(rank=rank, paddle=paddle, coshard=coshard)
    PassManager([p]).run(prog, ctx)
    return RankResult(rank, prog, collectives=list(ctx.collectives), notes=ctx.notes, ran=[p.spec()],
                      warnings=ctx.diagnostics.warnings, steps=ctx.stats.reshard_steps,
                      rings={ring: group for group, ring in ctx.rings.groups.items()})
