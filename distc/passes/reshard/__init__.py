"""Reshard lowering: Paddle 3.3.1's reshard functions, a registry for more, and the lowering driver.

A ``dist_op.reshard`` changes a value's layout (mesh + placements).  Lowering it for one rank means
inserting the ops that rank runs (collectives, slices, send/recv ...) and replacing the reshard's
result.  ``distc.passes.reshard_pass`` (``reshard{rank=R}``) does it for a whole program the way
``ReshardPasses.apply_reshard_pass`` does; :func:`lower_program` and :func:`lower_reshard` are the
same as functions.

Registry
--------
Functions are tried in priority order.  Matching has no side effects: the first function whose
``is_suitable(src, dst, shape)`` holds (layouts and the value's global shape) and whose
``refuses(src, dst, shape)`` gives no reason (Paddle's message where Paddle, having chosen the
function, raises while lowering) lowers the reshard; its ``reshard()`` always lowers.  Paddle's
own functions (one module each) come in Paddle's order; distc's (:mod:`.x_table`, one row each,
and :mod:`.x_via_replicate`) are placed relative to them and are suitable only where
:func:`.extra_plan.paddle_problem` finds Paddle's lowering wrong or refused:

====  =========================  ====================================================
  5   ``x_p_to_r``               before("p_to_r", 5): non-commuting partial types
 10   ``p_to_r``                 all-reduce
 20   ``p_to_r_cross_mesh``      send/recv to the other mesh, then all-reduce
 25   ``x_p_to_s``               before("p_to_s", 5): P(any)->S, uneven, any id order
 30   ``p_to_s``                 reduce-scatter (transposes for axis != 0, padding if uneven)
 40   ``r_to_s``                 slice (no communication)
 50   ``r_to_s_cross_mesh``      send/recv, then slice
 55   ``x_r_to_p``               before("r_to_p", 5): R->P(min|prod)
 60   ``r_to_p``                 assign on rank 0, zeros elsewhere
 70   ``same_status``            send_v2 / recv_v2 between meshes of one shape
 75   ``x_s_to_r``               before("s_to_r", 5): uneven or unordered S->R
 80   ``s_to_r``                 all-gather (+ split_with_num/concat for axis != 0)
 90   ``s_to_r_cross_mesh``      send/recv, then all-gather
 95   ``x_s_to_p`` ...           before("nd_mesh", 5..1): x_s_to_p, x_p_to_p, x_s_to_s, x_coshard
100   ``nd_mesh``                one mesh dim at a time on 1-D sub-meshes
110   ``nd_mesh_cross_mesh``     send/recv, then nd_mesh
120   ``global_to_sub_mesh``     retype in place (or share_data_)
125   ``x_sub_to_global``        before("sub_to_global_mesh", 5): S/P on the sub-mesh dim
130   ``sub_to_global_mesh``     broadcast from the sub-mesh
140   ``s_to_s``                 all-to-all
150   ``x_via_replicate``        after("s_to_s", 10): meshes of different shapes
====  =========================  ====================================================

Before lowering, reshards between two meshes of the same rank with different placements are split
in two (cross-mesh copy, then same-mesh reshard) and duplicates are folded (see :mod:`.lower`).

Adding a function
-----------------
Put it in a module ``distc/passes/reshard/x_<name>.py`` (imported with the package)::

    from distc.passes.reshard import ReshardFunction, reshard_function
    from distc.passes.reshard.registry import before

    @reshard_function(priority=before("nd_mesh", 2), name="x_mine")  # default: after all of Paddle's
    class Mine(ReshardFunction):
        def is_suitable(self, src, dst, shape):       # TensorDistAttr pair, the global shape
            return ...                                # decide here: no side effects
        def reshard(self, ctx, src, dst, value, dst_type):
            ...                                       # insert ops through ctx
            return new_value                          # replaces the reshard's result (or None)

``ctx`` is a :class:`~.context.ReshardContext` (the lowering state: ``ctx.rank``,
``ctx.ring(ranks)``, ``ctx.note(text)``, ``ctx.fix(text)``) and ``ctx.api`` the
:class:`~distc.passes.paddle_api.PaddleAPI` in front of the reshard op, which builds every op:
``ctx.api.tattr(mesh, dims_mapping, partial)`` / ``ctx.api.op_attr(mesh, operands, results)`` /
``ctx.api.cvt(value_or_type, attr[, shape])`` (styled dist attrs and types), op builders mirroring
Paddle's API (``all_gather``, ``all_reduce``, ``reduce_scatter``, ``all_to_all``, ``broadcast``,
``send_v2``, ``recv_v2``, ``slice``, ``split``, ``split_with_num``, ``concat``, ``transpose``,
``reshape``, ``full``, ``assign``, ``share_data_``, ``reshard``), ``ctx.api.retype(value, type)``,
``ctx.api.set_dist(value_or_op, op_dist_attr)``; Paddle's functions are building
blocks too (``from .s_to_r import S_TO_R`` then ``S_TO_R.reshard(ctx, ...)``; also ``P_TO_R``,
``R_TO_S``, ``ND_MESH``, ``SAME_STATUS``).  When no function is left the reshard fails with a
located error naming both layouts and every refusal.  Paddle's functions refuse exactly where
Paddle 3.3.1 raises (P(avg/max) -> S, uneven S -> R, uneven S -> S ...).
``reshard{paddle=true}`` (``paddle_only=True``) uses Paddle's functions alone.
"""

from __future__ import annotations

from ...dialects.collectives import Collective
from ..paddle_api import Decline
from .context import ReshardContext
from .groups import PADDLE_FIRST_RING_ID, RingAllocator, ring_allocator
from .lower import Lowering, ReshardStep, decompose, fold, lower_program, lower_reshard
from .registry import (
    ReshardFunction, after, before, by_name, candidates, choose, function_modules, functions, reshard_function,
    select, unregister,
)

__all__ = [
    "Collective", "Decline", "Lowering", "PADDLE_FIRST_RING_ID", "ReshardContext",
    "ReshardFunction", "ReshardStep", "RingAllocator", "after", "before", "by_name", "candidates", "choose", "decompose", "fold",
    "function_modules", "functions", "lower_program", "lower_reshard", "reshard_function",
    "ring_allocator", "select", "unregister",
]


def _import_functions() -> None:
    """Every reshard function registers as its module is imported: all of them, now, while this
    package is imported (another thread importing it waits for that), so the registry is complete
    before anyone can use it."""
    import importlib

    for m in function_modules():
        importlib.import_module(f"{__name__}.{m}")


_import_functions()
