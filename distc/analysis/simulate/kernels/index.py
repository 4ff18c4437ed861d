"""Shape, broadcast and indexing ops beyond :mod:`.shape`, forward and backward: arange, expand
(and expand_as), flatten, tile, slice_grad, where_grad, stack_grad, unbind, roll, topk, argmax,
argmin, one_hot, gather, gather_nd, index_select, index_add, nonzero, take_along_axis, put_along_axis, masked_fill,
cumsum.  As for reshape, the target shape of ``expand``/``flatten`` in a dist program is the
result type's local shape (the attribute is in the global frame until dist2dense patches it)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, norm_axis, np_dtype, operand_or_attr, scalar
from ....ir.types import DistTensorType
from .grads import unbroadcast
from .shape import slice_region


def _typed_shape(rt, op, i: int = 0) -> tuple[int, ...] | None:
    """The local shape result ``i`` declares, when it is a dist type with known extents."""
    t = op.results[i].type
    if isinstance(t, DistTensorType):
        want = rt.local_shape(t)
        if want is not None and all(d >= 0 for d in want):
            return tuple(want)
    return None


@kernel("pd_op.arange")
def arange(rt, op, vals):  # (start, end, step)
    start, end, step = (scalar(operand_or_attr(vals, i, op, k, d)) for i, k, d in
                        ((0, "start", 0), (1, "end", None), (2, "step", 1)))
    dt = np_dtype(str(attr(op, "dtype", "int64")))
    return [np.arange(start, end, step).astype(dt)]


def _expand_to(rt, op, x, shape):
    want = _typed_shape(rt, op)
    if want is None:
        shape = list(shape)
        off = len(shape) - x.ndim
        want = tuple(x.shape[i - off] if s == -1 and i >= off else s for i, s in enumerate(shape))
    try:
        return np.broadcast_to(x, want).copy()
    except ValueError:
        raise rt.err(op, f"cannot expand local {list(x.shape)} to {list(want)}") from None


@kernel("pd_op.expand")
def expand(rt, op, vals):  # (x, shape)
    x = np.asarray(vals[0])
    return [_expand_to(rt, op, x, operand_or_attr(vals, 1, op, "shape", [], conv=int_list))]


@kernel("pd_op.expand_as")
def expand_as(rt, op, vals):  # (x, y, target_shape)
    x = np.asarray(vals[0])
    shape = np.shape(vals[1]) if len(vals) > 1 and vals[1] is not None else int_list(attr(op, "target_shape"))
    return [_expand_to(rt, op, x, shape)]


@kernel("pd_op.expand_grad", "pd_op.expand_as_grad")
def expand_grad(rt, op, vals):  # (x, out_grad, shape)
    return [unbroadcast(np.asarray(vals[1], dtype=np.float64), np.shape(vals[0]))]


@kernel("pd_op.flatten")
def flatten(rt, op, vals):
    x = np.asarray(vals[0])
    want = _typed_shape(rt, op)
    if want is None or int(np.prod(want)) != x.size:
        if x.ndim == 0:
            want = (1,)
        else:
            a = norm_axis(int(attr(op, "start_axis", 1)), x.ndim)
            b = norm_axis(int(attr(op, "stop_axis", -1)), x.ndim)
            want = x.shape[:a] + (int(np.prod(x.shape[a:b + 1])),) + x.shape[b + 1:]
    return [x.reshape(want)] + [None] * (op.num_results - 1)


@kernel("pd_op.flatten_grad")
def flatten_grad(rt, op, vals):  # (x or xshape, out_grad)
    return [np.asarray(vals[1]).reshape(np.shape(vals[0]))]


@kernel("pd_op.tile")
def tile(rt, op, vals):  # (x, repeat_times)
    x = np.asarray(vals[0])
    return [np.tile(x, operand_or_attr(vals, 1, op, "repeat_times", [], conv=int_list))]


@kernel("pd_op.tile_grad")
def tile_grad(rt, op, vals):  # (x, out_grad, repeat_times)
    x, g = np.asarray(vals[0]), np.asarray(vals[1], dtype=np.float64)
    reps = operand_or_attr(vals, 2, op, "repeat_times", [], conv=int_list)
    shape = (1,) * (g.ndim - x.ndim) + x.shape
    reps = [1] * (g.ndim - len(reps)) + list(reps)
    split = []
    for r, n in zip(reps, shape):
        split += [r, n]
    out = g.reshape(split).sum(axis=tuple(range(0, 2 * g.ndim, 2)))
    return [out.reshape(x.shape)]


@kernel("pd_op.slice_grad")
def slice_grad(rt, op, vals):  # (input, out_grad, starts, ends)
    x, g = np.asarray(vals[0]), np.asarray(vals[1], dtype=np.float64)
    region, drop = slice_region(op, [None, vals[2] if len(vals) > 2 else None, vals[3] if len(vals) > 3 else None],
                                x.shape)
    for a in drop:
        g = np.expand_dims(g, a)
    dx = np.zeros(x.shape, dtype=np.float64)
    dx[region] = g.reshape(dx[region].shape)
    return [dx]


@kernel("pd_op.where_grad")
def where_grad(rt, op, vals):  # (condition, x, y, out_grad)
    c, x, y, g = np.asarray(vals[0], dtype=bool), np.asarray(vals[1]), np.asarray(vals[2]), np.asarray(vals[3])
    return [unbroadcast(np.where(c, g, 0.0), x.shape), unbroadcast(np.where(c, 0.0, g), y.shape)]


@kernel("pd_op.stack_grad")
def stack_grad(rt, op, vals):  # (x vector, out_grad)
    g = np.asarray(vals[1])
    axis = norm_axis(int(attr(op, "axis", 0)), g.ndim)
    return [[np.take(g, i, axis=axis) for i in range(g.shape[axis])]]


@kernel("pd_op.unbind")
def unbind(rt, op, vals):
    x = np.asarray(vals[0])
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    return [[np.take(x, i, axis=axis) for i in range(x.shape[axis])]]


@kernel("pd_op.roll", "pd_op.roll_grad")
def roll(rt, op, vals):  # (x, shifts) / (x, out_grad, shifts): the gradient rolls back
    grad = op.name.endswith("_grad")
    x = np.asarray(vals[1] if grad else vals[0])
    shifts = operand_or_attr(vals, 2 if grad else 1, op, "shifts", [0], conv=int_list)
    axes = int_list(attr(op, "axis", []) or [])
    sign = -1 if grad else 1
    if not axes:
        return [np.roll(x.reshape(-1), sign * shifts[0]).reshape(x.shape)]
    return [np.roll(x, [sign * s for s in shifts], axis=[norm_axis(a, x.ndim) for a in axes])]


def _k(vals, op) -> int:
    return int(scalar(operand_or_attr(vals, 1, op, "k", 1)))


@kernel("pd_op.topk")
def topk(rt, op, vals):  # (x, k) -> (out, indices)
    x = np.asarray(vals[0])
    axis = norm_axis(int(attr(op, "axis", -1)), x.ndim)
    k = _k(vals, op)
    largest = bool(attr(op, "largest", True))
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


@kernel("pd_op.topk_grad")
def topk_grad(rt, op, vals):  # (x, indices, out_grad)
    x, idx, g = np.asarray(vals[0]), np.asarray(vals[1]).astype(np.int64), np.asarray(vals[2], dtype=np.float64)
    axis = norm_axis(int(attr(op, "axis", -1)), x.ndim)
    dx = np.zeros(x.shape, dtype=np.float64)
    np.put_along_axis(dx, idx, g, axis=axis)
    return [dx]


def _arg(fn):
    def run(rt, op, vals):  # (x, axis)
        x = np.asarray(vals[0])
        keep = bool(attr(op, "keepdims", False))
        if bool(attr(op, "flatten", False)):
            out = np.asarray(fn(x.reshape(-1)))
            return [out.reshape([1] * x.ndim if keep else []).astype(np.int64)]
        a = norm_axis(int(scalar(operand_or_attr(vals, 1, op, "axis", 0))), x.ndim)
        out = fn(x, axis=a)
        return [(np.expand_dims(out, a) if keep else out).astype(np.int64)]
    return run


kernel("pd_op.argmax")(_arg(np.argmax))
kernel("pd_op.argmin")(_arg(np.argmin))


@kernel("pd_op.one_hot")
def one_hot(rt, op, vals):  # (x, num_classes)
    x = np.asarray(vals[0]).astype(np.int64)
    n = int(scalar(operand_or_attr(vals, 1, op, "num_classes", None) if len(vals) > 1 and vals[1] is not None
                   else attr(op, "num_classes", attr(op, "depth"))))
    if x.size and (x.min() < 0 or x.max() >= n):
        raise rt.err(op, f"indices outside the {n} classes")
    return [np.eye(n, dtype=np.float64)[x]]


def _index_axis(rt, op, x, index, axis):
    index = np.asarray(index).astype(np.int64)
    n = x.shape[axis]
    if index.size and (index.min() < -n or index.max() >= n):
        raise rt.err(op, f"indices outside the {n} entries of axis {axis} of the local {list(x.shape)}")
    return index


@kernel("pd_op.gather")
def gather(rt, op, vals):  # (x, index, axis)
    x = np.asarray(vals[0])
    axis = norm_axis(int(scalar(operand_or_attr(vals, 2, op, "axis", 0))), x.ndim)
    return [np.take(x, _index_axis(rt, op, x, vals[1], axis), axis=axis)]


@kernel("pd_op.index_select")
def index_select(rt, op, vals):  # (x, index)
    x = np.asarray(vals[0])
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    return [np.take(x, _index_axis(rt, op, x, vals[1], axis), axis=axis)]


def _scatter_add_axis(x, index, g, axis):
    dx = np.zeros(x.shape, dtype=np.float64)
    moved = np.moveaxis(dx, axis, 0)
    np.add.at(moved, np.asarray(index).astype(np.int64).reshape(-1),
              np.moveaxis(np.asarray(g, dtype=np.float64), axis, 0).reshape((-1,) + moved.shape[1:]))
    return dx


@kernel("pd_op.gather_grad")
def gather_grad(rt, op, vals):  # (x, index, out_grad, axis)
    x = np.asarray(vals[0])
    axis = norm_axis(int(scalar(operand_or_attr(vals, 3, op, "axis", 0))), x.ndim)
    return [_scatter_add_axis(x, vals[1], vals[2], axis)]


@kernel("pd_op.index_select_grad")
def index_select_grad(rt, op, vals):  # (x, index, out_grad)
    x = np.asarray(vals[0])
    return [_scatter_add_axis(x, vals[1], vals[2], norm_axis(int(attr(op, "axis", 0)), x.ndim))]


@kernel("pd_op.index_add", "pd_op.index_add_")
def index_add(rt, op, vals):  # (x, index, add_value, axis): x with add_value's slices added at index (repeats add up)
    x = np.array(vals[0], dtype=np.float64 if np.asarray(vals[0]).dtype.kind == "f" else None, copy=True)
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    index = _index_axis(rt, op, x, vals[1], axis).reshape(-1)
    add = np.asarray(vals[2])
    want = x.shape[:axis] + (index.size,) + x.shape[axis + 1:]
    if add.shape != want:
        raise rt.err(op, f"add_value of local {list(add.shape)} does not fit {index.size} indices of axis {axis} "
                         f"of the local {list(x.shape)}")
    np.add.at(np.moveaxis(x, axis, 0), index, np.moveaxis(add, axis, 0))
    return [x]


@kernel("pd_op.index_add_grad")
def index_add_grad(rt, op, vals):  # (index, add_value, out_grad, axis) -> (x_grad, add_value_grad)
    g = np.asarray(vals[2], dtype=np.float64)
    axis = norm_axis(int(attr(op, "axis", 0)), g.ndim)
    return [g.copy(), np.take(g, _index_axis(rt, op, g, vals[0], axis).reshape(-1), axis=axis)]


@kernel("pd_op.nonzero")
def nonzero(rt, op, vals):  # (x) -> [count, x.ndim] int64: the coordinates of x's nonzero entries, row-major
    return [np.argwhere(np.asarray(vals[0])).astype(np.int64).reshape(-1, np.ndim(vals[0]))]


@kernel("pd_op.gather_nd")
def gather_nd(rt, op, vals):  # (x, index): index[..., :k] addresses x's first k axes
    x, idx = np.asarray(vals[0]), np.asarray(vals[1]).astype(np.int64)
    k = idx.shape[-1]
    return [x[tuple(np.moveaxis(idx, -1, 0))] if k else np.broadcast_to(x, idx.shape[:-1] + x.shape).copy()]


@kernel("pd_op.gather_nd_grad")
def gather_nd_grad(rt, op, vals):  # (x, index, out_grad)
    x, idx, g = np.asarray(vals[0]), np.asarray(vals[1]).astype(np.int64), np.asarray(vals[2], dtype=np.float64)
    dx = np.zeros(x.shape, dtype=np.float64)
    np.add.at(dx, tuple(np.moveaxis(idx, -1, 0)), g)
    return [dx]


@kernel("pd_op.take_along_axis")
def take_along_axis(rt, op, vals):  # (arr, indices)
    x, idx = np.asarray(vals[0]), np.asarray(vals[1]).astype(np.int64)
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    return [np.take_along_axis(x, np.broadcast_to(idx, idx.shape), axis=axis)]


@kernel("pd_op.take_along_axis_grad")
def take_along_axis_grad(rt, op, vals):  # (arr, indices, out_grad)
    x, idx, g = np.asarray(vals[0]), np.asarray(vals[1]).astype(np.int64), np.asarray(vals[2], dtype=np.float64)
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    dx = np.zeros(x.shape, dtype=np.float64)
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    np.add.at(dx, tuple(grid), g)
    return [dx]


@kernel("pd_op.put_along_axis")
def put_along_axis(rt, op, vals):  # (arr, indices, values)
    x, idx = np.array(vals[0], dtype=np.float64), np.asarray(vals[1]).astype(np.int64)
    v = np.broadcast_to(np.asarray(vals[2], dtype=np.float64), idx.shape)
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    reduce = str(attr(op, "reduce", "assign"))
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    where = tuple(grid)
    if reduce == "assign":
        x[where] = v
    elif reduce == "add":
        if not bool(attr(op, "include_self", True)):
            x[where] = 0.0
        np.add.at(x, where, v)
    elif reduce in ("mul", "multiply"):
        if not bool(attr(op, "include_self", True)):
            x[where] = 1.0
        np.multiply.at(x, where, v)
    else:
        raise rt.err(op, f"reduce {reduce!r} is not simulated")
    return [x]


@kernel("pd_op.masked_fill")
def masked_fill(rt, op, vals):  # (x, mask, value)
    x, m = np.asarray(vals[0]), np.asarray(vals[1], dtype=bool)
    v = np.asarray(vals[2]) if vals[2] is not None else np.asarray(attr(op, "value", 0.0))
    return [np.where(m, v, x)]


@kernel("pd_op.masked_fill_grad")
def masked_fill_grad(rt, op, vals):  # (x, mask, value, out_grad) -> (x_grad, value_grad)
    x, m, g = np.asarray(vals[0]), np.asarray(vals[1], dtype=bool), np.asarray(vals[3], dtype=np.float64)
    vshape = np.shape(vals[2]) if vals[2] is not None else ()
    return [unbroadcast(np.where(m, 0.0, g), x.shape), unbroadcast(np.where(m, g, 0.0), vshape)]


def _cumsum(x, op, vals, i: int, reverse_flip: bool = False):
    if bool(attr(op, "flatten", False)):
        x = x.reshape(-1)
        axis = 0
    else:
        axis = norm_axis(int(scalar(operand_or_attr(vals, i, op, "axis", -1))), x.ndim)
    rev = bool(attr(op, "reverse", False)) != reverse_flip
    if rev:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis)
    if bool(attr(op, "exclusive", False)):
        out = out - x
    return np.flip(out, axis) if rev else out


@kernel("pd_op.cumsum")
def cumsum(rt, op, vals):  # (x, axis)
    return [_cumsum(np.asarray(vals[0]), op, vals, 1)]


@kernel("pd_op.cumsum_grad")
def cumsum_grad(rt, op, vals):  # (x, out_grad, axis): the sum in the other direction
    x, g = np.asarray(vals[0]), np.asarray(vals[1], dtype=np.float64)
    return [_cumsum(g, op, vals, 2, reverse_flip=True).reshape(x.shape)]


def _set_region(op, shape, starts, ends, steps):
    """``set_value``'s region: (slices per axis, the shape values take there)."""
    idx = [slice(None)] * len(shape)
    axes = int_list(attr(op, "axes", []) or [])
    steps = steps or [1] * len(axes)
    for a, s, e, st in zip(axes, starts, ends, steps):
        a = norm_axis(a, len(shape))
        idx[a] = slice(*slice(s, e, st).indices(shape[a]))
    return tuple(idx)


def _set_args(vals, first):
    return [int_list(vals[i]) if i < len(vals) and vals[i] is not None else [] for i in range(first, first + 3)]


@kernel("pd_op.set_value_with_tensor", "pd_op.set_value_with_tensor_")
def set_value_with_tensor(rt, op, vals):  # (x, values, starts, ends, steps): x[region] = values
    x = np.array(vals[0], copy=True)
    starts, ends, steps = _set_args(vals, 2)
    region = _set_region(op, x.shape, starts, ends, steps)
    v = np.asarray(vals[1])
    try:
        x[region] = v.reshape(x[region].shape) if v.size == x[region].size else v
    except ValueError:
        raise rt.err(op, f"values of local {list(v.shape)} do not fit the region {list(x[region].shape)}") from None
    return [x]


@kernel("pd_op.set_value", "pd_op.set_value_")
def set_value(rt, op, vals):  # (x, starts, ends, steps): x[region] = the constant ``values``
    x = np.array(vals[0], copy=True)
    starts, ends, steps = _set_args(vals, 1)
    region = _set_region(op, x.shape, starts, ends, steps)
    v = np.asarray(attr(op, "values", [0]) or [0], dtype=np.float64)
    x[region] = v.reshape(-1)[0] if v.size == 1 else v.reshape(x[region].shape)
    return [x]
