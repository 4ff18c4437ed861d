"""Replicate -> Shard on a 1-D mesh: each rank slices its piece, no communication (Paddle's
``RToSReshardFunction``); cross-mesh: send/recv first (``RToSReshardFunctionCrossMesh``).

Pieces are ``ceil(n/p)`` long and the last process takes the rest (5 over 3 ranks: 2, 2, 1).
A mesh dim of size 1 gives ``share_data_``; a rank outside the mesh gets a placeholder
``dist_op.reshard``.
"""

from __future__ import annotations

from .cross_mesh import CrossMesh
from .registry import ReshardFunction, reshard_function
from .util import is_replicated, is_shard


@reshard_function(priority=40, name="r_to_s", paddle=True)
class RToS(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (is_replicated(src) and is_shard(dst) and src.mesh.ndim == 1 and dst.mesh.ndim == 1
                and src.mesh == dst.mesh)

    def reshard(self, ctx, src, dst, value, dst_type):
        split_axis = mesh_axis = -1
        for i, m in enumerate(dst.dims_mapping):
            if m != -1:
                split_axis, mesh_axis = i, m
        mesh = src.mesh
        chunk = ctx.api.chunk_id(value)
        if ctx.rank in mesh.process_ids:
            total = value.type.shape[split_axis]
            pieces = mesh.shape[mesh_axis]
            if pieces == 1:
                out = ctx.api.share_data_(value)
                ctx.api.retype(out, dst_type)
                ctx.api.set_dist(out, ctx.api.op_attr(mesh, [src], [dst], chunk))
                return out
            piece = (total + pieces - 1) // pieces
            start = mesh.process_ids.index(ctx.rank) * piece
            end = start + piece
            if ctx.rank == mesh.process_ids[-1]:
                end = total
            out = ctx.api.slice(value, [split_axis], [start], [end])
            ctx.api.retype(out, dst_type)
            ctx.api.set_dist(out, ctx.api.op_attr(mesh, [src], [dst], chunk))
            return out
        return ctx.api.reshard(value, dst, dst_type)


@reshard_function(priority=50, name="r_to_s_cross_mesh", paddle=True)
class RToSCrossMesh(CrossMesh):
    def base(self):
        return R_TO_S

    def matches(self, src, dst):
        return is_replicated(src) and is_shard(dst)

    def on_destination(self, ctx, src, dst, value, dst_type):
        if value is None or ctx.rank not in dst.mesh.process_ids:
            return None  # (the ranks of the source mesh only send)
        return R_TO_S.reshard(ctx, src, dst, value, dst_type)


R_TO_S = RToS()
