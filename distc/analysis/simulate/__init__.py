"""A numeric SPMD simulator for lowered (per-rank) PIR programs.

Every rank of a mesh gets its own lowered program (Paddle's reshard pass is rank specific: r->p
emits zeros on non-root ranks, cross-mesh copies emit ``send_v2`` on one side and ``recv_v2`` on
the other).  :func:`simulate_ranks` runs all of them in lockstep with numpy, one generator per
rank; collectives block until every rank of their group reaches them, ``send_v2`` is buffered
and ``recv_v2`` blocks until a matching send exists.  :func:`verify_reshard` builds a random
global tensor, runs a one-reshard program (``pd_op.data`` + ``dist_op.shard_tensor`` + lowered
ops) on every rank and checks the final value of every rank of the destination mesh against the
serial meaning of the destination layout.

Meaning of a distributed value (global shape G, :class:`TensorDistAttr` d) on rank r:

* a tensor axis mapped to mesh dim k is split Paddle's way over the ranks along k
  (``ceil(n/p)`` elements each, the last rank(s) hold less or nothing: :func:`split_bounds`);
* ``partial(k, OP)``: the ranks along mesh dim k hold full-size values that reduce with OP to
  the global one.  Several partial dims nest: the value is reduced over the lowest partial
  mesh dim first (the order of Paddle's nd_mesh reshard), which matters only when their reduce
  types differ and do not commute.

How ops are executed (the rules Paddle's own later passes and kernels apply):

* an op whose ``op_dist_attr`` mesh does not contain the rank is not run on it (Paddle's
  ``remove_other_rank_op_pass``); its results are *absent* there.  An op run on a rank that
  reads an absent value is an error (a dangling use);
* ops without ``op_dist_attr`` (``pd_op.full`` of an axis, ``builtin.combine``...) run where
  their operands exist;
* ``dist_op.reshard`` left in a lowered program passes its operand's local piece through (the
  fake reshard Paddle leaves next to ``send_v2``; later passes erase it and forward the value);
  every pass-through is logged in :attr:`RankValues.notes`;
* shape constants of reshape are in the global frame in a dist program (dist2dense patches
  them); the local target shape is taken from the result type.  Other constants (slice bounds,
  split sections, ``pd_op.full`` shapes) are used as written, as Paddle's kernels do;
* a collective's group is the sorted process ids of its op mesh (Paddle creates every group
  with ``new_process_group(sorted(ids))``); without an op mesh, from ``rings`` (ring_id -> ranks)
  or, failing that, from the ranks whose programs use the same ``ring_id``.  Members of one
  group should use the same ``ring_id``; Paddle's dumps do not (each process numbers its groups
  in creation order, 12, 13 ...), so a mismatch is only noted (``strict_rings=True`` makes it an
  error), while one ring id used by one rank for two different groups is an error.
  ``send_v2``/``recv_v2`` pair up by ``peer`` (the partner's index in the 2-rank group, which
  Paddle builds as ``[src, dst]``), the position of both ranks in their op meshes (Paddle pairs
  ``zip(src_mesh.process_ids, dst_mesh.process_ids)``) and ``ring_id``.

* inputs: ``pd_op.data`` by its ``name``, ``builtin.parameter`` by its ``parameter_name``
  (persistable parameters and optimizer states), as global arrays cut to the rank's piece of the
  result type; a partial result type gets random pieces that reduce to the global array; a
  mapping ``rank -> array`` instead gives every rank's local value as it is (e.g. each rank's own
  gradient contribution);
* optimizer updates (``adamw_``, ``adam_`` in their 13- and 12-operand signatures, ``momentum_``,
  ``sgd_``) compute Paddle's dense kernels elementwise on the local pieces, which must have the
  same shape; ``assign_out_(x, out)`` writes x into out (same local shape) and returns it.  The
  in-place writes are not replayed on the operand values: a later reader of a parameter sees its
  value before the step (the update is the result of ``assign_out_`` or of the update op).

Floating-point tensors are simulated in float64, integers in int64.

API: :func:`simulate_ranks` (programs by rank + global inputs -> each rank's values),
:func:`verify_reshard` (-> :class:`ReshardReport`), and the layout helpers :func:`distribute`,
:func:`expected_piece`, :func:`check_layout`, :func:`reduce_arrays`.  A co-sharded tensor axis
(placements ``[Shard(0), Shard(0)]``) is split over its mesh dims in turn, the lowest mesh dim
outermost.

Package layout: :mod:`.values` (errors, dtypes, one rank's values), :mod:`.layout` (pieces of
a global array under a layout), :mod:`.registry` (the ``@kernel`` table), :mod:`.kernels` (one
module per op family; :mod:`.kernels.randomness` the counter-based draws that make a sharded
dropout equal the serial one), :mod:`.coverage` (every op without a kernel, found before
simulating), :mod:`.runner` (one rank, nested blocks of control flow), :mod:`.scheduler` (all
ranks, collectives, send/recv, deadlocks), :mod:`.reshard` (one-reshard proofs).
"""

from .layout import check_layout, distribute, expected_piece, reduce_arrays
from .registry import KERNELS, kernel, lookup
from .reshard import ReshardReport, final_value, verify_reshard
from .scheduler import simulate_ranks, simulate_serial
from .values import NoKernel, RankValues, SimulationError

__all__ = [
    "SimulationError", "NoKernel", "RankValues", "simulate_ranks", "simulate_serial", "distribute", "expected_piece",
    "check_layout", "verify_reshard", "ReshardReport", "reduce_arrays", "final_value",
    "KERNELS", "kernel", "lookup",
]
