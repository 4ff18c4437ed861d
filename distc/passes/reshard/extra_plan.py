"""Planning for distc's extra reshard functions (:mod:`.x_table`, :mod:`.x_via_replicate`):
which mesh dims change, and whether Paddle 3.3.1's own lowering of a case is right.

Paddle 3.3.1 refuses some transitions (S->P, P(avg/max)->S, P->P of another reduce type, uneven
S->R and S->S) and gets others wrong (found by :mod:`distc.analysis.simulate` on Paddle's own
output: uneven P->S cuts its padding with global-frame split sections; gathers and
reduce-scatters assume ascending process ids; co-sharded placements are lowered by their dims
mapping).  :func:`paddle_problem` names the reason, or ``None`` where the simulator proves
Paddle's lowering right: the extra functions are suitable only where it names one, so Paddle's
output is kept wherever it is correct.  The lowering itself is :mod:`.extra_lower`.
"""

from __future__ import annotations

import functools

from ...ir.dist import Placement, ProcessMesh, TensorDistAttr, split_bounds
from ...ir.records import record

FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
REDUCE_OK = ("SUM", "AVG", "MAX", "MIN", "PRODUCT")

@record(frozen=True)
class Step:
    dim: int  # mesh dim
    src: Placement
    dst: Placement

    def __str__(self) -> str:
        return f"mesh dim {self.dim}: {self.src.short()}->{self.dst.short()}"


def steps(src: TensorDistAttr, dst: TensorDistAttr) -> list[Step]:
    """The mesh dims whose placement changes."""
    return [Step(k, a, b) for k, (a, b) in enumerate(zip(src.placements, dst.placements)) if a != b]


def same_mesh(src: TensorDistAttr, dst: TensorDistAttr) -> bool:
    return src.mesh == dst.mesh and src.mesh.ndim >= 1


def has_step(src: TensorDistAttr, dst: TensorDistAttr, pred) -> bool:
    """``src`` and ``dst`` are on one mesh and some mesh dim's change satisfies ``pred(a, b)``."""
    if not same_mesh(src, dst) or len(src.placements) != len(dst.placements):
        return False
    return any(pred(s.src, s.dst) for s in steps(src, dst))


def coshard(a: TensorDistAttr) -> bool:
    return a.given is not None


def _uneven(n: int, p: int) -> bool:
    return n > 0 and n % p != 0


def _sorted_along(mesh: ProcessMesh, k: int) -> bool:
    return all(list(m.process_ids) == sorted(m.process_ids) for m in mesh.sub_meshes(k))


def paddle_problem(src: TensorDistAttr, dst: TensorDistAttr, shape) -> str | None:
    """Why Paddle 3.3.1's own lowering of ``src -> dst`` (same mesh) is wrong or refused, or
    ``None`` when it is right (as the simulator proves on Paddle's output), so distc keeps it."""
    return _paddle_problem(src, dst, tuple(shape))


@functools.lru_cache(maxsize=10_000)
def _paddle_problem(src: TensorDistAttr, dst: TensorDistAttr, shape) -> str | None:
    if not same_mesh(src, dst):
        return None  # cross-mesh copies are split off before (same_status), then judged here
    # co-sharded placements ([Shard(0), Shard(0)]) are lowered by their dims mapping, as Paddle
    # does, unless x_coshard is enabled (it is tried before Paddle's nd_mesh)
    mesh = src.mesh
    nd = mesh.ndim
    sp, dp = src.placements, dst.placements
    why = _mixed_partial_order(sp, dp)
    if why:
        return why
    for st in steps(src, dst):
        a, b, k = st.src, st.dst, st.dim
        p = mesh.shape[k]
        if a.is_shard() and b.is_partial() and nd == 1:
            return "Paddle has no S->P lowering on a 1-D mesh"
        if a.is_partial() and b.is_partial():
            return "Paddle has no P->P lowering for another reduce type"
        if a.is_partial() and b.is_shard():
            if a.reduce != "SUM":
                return f"Paddle's p_to_s only supports SUM, not {a.reduce}"
            if _uneven(shape[b.dim], p):
                return "Paddle's uneven p_to_s cuts the padding with global-frame split sections"
            if not _sorted_along(mesh, k):
                return "Paddle's reduce_scatter assumes ascending process ids"
        if a.is_shard() and not b.is_replicate() and (_uneven(shape[a.dim], p) or (b.is_shard() and _uneven(shape[b.dim], p))):
            return "Paddle fails on uneven S->R / S->S"
        if a.is_shard() and b.is_replicate() and _uneven(shape[a.dim], p):
            return "Paddle fails on uneven S->R / S->S"
        if a.is_shard() and not _sorted_along(mesh, k):
            return "Paddle's all_gather / all_to_all assume ascending process ids"
        if nd == 1 and a.is_shard() and b.is_shard() and 0 < a.dim < b.dim:
            # its reshapes assume the target axis is 0 or before the source axis (not in Paddle's
            # oracle; the simulator finds distc's faithful copy of Paddle's s_to_s scrambling the
            # pieces for S1->S2, S1->S3, S2->S3 ..., and right for S2->S1, S3->S1 ...)
            return "Paddle's s_to_s mixes up the pieces when the source shard axis is before the target, neither 0"
        if b.is_partial() and (a.is_replicate() or a.is_shard()) and b.reduce not in ("SUM", "AVG", "MAX"):
            return f"Paddle's r_to_p does not support {b.reduce}"
    # R->P on groups without global rank 0, zeros of the global shape, and the shards an N-d
    # r_to_p skips are fixed inside distc's copies of Paddle's r_to_p / nd_mesh themselves (they
    # keep Paddle's text wherever Paddle is right), so they are no reason to take over here.
    return None


def _mixed_partial_order(sp, dp) -> str | None:
    """A value partial over several mesh dims with reduce types that do not commute (sum and max
    ...) means: reduced over the lowest mesh dim first (as the simulator reads it).  Paddle's
    nd_mesh reduces a changing partial dim while a lower one of another type stays partial, which
    reduces in the other order."""
    for k, (a, b) in enumerate(zip(sp, dp)):
        if not a.is_partial() or a == b:
            continue
        for j in range(k):
            c, d = sp[j], dp[j]
            if c.is_partial() and c == d and c.reduce != a.reduce and not {a.reduce, c.reduce} <= {"SUM", "AVG"}:
                return (f"Paddle reduces mesh dim {k} ({a.reduce}) while mesh dim {j} stays partial "
                        f"({c.reduce}): the other order")
    return None


def describe_short(a: TensorDistAttr) -> str:
    return "[" + ", ".join(p.short() for p in a.placements) + "]"


def nested_bounds(n: int, mesh: ProcessMesh, coord, dims) -> tuple[int, int]:
    """The range of an axis of ``n`` that the process at ``coord`` holds when mesh ``dims`` split
    it in turn, the lowest mesh dim outermost (Paddle's ``ceil(n/p)`` pieces at every level)."""
    lo, hi = 0, n
    for md in sorted(dims):
        a, b = split_bounds(hi - lo, mesh.shape[md], coord[md])
        lo, hi = lo + a, lo + b
    return lo, hi


def piece_shape(attr: TensorDistAttr, shape, rank: int) -> tuple[int, ...]:
    """The shape of ``rank``'s piece, exact for uneven splits and co-sharded axes (``[S0, S0]``:
    nested); ``TensorDistAttr.local_shape`` follows the dims mapping, as Paddle does."""
    if rank not in attr.mesh.process_ids or any(d < 0 for d in shape):
        return attr.local_shape(tuple(shape), rank)
    coord = attr.mesh.coord(rank)
    out = []
    for axis, n in enumerate(shape):
        dims = [k for k, p in enumerate(attr.placements) if p.is_shard() and p.dim == axis]
        lo, hi = nested_bounds(n, attr.mesh, coord, dims)
        out.append(hi - lo)
    return tuple(out)


def static(shape) -> bool:
    """No dynamic (-1) dims: the extra functions lower static shapes only."""
    return all(d >= 0 for d in shape)
