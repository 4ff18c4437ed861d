"""distc's extra same-mesh reshard functions: one table row each (name, priority relative to
Paddle's functions, the kind of mesh-dim change it takes).  A row's function is suitable when the
value's shape is static, ``src`` and ``dst`` are on one mesh, some mesh dim changes the row's way,
and :func:`~.extra_plan.paddle_problem` finds Paddle 3.3.1's own lowering of the case wrong or
refused (rows with ``always``: whenever the change occurs).  Every row lowers the whole reshard
with :func:`~.extra_lower.lower`, correct for uneven pieces and any order of process ids.

``x_p_to_r`` (before ``p_to_r``)
    A value partial over mesh dims with reduce types that do not commute (``[P, P(max)]``) means
    reduced over the lowest mesh dim first; Paddle's nd_mesh all-reduces a higher dim while a lower
    one stays partial (``[P, P(max)] -> [P, R]``: the other order).  distc reduces every partial
    dim, lowest first, and makes the destination's partial dims afresh (found by
    tests/test_reshard_sweep.py).
``x_p_to_s`` (before ``p_to_s``)
    Paddle's p_to_s only takes Partial(SUM) ("The p to s reshard func only support sum op":
    corpus ``m2_Pavg_to_S0`` ...), and for an uneven axis cuts the padding off the last rank's
    piece with ``split`` sections taken from the global shape, which cannot run (oracle
    ``u2_5x7_P_to_S0``).  distc: sum/avg pad the axis to ``p*ceil(n/p)``, reduce_scatter (axis
    moved first with ``transpose``), slice the short pieces, avg divides by p; max/min/prod
    all_reduce with their op, then each rank slices its piece.
``x_r_to_p`` (before ``r_to_p``)
    Paddle's r_to_p refuses min and prod.  distc: the first process of each group keeps the value
    (``assign``), the others hold the reduce type's identity with the local shape.  (Paddle's
    R->P bugs on groups without global rank 0 are fixed inside distc's copy of r_to_p.)
``x_s_to_r`` (before ``s_to_r``)
    Paddle's uneven S->R padding path fails ("'list' object has no attribute
    'get_defining_op'": oracle ``u2_5x7_S0_to_R``), and its all_gather concatenates in ascending
    rank order, not mesh order.  distc: pieces padded to ``ceil(n/p)``, one ``all_gather``, every
    piece sliced back to size and concatenated in mesh order.
``x_s_to_p`` (before ``nd_mesh``)
    Paddle has no S->P function on a 1-D mesh (corpus ``m2_S0_to_P`` ...).  distc: S->P(sum)
    pads the local piece with zeros to the full extent (no communication), avg also multiplies
    by p, prod pads with ones; max/min gather the pieces and keep the value on every rank.
``x_p_to_p`` (before ``nd_mesh``)
    Paddle refuses P->P of another reduce type (corpus ``m2_P_to_Pavg`` ...).  distc: sum <-> avg
    is a local ``scale``/``divide`` by p; other pairs all_reduce, then R->P.
``x_s_to_s`` (before ``nd_mesh``)
    Paddle's s_to_s reshapes assume an even split (oracle ``u2_5x7_S0_to_S1``), its all_to_all
    ascending process ids, and it mixes up the pieces when 0 < source axis < target axis.  distc: the
    uneven S->R above, then a slice of the new piece.
``x_coshard`` (before ``nd_mesh``, always)
    One tensor axis split over several mesh dims (``[Shard(0), Shard(0)]``): Paddle lowers by the
    dims mapping, which names one mesh dim per axis (``[R, R] -> [S0, S0]`` on 2x2 comes out as
    ``[R, S0]``: half the rows where a quarter is due; corpus ``m22_*_to_S0S0``).  distc splits
    the axis over the mesh dims in turn, the lowest mesh dim outermost (8 rows on [[0,1],[2,3]]:
    rank 0 rows 0-1, rank 1 rows 2-3, rank 2 rows 4-5, rank 3 rows 6-7), proven on every rank.
    ``reshard{coshard=false}`` / ``distc reshard --no-coshard`` lower them as Paddle does.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.dist import Placement
from ...ir.records import record
from . import extra_plan as X
from .registry import ReshardFunction, before, reshard_function


@record(frozen=True)
class Row:
    name: str
    priority: int
    change: Callable[[Placement, Placement], bool]  # one mesh dim's src -> dst placement
    always: bool = False  # also where Paddle's lowering is right (it never is, for co-shards)
    optin: bool = False


TABLE = (
    Row("x_p_to_r", before("p_to_r", 5), lambda a, b: a.is_partial() and b.is_replicate()),
    Row("x_p_to_s", before("p_to_s", 5), lambda a, b: a.is_partial() and b.is_shard()),
    Row("x_r_to_p", before("r_to_p", 5), lambda a, b: a.is_replicate() and b.is_partial()),
    Row("x_s_to_r", before("s_to_r", 5), lambda a, b: a.is_shard() and b.is_replicate()),
    Row("x_s_to_p", before("nd_mesh", 5), lambda a, b: a.is_shard() and b.is_partial()),
    Row("x_p_to_p", before("nd_mesh", 4), lambda a, b: a.is_partial() and b.is_partial() and a.reduce != b.reduce),
    Row("x_s_to_s", before("nd_mesh", 3), lambda a, b: a.is_shard() and b.is_shard()),
    Row("x_coshard", before("nd_mesh", 1), lambda a, b: True, always=True),
)


class TableFunction(ReshardFunction):
    """A row of :data:`TABLE` as a reshard function."""

    def __init__(self, row: Row) -> None:
        self.row = row

    def is_suitable(self, src, dst, shape):
        row = self.row
        if not X.static(shape) or not X.has_step(src, dst, row.change):
            return False
        if row.always:
            return X.coshard(src) or X.coshard(dst)
        return X.paddle_problem(src, dst, shape) is not None

    def reshard(self, ctx, src, dst, value, dst_type):
        from .extra_lower import lower  # (loaded by the first reshard lowered so: most programs have none)

        return lower(ctx, src, dst, value, dst_type, function=self.name)


for _row in TABLE:
    reshard_function(TableFunction(_row), priority=_row.priority, name=_row.name, optin=_row.optin)
