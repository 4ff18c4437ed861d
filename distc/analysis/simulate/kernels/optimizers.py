"""Optimizer kernels.

The dense update kernels of Paddle's optimizer ops (phi's AdamDenseKernel/AdamWDenseKernel,
MomentumDenseKernel, SGDDenseKernel; the formulas in paddle/optimizer/*.py and
phi/kernels/funcs/adam_functors.h, impl/momentum_kernel_impl.h), elementwise on the rank's
local pieces.  Results follow the op's in-place order; a result whose operand is absent
(``<<NULL VALUE>>``: no master weight, no moment2_max) is None.  In float64 a master weight and
the parameter are the same number: with a master weight the update reads it, and writes both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..registry import kernel
from ..values import attr


def _opt_scalar(runner, op, x, key: str, default=None) -> float:
    """A scalar operand (``beta1``... tensors, the learning rate), else the attribute ``key``."""
    if x is not None:
        a = np.asarray(x)
        if a.size != 1:
            raise runner.err(op, f"{key} should hold one element, it has local shape {list(a.shape)}")
        return float(a.reshape(-1)[0])
    v = attr(op, key, default)
    if v is None:
        raise runner.err(op, f"no {key} operand or attribute")
    return float(v)


def _elementwise(runner, op, named: dict[str, Any]) -> dict[str, np.ndarray]:
    """The elementwise operands of an update, which must have the same local shape (a kernel
    would not broadcast them)."""
    out = {k: np.asarray(v, dtype=np.float64) for k, v in named.items() if v is not None}
    shapes = {k: list(v.shape) for k, v in out.items()}
    if len({tuple(v) for v in shapes.values()}) > 1:
        desc = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise runner.err(op, f"update of pieces with different local shapes ({desc})")
    return out


def _skip(x) -> bool:
    return x is not None and bool(np.asarray(x).reshape(-1)[0])


def _copy(x):
    return None if x is None else np.array(x, copy=True)


@kernel("pd_op.adam_", "pd_op.adamw_")
def adam(runner, op, vals: list) -> list:
    """``adam_``/``adamw_``: 13 operands (param, grad, learning_rate, moment1, moment2,
    moment2_max, beta1_pow, beta2_pow, master_param, skip_update, beta1, beta2, epsilon) or the
    2024 12 (no moment2_max).  With t the step of the beta powers::

        adamw only: lr = lr * lr_ratio; p = p - lr * coeff * p      (if with_decay)
        m1 = beta1 m1 + (1 - beta1) g;   m2 = beta2 m2 + (1 - beta2) g^2
        amsgrad: m2max = max(m2max, m2), used for m2 below
        p = p - lr sqrt(1 - beta2_pow) / (1 - beta1_pow) * m1 / (sqrt(m2) + eps sqrt(1 - beta2_pow))
        beta{1,2}_pow = beta{1,2}_pow * beta{1,2}   (unless use_global_beta_pow)

    ``skip_update`` true: every output is its input.  lazy_mode only concerns sparse gradients."""
    n = op.num_operands
    if n not in (12, 13):
        raise runner.err(op, f"{n} operands: the simulator knows the 12- and 13-operand signatures")
    param, grad, lr, m1, m2 = vals[:5]
    m2max = vals[5] if n == 13 else None
    b1p, b2p, master, skip, beta1_t, beta2_t, eps_t = vals[n - 7:]
    amsgrad = bool(attr(op, "amsgrad", False))
    outs_in = [param, m1, m2] + ([m2max] if n == 13 else []) + [b1p, b2p, master]
    if _skip(skip):
        return [_copy(x) for x in outs_in]
    if amsgrad and m2max is None:
        raise runner.err(op, "amsgrad without a moment2_max operand")
    beta1 = _opt_scalar(runner, op, beta1_t, "beta1")
    beta2 = _opt_scalar(runner, op, beta2_t, "beta2")
    eps = _opt_scalar(runner, op, eps_t, "epsilon")
    lr_v = _opt_scalar(runner, op, lr, "learning_rate")
    pow1 = _opt_scalar(runner, op, b1p, "beta1_pow")
    pow2 = _opt_scalar(runner, op, b2p, "beta2_pow")
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "moment1": m1, "moment2": m2,
                                  "moment2_max": m2max if amsgrad else None})
    p, g = e["param"], e["grad"]
    if op.name.split(".")[-1].rstrip("_") == "adamw":
        lr_v *= float(attr(op, "lr_ratio", 1.0))
        if bool(attr(op, "with_decay", False)):
            p = p - lr_v * float(attr(op, "coeff", 0.01)) * p
    m1_out = beta1 * e["moment1"] + (1 - beta1) * g
    m2_out = beta2 * e["moment2"] + (1 - beta2) * g * g
    m2max_out = np.maximum(e["moment2_max"], m2_out) if amsgrad else None
    denom = np.sqrt(m2max_out if amsgrad else m2_out) + eps * np.sqrt(1 - pow2)
    p_out = p - lr_v * np.sqrt(1 - pow2) / (1 - pow1) * (m1_out / denom)
    if bool(attr(op, "use_global_beta_pow", False)):
        b1p_out, b2p_out = _copy(b1p), _copy(b2p)
    else:
        b1p_out = np.asarray(b1p, dtype=np.float64) * beta1
        b2p_out = np.asarray(b2p, dtype=np.float64) * beta2
    outs = [p_out, m1_out, m2_out] + ([_copy(m2max) if m2max_out is None else m2max_out] if n == 13 else [])
    return outs + [b1p_out, b2p_out, None if master is None else p_out.copy()]


@kernel("pd_op.momentum_")
def momentum(runner, op, vals: list) -> list:
    """``momentum_`` (param, grad, velocity, learning_rate, master_param)::

        g = g * rescale_grad;  g = g + regularization_coeff * p   (regularization_method l2_decay)
        v = mu v + g
        p = p - lr (g + mu v)   (use_nesterov)   else   p = p - lr v

    (rescale_grad as the GPU kernel applies it; Paddle's CPU kernel ignores it.)"""
    if op.num_operands != 5:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 5-operand momentum_")
    param, grad, vel, lr, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "velocity": vel})
    p, g = e["param"], e["grad"] * float(attr(op, "rescale_grad", 1.0))
    if str(attr(op, "regularization_method", "")) == "l2_decay":
        g = g + float(attr(op, "regularization_coeff", 0.0)) * p
    mu = float(attr(op, "mu"))
    lr_v = _opt_scalar(runner, op, lr, "learning_rate")
    v_out = mu * e["velocity"] + g
    p_out = p - lr_v * (g + mu * v_out) if bool(attr(op, "use_nesterov", False)) else p - lr_v * v_out
    return [p_out, v_out, None if master is None else p_out.copy()]


@kernel("pd_op.sgd_")
def sgd(runner, op, vals: list) -> list:
    """``sgd_`` (param, learning_rate, grad, master_param): p = p - lr g."""
    if op.num_operands != 4:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 4-operand sgd_")
    param, lr, grad, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad})
    p_out = e["param"] - _opt_scalar(runner, op, lr, "learning_rate") * e["grad"]
    return [p_out, None if master is None else p_out.copy()]



def _state_outputs(op, master, p_out, *rest):
    return [p_out, *rest, None if master is None else p_out.copy()]


@kernel("pd_op.lamb_")
def lamb(runner, op, vals: list) -> list:
    """``lamb_`` (param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow, master_param,
    skip_update), phi's LambKernel::

        m1 = beta1 m1 + (1 - beta1) g;   m2 = beta2 m2 + (1 - beta2) g^2
        r = m1 / (1 - beta1_pow) / (sqrt(m2 / (1 - beta2_pow)) + eps) + weight_decay p
        ratio = |p| / |r|  (both norms over the whole local tensor; 1 if either is 0, or if
                            weight_decay is 0 and not always_adapt)
        p = p - lr ratio r;   beta{1,2}_pow = beta{1,2}_pow * beta{1,2}

    The norms make the update depend on the whole tensor: on a piece of a sharded parameter it is
    not the piece of the whole update."""
    if op.num_operands != 9:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 9-operand lamb_")
    param, grad, lr, m1, m2, b1p, b2p, master, skip = vals
    if _skip(skip):
        return [_copy(x) for x in (param, m1, m2, b1p, b2p, master)]
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "moment1": m1, "moment2": m2})
    p, g = e["param"], e["grad"]
    beta1, beta2 = float(attr(op, "beta1", 0.9)), float(attr(op, "beta2", 0.999))
    eps, wd = float(attr(op, "epsilon", 1e-6)), float(attr(op, "weight_decay", 0.01))
    pow1, pow2 = _opt_scalar(runner, op, b1p, "beta1_pow"), _opt_scalar(runner, op, b2p, "beta2_pow")
    m1_out = beta1 * e["moment1"] + (1 - beta1) * g
    m2_out = beta2 * e["moment2"] + (1 - beta2) * g * g
    r = m1_out / (1 - pow1) / (np.sqrt(m2_out / (1 - pow2)) + eps) + wd * p
    pn, rn = float(np.sqrt(np.sum(p * p))), float(np.sqrt(np.sum(r * r)))
    ratio = pn / rn if pn > 0 and rn > 0 and (wd != 0 or bool(attr(op, "always_adapt", False))) else 1.0
    p_out = p - _opt_scalar(runner, op, lr, "learning_rate") * ratio * r
    b1p_out = np.asarray(b1p, dtype=np.float64) * beta1
    b2p_out = np.asarray(b2p, dtype=np.float64) * beta2
    return _state_outputs(op, master, p_out, m1_out, m2_out, b1p_out, b2p_out)


@kernel("pd_op.adagrad_")
def adagrad(runner, op, vals: list) -> list:
    """``adagrad_`` (param, grad, moment, learning_rate, master_param)::

        m = m + g^2;   p = p - lr g / (sqrt(m) + eps)"""
    if op.num_operands != 5:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 5-operand adagrad_")
    param, grad, mom, lr, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad, "moment": mom})
    g = e["grad"]
    m_out = e["moment"] + g * g
    p_out = e["param"] - _opt_scalar(runner, op, lr, "learning_rate") * g / (
        np.sqrt(m_out) + float(attr(op, "epsilon", 1e-6)))
    return _state_outputs(op, master, p_out, m_out)


@kernel("pd_op.rmsprop_")
def rmsprop(runner, op, vals: list) -> list:
    """``rmsprop_`` (param, mean_square, grad, moment, learning_rate, mean_grad, master_param),
    results (param, moment, mean_square, mean_grad, master)::

        ms = rho ms + (1 - rho) g^2
        centered: mg = rho mg + (1 - rho) g;  mom = momentum mom + lr g / sqrt(ms - mg^2 + eps)
        else:                                 mom = momentum mom + lr g / sqrt(ms + eps)
        p = p - mom"""
    if op.num_operands != 7:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 7-operand rmsprop_")
    param, ms, grad, mom, lr, mg, master = vals
    centered = bool(attr(op, "centered", False))
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "mean_square": ms, "moment": mom, "mean_grad": mg if centered else None})
    g = e["grad"]
    rho, eps = float(attr(op, "decay", 0.9)), float(attr(op, "epsilon", 1e-10))
    lr_v = _opt_scalar(runner, op, lr, "learning_rate")
    ms_out = rho * e["mean_square"] + (1 - rho) * g * g
    if centered:
        mg_out = rho * e["mean_grad"] + (1 - rho) * g
        denom = np.sqrt(ms_out - mg_out * mg_out + eps)
    else:
        mg_out = _copy(mg)
        denom = np.sqrt(ms_out + eps)
    mom_out = float(attr(op, "momentum", 0.0)) * e["moment"] + lr_v * g / denom
    p_out = e["param"] - mom_out
    return [p_out, mom_out, ms_out, mg_out, None if master is None else p_out.copy()]


@kernel("pd_op.adamax_")
def adamax(runner, op, vals: list) -> list:
    """``adamax_`` (param, grad, learning_rate, moment, inf_norm, beta1_pow, master_param)::

        m = beta1 m + (1 - beta1) g;   u = max(beta2 u + eps, |g|)
        p = p - lr / (1 - beta1_pow) m / u

    beta1_pow is not an output (Adamax scales it with a separate op)."""
    if op.num_operands != 7:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 7-operand adamax_")
    param, grad, lr, mom, inf, b1p, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "moment": mom, "inf_norm": inf})
    g = e["grad"]
    beta1, beta2 = float(attr(op, "beta1", 0.9)), float(attr(op, "beta2", 0.999))
    m_out = beta1 * e["moment"] + (1 - beta1) * g
    u_out = np.maximum(beta2 * e["inf_norm"] + float(attr(op, "epsilon", 1e-8)), np.abs(g))
    lr_t = _opt_scalar(runner, op, lr, "learning_rate") / (1 - _opt_scalar(runner, op, b1p, "beta1_pow"))
    return _state_outputs(op, master, e["param"] - lr_t * m_out / u_out, m_out, u_out)


@kernel("pd_op.adadelta_")
def adadelta(runner, op, vals: list) -> list:
    """``adadelta_`` (param, grad, avg_squared_grad, avg_squared_update, learning_rate, master_param)::

        Eg = rho Eg + (1 - rho) g^2;   d = -sqrt((Eu + eps) / (Eg + eps)) g
        Eu = rho Eu + (1 - rho) d^2;   p = p + lr d"""
    if op.num_operands != 6:
        raise runner.err(op, f"{op.num_operands} operands: the simulator knows the 6-operand adadelta_")
    param, grad, asg, asu, lr, master = vals
    e = _elementwise(runner, op, {"param": master if master is not None else param, "grad": grad,
                                  "avg_squared_grad": asg, "avg_squared_update": asu})
    g = e["grad"]
    rho, eps = float(attr(op, "rho", 0.95)), float(attr(op, "epsilon", 1e-6))
    asg_out = rho * e["avg_squared_grad"] + (1 - rho) * g * g
    d = -np.sqrt((e["avg_squared_update"] + eps) / (asg_out + eps)) * g
    asu_out = rho * e["avg_squared_update"] + (1 - rho) * d * d
    return _state_outputs(op, master, e["param"] + _opt_scalar(runner, op, lr, "learning_rate") * d, asg_out, asu_out)
