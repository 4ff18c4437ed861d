"""Inputs and plumbing: ``pd_op.data``/``builtin.parameter`` (the rank's piece of a named input),
``dist_op.shard_tensor`` (the rank's piece of a value), ``dist_op.reshard`` left in a lowered
program (passes its operand through), vectors (``builtin.combine``/``split``/``slice``), copies."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import ABSENT, attr, np_dtype
from ....ir.types import DistTensorType


@kernel("pd_op.data")
def data(rt, op, vals):
    return [rt.input(op, attr(op, "name"))]


@kernel("builtin.parameter")
def parameter(rt, op, vals):
    return [rt.input(op, attr(op, "parameter_name"))]


@kernel("dist_op.shard_tensor")
def shard_tensor(rt, op, vals):
    t = op.results[0].type
    if not isinstance(t, DistTensorType):
        raise rt.err(op, "result is not a dist tensor")
    if rt.serial:
        return [vals[0]]
    k = rt.shard_count
    rt.shard_count += 1
    if rt.rank not in t.dist.mesh.process_ids:
        # Paddle's global-to-sub-mesh reshard retypes the producer in place: the value lives on
        # the sub-mesh only
        return [ABSENT]
    return [rt.sim.shard(k, vals[0], t.dist)[rt.rank]]


@kernel("dist_op.reshard")
def reshard(rt, op, vals):
    t = op.results[0].type
    if not rt.serial and isinstance(t, DistTensorType) and rt.rank in t.dist.mesh.process_ids:
        rt.env.notes.append(f"dist_op.reshard{' line %d' % op.loc[0] if op.loc else ''} "
                            f"passed through on rank {rt.rank}, which is in its destination mesh")
    return [vals[0]]


@kernel("builtin.combine")
def combine(rt, op, vals):
    return [list(vals)]


@kernel("builtin.split")
def split(rt, op, vals):
    xs = list(vals[0])
    if len(xs) != op.num_results:
        raise rt.err(op, f"vector of {len(xs)} split into {op.num_results} results")
    return xs


@kernel("builtin.slice")
def vector_slice(rt, op, vals):
    return [vals[0][int(attr(op, "index"))]]


@kernel("pd_op.assign", "pd_op.share_data", "pd_op.share_data_", "pd_op.memcpy", "pd_op.identity")
def assign(rt, op, vals):
    return [np.array(vals[0], copy=True)]


@kernel("pd_op.assign_out_")
def assign_out(rt, op, vals):
    x, out = np.asarray(vals[0]), np.asarray(vals[1])
    if x.shape != out.shape:
        raise rt.err(op, f"writes local {list(x.shape)} into a value of local {list(out.shape)}")
    return [np.array(x, dtype=out.dtype, copy=True)]


@kernel("pd_op.fetch")
def fetch(rt, op, vals):
    return [np.array(vals[0], copy=True)]


@kernel("pd_op.assign_value")
def assign_value(rt, op, vals):
    """``assign_value_(x)``: the constant ``values`` in ``shape`` (x only gives the buffer)."""
    shape = [int(s) for s in attr(op, "shape", []) or []]
    data = np.array(attr(op, "values", []) or [], dtype=np.float64)
    dtype = np_dtype(str(attr(op, "dtype", "float32")))
    if data.size != int(np.prod(shape)):
        raise rt.err(op, f"{data.size} values for shape {shape}")
    return [data.reshape(shape).astype(dtype)]
