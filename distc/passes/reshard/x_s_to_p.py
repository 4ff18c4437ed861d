"""Shard -> Partial (sum, avg, max, min, prod) on one mesh of any rank (distc extra function).

Paddle 3.3.1 has no such function: on a 1-D mesh it raises "There is no reshard function that
matches ..." (corpus ``m2_S0_to_P``, ``m2_S1_to_Pavg``, ``m2_S0_to_Pmax`` ...); on a 2-D mesh its
nd_mesh goes S->R then r_to_p, whose zeros land on every group without global rank 0.

distc: S->P(sum) pads the local piece with zeros to the full extent (``full`` + ``concat``, no
communication: the pieces sum to the tensor); avg also multiplies by p (``scale``); prod pads with
ones; max/min gather the pieces (``all_gather``) and keep the value on every rank.
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=95, name="x_s_to_p")
class XShardToPartial(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.has_step(src, dst, lambda a, b: a.kind == "S" and b.kind == "P")

    def reshard(self, ctx, src, dst, value, dst_type):
        X.decline_if_paddle_is_right(src, dst, value)
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
