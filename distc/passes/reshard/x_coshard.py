"""Reshards to or from co-sharded placements: one tensor axis split over several mesh dims,
e.g. ``[Shard(0), Shard(0)]`` (distc extra function).

Paddle 3.3.1 keeps such placements in the printed type but lowers by the dims mapping, which
holds one mesh dim per tensor axis (the last one): ``[R, R] -> [S0, S0]`` on a 2x2 mesh comes out
as ``[R, S0]``, each rank holding half of the rows instead of a quarter (corpus/oracle
``m22_*_to_S0S0``, ``m22u_7x9_RR_to_S0S0``; proven with the simulator).

Whether that is a bug depends on what the placements mean to the program's other ops, which
lower by the dims mapping too; so by default distc lowers co-shards as Paddle does, and this
function is opt-in (``reshard{coshard=true}``, ``distc reshard --coshard``).

With it, the axis is split over the mesh dims in turn, the lowest mesh dim outermost (8 rows on
``[[0,1],[2,3]]``: rank 0 rows 0-1, rank 1 rows 2-3, rank 2 rows 4-5, rank 3 rows 6-7); a changed
co-sharded axis is gathered whole (``all_gather`` per mesh dim, innermost first, uneven pieces
padded and cut back) and each rank slices its nested piece.
"""

from __future__ import annotations

from . import x_common as X
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=99, name="x_coshard", optin=True)
class XCoShard(ReshardFunction):
    def is_suitable(self, src, dst):
        return X.same_mesh(src, dst) and (X.coshard(src) or X.coshard(dst))

    def reshard(self, ctx, src, dst, value, dst_type):
        return X.lower(ctx, src, dst, value, dst_type, function=self.name)
