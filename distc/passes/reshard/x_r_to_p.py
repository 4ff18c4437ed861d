"""Replicate -> Partial where Paddle 3.3.1 gets it wrong (distc extra function).

Paddle's r_to_p keeps the value on *global* rank 0 and writes zeros everywhere else, so on a mesh
without rank 0 every rank holds zeros (oracle ``cross_m2_R_to_P``, ``m4567_R_to_P``), and on a 2-D
mesh (one group per sub-mesh, at most one of them with rank 0) most groups sum to zero (oracle
``m22_RR_to_PR``, ``m22_S0R_to_RP`` ...); there its zeros also take the global shape of a value
sharded on the other mesh dim, and a shard the destination adds is never cut (``m22_RR_to_PS1``
keeps 8x12 where 8x6 is due).  It also refuses min and prod.

distc: the first process of each group keeps the value (``assign``), the others hold the reduce
type's identity with the value's local shape (``full`` zeros for sum, ones for prod; avg, max and
min keep the value everywhere); new shards are sliced afterwards.  Where Paddle is right (1-D
mesh holding rank 0, or avg/max) Paddle's lowering is kept.
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=55, name="x_r_to_p")
class XReplicateToPartial(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.has_step(src, dst, lambda a, b: a.kind == "R" and b.kind == "P")

    def reshard(self, ctx, src, dst, value, dst_type):
        X.decline_if_paddle_is_right(src, dst, value)
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
