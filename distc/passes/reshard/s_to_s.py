"""Shard(i) -> Shard(j) on a 1-D mesh: one all-to-all (Paddle's ``SToSReshardFunction``).

The all-to-all exchanges blocks along axis 0.  If the target axis ``j`` is not 0, each piece is
first reshaped so that the ``p`` blocks of axis ``j`` come first (reshape, transpose, reshape);
if the source axis ``i`` is not 0, the received blocks are moved back to axis ``i`` afterwards.
Paddle assumes even splits here (its reshape fails otherwise), so distc declines uneven cases.
"""

from __future__ import annotations

from .registry import ReshardFunction, reshard_function
from .util import is_shard


@reshard_function(priority=140, name="s_to_s", paddle=True)
class SToS(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (is_shard(src) and is_shard(dst) and src.mesh.ndim == 1 and dst.mesh.ndim == 1
                and src.mesh == dst.mesh)

    def refuses(self, src, dst, shape):
        i = list(src.dims_mapping).index(0)
        j = list(dst.dims_mapping).index(0)
        n = src.mesh.size
        if any(d > 0 and d % n for d in (shape[i], shape[j], shape[0] if i != 0 else 0)):
            return ("Paddle's s_to_s reshapes assume an even split "
                    "(Expected capacity == in_size in reshape's infermeta)")
        return None

    def reshard(self, ctx, src, dst, value, dst_type):
        i = list(src.dims_mapping).index(0)
        j = list(dst.dims_mapping).index(0)
        n = src.mesh.size
        shape = list(value.type.shape)
        if j != 0:
            pre = list(shape)
            if pre[j] != -1:
                pre[j] = pre[j] // n
            pre.insert(j, n)
            x = ctx.api.reshape(value, pre)
            axes = [j] + [k for k in range(len(pre)) if k != j]
            x = ctx.api.transpose(x, axes)
            pre.pop(j)
            if pre[i] != -1:
                pre[i] *= n
            x = ctx.api.reshape(x, pre)
            ctx.api.retype(x, ctx.api.cvt(value, dst))
        else:
            x = ctx.api.share_data_(value)
        out = ctx.api.all_to_all(x, sorted(src.mesh.process_ids))
        ctx.api.retype(out, ctx.api.cvt(x, src))
        ctx.api.set_dist(out, ctx.api.op_attr(src.mesh, [src], [dst], -1))
        if i != 0:
            post = list(shape)
            if post[0] != -1:
                post[0] = post[0] // n
            post.insert(0, n)
            out = ctx.api.reshape(out, post)
            axes = list(range(1, len(post)))
            axes.insert(i, 0)
            out = ctx.api.transpose(out, axes)
            post.pop(0)
            if post[i] != -1:
                post[i] *= n
            out = ctx.api.reshape(out, post)
        ctx.api.retype(out, dst_type)
        return out
