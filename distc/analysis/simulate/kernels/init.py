"""Random initializers of startup programs (``uniform``, ``gaussian``,
``truncated_gaussian_random``), seeded alike on every rank: the value is drawn at the global shape
from the simulation seed, the op's ``seed`` and the name of the parameter or state it initializes
(the ``set_parameter``/``shadow_output`` it flows into), then each rank takes its piece — by the
result's dist type, else by the layout the simulator was given for that name (a dense per-rank
startup program keeps the global ``shape`` and declares only the local type)."""

from __future__ import annotations

import zlib

import numpy as np

from ..layout import expected_piece
from ..registry import kernel
from ..values import attr, int_list, operand_or_attr, scalar
from ....dialects import ops
from ....ir.types import DistTensorType


def target_name(v) -> str | None:
    """The name of the parameter/state a value initializes (through slices, casts...)."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop(0)
        if x in seen:
            continue
        seen.add(x)
        for op, _ in list(x.uses):
            if op.name == ops.SET_PARAMETER:
                return str(attr(op, "parameter_name"))
            if op.name == ops.SHADOW_OUTPUT:
                return str(attr(op, "output_name"))
            todo.extend(op.results)
    return None


def _draw(rt, op, shape, fn):
    res = op.results[0]
    name = target_name(res) or f"{op.name}#{rt.prog.ops.index(op)}"
    rng = np.random.default_rng([rt.sim.seed, zlib.crc32(name.encode()), int(attr(op, "seed", 0) or 0)])
    g = np.asarray(fn(rng, tuple(shape)), dtype=np.float64)
    want = rt.local_shape(res.type)
    if want is None or tuple(want) == g.shape or any(d < 0 for d in want):
        return [g]
    t = res.type
    layout = t.dist if isinstance(t, DistTensorType) else rt.sim.layouts.get(name)
    if layout is not None:
        piece = expected_piece(g, layout, rt.rank)
        if piece.shape == tuple(want):
            return [piece]
    raise rt.err(op, f"draws {list(g.shape)} for {name!r} but its type is local {list(want)}, and no layout "
                     "says which piece this rank holds")


def _shape(vals, op):
    return operand_or_attr(vals, 0, op, "shape", [], conv=int_list)


@kernel("pd_op.uniform")
def uniform(rt, op, vals):  # (shape, min, max)
    lo = float(operand_or_attr(vals, 1, op, "min", -1.0, conv=scalar))
    hi = float(operand_or_attr(vals, 2, op, "max", 1.0, conv=scalar))
    return _draw(rt, op, _shape(vals, op), lambda rng, s: rng.uniform(lo, hi, size=s))


@kernel("pd_op.gaussian")
def gaussian(rt, op, vals):  # (shape)
    mean, std = float(attr(op, "mean", 0.0)), float(attr(op, "std", 1.0))
    return _draw(rt, op, _shape(vals, op), lambda rng, s: rng.normal(mean, std, size=s))


@kernel("pd_op.truncated_gaussian_random")
def truncated_gaussian(rt, op, vals):
    """Normal(mean, std) redrawn until inside [a, b]."""
    mean, std = float(attr(op, "mean", 0.0)), float(attr(op, "std", 1.0))
    a, b = float(attr(op, "a", -2.0)), float(attr(op, "b", 2.0))

    def draw(rng, s):
        x = rng.normal(mean, std, size=s)
        bad = (x < a) | (x > b)
        while bad.any():
            x[bad] = rng.normal(mean, std, size=int(bad.sum()))
            bad = (x < a) | (x > b)
        return x

    return _draw(rt, op, _shape(vals, op), draw)
