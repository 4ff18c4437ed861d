"""Same layout, another mesh of the same shape: point-to-point copies (Paddle's
``SameStatusReshardFunction``).

Process ``i`` of the source mesh sends to process ``i`` of the destination mesh over the p2p group
``[src, dst]``.  Each rank handles only the first pair it appears in: as a sender it emits
``send_v2`` and leaves a ``dist_op.reshard`` (a placeholder value of the destination layout that
Paddle's later ``remove_other_rank_op_pass`` deletes); as a receiver it emits ``recv_v2``.  A rank
in neither mesh also gets the placeholder.
"""

from __future__ import annotations

from ...dialects import ops
from ..sharding_util import chunk_id_of

from .extra_plan import piece_shape
from .registry import ReshardFunction, reshard_function


@reshard_function(priority=70, name="same_status", paddle=True)
class SameStatus(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (tuple(src.dims_mapping) == tuple(dst.dims_mapping)
                and sorted(d for d, _ in src.partial) == sorted(d for d, _ in dst.partial)
                and src.mesh != dst.mesh and src.mesh.shape == dst.mesh.shape)

    def refuses(self, src, dst, shape):
        # (Paddle raises on the receiving ranks only; distc refuses the case on every rank)
        if any(d < 0 for d in shape):
            return "dynamic shape is not supported by pir-auto parallel yet."
        return None

    def reshard(self, ctx, src, dst, value, dst_type):
        pairs = list(zip(src.mesh.process_ids, dst.mesh.process_ids))
        for s, d in pairs:
            if s != d:
                ctx.ring([s, d])
                ctx.ring([d, s])
        me = ctx.rank
        if not ctx.paddle_only and me in src.mesh.process_ids and me in dst.mesh.process_ids:
            return self._overlapping(ctx, src, dst, value, dst_type, pairs)
        for s, d in pairs:
            if s == me:
                op = ctx.api.send_v2(value, [s, d], [s, d].index(d))
                ctx.api.set_dist(op, ctx.api.op_attr(src.mesh, [src], [], send_chunk(value)))
                break
            if d == me:
                out = ctx.api.recv_v2(_recv_shape(ctx, dst, dst_type), dst_type.dtype, [s, d], [s, d].index(s), dst_type)
                ctx.api.set_dist(out, ctx.api.op_attr(dst.mesh, [], [dst], recv_chunk(value, dst.mesh)))
                return out
        return ctx.api.reshard(value, dst, dst_type)


    def copy_to(self, ctx, src, mesh, value):
        """The first step of Paddle's cross-mesh functions: the value, same placements, copied to
        ``mesh``.  Returns (its layout there, the copy)."""
        tmp = ctx.api.tattr(mesh, src.dims_mapping, src.printed_partial)
        return tmp, self.reshard(ctx, src, tmp, value, ctx.api.cvt(value, tmp))

    @staticmethod
    def _overlapping(ctx, src, dst, value, dst_type, pairs):
        """A rank in both meshes.  Paddle's loop stops at its first role, so a rank that must both
        receive and send (meshes [0,1] -> [1,2]) never sends and the chain deadlocks.  distc does
        every role of the rank, in pair order (the same order on every rank, so sends and receives
        meet), and keeps the value where a rank is its own peer."""
        me = ctx.rank
        out = None
        for s, d in pairs:
            if s == d == me:
                out = value
            elif s == me:
                op = ctx.api.send_v2(value, [s, d], [s, d].index(d))
                ctx.api.set_dist(op, ctx.api.op_attr(src.mesh, [src], [], send_chunk(value)))
            elif d == me:
                out = ctx.api.recv_v2(_recv_shape(ctx, dst, dst_type), dst_type.dtype, [s, d], [s, d].index(s), dst_type)
                ctx.api.set_dist(out, ctx.api.op_attr(dst.mesh, [], [dst], recv_chunk(value, dst.mesh)))
        ctx.fix(f"same_status: rank {me} is in both meshes {list(src.mesh.process_ids)} and "
                f"{list(dst.mesh.process_ids)}: it sends and receives in pair order (Paddle 3.3.1 stops "
                "after its first role, which deadlocks)")
        if out is value:
            return ctx.api.reshard(value, dst, dst_type)
        return out


def send_chunk(value) -> int:
    """Paddle's chunk id for the send: its producer's; for ``add_n(combine(...))`` (a backward sum)
    the chunk of the combined values' producers, which the add_n is given too (VPP)."""
    p = value.owner
    if p is None:
        return -1
    c = p.operand(0) if p.name == "pd_op.add_n" and p.num_operands else None
    comb = c.owner if c is not None else None
    if comb is not None and comb.name == ops.COMBINE:
        ids = [chunk_id_of(v.owner) if v is not None and v.owner is not None else -1 for v in comb.operands]
        if ids and all(i == ids[0] for i in ids) and p.dist_attr is not None:
            if p.dist_attr.chunk_id is not None and p.dist_attr.chunk_id != ids[0]:
                p.dist_attr = p.dist_attr.with_(chunk_id=ids[0])
            return ids[0]
    return chunk_id_of(p)


def recv_chunk(value, mesh) -> int:
    """Paddle's chunk id for the receive: from the users of the reshard on ``mesh`` onwards, the
    first op with a chunk id (``find_var_used_op_chunk_id``)."""
    chunk = -1
    for u in value.users:
        r = u.results[0] if u.results else None
        d = r.dist_attr if r is not None else None
        if d is not None and d.mesh == mesh:
            chunk = _used_chunk(r)
    return chunk


def _used_chunk(v) -> int:
    seen: set[int] = set()

    def dfs(x) -> int:
        for op in x.users:
            if id(op) in seen:
                return -1
            seen.add(id(op))
            c = chunk_id_of(op)
            if op.dist_attr is not None and c != -1:
                return c
            for r in op.results:
                c = dfs(r)
                if c != -1:
                    return c
        return -1

    return dfs(v)


def _recv_shape(ctx, dst, dst_type) -> tuple[int, ...]:
    """The piece this rank receives: Paddle writes ``ceil(n/p)`` for every rank (wrong for the last
    pieces of an uneven split, and for co-sharded axes); distc the rank's own piece."""
    paddles = tuple(dst_type.local_shape())
    if ctx.paddle_only:
        return paddles
    mine = piece_shape(dst, tuple(dst_type.shape), ctx.rank)
    if mine != paddles:
        ctx.fix(f"same_status: rank {ctx.rank} receives its piece {list(mine)} (Paddle 3.3.1's recv_v2 "
                f"expects {list(paddles)})")
    return mine


SAME_STATUS = SameStatus()
