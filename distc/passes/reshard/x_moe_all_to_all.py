"""``moe_all_to_all`` (opt-in: ``reshard{moe_all_to_all=true}``, ``distc shard --moe-all-to-all``):
Paddle 3.3.1's lowering under ``FLAGS_enable_moe_utils=true`` (``moe_utils._specific_alltoall_dim``
and ``_pir_nd_mesh_all2all``), tried before every other function.

On an n-d mesh, a reshard whose layouts differ on one mesh dim ``k`` only, from ``Shard(a)`` to
``Shard(b)`` with ``|a - b| = 1`` (no partial anywhere), is lowered on the 1-D sub-mesh along ``k``
that holds the rank: ``share_data`` retypes the rank's piece as a value on that sub-mesh (its
shape: the local shape, times the sub-mesh size on axis ``a``), Paddle's 1-D ``s_to_s`` (one
all-to-all) reshards it there, and its result is retyped to the target type.  Without the flag
Paddle (and distc) lower it one mesh dim at a time (all-gather, split, concat, slice).

Paddle also takes this path when another mesh dim changes too (it then reshards dim ``k`` only and
retypes the result as if every dim had changed: a wrong program); distc takes it only when ``k``
is the one change.  Where Paddle's 1-D ``s_to_s`` is wrong (``S(a) -> S(b)`` with ``0 < a < b``: it
mixes up the pieces, e.g. ``[S0,S1] -> [S0,S2]``, the way back of an MoE dispatch; proven by the
simulator) distc lowers the reshard as it would without the flag and says so (``--paddle``: Paddle's
program, bug included).
"""

from __future__ import annotations

from .registry import ReshardFunction, reshard_function
from .s_to_s import SToS
from .util import sub_mesh_1d


def alltoall_dim(src, dst) -> int | None:
    """Paddle's ``_specific_alltoall_dim`` (restricted to reshards that change one mesh dim)."""
    if src.mesh != dst.mesh or src.mesh.ndim == 1:
        return None
    ps, pd = src.placements, dst.placements
    if any(p.is_partial() for p in ps + pd):
        return None
    dim = None
    for i, (a, b) in enumerate(zip(ps, pd)):
        if a == b:
            continue
        if not (a.is_shard() and b.is_shard()) or abs(a.dim - b.dim) != 1 or dim is not None:
            return None
        dim = i
    return dim


@reshard_function(priority=1, name="moe_all_to_all", paddle=True, optin=True)
class MoeAllToAll(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return alltoall_dim(src, dst) is not None

    def refuses(self, src, dst, shape):
        k = alltoall_dim(src, dst)
        sub = self._sub(src, dst, k, 0)
        return SToS().refuses(sub[0], sub[1], self._sub_shape(src, shape, k))

    @staticmethod
    def _sub(src, dst, k, rank):
        from ...ir.dist import TensorDistAttr

        mesh = sub_mesh_1d(src.mesh, k, rank)
        a, b = src.placements[k], dst.placements[k]
        n = len(src.dims_mapping)
        one = lambda p: TensorDistAttr(mesh, tuple(0 if d == p.dim else -1 for d in range(n)))  # noqa: E731
        return one(a), one(b)

    @staticmethod
    def _sub_shape(src, shape, k):
        """``_cal_global_shape(local shape, sub-mesh, [src placement on k])``."""
        local = list(src.local_shape(tuple(shape)))
        a = src.placements[k]
        local[a.dim] *= src.mesh.shape[k]
        return tuple(local)

    def reshard(self, ctx, src, dst, value, dst_type):
        k = alltoall_dim(src, dst)
        a, b = src.placements[k], dst.placements[k]
        if not ctx.paddle_only and 0 < a.dim < b.dim:
            from . import registry

            other = registry.choose(src, dst, tuple(value.type.shape), disable=("moe_all_to_all",))
            if other is not None:
                ctx.fix(f"moe_all_to_all: Paddle's all-to-all path for {a} -> {b} on mesh dim {k} mixes up the "
                        f"pieces (its 1-D s_to_s: source axis before the target, neither 0): lowered by '{other.name}' instead "
                        f"(--paddle: Paddle's program)")
                return other.reshard(ctx, src, dst, value, dst_type)
        s_attr, d_attr = self._sub(src, dst, k, ctx.rank)
        s_attr, d_attr = ctx.api.tattr(s_attr.mesh, s_attr.dims_mapping), ctx.api.tattr(d_attr.mesh, d_attr.dims_mapping)
        shape = self._sub_shape(src, value.type.shape, k)
        sub = ctx.api.share_data(value)
        ctx.api.retype(sub, ctx.api.cvt(value, s_attr, shape))
        out = SToS().reshard(ctx, s_attr, d_attr, sub, ctx.api.cvt(value, d_attr, shape))
        ctx.api.retype(out, dst_type)
        ctx.note(f"moe_all_to_all: {src.placements[k]} -> {dst.placements[k]} on mesh dim {k} through one "
                 f"all-to-all on the 1-D sub-mesh {list(s_attr.mesh.process_ids)} (FLAGS_enable_moe_utils)")
        return out
