"""Replicate -> Partial on a 1-D mesh (Paddle's ``RToPReshardFunction``).

For SUM, global rank 0 keeps the value (``pd_op.assign``) and every other rank holds zeros
(``pd_op.full``); AVG and MAX keep the value everywhere.  Paddle tests the *global* rank against
0, not the mesh's first process, so on a mesh without rank 0 every rank holds zeros: distc
reproduces that (the numeric result is then wrong, as in Paddle; see the note it leaves).
"""

from __future__ import annotations

from .context import Decline
from .registry import ReshardFunction, reshard_function
from .util import is_partial, is_replicated, is_shard


@reshard_function(priority=60, name="r_to_p", paddle=True)
class RToP(ReshardFunction):
    def is_suitable(self, src, dst):
        return (is_replicated(src) and is_partial(dst) and not is_shard(dst) and src.mesh.ndim == 1
                and dst.mesh.ndim == 1 and src.mesh == dst.mesh)

    def reshard(self, ctx, src, dst, value, dst_type):
        reduce = dict(dst.partial)[0]
        if reduce not in ("SUM", "AVG", "MAX"):
            raise Decline(f"Unsupported reduce type {reduce}")
        if reduce == "SUM" and ctx.rank != 0:
            out = ctx.full(value.type.shape, 0, value.type.dtype)
            if 0 not in dst.mesh.process_ids:
                ctx.note(f"r_to_p: no process of mesh {list(dst.mesh.process_ids)} is global rank 0, so "
                         "Paddle 3.3.1 leaves zeros on every rank (the sum is then 0)")
        else:
            out = ctx.assign(value)
        ctx.retype(out, dst_type)
        ctx.set_dist(out, ctx.op_attr(dst.mesh, [src], [dst], ctx.chunk_id(value)))
        return out
