"""Buffer views of fused ZeRO (tensor fusion): ops whose results share memory with a buffer.

* ``view_slice(x, begin_idx, end_idx)`` -> the elements ``[begin, end)`` of x's flat storage, a
  numpy view (writes through it reach x);
* ``view_shape(x, dims)`` -> x's storage in ``dims`` (a view);
* ``share_var(a, b)`` -> nothing: the two share memory; the simulator copies the fresh value into
  the buffer view (the operand that is a view, else the first operand: the fused parameter
  buffer that the all-gathered shard lands in);
* ``empty(shape)`` -> zeros (a released-gradient buffer, filled through its views);
* ``nop(x)`` -> x (an ordering point on the sharding stream).

Views are remembered by the rank's runner (``rt.views``): an in-place op (``adamw_`` ...) on a
view writes its result back into the view, so the update of a ``slice@`` parameter reaches the
shard it is a view of, as in Paddle."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, np_dtype


def _flat(rt, op, x) -> np.ndarray:
    a = np.asarray(x)
    if not a.flags.c_contiguous:
        raise rt.err(op, "a view of a value that is not contiguous in memory")
    return a.reshape(-1)


@kernel("pd_op.view_slice")
def view_slice(rt, op, vals):
    flat = _flat(rt, op, vals[0])
    lo, hi = int(attr(op, "begin_idx", 0)), int(attr(op, "end_idx", flat.size))
    if not 0 <= lo <= hi <= flat.size:
        raise rt.err(op, f"view [{lo}, {hi}) of a buffer of {flat.size} elements")
    v = flat[lo:hi]
    rt.views.add(id(v))
    rt.keep.append(v)
    return [v]


@kernel("pd_op.view_shape")
def view_shape(rt, op, vals):
    flat = _flat(rt, op, vals[0])
    dims = int_list(attr(op, "dims", [])) or [flat.size]
    v = flat.reshape(dims)
    rt.views.add(id(v))
    rt.keep.append(v)
    return [v]


@kernel("pd_op.share_var")
def share_var(rt, op, vals):
    if len(vals) != 2:
        raise rt.err(op, f"share_var of {len(vals)} values (2 expected)")
    a, b = (np.asarray(v) for v in vals)
    dst, src = (b, a) if id(vals[1]) in rt.views and id(vals[0]) not in rt.views else (a, b)
    if dst.size != src.size:
        raise rt.err(op, f"shares {src.size} elements with a buffer of {dst.size}")
    np.copyto(dst, src.reshape(dst.shape))
    return []


@kernel("pd_op.empty")
def empty(rt, op, vals):
    t = op.results[0].type
    shape = rt.local_shape(t) or [int(d) for d in np.asarray(vals[0]).reshape(-1)]
    return [np.zeros(tuple(shape), dtype=np_dtype(str(attr(op, "dtype", "float32"))))]


@kernel("pd_op.nop")
def nop(rt, op, vals):
    return [vals[0]]
