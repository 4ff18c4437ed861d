"""The state and op helpers of :class:`~.extra_lower.Lowerer`: the layout of every intermediate
value (co-sharded axes split over their mesh dims in turn, the lowest mesh dim outermost),
this rank's piece of it, and Paddle's ops (``full``, ``scale``, ``divide``, ``concat``, ``slice``,
``transpose``) typed and placed as Paddle types them.
"""

from __future__ import annotations

from ...ir.dist import ProcessMesh, TensorDistAttr, VecDistAttr
from .extra_plan import nested_bounds
from ...dialects import ops


class PieceOps:
    """One reshard's lowering state on one rank; the rounds are in :class:`~.extra_lower.Lowerer`."""

    def __init__(self, ctx, src: TensorDistAttr, dst: TensorDistAttr, value, dst_type) -> None:
        self.ctx = ctx
        self.src, self.dst = src, dst
        self.mesh = src.mesh
        self.shape = tuple(value.type.shape)
        self.dtype = value.type.dtype
        self.rank = ctx.rank
        self.coord = self.mesh.coord(self.rank)
        self.cur = list(src.placements)
        self.value = value
        self.local = self.local_of(self.cur)
        self.dst_type = dst_type
        self.chunk = ctx.api.chunk_id(value)
        self.did: list[str] = []
        self.src_value = value

    # -- attrs and types ---------------------------------------------------------------------
    def attr(self, placements) -> TensorDistAttr:
        """The layout of ``placements`` (co-sharding kept as given placements; its dims mapping
        names the last mesh dim, as Paddle's does)."""
        return self.ctx.api.maker.from_placements(self.mesh, list(placements), len(self.shape))

    def type_for(self, local, attr: TensorDistAttr):
        """A dist type whose local shape on this rank is ``local`` (intermediate values)."""
        g = list(local)
        for k, pl in enumerate(attr.placements):
            if pl.is_shard():
                g[pl.dim] *= self.mesh.shape[k]
        return self.ctx.api.dist_type(g, self.dtype, attr)

    def dims_of(self, placements, axis: int) -> list[int]:
        """The mesh dims sharding ``axis``, outermost (lowest) first."""
        return [k for k, pl in enumerate(placements) if pl.is_shard() and pl.dim == axis]

    def bounds(self, dims, axis: int) -> tuple[int, int]:
        """This rank's range of ``axis`` split over mesh ``dims`` in turn (nested, Paddle's
        ``ceil(n/p)`` pieces at every level)."""
        return nested_bounds(self.shape[axis], self.mesh, self.coord, dims)

    def local_of(self, placements) -> list[int]:
        out = []
        for axis in range(len(self.shape)):
            lo, hi = self.bounds(self.dims_of(placements, axis), axis)
            out.append(hi - lo)
        return out

    def put(self, v, local, attr: TensorDistAttr):
        self.ctx.api.retype(v, self.type_for(local, attr))
        return v

    def sub(self, k: int):
        m = self.mesh.sub_mesh(k, self.rank)
        group = sorted(m.process_ids)
        return m, group

    def sub_attr(self, sub: ProcessMesh, axis: int | None = None, reduce: str | None = None) -> TensorDistAttr:
        dm = [-1] * len(self.shape)
        if axis is not None:
            dm[axis] = 0
        return self.ctx.api.tattr(sub, dm, {0: reduce} if reduce else {})

    def dist_of(self, op_or_value, mesh, operands, results) -> None:
        self.ctx.api.set_dist(op_or_value, self.ctx.api.op_attr(mesh, operands, results, self.chunk))

    # -- small op helpers ----------------------------------------------------------------------
    def full(self, local, value: float, attr: TensorDistAttr):
        v = self.ctx.api.full(list(local), value, self.dtype)
        self.put(v, local, attr)
        self.dist_of(v, self.mesh, [], [attr])
        return v

    def _by_scalar(self, name: str, x, value: float, attrs: dict, attr: TensorDistAttr):
        """``name(x, full([1], value))``: the scalar as a replicated 1-element tensor."""
        ctx = self.ctx
        s = ctx.api.full([1], value, self.dtype, place="Place(cpu)")
        rep = ctx.api.tattr(self.mesh, [-1])
        ctx.api.retype(s, ctx.api.dist_type([1], self.dtype, rep))
        ctx.api.set_dist(s, ctx.api.op_attr(self.mesh, [], [rep]))
        op = ctx.api.insert(name, [x, s], [self.type_for(self.local, attr)], attrs,
                        ctx.api.op_attr(self.mesh, [ctx.api.dist(x), rep], [attr], self.chunk))
        return op.result

    def scale(self, x, factor: float, attr: TensorDistAttr):
        m = self.ctx.api.maker
        return self._by_scalar(ops.SCALE, x, factor, {"bias": m.f32(0.0), "bias_after_scale": m.bool(True)}, attr)

    def divide(self, x, divisor: int, attr: TensorDistAttr):
        """``x / divisor`` (``divide`` by a ``full``: 1/p would lose digits as a printed float)."""
        return self._by_scalar(ops.DIVIDE, x, float(divisor), {}, attr)

    def concat(self, parts, axis: int, local, attr: TensorDistAttr):
        """``concat`` of a list of values or of a vector value."""
        if isinstance(parts, list) and len(parts) == 1:
            return parts[0]
        out = self.ctx.api.concat(parts, axis)
        self.put(out, local, attr)
        if isinstance(parts, list):
            in_attrs = tuple(self.ctx.api.dist(v) for v in parts)
        else:
            in_attrs = tuple(e.dist for e in parts.type.elements)
        self.dist_of(out, self.mesh, [VecDistAttr(in_attrs), self.ctx.api.tattr(self.mesh, [-1])], [attr])
        return out

    def slice(self, x, axes, starts, ends, local, attr: TensorDistAttr):
        out = self.ctx.api.slice(x, list(axes), list(starts), list(ends))
        self.put(out, local, attr)
        self.dist_of(out, self.mesh, [self.ctx.api.dist(x)], [attr])
        return out

    def unpack(self, vec):
        types = list(vec.type.elements)
        op = self.ctx.api.insert(ops.BUILTIN_SPLIT, [vec], types)
        return list(op.results)

    def transpose(self, x, perm, local, attr: TensorDistAttr):
        out = self.ctx.api.transpose(x, perm)
        self.put(out, local, attr)
        return out

    def attr_perm(self, attr: TensorDistAttr, perm) -> TensorDistAttr:
        if perm is None:
            return attr
        return self.ctx.api.tattr(attr.mesh, [attr.dims_mapping[i] for i in perm], attr.printed_partial)

