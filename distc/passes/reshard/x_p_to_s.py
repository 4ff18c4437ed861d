"""Partial -> Shard where Paddle 3.3.1 refuses or is wrong (distc extra function).

Paddle's p_to_s only takes Partial(SUM) ("The p to s reshard func only support sum op, but
received ReduceType.kRedAvg": corpus ``m2_Pavg_to_S0``, ``m2_Pmax_to_S1`` ...), and for an uneven
axis it cuts the padding off the last rank's piece with ``split`` sections taken from the global
shape (``[n, pad]`` on a piece of ``ceil(n/p)`` rows), which cannot run (oracle ``u2_5x7_P_to_S0``
and every other uneven P->S).  Even Partial(SUM) -> Shard is left to Paddle.

distc: sum/avg pad the axis to ``p*ceil(n/p)``, reduce_scatter (axis moved first with
``transpose``), slice the short pieces to their real size, and avg divides by p; max/min/prod
all_reduce with their op, then each rank slices its piece.
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=25, name="x_p_to_s")
class XPartialToShard(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.has_step(src, dst, lambda a, b: a.kind == "P" and b.kind == "S")

    def reshard(self, ctx, src, dst, value, dst_type):
        X.decline_if_paddle_is_right(src, dst, value)
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
