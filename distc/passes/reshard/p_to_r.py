"""Partial -> Replicate on a 1-D mesh: one all-reduce (Paddle's ``PToRReshardFunction``), and its
cross-mesh form: send/recv to the destination mesh first (``PToRReshardFunctionCrossMesh``)."""

from __future__ import annotations

from .cross_mesh import CrossMesh
from .registry import ReshardFunction, reshard_function
from .util import is_partial, is_replicated


@reshard_function(priority=10, name="p_to_r", paddle=True)
class PToR(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (is_partial(src) and is_replicated(dst) and src.mesh.ndim == 1 and dst.mesh.ndim == 1
                and src.mesh == dst.mesh)

    def reshard(self, ctx, src, dst, value, dst_type):
        reduce = dict(src.partial)[0]
        out = ctx.api.all_reduce(value, sorted(src.mesh.process_ids), reduce)
        ctx.api.retype(out, dst_type)
        ctx.api.set_dist(out, ctx.api.op_attr(src.mesh, [src], [dst], ctx.api.chunk_id(value)))
        return out


@reshard_function(priority=20, name="p_to_r_cross_mesh", paddle=True)
class PToRCrossMesh(CrossMesh):
    def base(self):
        return P_TO_R

    def matches(self, src, dst):
        return is_partial(src) and is_replicated(dst)


P_TO_R = PToR()
