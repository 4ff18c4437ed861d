"""The lowering shared by distc's extra reshard functions (:mod:`.x_table`, :mod:`.x_via_replicate`),
used where :func:`~.extra_plan.paddle_problem` finds Paddle 3.3.1's own lowering wrong or refused.

:func:`lower` works one mesh dim at a time on the 1-D sub-mesh holding the rank, in four rounds
(like Paddle's ``NdMeshReshardFunction``), every step correct for uneven pieces (``ceil(n/p)``
each, the last ones shorter or empty) and for any order of process ids:

1. mesh dims that stop sharding a tensor axis: S->P(sum|avg|prod) pads the local piece with
   zeros (ones) to the full extent, no communication (avg also multiplies by p); anything else
   un-shards first: all_gather of pieces padded to ``ceil(n/p)``, then slices put back together
   in mesh order (``split_with_num`` + ``concat`` when even);
2. partial mesh dims: P->R all_reduce; P->S(sum|avg) reduce_scatter of the value padded to
   ``p*ceil(n/p)`` (transposed so the axis is first; avg then divides by p) and the short
   pieces sliced; P(max|min|prod)->S all_reduce + slice; P(sum)<->P(avg) a local multiply or
   divide by p; other P->P' all_reduce then R->P';
3. new partial mesh dims R->P: the first process of each group along the dim keeps the value,
   the others hold the reduce type's identity (zeros for sum, ones for prod, the value itself
   for avg/max/min), built with the *local* shape;
4. new shards R->S: a slice of the rank's piece.

A tensor axis co-sharded over several mesh dims (placements ``[Shard(0), Shard(0)]``) is split over
them in turn, the lowest mesh dim outermost (as :mod:`distc.analysis.simulate` reads it); when its
sharding changes it is gathered whole (innermost mesh dim first) and cut again with one slice.

The ops are Paddle's own (``all_gather``, ``all_reduce``, ``reduce_scatter``, ``slice``,
``concat``, ``split_with_num``, ``transpose``, ``full``, ``assign``, ``scale``, ``divide``), so the output
still runs on Paddle.
"""

from __future__ import annotations

from ...ir.dist import Placement, TensorDistAttr, split_bounds
from ...ir.types import VectorType
from ...syntax.diagnostics import DiagnosticError
from .extra_ops import PieceOps
from .extra_plan import FLOAT_DTYPES, REDUCE_OK, describe_short, paddle_problem, same_mesh
from .util import describe


class Lowerer(PieceOps):
    # -- the steps -----------------------------------------------------------------------------
    def s_to_r(self, k: int, axis: int) -> None:
        """Gather the pieces of ``axis`` along mesh dim ``k`` (uneven and any id order)."""
        ctx = self.ctx
        p = self.mesh.shape[k]
        outer = [j for j in self.dims_of(self.cur, axis) if j != k]
        assert all(j < k for j in outer), "co-sharded axes are gathered innermost first"
        lo, hi = self.bounds(outer, axis)
        n = hi - lo  # the piece the mesh dims outside k leave this rank (the whole axis if none)
        sub, group = self.sub(k)
        before = self.attr(self.cur)
        self.cur[k] = Placement("R")
        after = self.attr(self.cur)
        if p == 1:
            out = ctx.api.share_data_(self.value)
            self.value = self.put(out, self.local, after)
            return
        c = (n + p - 1) // p
        sizes = [split_bounds(n, p, i)[1] - split_bounds(n, p, i)[0] for i in range(p)]
        order = [group.index(r) for r in sub.process_ids]  # coordinate -> position in the group
        x = self.value
        loc = list(self.local)
        if loc[axis] < c:  # pad this rank's piece to ceil(n/p)
            pad = list(loc)
            pad[axis] = c - loc[axis]
            z = self.full(pad, 0.0, before)
            loc[axis] = c
            x = self.concat([x, z], axis, loc, before)
        gathered = ctx.api.all_gather(x, group, p)
        gl = list(loc)
        gl[0] *= p
        gattr = self.sub_attr(sub)
        self.put(gathered, gl, after)
        self.dist_of(gathered, sub, [self.sub_attr(sub, axis)], [gattr])
        out_local = list(self.local)
        out_local[axis] = n
        even = all(s == c for s in sizes)
        if even and axis == 0 and order == list(range(p)):
            self.value = gathered
        elif even:
            vec = ctx.api.split_with_num(gathered, p, 0)
            pl = list(loc)
            vec.type = VectorType(tuple(self.type_for(pl, after) for _ in range(p)))
            if order == list(range(p)):
                self.value = self.concat(vec, axis, out_local, after)
            else:
                pieces = self.unpack(vec)
                self.value = self.concat([pieces[order[i]] for i in range(p)], axis, out_local, after)
        else:
            parts = []
            for i in range(p):
                if sizes[i] == 0:
                    continue
                j = order[i]
                pl = list(loc)
                pl[axis] = sizes[i]
                axes, starts, ends = [0], [j * loc[0]], [(j + 1) * loc[0]]
                if axis != 0:
                    axes, starts, ends = [0, axis], [j * loc[0], 0], [(j + 1) * loc[0], sizes[i]]
                else:
                    ends = [j * loc[0] + sizes[i]]
                parts.append(self.slice(gathered, axes, starts, ends, pl, after))
            self.value = self.concat(parts, axis, out_local, after)
        self.local = out_local

    def s_to_p(self, k: int, axis: int, reduce: str) -> None:
        """Shard -> Partial along mesh dim ``k``."""
        p = self.mesh.shape[k]
        n = self.shape[axis]
        if reduce in ("MAX", "MIN") or (reduce in ("AVG",) and self.dtype not in FLOAT_DTYPES):
            self.s_to_r(k, axis)
            self.r_to_p(k, reduce)
            return
        before = self.attr(self.cur)
        self.cur[k] = Placement("P", -1, reduce)
        after = self.attr(self.cur)
        lo, hi = split_bounds(n, p, self.coord[k])
        fill = 1.0 if reduce == "PRODUCT" else 0.0
        parts = []
        if lo > 0:
            s = list(self.local)
            s[axis] = lo
            parts.append(self.full(s, fill, after))
        if hi > lo:
            parts.append(self.value)
        if n > hi:
            s = list(self.local)
            s[axis] = n - hi
            parts.append(self.full(s, fill, after))
        out_local = list(self.local)
        out_local[axis] = n
        x = self.concat(parts, axis, out_local, after) if len(parts) > 1 else None
        if x is None:
            x = self.ctx.api.assign(parts[0])
            self.put(x, out_local, after)
            self.dist_of(x, self.mesh, [before], [after])
        self.local = out_local
        if reduce == "AVG":
            x = self.scale(x, float(p), after)
        self.value = x

    def p_to_r(self, k: int, reduce: str) -> None:
        sub, group = self.sub(k)
        self.cur[k] = Placement("R")
        after = self.attr(self.cur)
        out = self.ctx.api.all_reduce(self.value, group, reduce)
        self.put(out, self.local, after)
        self.dist_of(out, sub, [self.sub_attr(sub, reduce=reduce)], [self.sub_attr(sub)])
        self.value = out

    def p_to_s(self, k: int, reduce: str, axis: int) -> None:
        ctx = self.ctx
        p = self.mesh.shape[k]
        n = self.shape[axis]
        if reduce not in ("SUM", "AVG") or (reduce == "AVG" and self.dtype not in FLOAT_DTYPES):
            self.p_to_r(k, reduce)
            self.r_to_s([k], axis)
            return
        sub, group = self.sub(k)
        before = self.attr(self.cur)
        c = (n + p - 1) // p
        x = self.value
        loc = list(self.local)  # loc[axis] == n: the axis is not sharded by another dim
        perm = None
        if axis != 0:
            perm = list(range(len(loc)))
            perm[0], perm[axis] = axis, 0
            loc = [loc[i] for i in perm]
            x = self.transpose(x, perm, loc, self.attr_perm(before, perm))
        tattr = self.attr_perm(before, perm)
        if loc[0] < c * p:
            pad = list(loc)
            pad[0] = c * p - loc[0]
            z = self.full(pad, 0.0, tattr)
            loc[0] = c * p
            x = self.concat([x, z], 0, loc, tattr)
        order = [group.index(r) for r in sub.process_ids]
        if order != list(range(p)):  # chunk j of the input goes to group position j
            vec = ctx.api.split_with_num(x, p, 0)
            cl = list(loc)
            cl[0] = c
            vec.type = VectorType(tuple(self.type_for(cl, tattr) for _ in range(p)))
            chunks = self.unpack(vec)
            inv = {j: i for i, j in enumerate(order)}
            x = self.concat([chunks[inv[j]] for j in range(p)], 0, loc, tattr)
        out = ctx.api.reduce_scatter(x, group, p)
        self.cur[k] = Placement("S", axis)
        after = self.attr(self.cur)
        rl = list(loc)
        rl[0] = c
        rattr = self.attr_perm(after, perm)
        self.put(out, rl, rattr)
        self.dist_of(out, sub, [self.sub_attr(sub, reduce="SUM")], [self.sub_attr(sub, 0)])
        lo, hi = split_bounds(n, p, self.coord[k])
        if hi - lo < c:
            sl = list(rl)
            sl[0] = hi - lo
            out = self.slice(out, [0], [0], [hi - lo], sl, rattr)
            rl = sl
        if perm is not None:
            rl = [rl[i] for i in perm]
            out = self.transpose(out, perm, rl, after)
        self.local = rl
        if reduce == "AVG":
            out = self.divide(out, p, after)
        self.value = out

    def p_to_p(self, k: int, a: str, b: str) -> None:
        p = self.mesh.shape[k]
        if {a, b} == {"SUM", "AVG"} and self.dtype in FLOAT_DTYPES:
            self.cur[k] = Placement("P", -1, b)
            after = self.attr(self.cur)
            if b == "AVG":
                self.value = self.scale(self.value, float(p), after)
            else:
                self.value = self.divide(self.value, p, after)
            return
        self.p_to_r(k, a)
        self.r_to_p(k, b)

    def r_to_p(self, k: int, reduce: str) -> None:
        sub, group = self.sub(k)
        before = self.attr(self.cur)
        self.cur[k] = Placement("P", -1, reduce)
        after = self.attr(self.cur)
        root = sub.process_ids[0]
        if reduce in ("SUM", "PRODUCT") and self.rank != root:
            out = self.ctx.api.full(list(self.local), 0.0 if reduce == "SUM" else 1.0, self.dtype)
        else:
            out = self.ctx.api.assign(self.value)
        self.put(out, self.local, after)
        self.dist_of(out, sub, [self.sub_attr(sub)], [self.sub_attr(sub, reduce=reduce)])
        self.value = out

    def r_to_s(self, dims: list[int], axis: int) -> None:
        """Cut this rank's piece of the replicated ``axis`` for mesh ``dims`` (one slice, nested
        bounds when several mesh dims co-shard the axis)."""
        for k in dims:
            self.cur[k] = Placement("S", axis)
        after = self.attr(self.cur)
        lo, hi = self.bounds(dims, axis)
        if (lo, hi) == (0, self.shape[axis]):
            out = self.ctx.api.share_data_(self.value)
            self.value = self.put(out, self.local, after)
            return
        loc = list(self.local)
        loc[axis] = hi - lo
        self.value = self.slice(self.value, [axis], [lo], [hi], loc, after)
        self.local = loc

    # -- driver --------------------------------------------------------------------------------
    def run(self):
        dst = list(self.dst.placements)
        nd = self.mesh.ndim
        # A value partial over several mesh dims is reduced over the lowest mesh dim first (the
        # order of Paddle's nd_mesh).  One reduce type, or only sum and avg (linear), commute:
        # the rounds below may then touch one partial dim while others stay.  With other mixes
        # ("safe" mode) every partial dim of the source is reduced (lowest first) and the
        # destination's are made afresh, highest first, which is valid for any mix.
        types = {p.reduce for p in (*self.src.placements, *dst) if p.is_partial()}
        safe = len(types) > 1 and not types <= {"SUM", "AVG"}
        if safe:
            self.did.append("mixed partial reduce types: every partial dim is reduced, then rebuilt")
        # axes co-sharded (several mesh dims) in the source or destination whose sharding
        # changes are gathered whole first and cut again at the end
        src_pl = list(self.cur)
        redo = {a for a in range(len(self.shape))
                if self.dims_of(src_pl, a) != self.dims_of(dst, a)
                and max(len(self.dims_of(src_pl, a)), len(self.dims_of(dst, a))) > 1}
        # 1. shards that change, the innermost mesh dim first
        for k in range(nd - 1, -1, -1):
            a, b = self.cur[k], dst[k]
            if not a.is_shard() or (a == b and a.dim not in redo):
                continue
            if b.is_partial() and not safe and a.dim not in redo:
                self.s_to_p(k, a.dim, b.reduce)
                how = ("local pad, no communication" if b.reduce in ("SUM", "AVG", "PRODUCT")
                       else "all_gather, then keep")
                self.did.append(f"{a.short()}->{b.short()} on mesh dim {k}: {how}")
            else:
                self.s_to_r(k, a.dim)
                self.did.append(f"{a.short()}->r on mesh dim {k}: all_gather")
        # 2. partial dims that change (all of them in safe mode), the lowest mesh dim first
        for k in range(nd):
            a, b = self.cur[k], dst[k]
            if not a.is_partial() or (a == b and not safe):
                continue
            if b.is_shard() and b.dim not in redo:
                self.p_to_s(k, a.reduce, b.dim)
                how = "reduce_scatter" if a.reduce in ("SUM", "AVG") else "all_reduce + slice"
                self.did.append(f"{a.short()}->{b.short()} on mesh dim {k}: {how}")
            elif b.is_partial() and not safe:
                self.p_to_p(k, a.reduce, b.reduce)
                local = {a.reduce, b.reduce} == {"SUM", "AVG"}
                self.did.append(f"{a.short()}->{b.short()} on mesh dim {k}: "
                                + ("local multiply/divide by p" if local else "all_reduce, then r->p"))
            else:
                self.p_to_r(k, a.reduce)
                self.did.append(f"{a.short()}->r on mesh dim {k}: all_reduce")
        # 3. new partial dims, the highest mesh dim first
        for k in range(nd - 1, -1, -1):
            a, b = self.cur[k], dst[k]
            if a.is_replicate() and b.is_partial():
                self.r_to_p(k, b.reduce)
                self.did.append(f"r->{b.short()} on mesh dim {k}: the group's first process keeps the value")
        # 4. new shards: one slice per tensor axis (over all the mesh dims sharding it)
        for axis in range(len(self.shape)):
            want = self.dims_of(dst, axis)
            if want and self.dims_of(self.cur, axis) != want:
                assert not self.dims_of(self.cur, axis)
                self.r_to_s(want, axis)
                where = ", ".join(str(k) for k in want)
                self.did.append(f"r->s{axis} on mesh dim{'s' if len(want) > 1 else ''} {where}: slice")
        if list(self.cur) != dst:  # pragma: no cover - the rounds above cover every change
            raise AssertionError(f"internal: could not reach {dst} (at {self.cur})")
        out = self.value
        if out is self.src_value:
            out = self.ctx.api.share_data_(out)
        self.ctx.api.retype(out, self.dst_type)
        self.ctx.api.set_result_dist(out, self.dst)
        return out




def lower(ctx, src: TensorDistAttr, dst: TensorDistAttr, value, dst_type, *, function: str):
    """Lower ``src -> dst`` (one mesh) for ``ctx.rank`` correctly; leaves a note for ``--explain``."""
    if not same_mesh(src, dst):
        raise ValueError("distc's extra lowering works on one mesh (cross-mesh copies are split off first)")
    for pl in (*src.placements, *dst.placements):
        if pl.is_partial() and pl.reduce not in REDUCE_OK:
            line, col = ctx.op.loc or (None, None)
            raise DiagnosticError(
                f"no lowering from {describe(src)} to {describe(dst)}: partial reduce type {pl.reduce} "
                "has no collective", line, col)
    if ctx.rank not in src.mesh.process_ids:
        return ctx.api.reshard(value, dst, dst_type)
    lw = Lowerer(ctx, src, dst, value, dst_type)
    out = lw.run()
    why = paddle_problem(src, dst, value.type.shape) or "Paddle's lowering differs"
    ids = list(src.mesh.process_ids)
    ctx.note(f"{function}: {describe_short(src)} -> {describe_short(dst)} on mesh {list(src.mesh.shape)} "
             f"{ids}, shape {list(value.type.shape)}, rank {ctx.rank}: not Paddle's lowering ({why}); "
             + "; ".join(lw.did))
    return out


