"""Sub-mesh -> the global mesh holding it, replicated (Paddle's ``SubToGlobalMeshFunction``).

Each process of the source mesh broadcasts its copy to the processes at the same position in the
other slices of the global mesh.  Source ranks pass their value through ``share_data_``; the others
allocate zeros to receive into.  Paddle's list of "other" ranks is built by removing items from a
list while iterating over it, which skips some: distc reproduces that list for the zeros' mesh.
Paddle never reaches this function for 1-D -> N-d pairs (the global->sub check crashes first);
distc does (see global_to_sub).
"""

from __future__ import annotations

from .registry import ReshardFunction, reshard_function
from .util import mesh_1d, mesh_equal_ignore_one, split_mesh, sub_mesh_dim


def _placements_equal(a, b) -> bool:
    small, large = (a, b) if len(a) < len(b) else (b, a)
    for i, p in enumerate(large):
        if i < len(small):
            if small[i] != p:
                return False
        elif not p.is_replicate():
            return False
    return True


@reshard_function(priority=130, name="sub_to_global_mesh", paddle=True)
class SubToGlobalMesh(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        d = sub_mesh_dim(dst.mesh, src.mesh)
        if d == -1:
            return False
        local = list(dst.derived_placements())
        if d < len(local):
            from ...ir.dist import REPLICATE

            local[d] = REPLICATE
        return _placements_equal(list(src.derived_placements()), local)

    def reshard(self, ctx, src, dst, value, dst_type):
        d = sub_mesh_dim(dst.mesh, src.mesh)
        others_meshes = [m for m in split_mesh(dst.mesh, d) if not mesh_equal_ignore_one(m, src.mesh, d)]
        groups = []
        roots = []
        for i, p in enumerate(src.mesh.process_ids):
            groups.append([p] + [m.process_ids[i] for m in others_meshes])
            roots.append(p)
        other_ranks = _buggy_remove(list(dst.mesh.process_ids), set(src.mesh.process_ids))
        me = ctx.rank
        if me in src.mesh.process_ids:
            tmp = ctx.api.share_data_(value)
            ctx.api.set_dist(tmp, ctx.api.op_attr(src.mesh, [src], [src], ctx.api.chunk_id(value)))
        elif me in other_ranks:
            tmp = ctx.api.full(dst_type.shape, 0, dst_type.dtype)
            zmesh = mesh_1d(other_ranks)
            za = ctx.api.tattr(zmesh, dst.dims_mapping, dst.printed_partial)
            ctx.api.retype(tmp, ctx.api.cvt(dst_type, za))
            ctx.api.set_dist(tmp, ctx.api.op_attr(zmesh, [], [za]))
        else:
            return ctx.api.reshard(value, dst)
        gid = None
        for i, g in enumerate(groups):
            groups[i] = sorted(g)
            roots[i] = groups[i].index(roots[i])
        for i, g in enumerate(groups):
            ctx.ring(g)
            if me in g:
                gid = i
        out = ctx.api.broadcast(tmp, groups[gid], roots[gid])
        ctx.api.retype(out, dst_type)
        ctx.api.set_dist(out, ctx.api.op_attr(dst.mesh, [src], [dst]))
        return out


def _buggy_remove(items: list, drop: set) -> list:
    """``for r in items: if r in drop: items.remove(r)`` -- as Python runs it."""
    i = 0
    while i < len(items):
        if items[i] in drop:
            del items[i]
            i += 1  # the element that moved into position i is skipped
            continue
        i += 1
    return items
