"""Random initializers of startup programs (``uniform``, ``gaussian``,
``truncated_gaussian_random``), seeded alike on every rank: each element is a counter-based draw
(:mod:`.randomness`) keyed by the simulation seed, the op's ``seed`` and the name of the parameter
or state it initializes (the ``set_parameter``/``shadow_output`` it flows into) and indexed by the
element's global index, so each rank draws exactly its piece — found from the result's dist type,
else from the layout the simulator was given for that name (a dense per-rank startup program
keeps the global ``shape`` and declares only the local type)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, operand_or_attr, scalar
from .randomness import normal, piece_index, stream_key, uniform01
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
    """``fn(key, global_indices)`` on this rank's piece of the global ``shape``."""
    res = op.results[0]
    name = target_name(res) or f"{op.name}#{rt.ordinal(op)}"
    key = stream_key(rt.sim.seed, name, int(attr(op, "seed", 0) or 0))
    shape = tuple(int(d) for d in shape)
    want = rt.local_shape(res.type)
    if want is None or any(d < 0 for d in want):
        want = shape
    t = res.type
    layout = t.dist if isinstance(t, DistTensorType) else rt.sim.layouts.get(name)
    idx = piece_index(shape, layout, None if rt.serial else rt.rank, tuple(want))
    if idx is None:
        raise rt.err(op, f"draws {list(shape)} for {name!r} but its type is local {list(want)}, and no layout "
                         "says which piece this rank holds")
    return [np.asarray(fn(key, idx), dtype=np.float64)]


def _shape(vals, op):
    return operand_or_attr(vals, 0, op, "shape", [], conv=int_list)


@kernel("pd_op.uniform")
def uniform(rt, op, vals):  # (shape, min, max)
    lo = float(operand_or_attr(vals, 1, op, "min", -1.0, conv=scalar))
    hi = float(operand_or_attr(vals, 2, op, "max", 1.0, conv=scalar))
    return _draw(rt, op, _shape(vals, op), lambda key, i: lo + (hi - lo) * uniform01(key, i))


@kernel("pd_op.gaussian")
def gaussian(rt, op, vals):  # (shape)
    mean, std = float(attr(op, "mean", 0.0)), float(attr(op, "std", 1.0))
    return _draw(rt, op, _shape(vals, op), lambda key, i: mean + std * normal(key, i))


@kernel("pd_op.truncated_gaussian_random")
def truncated_gaussian(rt, op, vals):
    """Normal(mean, std) redrawn until inside [a, b]."""
    mean, std = float(attr(op, "mean", 0.0)), float(attr(op, "std", 1.0))
    a, b = float(attr(op, "a", -2.0)), float(attr(op, "b", 2.0))

    def draw(key, idx):
        x = mean + std * normal(key, idx)
        bad = (x < a) | (x > b)
        attempt = 0
        while bad.any():  # redraw the rejected elements from the next stream (still per element)
            attempt += 1
            x[bad] = mean + std * normal(stream_key(key, attempt), idx[bad])
            bad = (x < a) | (x > b)
        return x

    return _draw(rt, op, _shape(vals, op), draw)
