"""Shape ops: transpose, slice, split, concat, reshape, pad (and creation: full, full_like,
full_int_array, zeros_like, ones_like).  Constants are used as written, as Paddle's kernels do,
except reshape's target shape: in a dist program it is in the global frame (dist2dense patches
it), so the local target shape is taken from the result type."""

from __future__ import annotations

import itertools

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, norm_axis, np_dtype, operand_or_attr
from ....ir.types import DistTensorType


@kernel("pd_op.full")
def full(rt, op, vals):
    dtype = np_dtype(str(attr(op, "dtype", "float32")))
    # used as written: dist2dense patches data and reshape shapes only, not full's; startup
    # programs are run with ``shapes_from_types`` (an initializer fills its declared shape)
    shape = tuple(int(s) for s in (attr(op, "shape", []) or []))
    if rt.sim.shapes_from_types:
        want = rt.local_shape(op.results[0].type)
        if want is not None and all(d >= 0 for d in want):
            shape = tuple(want)
    if rt.sim.tags is not None and np.dtype(dtype).kind == "f":
        from .init import tagged_constant

        x = tagged_constant(rt, op, shape, float(attr(op, "value", 0) or 0))
        if x is not None:
            return [np.asarray(x, dtype=dtype).reshape(shape)]
    return [np.full(shape, attr(op, "value", 0), dtype=dtype)]


@kernel("pd_op.full_int_array")
def full_int_array(rt, op, vals):
    return [np.array(int_list(attr(op, "value", [])), dtype=np.int64)]


@kernel("pd_op.full_like")
def full_like(rt, op, vals):
    dtype = str(attr(op, "dtype", "Undefined"))
    x = np.asarray(vals[0])
    val = operand_or_attr(vals, 1, op, "value", 0)
    return [np.full(x.shape, val, dtype=x.dtype if dtype in ("Undefined", "undefined") else np_dtype(dtype))]


@kernel("pd_op.zeros_like")
def zeros_like(rt, op, vals):
    return [np.zeros_like(np.asarray(vals[0]))]


@kernel("pd_op.ones_like")
def ones_like(rt, op, vals):
    return [np.ones_like(np.asarray(vals[0]))]


@kernel("pd_op.cast")
def cast(rt, op, vals):
    return [np.asarray(vals[0]).astype(np_dtype(str(attr(op, "dtype"))))]


@kernel("pd_op.transpose")
def transpose(rt, op, vals):
    return [np.transpose(vals[0], int_list(attr(op, "perm")))]


def slice_region(op, vals, shape) -> tuple[tuple[slice, ...], list[int]]:
    """A slice op's region of an input of ``shape`` (starts/ends from operands 1, 2 or the
    attributes, clamped as Paddle does) and the axes it drops (``decrease_axis``)."""
    axes = int_list(attr(op, "axes"))
    starts = operand_or_attr(vals, 1, op, "starts", conv=int_list)
    ends = operand_or_attr(vals, 2, op, "ends", conv=int_list)
    if len(starts) == 1 and len(axes) > 1:
        starts = starts * len(axes)
    if len(ends) == 1 and len(axes) > 1:
        ends = ends * len(axes)
    idx = [slice(None)] * len(shape)
    for a, s, e in zip(axes, starts, ends):
        a = norm_axis(a, len(shape))
        n = shape[a]
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        s = min(max(s, 0), n)
        e = min(max(e, 0), n)
        idx[a] = slice(s, max(s, e))
    dec = int_list(attr(op, "decrease_axis", []) or [])
    return tuple(idx), sorted({norm_axis(a, len(shape)) for a in dec})


@kernel("pd_op.slice")
def slice_(rt, op, vals):
    x = np.asarray(vals[0])
    idx, drop = slice_region(op, vals, x.shape)
    out = x[idx]
    if drop:
        out = out.reshape([d for i, d in enumerate(out.shape) if i not in drop])
    return [np.array(out, copy=True)]


@kernel("pd_op.split_with_num")
def split_with_num(rt, op, vals):
    x = np.asarray(vals[0])
    num = int(attr(op, "num"))
    axis = norm_axis(int(operand_or_attr(vals, 1, op, "axis", 0)), x.ndim)
    if x.shape[axis] % num:
        raise rt.err(op, f"cannot split extent {x.shape[axis]} of axis {axis} into {num} equal parts")
    return [list(np.split(x, num, axis=axis))]


@kernel("pd_op.split")
def split(rt, op, vals):
    x = np.asarray(vals[0])
    sections = operand_or_attr(vals, 1, op, "sections", conv=int_list)
    axis = norm_axis(int(operand_or_attr(vals, 2, op, "axis", 0)), x.ndim)
    n = x.shape[axis]
    if sections.count(-1) == 1:
        sections[sections.index(-1)] = n - (sum(sections) + 1)
    if sum(sections) != n or any(s < 0 for s in sections):
        raise rt.err(op, f"sections {sections} do not add up to extent {n} of axis {axis} "
                         f"(local shape {list(x.shape)})")
    cuts = list(itertools.accumulate(sections))[:-1]
    return [list(np.split(x, cuts, axis=axis))]


@kernel("pd_op.concat")
def concat(rt, op, vals):
    xs = [np.asarray(a) for a in vals[0]]
    axis = norm_axis(int(operand_or_attr(vals, 1, op, "axis", 0)), xs[0].ndim)
    shapes = [list(a.shape) for a in xs]
    for a in xs[1:]:
        if a.ndim != xs[0].ndim or any(a.shape[d] != xs[0].shape[d] for d in range(a.ndim) if d != axis):
            raise rt.err(op, f"cannot concatenate shapes {shapes} on axis {axis}")
    return [np.concatenate(xs, axis=axis)]


@kernel("pd_op.reshape")
def reshape(rt, op, vals):
    x = np.asarray(vals[0])
    t = op.results[0].type
    if isinstance(t, DistTensorType):
        want = rt.local_shape(t)
        if want is not None and int(np.prod(want)) == x.size and all(d >= 0 for d in want):
            return [x.reshape(want)]
    shape = operand_or_attr(vals, 1, op, "shape", conv=int_list)
    shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    try:
        return [x.reshape(shape)]
    except ValueError:
        raise rt.err(op, f"cannot reshape local {list(x.shape)} to {shape}") from None


@kernel("pd_op.pad")
def pad(rt, op, vals):
    x = np.asarray(vals[0])
    pads = int_list(attr(op, "paddings"))
    pv = operand_or_attr(vals, 1, op, "pad_value", 0.0)
    if len(pads) != 2 * x.ndim:
        raise rt.err(op, f"paddings {pads} do not fit rank {x.ndim}")
    return [np.pad(x, [(pads[2 * i], pads[2 * i + 1]) for i in range(x.ndim)], constant_values=pv)]
