"""Reshard lowering: Paddle 3.3.1's reshard functions, a registry for more, and the lowering driver.

A ``dist_op.reshard`` changes a value's layout (mesh + placements).  Lowering it for one rank means
inserting the ops that rank runs (collectives, slices, send/recv ...) and replacing the reshard's
result.  ``distc.passes.reshard_pass`` (``reshard{rank=R}``) does it for a whole program the way
``ReshardPasses.apply_reshard_pass`` does; :func:`lower_program` and :func:`lower_reshard` are the
same as functions.

Registry
--------
Functions are tried in priority order; the first whose ``is_suitable(src, dst)`` holds lowers the
reshard.  Paddle's own functions (one module each) come first, in Paddle's order:

====  =========================  ====================================================
 10   ``p_to_r``                 all-reduce
 20   ``p_to_r_cross_mesh``      send/recv to the other mesh, then all-reduce
 30   ``p_to_s``                 reduce-scatter (transposes for axis != 0, padding if uneven)
 40   ``r_to_s``                 slice (no communication)
 50   ``r_to_s_cross_mesh``      send/recv, then slice
 60   ``r_to_p``                 assign on rank 0, zeros elsewhere
 70   ``same_status``            send_v2 / recv_v2 between meshes of one shape
 80   ``s_to_r``                 all-gather (+ split_with_num/concat for axis != 0)
 90   ``s_to_r_cross_mesh``      send/recv, then all-gather
100   ``nd_mesh``                one mesh dim at a time on 1-D sub-meshes
110   ``nd_mesh_cross_mesh``     send/recv, then nd_mesh
120   ``global_to_sub_mesh``     retype in place (or share_data_)
130   ``sub_to_global_mesh``     broadcast from the sub-mesh
140   ``s_to_s``                 all-to-all
====  =========================  ====================================================

Before lowering, reshards between two meshes of the same rank with different placements are split
in two (cross-mesh copy, then same-mesh reshard) and duplicates are folded (see :mod:`.lower`).

Adding a function
-----------------
Put it in a module ``distc/passes/reshard/x_<name>.py`` (imported automatically)::

    from distc.passes.reshard import ReshardFunction, reshard_function, Decline

    @reshard_function(priority=1000, name="s_to_p")   # >= 1000: after all of Paddle's
    class SToP(ReshardFunction):
        def is_suitable(self, src, dst):              # TensorDistAttr pair (mesh, dims_mapping, partial)
            return ...
        def reshard(self, ctx, src, dst, value, dst_type):
            ...                                       # insert ops through ctx
            return new_value                          # replaces the reshard's result (or None)

``ctx`` is a :class:`~.context.ReshardContext`: ``ctx.rank``, ``ctx.ring(ranks)`` (ring ids),
``ctx.tattr(mesh, dims_mapping, partial)`` / ``ctx.op_attr(mesh, operands, results)`` /
``ctx.cvt(value_or_type, attr[, shape])`` (styled dist attrs and types), op builders mirroring
Paddle's API (``all_gather``, ``all_reduce``, ``reduce_scatter``, ``all_to_all``, ``broadcast``,
``send_v2``, ``recv_v2``, ``slice``, ``split``, ``split_with_num``, ``concat``, ``transpose``,
``reshape``, ``full``, ``assign``, ``share_data_``, ``reshard_v2``), ``ctx.retype(value, type)``,
``ctx.set_dist(value_or_op, op_dist_attr)``, ``ctx.note(text)``; Paddle's functions are building
blocks too (``from .s_to_r import S_TO_R`` then ``S_TO_R.reshard(ctx, ...)``; also ``P_TO_R``,
``R_TO_S``, ``ND_MESH``, ``SAME_STATUS``).  Raising :class:`Decline` rolls back what the function inserted and lets the next
suitable function try; when none is left the reshard fails with a located error naming both
layouts.  Paddle's functions decline exactly where Paddle 3.3.1 raises (P(avg/max) -> S, uneven
S -> R, uneven S -> S ...), so extra functions registered after them pick those cases up.
``reshard{paddle=true}`` (``paddle_only=True``) uses Paddle's functions alone.
"""

from __future__ import annotations

from .context import CollectiveRecord, Decline, ReshardContext
from .groups import PADDLE_FIRST_RING_ID, RingAllocator, ring_allocator
from .lower import Lowering, decompose, fold, lower_program, lower_reshard
from .registry import (
    ReshardFunction, by_name, candidates, choose, functions, load_functions, reshard_function, unregister,
)

__all__ = [
    "CollectiveRecord", "Decline", "Lowering", "PADDLE_FIRST_RING_ID", "ReshardContext",
    "ReshardFunction", "RingAllocator", "by_name", "candidates", "choose", "decompose", "fold",
    "functions", "load_functions", "lower_program", "lower_reshard", "reshard_function",
    "ring_allocator", "unregister",
]
