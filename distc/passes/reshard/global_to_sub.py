"""Global mesh -> one of its sub-meshes, replicated (Paddle's ``GlobalToSubMeshFunction``).

The value is made replicated on the global mesh first (N-d reshard) if needed.  Then no data
moves: if the value has a single use (the reshard itself) its type is changed in place (and the
producer's ``op_dist_attr`` result entry with it); otherwise a ``share_data_`` carries the new type.
"""

from __future__ import annotations

from .registry import ReshardFunction, reshard_function
from .util import is_replicated, sub_meshes_dim0


@reshard_function(priority=120, name="global_to_sub_mesh", paddle=True)
class GlobalToSubMesh(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        if not is_replicated(dst):
            return False
        a, b = src.mesh, dst.mesh
        if a.ndim > b.ndim + 1:
            return False
        if a.ndim == b.ndim:
            return set(b.process_ids) < set(a.process_ids)
        if a.ndim < 2:
            return True  # Paddle fails while choosing (see refuses)
        return b in sub_meshes_dim0(a)

    def refuses(self, src, dst, shape):
        if src.mesh.ndim < 2 and src.mesh.ndim != dst.mesh.ndim:
            # Paddle calls get_sub_meshes on the 1-D mesh here and fails; distc skips the
            # function (or stops, with only Paddle's functions)
            return ("get_sub_meshes of a 1-D mesh: Expected size == process_ids.size(), "
                    "but received size:0 != process_ids.size():1")
        if not is_replicated(src):
            from .nd_mesh import ND_MESH

            return ND_MESH.refuses(src, src.with_(dims_mapping=(-1,) * len(shape), partial=()), shape)
        return None

    def reshard(self, ctx, src, dst, value, dst_type):
        from .nd_mesh import ND_MESH

        if not is_replicated(src):
            tmp = ctx.api.tattr(src.mesh, [-1] * len(src.dims_mapping))
            if src.given is not None and not ctx.paddle_only:  # co-sharded: nested, not by dims mapping
                from .extra_lower import lower

                value = lower(ctx, src, tmp, value, ctx.api.cvt(value, tmp), function=self.name)
            else:
                value = ND_MESH.reshard(ctx, src, tmp, value, ctx.api.cvt(value, tmp))
            src = tmp
        if len(value.uses) == 1 and value.owner is not None:
            ctx.api.retype(value, ctx.api.cvt(value, dst))
            ctx.api.set_result_dist(value, dst)
            return value
        out = ctx.api.share_data_(value)
        ctx.api.retype(out, dst_type)
        ctx.api.set_dist(out, ctx.api.op_attr(src.mesh, [src], [dst], ctx.api.chunk_id(value)))
        return out
