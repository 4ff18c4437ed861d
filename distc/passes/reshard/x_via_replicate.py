"""Reshards between meshes of different shapes that Paddle 3.3.1 has no function for (distc extra
function): e.g. ``[0,1]`` S0 -> ``[0,1,2,3]`` S0, ``[[0,1],[2,3]]`` [S0,R] -> ``[0,1]`` S0,
``[0,1,2,3]`` S0 -> ``[0,1]`` R (oracle ``m2_to_g4_*``, ``g22_to_m2_*``, ``g4_to_m2_*``).

distc goes through a replicated copy: (1) on the source mesh, the value becomes replicated (the
same-mesh lowering of the other extra functions); (2) every destination rank that does not hold it
already receives the whole tensor from a source rank (``send_v2``/``recv_v2``, destination ranks
taken in order and source ranks assigned round-robin, so every rank meets its sends and receives
in one global order); (3) on the destination mesh the replicated value is cut (or made partial)
into the destination placements.  It moves more bytes than a direct plan would, and is correct
on every rank (proven by the simulator in tests/test_beyond_paddle.py).
"""

from __future__ import annotations

from ...ir.dist import ProcessMesh
from .extra_plan import describe_short, static
from .registry import ReshardFunction, after, before, reshard_function
from .util import sub_mesh_dim


@reshard_function(priority=after("s_to_s", 10), name="x_via_replicate")
class ViaReplicate(ReshardFunction):
    def is_suitable(self, src, dst, shape):
        return (static(shape) and src.mesh != dst.mesh and src.mesh.shape != dst.mesh.shape and bool(src.mesh.shape)
                and bool(dst.mesh.shape))

    def reshard(self, ctx, src, dst, value, dst_type):
        from .extra_lower import lower  # (loaded by the first reshard lowered so: most programs have none)

        nd = len(value.type.shape)
        me = ctx.rank
        s_ids, d_ids = list(src.mesh.process_ids), list(dst.mesh.process_ids)
        pairs = []  # (sender, receiver) of the whole-tensor copies
        for d in d_ids:
            if d not in s_ids:
                pairs.append((s_ids[len(pairs) % len(s_ids)], d))
        for s, d in pairs:  # every rank creates every pair's group first (as Paddle's same_status
            ctx.ring([s, d])  # does), so ring ids agree across ranks
        # (1) replicated on the source mesh
        rep_src = ctx.api.tattr(src.mesh, [-1] * nd)
        if me in s_ids and (src.dims_mapping != rep_src.dims_mapping or src.partial):
            value = lower(ctx, src, rep_src, value, ctx.api.cvt(value, rep_src), function=self.name)
        # (2) whole copies to the destination ranks that lack one
        rep_dst = ctx.api.tattr(dst.mesh, [-1] * nd)
        rep_dst_type = ctx.api.cvt(value, rep_dst)
        got = None
        for s, d in pairs:
            # each p2p op's mesh is the one rank that runs it (a later remove-other-rank keeps it
            # exactly there; the pair's ring id, the same on every rank, joins the two sides)
            if me == s:
                op = ctx.api.send_v2(value, [s, d], 1)
                ctx.api.set_dist(op, ctx.api.op_attr(ProcessMesh((1,), (s,)), [rep_src], [], ctx.api.chunk_id(value)))
            if me == d:
                got = ctx.api.recv_v2(rep_dst_type.local_shape(), rep_dst_type.dtype, [s, d], 0, rep_dst_type)
                ctx.api.set_dist(got, ctx.api.op_attr(ProcessMesh((1,), (d,)), [], [rep_dst], -1))
        if me not in d_ids:
            return ctx.api.reshard(value, dst, dst_type)
        if got is None:  # this rank holds the whole tensor already: the same data, on the new mesh
            got = ctx.api.assign(value)
            ctx.api.retype(got, rep_dst_type)
            ctx.api.set_dist(got, ctx.api.op_attr(dst.mesh, [rep_dst], [rep_dst], ctx.api.chunk_id(value)))
        ctx.note(f"{self.name}: {describe_short(src)} on {s_ids} -> {describe_short(dst)} on {d_ids}: "
                 "no Paddle function for meshes of different shapes; through a replicated copy")
        # (3) the destination placements
        if dst.dims_mapping == rep_dst.dims_mapping and not dst.partial:
            ctx.api.retype(got, dst_type)
            return got
        return lower(ctx, rep_dst, dst, got, dst_type, function=self.name)


@reshard_function(priority=before("sub_to_global_mesh", 5), name="x_sub_to_global")
class SubToGlobalViaReplicate(ViaReplicate):
    """Sub-mesh -> global mesh where the destination is not replicated along the sub-mesh's dim
    (``[0,1]`` R -> ``[[0,1],[2,3]]`` [S0, R] or [P, R]): Paddle's sub_to_global_mesh is suitable
    but only broadcasts, so the result is the replicated value typed as sharded or partial (found
    by tests/test_reshard_sweep.py); distc goes through the replicated copy above."""

    def is_suitable(self, src, dst, shape):
        from .sub_to_global import SubToGlobalMesh

        d = sub_mesh_dim(dst.mesh, src.mesh)
        return (static(shape) and d != -1 and SubToGlobalMesh.is_suitable(self, src, dst, shape)
                and not dst.placements[d].is_replicate())
