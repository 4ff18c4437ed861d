"""Forward math of the training programs: unary math (rsqrt, sqrt, silu, relu, square, exp...),
reductions (mean, sum, squared_l2_norm, clip_by_norm, add_n), matmul, softmax, embedding, causal masks
(triu/tril), stack/unsqueeze/squeeze, cross entropy with softmax, and the program's outputs
(``builtin.shadow_output``, ``builtin.set_parameter``).  Paddle's formulas, in float64."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, norm_axis, operand_or_attr


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


_UNARY = {
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sqrt": np.sqrt, "square": np.square, "exp": np.exp,
    "log": np.log, "tanh": np.tanh, "abs": np.abs, "sin": np.sin, "cos": np.cos,
    "relu": lambda x: np.maximum(x, 0), "sigmoid": sigmoid, "silu": lambda x: x * sigmoid(x),
    "reciprocal": lambda x: 1.0 / x,
}


def _unary(fn):
    def run(rt, op, vals):
        with np.errstate(all="ignore"):
            return [fn(np.asarray(vals[0]))]
    return run


for _name, _fn in _UNARY.items():
    kernel(f"pd_op.{_name}")(_unary(_fn))


def axes_of(vals, op, nd: int, i: int = 1) -> tuple[int, ...] | None:
    """The reduction axes (operand ``i`` or attribute ``axis``); None = all axes."""
    ax = operand_or_attr(vals, i, op, "axis", [], conv=int_list)
    if not ax or bool(attr(op, "reduce_all", False)):
        return None
    return tuple(sorted({norm_axis(a, nd) for a in ax}))


@kernel("pd_op.mean")
def mean(rt, op, vals):
    x = np.asarray(vals[0], dtype=np.float64)
    return [np.mean(x, axis=axes_of(vals, op, x.ndim), keepdims=bool(attr(op, "keepdim", False)))]


@kernel("pd_op.sum")
def sum_(rt, op, vals):
    x = np.asarray(vals[0])
    return [np.sum(x, axis=axes_of(vals, op, x.ndim), keepdims=bool(attr(op, "keepdim", False)))]


@kernel("pd_op.squared_l2_norm")
def squared_l2_norm(rt, op, vals):
    x = np.asarray(vals[0], dtype=np.float64)
    return [np.array([np.sum(x * x)])]


@kernel("pd_op.clip_by_norm")
def clip_by_norm(rt, op, vals):
    """ClipGradByNorm: x * max_norm / ||x|| where the norm exceeds max_norm, else x."""
    x = np.asarray(vals[0], dtype=np.float64)
    n, m = float(np.sqrt(np.sum(x * x))), float(attr(op, "max_norm", 1.0))
    return [x * (m / n) if n > m else x.copy()]


@kernel("pd_op.add_n")
def add_n(rt, op, vals):
    xs = [np.asarray(a) for a in vals[0]]
    out = xs[0].copy()
    for a in xs[1:]:
        out = out + a
    return [out]


def _t(x, flag: bool):
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


@kernel("pd_op.matmul")
def matmul(rt, op, vals):
    x, y = np.asarray(vals[0]), np.asarray(vals[1])
    try:
        return [np.matmul(_t(x, bool(attr(op, "transpose_x", False))), _t(y, bool(attr(op, "transpose_y", False))))]
    except ValueError as e:
        raise rt.err(op, f"local shapes {list(x.shape)} and {list(y.shape)}: {e}") from None


def softmax_of(x, axis: int):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


@kernel("pd_op.softmax")
def softmax(rt, op, vals):
    return [softmax_of(np.asarray(vals[0]), int(attr(op, "axis", -1)))]


@kernel("pd_op.embedding")
def embedding(rt, op, vals):
    ids, w = np.asarray(vals[0]).astype(np.int64), np.asarray(vals[1])
    if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
        raise rt.err(op, f"ids outside the {w.shape[0]} rows of the local weight {list(w.shape)}")
    out = w[ids]
    pad = int(attr(op, "padding_idx", -1))
    if pad >= 0:
        out = np.where((ids == pad)[..., None], 0.0, out)
    return [out]


@kernel("pd_op.triu", "pd_op.tril", "pd_op.triu_grad", "pd_op.tril_grad")
def triangle(rt, op, vals):
    """triu/tril, and their gradients (the same mask applied to the output gradient)."""
    x = np.asarray(vals[0])
    k = int(attr(op, "diagonal", 0))
    return [np.triu(x, k) if op.name.startswith("pd_op.triu") else np.tril(x, k)]


@kernel("pd_op.stack")
def stack(rt, op, vals):
    xs = [np.asarray(a) for a in vals[0]]
    return [np.stack(xs, axis=norm_axis(int(attr(op, "axis", 0)), xs[0].ndim + 1))]


@kernel("pd_op.unsqueeze")
def unsqueeze(rt, op, vals):
    x = np.asarray(vals[0])
    for a in operand_or_attr(vals, 1, op, "axis", [], conv=int_list):
        x = np.expand_dims(x, norm_axis(a, x.ndim + 1))
    return [x] + [None] * (op.num_results - 1)


@kernel("pd_op.squeeze")
def squeeze(rt, op, vals):
    x = np.asarray(vals[0])
    ax = [norm_axis(a, x.ndim) for a in operand_or_attr(vals, 1, op, "axis", [], conv=int_list)]
    ax = tuple(a for a in ax if x.shape[a] == 1) if ax else None
    return [np.squeeze(x, axis=ax)] + [None] * (op.num_results - 1)


def ce_labels(rt, op, logits, label):
    """Class ids of a hard label (shape of logits with 1 on the class axis) and the ignore mask."""
    axis = norm_axis(int(attr(op, "axis", -1)), logits.ndim)
    lab = np.asarray(label).astype(np.int64)
    if lab.ndim == logits.ndim:
        lab = np.take(lab, 0, axis=axis)
    ignore = lab == int(attr(op, "ignore_index", -100))
    n = logits.shape[axis]
    if ((lab < 0) | (lab >= n))[~ignore].any():
        raise rt.err(op, f"labels outside the {n} classes of the local logits {list(logits.shape)}")
    return axis, np.where(ignore, 0, lab), ignore


@kernel("pd_op.cross_entropy_with_softmax")
def cross_entropy_with_softmax(rt, op, vals):
    """(softmax, loss): loss = -log softmax[label] along ``axis`` (kept as size 1), 0 where the
    label is ``ignore_index``; soft labels: -sum(label * log softmax)."""
    x = np.asarray(vals[0], dtype=np.float64)
    axis = norm_axis(int(attr(op, "axis", -1)), x.ndim)
    if bool(attr(op, "use_softmax", True)):
        sm = softmax_of(x, axis)
    else:
        sm = x
    if bool(attr(op, "soft_label", False)):
        loss = -np.sum(np.asarray(vals[1]) * np.log(sm), axis=axis, keepdims=True)
        return [sm, loss]
    axis, lab, ignore = ce_labels(rt, op, x, vals[1])
    picked = np.take_along_axis(sm, np.expand_dims(lab, axis), axis=axis)
    loss = np.where(np.expand_dims(ignore, axis), 0.0, -np.log(picked))
    return [sm, loss]


@kernel("builtin.shadow_output", "builtin.set_parameter")
def output(rt, op, vals):
    return []
