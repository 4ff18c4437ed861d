"""More reductions, batched products and small math, forward and backward: max, min, amax, amin,
prod, all, any, mean_all, bmm, einsum, floor/ceil/round/sign/expm1, floor_divide, remainder,
bitwise ops, isfinite/isnan/isinf, numel, increment, full_with_tensor, linspace, flip, unstack,
split_grad, sigmoid_cross_entropy_with_logits, bce_loss.  A max/min gradient goes to every
maximal element (phi's reduce grad: ``x == out``); amax/amin share it evenly between ties."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, norm_axis, np_dtype, operand_or_attr, scalar
from .grads import unbroadcast
from .nn import axes_of, sigmoid


def _reduce(fn):
    def run(rt, op, vals):  # (x, axis)
        x = np.asarray(vals[0])
        return [fn(x, axis=axes_of(vals, op, x.ndim), keepdims=bool(attr(op, "keepdim", False)))]
    return run


for _name, _fn in (("max", np.max), ("min", np.min), ("amax", np.max), ("amin", np.min), ("prod", np.prod),
                   ("all", np.all), ("any", np.any)):
    kernel(f"pd_op.{_name}")(_reduce(_fn))


def _expand_back(x, g, axes, keep):
    axes = tuple(range(x.ndim)) if axes is None else axes
    if not keep:
        for a in sorted(axes):
            g = np.expand_dims(g, a)
    return g, axes


@kernel("pd_op.max_grad", "pd_op.min_grad", "pd_op.amax_grad", "pd_op.amin_grad")
def extreme_grad(rt, op, vals):  # (x, out, out_grad, axis)
    x, out, g = np.asarray(vals[0]), np.asarray(vals[1]), np.asarray(vals[2], dtype=np.float64)
    keep = bool(attr(op, "keepdim", False))
    g, axes = _expand_back(x, g, axes_of(vals, op, x.ndim, 3), keep)
    o, _ = _expand_back(x, out, axes_of(vals, op, x.ndim, 3), keep)
    hit = (x == o).astype(np.float64)
    if op.name.split(".")[-1].startswith("am"):
        hit = hit / hit.sum(axis=axes, keepdims=True)
    return [hit * g]


@kernel("pd_op.prod_grad")
def prod_grad(rt, op, vals):  # (x, out, out_grad, dims)
    x, out, g = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1]), np.asarray(vals[2], dtype=np.float64)
    keep = bool(attr(op, "keepdim", False))
    axes = axes_of(vals, op, x.ndim, 3)
    g, axes = _expand_back(x, g, axes, keep)
    o, _ = _expand_back(x, out, axes, keep)
    with np.errstate(all="ignore"):
        return [np.where(x != 0, g * o / x, g * np.prod(np.where(x == 0, 1.0, x), axis=axes, keepdims=True))]


@kernel("pd_op.mean_all")
def mean_all(rt, op, vals):
    return [np.asarray(np.mean(np.asarray(vals[0], dtype=np.float64)))]


@kernel("pd_op.mean_all_grad")
def mean_all_grad(rt, op, vals):  # (x, out_grad)
    x = np.asarray(vals[0])
    return [np.full(x.shape, float(np.asarray(vals[1]).reshape(-1)[0]) / max(x.size, 1))]


@kernel("pd_op.bmm")
def bmm(rt, op, vals):
    return [np.matmul(np.asarray(vals[0]), np.asarray(vals[1]))]


@kernel("pd_op.bmm_grad")
def bmm_grad(rt, op, vals):  # (x, y, out_grad)
    x, y, g = (np.asarray(v, dtype=np.float64) for v in vals[:3])
    return [g @ np.swapaxes(y, -1, -2), np.swapaxes(x, -1, -2) @ g]


def _equation(op, n: int) -> tuple[list[str], str]:
    eq = str(attr(op, "equation")).replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    ins = lhs.split(",")
    if not _:
        letters = sorted(c for c in set("".join(ins)) if "".join(ins).count(c) == 1 and c.isalpha())
        rhs = "".join(letters)
    if len(ins) != n:
        raise ValueError(f"equation {eq!r} for {n} operands")
    return ins, rhs


@kernel("pd_op.einsum")
def einsum(rt, op, vals):  # (x vector) -> (out, inner_cache, xshape)
    xs = [np.asarray(a, dtype=np.float64) for a in vals[0]]
    ins, rhs = _equation(op, len(xs))
    out = np.einsum(",".join(ins) + "->" + rhs, *xs)
    return [out, [None] * len(xs), [None] * len(xs)][: op.num_results]


@kernel("pd_op.einsum_grad")
def einsum_grad(rt, op, vals):  # (x vector, inner_cache, out_grad) -> x_grad vector
    xs = [np.asarray(a, dtype=np.float64) for a in vals[0]]
    g = np.asarray(vals[-1], dtype=np.float64)
    ins, rhs = _equation(op, len(xs))
    grads = []
    for i, term in enumerate(ins):
        others = [t for j, t in enumerate(ins) if j != i]
        spec = ",".join([rhs] + others) + "->" + "".join(c for c in term if c in rhs + "".join(others))
        part = np.einsum(spec, g, *[x for j, x in enumerate(xs) if j != i])
        # letters of the operand found nowhere else were summed in the forward pass: broadcast back
        grads.append(np.broadcast_to(_place(part, spec.split("->")[1], term), xs[i].shape).copy())
    return [grads]


def _place(a, have: str, want: str):
    """``a`` with axes ``have`` laid out as ``want`` (missing letters get size-1 axes)."""
    a = np.transpose(a, [have.index(c) for c in want if c in have])
    shape, k = [], 0
    for c in want:
        if c in have:
            shape.append(a.shape[k])
            k += 1
        else:
            shape.append(1)
    return a.reshape(shape)


_MATH = {"floor": np.floor, "ceil": np.ceil, "round": np.round, "sign": np.sign, "expm1": np.expm1,
         "bitwise_not": np.invert, "isfinite": np.isfinite, "isnan": np.isnan, "isinf": np.isinf}
for _name, _fn in _MATH.items():
    kernel(f"pd_op.{_name}")(lambda rt, op, vals, f=_fn: [f(np.asarray(vals[0]))])

_BIN = {"floor_divide": np.floor_divide, "remainder": np.mod, "bitwise_and": np.bitwise_and,
        "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
for _name, _fn in _BIN.items():
    kernel(f"pd_op.{_name}")(lambda rt, op, vals, f=_fn: [f(np.asarray(vals[0]), np.asarray(vals[1]))])


@kernel("pd_op.expm1_grad")
def expm1_grad(rt, op, vals):  # (out, out_grad)
    return [(np.asarray(vals[0]) + 1.0) * np.asarray(vals[1])]


@kernel("pd_op.round_grad", "pd_op.floor_grad", "pd_op.ceil_grad", "pd_op.sign_grad")
def zero_grad(rt, op, vals):
    return [np.zeros_like(np.asarray(vals[-1]), dtype=np.float64)]


@kernel("pd_op.numel")
def numel(rt, op, vals):
    return [np.array(np.asarray(vals[0]).size, dtype=np.int64)]


@kernel("pd_op.increment", "pd_op.increment_")
def increment(rt, op, vals):
    x = np.asarray(vals[0])
    return [x + np.asarray(attr(op, "value", 1.0)).astype(x.dtype)]


@kernel("pd_op.full_with_tensor")
def full_with_tensor(rt, op, vals):  # (value, shape)
    shape = int_list(vals[1]) if len(vals) > 1 and vals[1] is not None else int_list(attr(op, "shape", []))
    return [np.full(shape, scalar(vals[0]), dtype=np_dtype(str(attr(op, "dtype", "float32"))))]


@kernel("pd_op.linspace")
def linspace(rt, op, vals):  # (start, stop, number)
    n = int(scalar(vals[2]))
    return [np.linspace(scalar(vals[0]), scalar(vals[1]), n).astype(np_dtype(str(attr(op, "dtype", "float32"))))]


@kernel("pd_op.flip", "pd_op.flip_grad")
def flip(rt, op, vals):
    x = np.asarray(vals[-1] if op.name.endswith("_grad") else vals[0])
    return [np.flip(x, axis=tuple(norm_axis(a, x.ndim) for a in int_list(attr(op, "axis", [0]))))]


@kernel("pd_op.unstack")
def unstack(rt, op, vals):
    x = np.asarray(vals[0])
    axis = norm_axis(int(attr(op, "axis", 0)), x.ndim)
    return [[np.take(x, i, axis=axis) for i in range(x.shape[axis])]]


@kernel("pd_op.unstack_grad")
def unstack_grad(rt, op, vals):  # (out_grad vector)
    gs = [np.asarray(a) for a in vals[0]]
    return [np.stack(gs, axis=norm_axis(int(attr(op, "axis", 0)), gs[0].ndim + 1))]


@kernel("pd_op.split_grad")
def split_grad(rt, op, vals):  # (out_grad vector, axis): the pieces concatenated
    gs = [np.asarray(a) for a in vals[0]]
    axis = norm_axis(int(scalar(operand_or_attr(vals, 1, op, "axis", 0))), gs[0].ndim)
    return [np.concatenate(gs, axis=axis)]


@kernel("pd_op.sigmoid_cross_entropy_with_logits")
def sigmoid_ce(rt, op, vals):  # (x, label, pos_weight) -> max(x,0) - x*label + log(1+exp(-|x|))
    x, lab = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1], dtype=np.float64)
    pw = vals[2] if len(vals) > 2 and vals[2] is not None else None
    loss = np.maximum(x, 0) - x * lab + np.log1p(np.exp(-np.abs(x)))
    if pw is not None:
        w = 1 + (np.asarray(pw) - 1) * lab
        loss = (1 - lab) * x + w * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))
    ignore = lab == int(attr(op, "ignore_index", -100))
    loss = np.where(ignore, 0.0, loss)
    if bool(attr(op, "normalize", False)):
        loss = loss / max(int((~ignore).sum()), 1)
    return [loss]


@kernel("pd_op.sigmoid_cross_entropy_with_logits_grad")
def sigmoid_ce_grad(rt, op, vals):  # (x, label, pos_weight, out_grad)
    x, lab, g = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1], dtype=np.float64), np.asarray(vals[-1])
    pw = vals[2] if len(vals) > 3 and vals[2] is not None else None
    s = sigmoid(x)
    if pw is None:
        d = s - lab
    else:  # d/dx [(1 - y) x + w softplus(-x)], w = 1 + (pos_weight - 1) y
        d = (1 - lab) + (1 + (np.asarray(pw) - 1) * lab) * (s - 1)
    ignore = lab == int(attr(op, "ignore_index", -100))
    d = np.where(ignore, 0.0, d)
    if bool(attr(op, "normalize", False)):
        d = d / max(int((~ignore).sum()), 1)
    return [unbroadcast(d * g, x.shape)]


@kernel("pd_op.bce_loss")
def bce_loss(rt, op, vals):  # (input probabilities, label)
    p, y = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1], dtype=np.float64)
    return [-(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log1p(-p), -100))]


@kernel("pd_op.bce_loss_grad")
def bce_loss_grad(rt, op, vals):  # (input, label, out_grad)
    p, y, g = (np.asarray(v, dtype=np.float64) for v in vals[:3])
    return [g * (p - y) / np.maximum((1 - p) * p, 1e-12)]
