"""Backward kernels (``*_grad``), the derivatives of :mod:`.nn`, :mod:`.elementwise` and
:mod:`.shape` ops with Paddle's operand order (tested against finite differences).  A gradient
of a broadcast operand is summed over the broadcast axes back to the operand's shape."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, norm_axis, operand_or_attr
from .nn import axes_of, ce_labels, sigmoid


def unbroadcast(g, shape) -> np.ndarray:
    """Sum ``g`` down to ``shape`` (numpy broadcasting in reverse)."""
    g = np.asarray(g)
    shape = tuple(shape)
    while g.ndim > len(shape):
        g = g.sum(0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(i, keepdims=True)
    return g


def _binary_grad(fx, fy):
    def run(rt, op, vals):
        x, y, dout = (np.asarray(v) for v in vals[:3])
        return [unbroadcast(fx(x, y, dout), x.shape), unbroadcast(fy(x, y, dout), y.shape)]
    return run


kernel("pd_op.add_grad")(_binary_grad(lambda x, y, g: g, lambda x, y, g: g))
kernel("pd_op.subtract_grad")(_binary_grad(lambda x, y, g: g, lambda x, y, g: -g))
kernel("pd_op.multiply_grad")(_binary_grad(lambda x, y, g: g * y, lambda x, y, g: g * x))


@kernel("pd_op.divide_grad")
def divide_grad(rt, op, vals):  # (x, y, out, out_grad)
    x, y, out, g = (np.asarray(v) for v in vals[:4])
    return [unbroadcast(g / y, x.shape), unbroadcast(-g * out / y, y.shape)]


@kernel("pd_op.maximum_grad", "pd_op.minimum_grad")
def extremum_grad(rt, op, vals):
    x, y, g = (np.asarray(v) for v in vals[:3])
    take_x = x > y if op.name.endswith("maximum_grad") else x < y
    return [unbroadcast(np.where(take_x, g, 0.0), x.shape), unbroadcast(np.where(take_x, 0.0, g), y.shape)]


# unary: (name, which operand the formula reads, d out / d in)
_UNARY_GRAD = {
    "rsqrt_grad": ("out", lambda out, g: -0.5 * out ** 3 * g),
    "sqrt_grad": ("out", lambda out, g: 0.5 * g / out),
    "exp_grad": ("out", lambda out, g: out * g),
    "tanh_grad": ("out", lambda out, g: (1 - out * out) * g),
    "sigmoid_grad": ("out", lambda out, g: out * (1 - out) * g),
    "relu_grad": ("out", lambda out, g: np.where(out > 0, g, 0.0)),
    "square_grad": ("x", lambda x, g: 2.0 * x * g),
    "log_grad": ("x", lambda x, g: g / x),
    "abs_grad": ("x", lambda x, g: np.sign(x) * g),
    "sin_grad": ("x", lambda x, g: np.cos(x) * g),
    "cos_grad": ("x", lambda x, g: -np.sin(x) * g),
}


def _unary_grad(fn):
    def run(rt, op, vals):
        with np.errstate(all="ignore"):
            return [fn(np.asarray(vals[0]), np.asarray(vals[-1]))]
    return run


for _name, (_, _fn) in _UNARY_GRAD.items():
    kernel(f"pd_op.{_name}")(_unary_grad(_fn))


@kernel("pd_op.silu_grad")
def silu_grad(rt, op, vals):  # (x, out, out_grad)
    x, g = np.asarray(vals[0]), np.asarray(vals[-1])
    s = sigmoid(x)
    return [g * s * (1 + x * (1 - s))]


@kernel("pd_op.softmax_grad")
def softmax_grad(rt, op, vals):  # (out, out_grad)
    out, g = np.asarray(vals[0]), np.asarray(vals[1])
    axis = int(attr(op, "axis", -1))
    return [out * (g - np.sum(g * out, axis=axis, keepdims=True))]


def _t(x, flag):
    return np.swapaxes(x, -1, -2) if flag else x


@kernel("pd_op.matmul_grad")
def matmul_grad(rt, op, vals):  # (x, y, out_grad)
    x, y, g = (np.asarray(v, dtype=np.float64) for v in vals[:3])
    tx, ty = bool(attr(op, "transpose_x", False)), bool(attr(op, "transpose_y", False))
    xe = x[None, :] if x.ndim == 1 else _t(x, tx)
    ye = y[:, None] if y.ndim == 1 else _t(y, ty)
    ge = g
    if x.ndim == 1:
        ge = np.expand_dims(ge, -2)
    if y.ndim == 1:
        ge = np.expand_dims(ge, -1)
    dxe = unbroadcast(ge @ np.swapaxes(ye, -1, -2), xe.shape)
    dye = unbroadcast(np.swapaxes(xe, -1, -2) @ ge, ye.shape)
    dx = dxe[0] if x.ndim == 1 else _t(dxe, tx)
    dy = dye[:, 0] if y.ndim == 1 else _t(dye, ty)
    return [dx, dy]


@kernel("pd_op.mean_grad", "pd_op.sum_grad")
def reduce_grad(rt, op, vals):  # (x, out_grad, axis)
    x, g = np.asarray(vals[0]), np.asarray(vals[1], dtype=np.float64)
    axes = axes_of(vals, op, x.ndim, 2)
    axes = tuple(range(x.ndim)) if axes is None else axes
    if not bool(attr(op, "keepdim", False)):
        for a in axes:
            g = np.expand_dims(g, a)
    n = int(np.prod([x.shape[a] for a in axes])) if op.name.endswith("mean_grad") else 1
    return [np.broadcast_to(g, x.shape) / max(n, 1)]


@kernel("pd_op.reshape_grad")
def reshape_grad(rt, op, vals):  # (x or xshape, out_grad)
    x, g = np.asarray(vals[0]), np.asarray(vals[1])
    return [g.reshape(x.shape)]


@kernel("pd_op.transpose_grad")
def transpose_grad(rt, op, vals):
    perm = int_list(attr(op, "perm"))
    return [np.transpose(np.asarray(vals[0]), np.argsort(perm))]


@kernel("pd_op.unsqueeze_grad", "pd_op.squeeze_grad")
def squeeze_grad(rt, op, vals):  # (x or xshape, out_grad)
    return [np.asarray(vals[1]).reshape(np.asarray(vals[0]).shape)]


@kernel("pd_op.embedding_grad")
def embedding_grad(rt, op, vals):  # (ids, weight, out_grad)
    ids, w, g = np.asarray(vals[0]).astype(np.int64), np.asarray(vals[1]), np.asarray(vals[2], dtype=np.float64)
    dw = np.zeros(w.shape, dtype=np.float64)
    np.add.at(dw, ids.reshape(-1), g.reshape(-1, w.shape[-1]))
    pad = int(attr(op, "padding_idx", -1))
    if pad >= 0:
        dw[pad] = 0.0
    return [dw]


@kernel("pd_op.cross_entropy_with_softmax_grad")
def cross_entropy_with_softmax_grad(rt, op, vals):  # (label, softmax, loss_grad)
    label, sm, g = np.asarray(vals[0]), np.asarray(vals[1], dtype=np.float64), np.asarray(vals[2])
    if bool(attr(op, "soft_label", False)):
        return [(sm - label) * g]
    axis, lab, ignore = ce_labels(rt, op, sm, label)
    onehot = np.zeros_like(sm)
    np.put_along_axis(onehot, np.expand_dims(lab, axis), 1.0, axis=axis)
    return [np.where(np.expand_dims(ignore, axis), 0.0, (sm - onehot) * g)]


@kernel("pd_op.scale_grad")
def scale_grad(rt, op, vals):
    return [np.asarray(vals[0]) * operand_or_attr(vals, 1, op, "scale", 1.0)]


@kernel("pd_op.concat_grad")
def concat_grad(rt, op, vals):  # (x vector, out_grad, axis)
    xs, g = [np.asarray(a) for a in vals[0]], np.asarray(vals[1])
    axis = norm_axis(int(operand_or_attr(vals, 2, op, "axis", 0)), g.ndim)
    cuts = np.cumsum([a.shape[axis] for a in xs])[:-1]
    return [list(np.split(g, cuts, axis=axis))]
