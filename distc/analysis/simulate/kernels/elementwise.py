"""Elementwise kernels: binary arithmetic with numpy broadcasting, ``scale``."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, operand_or_attr

_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "maximum": np.maximum, "minimum": np.minimum, "elementwise_pow": np.power,
}


def _divide(a, b):
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return np.floor_divide(a, b)
    return a / b


def _binary(fn):
    def run(rt, op, vals):
        a, b = np.asarray(vals[0]), np.asarray(vals[1])
        try:
            return [fn(a, b)]
        except ValueError as e:
            raise rt.err(op, f"shapes {list(a.shape)} and {list(b.shape)}: {e}") from None
    return run


for _name, _fn in _BINARY.items():
    kernel(f"pd_op.{_name}")(_binary(_fn))
kernel("pd_op.divide")(_binary(_divide))


@kernel("pd_op.scale")
def scale(rt, op, vals):
    x = np.asarray(vals[0])
    s = operand_or_attr(vals, 1, op, "scale", 1.0)
    b = attr(op, "bias", 0.0)
    if attr(op, "bias_after_scale", True):
        return [x * s + b]
    return [(x + b) * s]


_COMPARE = {
    "less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
    "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}
for _name, _fn in _COMPARE.items():
    kernel(f"pd_op.{_name}")(_binary(_fn))


@kernel("pd_op.logical_not")
def logical_not(rt, op, vals):
    return [np.logical_not(np.asarray(vals[0]))]


@kernel("pd_op.where")
def where(rt, op, vals):  # (condition, x, y)
    return [np.where(np.asarray(vals[0], dtype=bool), np.asarray(vals[1]), np.asarray(vals[2]))]
