"""Paddle's ``*ReshardFunctionCrossMesh`` base: copy to the other mesh, then lower there."""

from __future__ import annotations

from ...ir.dist import TensorDistAttr
from .registry import ReshardFunction
from .same_status import SAME_STATUS


class CrossMesh(ReshardFunction):
    """Paddle's ``*ReshardFunctionCrossMesh``: between two different 1-D meshes of one shape, the
    value is copied to the destination mesh as it is (``same_status``: send/recv), then the
    same-mesh function :meth:`base` lowers it there.  Subclasses say which layouts (``matches``)."""

    def base(self) -> ReshardFunction:  # pragma: no cover
        raise NotImplementedError

    def matches(self, src: TensorDistAttr, dst: TensorDistAttr) -> bool:  # pragma: no cover
        raise NotImplementedError

    def is_suitable(self, src, dst, shape):
        return (self.matches(src, dst) and src.mesh.ndim == 1 and dst.mesh.ndim == 1
                and src.mesh.shape == dst.mesh.shape and src.mesh != dst.mesh)

    def refuses(self, src, dst, shape):
        return SAME_STATUS.refuses(src, dst, shape) or self.base().refuses(src, dst, shape)

    def reshard(self, ctx, src, dst, value, dst_type):
        tmp, out = SAME_STATUS.copy_to(ctx, src, dst.mesh, value)
        return self.on_destination(ctx, tmp, dst, out, dst_type)

    def on_destination(self, ctx, src, dst, value, dst_type):
        return self.base().reshard(ctx, src, dst, value, dst_type)
