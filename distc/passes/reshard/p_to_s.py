"""Partial(SUM) -> Shard on a 1-D mesh: one reduce-scatter (Paddle's ``PToSReshardFunction``).

Reduce-scatter splits axis 0, so another shard axis is transposed to the front and back.  An
uneven axis is padded with zeros up to ``p * ceil(n/p)`` first (``full``, ``concat``); the last
process cuts the padding off its piece again (``split``).
"""

from __future__ import annotations

from .registry import ReshardFunction, reshard_function
from .util import is_partial, is_shard, reduce_enum


@reshard_function(priority=30, name="p_to_s", paddle=True)
class PToS(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (is_partial(src) and is_shard(dst) and src.mesh.ndim == 1 and dst.mesh.ndim == 1
                and src.mesh == dst.mesh)

    def refuses(self, src, dst, shape):
        return refusal(dict(src.partial)[0])

    def reshard(self, ctx, src, dst, value, dst_type):
        chunk = ctx.api.chunk_id(value)
        split_axis = list(dst.dims_mapping).index(0)
        n = src.mesh.size
        balanced = value.type.shape[split_axis] % n == 0
        perm = None
        if split_axis != 0:
            perm = list(range(len(value.type.shape)))
            perm[0], perm[split_axis] = split_axis, 0
            value = ctx.api.transpose(value, perm)
            dm = list(dst.dims_mapping)
            dm[split_axis] = -1
            dm[0] = 0
            dst = ctx.api.tattr(dst.mesh, dm, dst.printed_partial)
        if balanced:
            gd = dst_type.dist
            gdm = list(gd.dims_mapping)
            gdm[0], gdm[split_axis] = gdm[split_axis], gdm[0]
            rs_type = ctx.api.cvt(value, ctx.api.tattr(gd.mesh, gdm, gd.printed_partial))
            out = ctx.api.reduce_scatter(value, sorted(src.mesh.process_ids), n)
            ctx.api.retype(out, rs_type)
            ctx.api.set_dist(out, ctx.api.op_attr(src.mesh, [src], [dst], chunk))
            if perm is not None:
                out = ctx.api.transpose(out, perm)
            return out
        # uneven: pad axis 0 with zeros, reduce-scatter, the last rank drops the padding
        dst_type = ctx.api.cvt(value, dst)
        size = value.type.shape[0]
        avg = (size + n - 1) // n
        pad = avg * n - size
        pad_shape = list(ctx.api.local_shape(value))
        pad_shape[0] = pad
        padding = ctx.api.full(pad_shape, 0.0, value.type.dtype)
        ctx.api.retype(padding, ctx.api.cvt(padding, src))
        ctx.api.set_dist(padding, ctx.api.op_attr(src.mesh, [], [src], chunk))
        cat = ctx.api.concat([value, padding], 0)
        axis_attr = ctx.api.tattr(src.mesh, [-1], {0: "SUM"})
        from ...ir.dist import VecDistAttr

        ctx.api.set_dist(cat, ctx.api.op_attr(src.mesh, [VecDistAttr((src, src)), axis_attr], [src], chunk))
        shape = list(value.type.shape)
        shape[0] = avg * n
        ctx.api.retype(cat, ctx.api.cvt(value, src, shape))
        out = self.with_padding(ctx, cat, src, dst, dst_type, pad)
        if perm is not None:
            out = ctx.api.transpose(out, perm)
        return out

    @staticmethod
    def with_padding(ctx, value, src, dst, dst_type, pad):
        n = src.mesh.size
        out = ctx.api.reduce_scatter(value, sorted(src.mesh.process_ids), n)
        shape = list(dst_type.shape)
        shape[0] += pad
        ctx.api.retype(out, ctx.api.cvt(out, dst, shape))
        chunk = ctx.api.chunk_id(value)
        ctx.api.set_dist(out, ctx.api.op_attr(src.mesh, [src], [dst], chunk))
        if pad:
            if ctx.rank == dst.mesh.process_ids[-1]:
                pieces = ctx.api.split(out, [out.type.shape[0] - pad, pad], 0)
                ctx.api.set_dist(pieces[0], ctx.api.op_attr(dst.mesh, [dst], [dst], chunk))
                return pieces[0]
            ctx.api.retype(out, dst_type)
        return out


def refusal(reduce: str) -> str | None:
    """Paddle's p_to_s reduce-scatters sums only."""
    if reduce != "SUM":
        return f"The p to s reshard func only support sum op, but received {reduce_enum(reduce)}"
    return None


# within an N-d reshard the padding is typed on the 1-D sub-mesh and the value on the N-d mesh:
# Paddle's concat SPMD rule crashes on that mix (SIGSEGV in PlacementEqual); nd_mesh refuses it
UNEVEN_ON_SUB_MESH = "uneven P->S on a sub-mesh (Paddle 3.3.1 crashes in ConcatInferSpmd)"
