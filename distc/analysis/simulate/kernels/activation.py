"""Activations and pointwise math beyond :mod:`.nn` (forward and backward, Paddle's formulas):
gelu (exact erf form and ``approximate`` tanh form), swiglu (``silu(x) * y``, or the two halves
of x's last axis), pow, leaky_relu, elu, hardswish, hardsigmoid, softplus, mish, erf, clip,
log_softmax, logsumexp, and the gradients of elementwise_pow and sigmoid-family ops that
:mod:`.grads` lacks."""

from __future__ import annotations

import math

import numpy as np

from ..registry import kernel
from ..values import attr, norm_axis, operand_or_attr
from .grads import unbroadcast
from .nn import axes_of, sigmoid

_ERF = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    x = np.asarray(x, dtype=np.float64)
    return _ERF(x) if x.size else x.copy()


_C = math.sqrt(2.0 / math.pi)


def gelu(x, approximate: bool):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(_C * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_derivative(x, approximate: bool):
    if approximate:
        inner = _C * (x + 0.044715 * x ** 3)
        t = np.tanh(inner)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _C * (1.0 + 3 * 0.044715 * x * x)
    return 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


@kernel("pd_op.gelu")
def gelu_k(rt, op, vals):
    return [gelu(np.asarray(vals[0], dtype=np.float64), bool(attr(op, "approximate", False)))]


@kernel("pd_op.gelu_grad")
def gelu_grad(rt, op, vals):  # (x, out_grad)
    x, g = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1])
    return [g * gelu_derivative(x, bool(attr(op, "approximate", False)))]


def _swiglu_halves(x, y):
    if y is not None:
        return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), False
    x = np.asarray(x, dtype=np.float64)
    h = x.shape[-1] // 2
    return x[..., :h], x[..., h:], True


@kernel("pd_op.swiglu")
def swiglu(rt, op, vals):  # (x, y or NULL): silu(x) * y
    a, b, _ = _swiglu_halves(vals[0], vals[1] if len(vals) > 1 else None)
    return [a * sigmoid(a) * b]


@kernel("pd_op.swiglu_grad")
def swiglu_grad(rt, op, vals):  # (x, y or NULL, out_grad) -> (x_grad, y_grad)
    a, b, halves = _swiglu_halves(vals[0], vals[1] if len(vals) > 2 else None)
    g = np.asarray(vals[-1], dtype=np.float64)
    s = sigmoid(a)
    da = g * b * s * (1 + a * (1 - s))
    db = g * a * s
    if halves:
        return [np.concatenate([da, db], axis=-1), None]
    return [da, db]


@kernel("pd_op.pow")
def pow_(rt, op, vals):
    y = float(operand_or_attr(vals, 1, op, "y", 1.0))
    with np.errstate(all="ignore"):
        return [np.power(np.asarray(vals[0], dtype=np.float64), y)]


@kernel("pd_op.pow_grad")
def pow_grad(rt, op, vals):  # (x, out_grad)
    x, g = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1])
    y = float(operand_or_attr(vals, 2, op, "y", 1.0))
    with np.errstate(all="ignore"):
        return [g * y * np.power(x, y - 1)]


@kernel("pd_op.elementwise_pow_grad")
def elementwise_pow_grad(rt, op, vals):  # (x, y, out_grad)
    x, y, g = (np.asarray(v, dtype=np.float64) for v in vals[:3])
    with np.errstate(all="ignore"):
        dx = g * y * np.power(x, y - 1)
        dy = g * np.power(x, y) * np.log(np.where(x > 0, x, np.nan))
    return [unbroadcast(dx, x.shape), unbroadcast(np.nan_to_num(dy), y.shape)]


# unary activations with attributes: name -> (forward, derivative in terms of x)
def _alpha(op, key="alpha", default=0.02):
    return float(attr(op, key, default))


_ACT = {
    "leaky_relu": (lambda op, x: np.where(x >= 0, x, _alpha(op, "negative_slope") * x),
                   lambda op, x: np.where(x >= 0, 1.0, _alpha(op, "negative_slope"))),
    "elu": (lambda op, x: np.where(x > 0, x, _alpha(op, "alpha", 1.0) * (np.exp(np.minimum(x, 0)) - 1)),
            lambda op, x: np.where(x > 0, 1.0, _alpha(op, "alpha", 1.0) * np.exp(np.minimum(x, 0)))),
    "hardswish": (lambda op, x: x * np.clip(x + 3, 0, 6) / 6,
                  lambda op, x: np.where(x < -3, 0.0, np.where(x > 3, 1.0, (2 * x + 3) / 6))),
    "hardsigmoid": (lambda op, x: np.clip(x * _alpha(op, "slope", 1 / 6) + _alpha(op, "offset", 0.5), 0, 1),
                    lambda op, x: np.where((x * _alpha(op, "slope", 1 / 6) + _alpha(op, "offset", 0.5) > 0) &
                                           (x * _alpha(op, "slope", 1 / 6) + _alpha(op, "offset", 0.5) < 1),
                                           _alpha(op, "slope", 1 / 6), 0.0)),
    "softplus": (lambda op, x: np.where(x * _alpha(op, "beta", 1.0) > _alpha(op, "threshold", 20.0), x,
                                        np.log1p(np.exp(np.minimum(x * _alpha(op, "beta", 1.0), 50))) / _alpha(op, "beta", 1.0)),
                 lambda op, x: np.where(x * _alpha(op, "beta", 1.0) > _alpha(op, "threshold", 20.0), 1.0,
                                        sigmoid(x * _alpha(op, "beta", 1.0)))),
    "mish": (lambda op, x: x * np.tanh(np.log1p(np.exp(np.minimum(x, 50)))),
             lambda op, x: np.tanh(np.log1p(np.exp(np.minimum(x, 50)))) +
             x * (1 - np.tanh(np.log1p(np.exp(np.minimum(x, 50)))) ** 2) * sigmoid(x)),
    "erf": (lambda op, x: erf(x), lambda op, x: 2 / math.sqrt(math.pi) * np.exp(-x * x)),
    "log1p": (lambda op, x: np.log1p(x), lambda op, x: 1 / (1 + x)),
    "logsigmoid": (lambda op, x: -np.logaddexp(0, -x), lambda op, x: sigmoid(-x)),
    "softsign": (lambda op, x: x / (1 + np.abs(x)), lambda op, x: 1 / (1 + np.abs(x)) ** 2),
    "relu6": (lambda op, x: np.clip(x, 0, 6), lambda op, x: np.where((x > 0) & (x < 6), 1.0, 0.0)),
    "atan": (lambda op, x: np.arctan(x), lambda op, x: 1 / (1 + x * x)),
}


def _act(fwd):
    def run(rt, op, vals):
        with np.errstate(all="ignore"):
            return [fwd(op, np.asarray(vals[0], dtype=np.float64))]
    return run


def _act_grad(der):
    def run(rt, op, vals):  # (x, out_grad)
        with np.errstate(all="ignore"):
            return [np.asarray(vals[-1]) * der(op, np.asarray(vals[0], dtype=np.float64))]
    return run


for _name, (_fwd, _der) in _ACT.items():
    kernel(f"pd_op.{_name}")(_act(_fwd))
    kernel(f"pd_op.{_name}_grad")(_act_grad(_der))


@kernel("pd_op.clip")
def clip(rt, op, vals):  # (x, min, max)
    lo = float(operand_or_attr(vals, 1, op, "min", -np.inf))
    hi = float(operand_or_attr(vals, 2, op, "max", np.inf))
    return [np.clip(np.asarray(vals[0]), lo, hi)]


@kernel("pd_op.clip_grad")
def clip_grad(rt, op, vals):  # (x, out_grad, min, max)
    x, g = np.asarray(vals[0]), np.asarray(vals[1])
    lo = float(operand_or_attr(vals, 2, op, "min", -np.inf))
    hi = float(operand_or_attr(vals, 3, op, "max", np.inf))
    return [np.where((x >= lo) & (x <= hi), g, 0.0)]


@kernel("pd_op.log_softmax")
def log_softmax(rt, op, vals):
    x = np.asarray(vals[0], dtype=np.float64)
    a = norm_axis(int(attr(op, "axis", -1)), x.ndim)
    m = x.max(axis=a, keepdims=True)
    return [x - m - np.log(np.exp(x - m).sum(axis=a, keepdims=True))]


@kernel("pd_op.log_softmax_grad")
def log_softmax_grad(rt, op, vals):  # (out, out_grad)
    out, g = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1])
    a = norm_axis(int(attr(op, "axis", -1)), out.ndim)
    return [g - np.exp(out) * g.sum(axis=a, keepdims=True)]


@kernel("pd_op.logsumexp")
def logsumexp(rt, op, vals):
    x = np.asarray(vals[0], dtype=np.float64)
    ax = axes_of(vals, op, x.ndim)
    m = np.max(x, axis=ax, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    if not bool(attr(op, "keepdim", False)):
        out = np.squeeze(out, axis=ax) if ax is not None else out.reshape(())
    return [out]


@kernel("pd_op.logsumexp_grad")
def logsumexp_grad(rt, op, vals):  # (x, out, out_grad)
    x, out, g = (np.asarray(v, dtype=np.float64) for v in vals[:3])
    ax = axes_of(vals, op, x.ndim, 3)
    ax = tuple(range(x.ndim)) if ax is None else ax
    if not bool(attr(op, "keepdim", False)):
        for a in sorted(ax):
            out, g = np.expand_dims(out, a), np.expand_dims(g, a)
    return [g * np.exp(x - out)]

