"""``reshard{rank=R}``: lower every ``dist_op.reshard`` for rank R as Paddle 3.3.1 does
(``ReshardPasses.apply_reshard_pass``); see :mod:`distc.passes.reshard`."""

from __future__ import annotations


from ..ir.core import ops_with_attr
from ..ir.records import field, record
from .base import INTERNAL, ModulePass, PassContext, register


@register
@record
class ReshardPass(ModulePass):
    name = "reshard"
    description = "lower dist_op.reshard ops for one rank (Paddle 3.3.1's reshard functions)"

    rank: int = 0
    paddle: bool = False  # only Paddle's own reshard functions (fail where Paddle fails)
    ring_base: int = 12  # the first ring id handed out (Paddle's first in a fresh process)
    coshard: bool = True  # co-sharded placements ([Shard(0), Shard(0)]) as nested splits (not Paddle's)
    moe_all_to_all: bool = False  # Paddle's FLAGS_enable_moe_utils lowering (x_moe_all_to_all)
    # the Replayer to lower with (one that logs, or sketches: distc.pipeline.derive); None: a plain one
    replayer: object = field(default=None, metadata=INTERNAL, compare=False, repr=False)

    def apply(self, prog, ctx: PassContext) -> None:
        from .reshard import lower_program, ring_allocator

        if self.rank < 0 or self.ring_base < 0:
            from ..syntax.diagnostics import DiagnosticError

            raise DiagnosticError("reshard: rank and ring_base must be 0 or more")
        rings = ring_allocator(ctx, first=self.ring_base)
        rings.reserved |= _ring_ids_in(prog) - set(rings.groups.values())
        res = lower_program(prog, self.rank, rings=rings, paddle_only=self.paddle,
                            enable=("moe_all_to_all",) if self.moe_all_to_all else (),
                            disable=() if self.coshard else ("x_coshard",),
                            replay=self.replayer if self.replayer is not None else True)
        ctx.collectives.extend(res.records)
        ctx.notes.extend(res.notes)
        ctx.stats.reshard_steps.extend(res.steps)
        ctx.stats.rank = self.rank


def _ring_ids_in(prog) -> set[int]:
    out = set()
    for _, a in ops_with_attr(prog.all_ops(), "ring_id"):  # (most ops have none: found in C)
        v = getattr(a, "value", None)
        if isinstance(v, int):
            out.add(v)
    return out
