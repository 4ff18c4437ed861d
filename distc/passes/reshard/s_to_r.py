"""Shard -> Replicate on a 1-D mesh (Paddle's ``SToRReshardFunction``) and its cross-mesh form.

An all-gather concatenates the pieces along axis 0; when the shard axis is not 0 the gathered
tensor is cut back into its pieces (``split_with_num``) and concatenated along the shard axis.
Paddle's padding path for an uneven split fails (it indexes the list ``split`` returns as a
value), so distc declines those cases and leaves them to other functions.
"""

from __future__ import annotations

from .cross_mesh import CrossMesh
from .registry import ReshardFunction, reshard_function
from .util import is_replicated, is_shard


@reshard_function(priority=80, name="s_to_r", paddle=True)
class SToR(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (is_shard(src) and is_replicated(dst) and src.mesh.ndim == 1 and dst.mesh.ndim == 1
                and src.mesh == dst.mesh)

    @staticmethod
    def allgather_type(ctx, value, split_axis):
        d = ctx.api.dist(value)
        shape = list(value.type.shape)
        p = d.mesh.shape[d.dims_mapping[split_axis]]
        shape[split_axis] = (shape[split_axis] + p - 1) // p
        shape[0] *= p
        dm = list(d.dims_mapping)
        dm[split_axis] = -1
        return ctx.api.dist_type(shape, value.type.dtype, ctx.api.tattr(d.mesh, dm, d.printed_partial))

    def refuses(self, src, dst, shape):
        return refusal(shape, next(i for i, m in enumerate(src.dims_mapping) if m != -1), src.mesh.size)

    def reshard(self, ctx, src, dst, value, dst_type):
        chunk = ctx.api.chunk_id(value)
        if src.mesh.size == 1:
            out = ctx.api.share_data_(value)
            ctx.api.retype(out, dst_type)
            ctx.api.set_dist(out, ctx.api.op_attr(src.mesh, [src], [dst], chunk))
            return out
        split_axis = next(i for i, m in enumerate(src.dims_mapping) if m != -1)
        return self.gather(ctx, src, dst, value, split_axis)

    def gather(self, ctx, src, dst, value, split_axis):
        mesh = src.mesh
        n = mesh.size
        chunk = ctx.api.chunk_id(value)
        ag = ctx.api.all_gather(value, sorted(mesh.process_ids), n)
        ctx.api.retype(ag, self.allgather_type(ctx, value, split_axis))
        new_dst = ctx.api.tattr(dst.mesh, [-1] * len(dst.dims_mapping), dst.printed_partial)
        ctx.api.set_dist(ag, ctx.api.op_attr(mesh, [src], [new_dst], chunk))
        if split_axis == 0:
            return ag
        vec = ctx.api.split_with_num(ag, n, 0)
        sop = vec.owner
        if chunk != -1:
            sop.dist_attr = sop.dist_attr.with_(chunk_id=chunk)
        ag_attr = ctx.api.dist(ag)
        vec.type = type(vec.type)(tuple(ctx.api.cvt(e, ag_attr) for e in vec.type.elements))
        out = ctx.api.concat(vec, split_axis)
        if chunk != -1:
            out.owner.dist_attr = out.owner.dist_attr.with_(chunk_id=chunk)
        return out


@reshard_function(priority=90, name="s_to_r_cross_mesh", paddle=True)
class SToRCrossMesh(CrossMesh):
    def base(self):
        return S_TO_R

    def matches(self, src, dst):
        return is_shard(src) and is_replicated(dst)


S_TO_R = SToR()


def refusal(shape, axis: int, n: int) -> str | None:
    """Paddle's s_to_r fails on a split of ``shape[axis]`` over ``n`` that is not even."""
    if n > 1 and shape[axis] % n != 0:
        return "'list' object has no attribute 'get_defining_op' (Paddle's uneven s_to_r padding path fails)"
    return None
