"""Shard -> Replicate on an uneven axis, or along process ids out of order (distc extra function).

Paddle 3.3.1's padding path for an uneven S->R fails ("'list' object has no attribute
'get_defining_op'": oracle ``u2_5x7_S0_to_R``, ``u3_7x5_S1_to_R``, ``m22u_7x9_S0R_to_RR`` ...), and
its all_gather concatenates in ascending rank order, which is not the mesh order when the
process ids along a mesh dim descend.  Even, ordered S->R is left to Paddle.

distc: each rank pads its piece to ``ceil(n/p)`` with zeros (``full`` + ``concat``), one
``all_gather``, then every piece is sliced back to its real size and the pieces are concatenated
in mesh order (an even split uses ``split_with_num`` + ``concat`` as Paddle does).
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=75, name="x_s_to_r")
class XShardToReplicate(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.has_step(src, dst, lambda a, b: a.kind == "S" and b.kind == "R")

    def reshard(self, ctx, src, dst, value, dst_type):
        X.decline_if_paddle_is_right(src, dst, value)
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
