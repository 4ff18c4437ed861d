"""Replicate -> Partial on a 1-D mesh (Paddle's ``RToPReshardFunction``).

For SUM, global rank 0 keeps the value (``pd_op.assign``) and every other rank holds zeros
(``pd_op.full``); AVG and MAX keep the value everywhere.  Paddle tests the *global* rank against
0, not the mesh's first process, so on a mesh without rank 0 (or a 2-D mesh's sub-mesh group
without it) every rank holds zeros, and its zeros take the value's global shape even where the
value is sharded over another mesh dim.  With ``paddle=true`` distc reproduces that.  By default
the group's root is rank 0 if the group holds it, else (N-d mesh) the process at rank 0's
coordinate along the group's mesh dim, or the group's first process, and the zeros take the local
shape of the layout the step makes: the text is Paddle's wherever Paddle's program is right, and the fix shows
only on the ranks Paddle gets wrong (with a note for ``--explain``).
"""

from __future__ import annotations

from .registry import ReshardFunction, reshard_function
from .util import is_partial, is_replicated, is_shard


@reshard_function(priority=60, name="r_to_p", paddle=True)
class RToP(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (is_replicated(src) and is_partial(dst) and not is_shard(dst) and src.mesh.ndim == 1
                and dst.mesh.ndim == 1 and src.mesh == dst.mesh)

    def refuses(self, src, dst, shape):
        return refusal(dict(dst.partial)[0])

    def reshard(self, ctx, src, dst, value, dst_type):
        reduce = dict(dst.partial)[0]
        ids = dst.mesh.process_ids
        # a rank outside the group runs none of this: keep Paddle's text for it
        root = 0 if (ctx.paddle_only or ctx.rank not in ids) else _root(ctx, ids)
        if root != 0:
            ctx.fix(f"r_to_p: no process of group {list(ids)} is global rank 0, where Paddle 3.3.1 "
                     f"leaves zeros on every rank (the sum is then 0); distc keeps the value on rank {root}")
        if reduce == "SUM" and ctx.rank != root:
            shape = tuple(value.type.shape)
            if not ctx.paddle_only:
                local = tuple(dst_type.local_shape(ctx.rank))  # the layout the step makes
                if local != shape:
                    ctx.fix(f"r_to_p: zeros of the local shape {list(local)} (Paddle 3.3.1 writes the "
                             f"global shape {list(shape)} of a value sharded over another mesh dim)")
                    shape = local
            out = ctx.api.full(shape, 0, value.type.dtype)
        else:
            out = ctx.api.assign(value)
        ctx.api.retype(out, dst_type)
        ctx.api.set_dist(out, ctx.api.op_attr(dst.mesh, [src], [dst], ctx.api.chunk_id(value)))
        return out


def _root(ctx, ids) -> int:
    """The process of group ``ids`` that keeps the value: rank 0 where the group holds it (Paddle's
    choice); on an N-d mesh, in every group along the same mesh dim, the process at rank 0's
    coordinate (else two ranks of a [P, P] value would both keep it, or none); else the first.
    A non-partial value made Partial(sum) over every mesh dim is right in Paddle (rank 0 alone
    keeps it): kept."""
    layouts = getattr(ctx, "layouts", None)
    mesh = layouts[1].mesh if layouts else None
    if mesh is not None and mesh.ndim > 1 and 0 in mesh.process_ids and set(ids) <= set(mesh.process_ids):
        src, dst = layouts
        if not src.partial and sorted(dst.partial) == [(k, "SUM") for k in range(mesh.ndim)]:
            return 0  # (gathered, then) sum over the whole mesh: rank 0 alone keeps it, as in Paddle
        c0 = mesh.coord(0)
        for k in range(mesh.ndim):
            if tuple(mesh.sub_mesh(k, ctx.rank).process_ids) == tuple(ids):
                return ids[c0[k]]
    return 0 if 0 in ids else ids[0]


def refusal(reduce: str) -> str | None:
    """Paddle's r_to_p supports sum, avg and max only."""
    return None if reduce in ("SUM", "AVG", "MAX") else f"Unsupported reduce type {reduce}"
