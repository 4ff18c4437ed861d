"""Shard(i) -> Shard(j) on an uneven axis, or along process ids out of order (distc extra function).

Paddle 3.3.1's s_to_s (one all_to_all between reshapes) assumes an even split: its reshape fails
on uneven shapes ("Expected capacity == in_size": oracle ``u2_5x7_S0_to_S1``, ``u3_7x5_S1_to_S0``),
and on a 2-D mesh the S->R step of its nd_mesh fails the same way (``m22u_7x9_S0S1_to_S1S0``).
Even, ordered S->S is left to Paddle (all_to_all).

distc: the uneven S->R of :mod:`.x_s_to_r` (padded all_gather, pieces cut back to size), then a
slice of the new piece; no padding ever reaches the result.
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=97, name="x_s_to_s")
class XShardToShard(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.has_step(src, dst, lambda a, b: a.kind == "S" and b.kind == "S")

    def reshard(self, ctx, src, dst, value, dst_type):
        X.decline_if_paddle_is_right(src, dst, value)
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
