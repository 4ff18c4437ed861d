"""Normalisations and their gradients, Paddle's formulas (phi's CPU kernels), in float64:

* ``layer_norm(x, scale, bias)`` over the axes from ``begin_norm_axis`` on -> (out, mean,
  variance), mean and (biased) variance of shape ``x.shape[:begin_norm_axis]``;
* ``batch_norm(x, mean, variance, scale, bias)`` (and the in-place ``batch_norm_``) -> (out,
  mean_out, variance_out, saved_mean, saved_variance, reserve_space): in training the batch's
  mean and biased variance over every axis but the channel one, running statistics
  ``momentum * running + (1 - momentum) * batch``, ``saved_variance`` the inverse standard
  deviation; ``is_test``/``use_global_stats`` normalise by the running statistics;
* ``rms_norm(x, scale)`` -> (out, inv_rms) over the axes from ``begin_norm_axis``.

Absent optional operands (``<<NULL VALUE>>``: no scale, no bias) are a scale of one and a bias
of zero, and their gradients are None."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, norm_axis


def _f(x):
    return None if x is None else np.asarray(x, dtype=np.float64)


def _split(x: np.ndarray, begin: int) -> tuple[int, int]:
    lead = int(np.prod(x.shape[:begin])) if begin else 1
    return lead, int(x.size // max(lead, 1)) if x.size else int(np.prod(x.shape[begin:]))


@kernel("pd_op.layer_norm")
def layer_norm(rt, op, vals):  # (x, scale, bias) -> (out, mean, variance)
    x, scale, bias = _f(vals[0]), _f(vals[1]), _f(vals[2])
    begin = norm_axis(int(attr(op, "begin_norm_axis", 1)), x.ndim)
    eps = float(attr(op, "epsilon", 1e-5))
    lead, n = _split(x, begin)
    x2 = x.reshape(lead, n)
    mean = x2.mean(1)
    var = x2.var(1)
    y = (x2 - mean[:, None]) / np.sqrt(var[:, None] + eps)
    if scale is not None:
        y = y * scale.reshape(1, n)
    if bias is not None:
        y = y + bias.reshape(1, n)
    stat_shape = x.shape[:begin]
    return [y.reshape(x.shape), mean.reshape(stat_shape), var.reshape(stat_shape)]


@kernel("pd_op.layer_norm_grad")
def layer_norm_grad(rt, op, vals):  # (x, scale, bias, mean, variance, out_grad) -> (x, scale, bias grads)
    x, scale, bias, mean, var, g = (_f(v) for v in vals[:6])
    begin = norm_axis(int(attr(op, "begin_norm_axis", 1)), x.ndim)
    eps = float(attr(op, "epsilon", 1e-5))
    lead, n = _split(x, begin)
    x2, g2 = x.reshape(lead, n), g.reshape(lead, n)
    inv = 1.0 / np.sqrt(var.reshape(lead, 1) + eps)
    xhat = (x2 - mean.reshape(lead, 1)) * inv
    gs = g2 * (scale.reshape(1, n) if scale is not None else 1.0)
    dx = inv * (gs - gs.mean(1, keepdims=True) - xhat * (gs * xhat).mean(1, keepdims=True))
    dscale = None if scale is None else (g2 * xhat).sum(0).reshape(scale.shape)
    dbias = None if bias is None else g2.sum(0).reshape(bias.shape)
    return [dx.reshape(x.shape), dscale, dbias]


def _channel_axis(op, x) -> int:
    fmt = str(attr(op, "data_format", "NCHW"))
    return x.ndim - 1 if fmt in ("NHWC", "NDHWC", "NLC") else min(1, x.ndim - 1)


def _bshape(x, c):
    s = [1] * x.ndim
    s[c] = x.shape[c]
    return s


@kernel("pd_op.batch_norm")
def batch_norm(rt, op, vals):  # (x, mean, variance, scale, bias)
    x, rmean, rvar, scale, bias = (_f(v) for v in vals[:5])
    c = _channel_axis(op, x)
    axes = tuple(a for a in range(x.ndim) if a != c)
    eps, mom = float(attr(op, "epsilon", 1e-5)), float(attr(op, "momentum", 0.9))
    test = bool(attr(op, "is_test", False)) or bool(attr(op, "use_global_stats", False))
    if test:
        mu, var = rmean, rvar
        mean_out, var_out = rmean.copy(), rvar.copy()
    else:
        mu, var = x.mean(axes), x.var(axes)
        mean_out = mom * rmean + (1 - mom) * mu
        var_out = mom * rvar + (1 - mom) * var
    inv = 1.0 / np.sqrt(var + eps)
    bs = _bshape(x, c)
    y = (x - mu.reshape(bs)) * inv.reshape(bs)
    if scale is not None:
        y = y * scale.reshape(bs)
    if bias is not None:
        y = y + bias.reshape(bs)
    return [y, mean_out, var_out, mu.copy(), inv, np.zeros((0,))][: op.num_results]


@kernel("pd_op.batch_norm_grad")
def batch_norm_grad(rt, op, vals):
    """(x, scale, bias, mean_out, variance_out, saved_mean, saved_variance, reserve_space,
    out_grad) -> (x, scale, bias grads)."""
    x, scale, bias, rmean, rvar, smean, sinv, _, g = (_f(v) for v in vals[:9])
    c = _channel_axis(op, x)
    axes = tuple(a for a in range(x.ndim) if a != c)
    bs = _bshape(x, c)
    eps = float(attr(op, "epsilon", 1e-5))
    test = bool(attr(op, "is_test", False)) or bool(attr(op, "use_global_stats", False))
    if test:
        mu, inv = rmean, 1.0 / np.sqrt(rvar + eps)
    else:
        mu, inv = smean, sinv
    xhat = (x - mu.reshape(bs)) * inv.reshape(bs)
    gamma = scale.reshape(bs) if scale is not None else 1.0
    dscale = (g * xhat).sum(axes)
    dbias = g.sum(axes)
    if test:
        dx = g * gamma * inv.reshape(bs)
    else:
        m = x.size // x.shape[c]
        dx = gamma * inv.reshape(bs) / m * (m * g - dbias.reshape(bs) - xhat * dscale.reshape(bs))
    return [dx, None if scale is None else dscale.reshape(scale.shape), None if bias is None else dbias.reshape(bias.shape)]


@kernel("pd_op.rms_norm")
def rms_norm(rt, op, vals):
    """``rms_norm(x, scale)`` -> (out, inv_rms): x / sqrt(mean(x^2) + eps) * scale over the
    axes from ``begin_norm_axis`` (default: the last)."""
    x, scale = _f(vals[0]), _f(vals[1]) if len(vals) > 1 else None
    begin = norm_axis(int(attr(op, "begin_norm_axis", -1)), x.ndim)
    eps = float(attr(op, "epsilon", 1e-6))
    lead, n = _split(x, begin)
    x2 = x.reshape(lead, n)
    inv = 1.0 / np.sqrt((x2 * x2).mean(1) + eps)
    y = x2 * inv[:, None]
    if scale is not None:
        y = y * scale.reshape(1, n)
    return [y.reshape(x.shape), inv.reshape(x.shape[:begin])][: op.num_results]


@kernel("pd_op.rms_norm_grad")
def rms_norm_grad(rt, op, vals):  # (x, scale, inv_rms, out_grad) -> (x_grad, scale_grad)
    x, scale, inv, g = (_f(v) for v in vals[:4])
    begin = norm_axis(int(attr(op, "begin_norm_axis", -1)), x.ndim)
    lead, n = _split(x, begin)
    x2, g2 = x.reshape(lead, n), g.reshape(lead, n)
    r = inv.reshape(lead, 1)
    gs = g2 * (scale.reshape(1, n) if scale is not None else 1.0)
    dx = r * gs - x2 * r ** 3 * (gs * x2).mean(1, keepdims=True)
    dscale = None if scale is None else (g2 * x2 * r).sum(0).reshape(scale.shape)
    return [dx.reshape(x.shape), dscale]
