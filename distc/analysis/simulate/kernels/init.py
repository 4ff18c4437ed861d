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
from ....dialects.fusion import SLICE, buffer_names
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


_MOVES = ("pd_op.slice", "pd_op.reshape", "pd_op.cast", "pd_op.assign", "pd_op.share_data_", "pd_op.share_data",
          "dist_op.shard_tensor", "dist_op.reshard")


def kept_as(v) -> str | None:
    """The name ``v`` is kept under: a ``set_parameter``/``shadow_output`` of it or of a piece or
    copy of it (``slice``, ``cast`` ...), else (a fused ZeRO-3 startup keeps no whole parameter)
    its place in a ``coalesce_tensor_`` into a buffer kept as ``fused@-A-B-...``."""
    for u, _ in v.uses:
        if u.name in (ops.SET_PARAMETER, ops.SHADOW_OUTPUT):
            return str(attr(u, "parameter_name" if u.name == ops.SET_PARAMETER else "output_name"))
    for u, _ in v.uses:  # the whole value, a piece of it kept (a ZeRO state sliced for the rank)
        if u.name in _MOVES and u.num_results:
            n = kept_as(u.results[0])
            if n is not None:
                return n
    for u, i in v.uses:
        if u.name != ops.COMBINE:
            continue
        for c, _ in u.results[0].uses:
            if c.name != ops.COALESCE_TENSOR_ or c.num_results < 2:
                continue
            for s, _ in c.results[1].uses:
                names = buffer_names(str(attr(s, "output_name"))) if s.name == ops.SHADOW_OUTPUT else []
                if i < len(names):
                    return names[i]
    return None


def tagged_constant(rt, op, shape, value: float):
    """A startup proof's constant (``Simulator.tags``: name -> its serial shape): a ``full``
    whose result a ``set_parameter``/``shadow_output`` of such a name keeps is filled with
    ``value`` plus a pattern of that name's own (in [0, 0.5), drawn per global element, each rank
    its piece), so parameters and states that start as the same constant are told apart: a
    piece taken from the wrong name, place or range is not its piece of the serial value.  None
    for any other ``full``."""
    name = kept_as(op.results[0])
    if name is None:
        return None
    base = name[len(SLICE):] if name.startswith(SLICE) and name not in rt.sim.tags else name
    if base not in rt.sim.tags:
        return None
    whole, serial_layout = rt.sim.tags[base]
    if base != name:  # a fused ZeRO rank's slice@ state: its piece of the buffer (the rank's main program says)
        idx = rt.sim.slice_index(rt.rank, base, tuple(whole)) if rt.sim.slice_index is not None else None
        if idx is None or idx.shape != tuple(shape):
            return None
        pad = idx < 0  # (the buffer's padding: the constant itself)
        x = uniform01(stream_key(rt.sim.seed, "constant", base), np.where(pad, 0, idx).astype(np.uint64))
        return value + 0.5 * np.where(pad, 0.0, x)
    t = op.results[0].type
    # its own dist type, else the main program's layout of the name, else (a piece made on the way
    # to it: the mp piece a ZeRO state is sliced from) the serial startup program's
    layouts = [t.dist] if isinstance(t, DistTensorType) and tuple(t.shape) == tuple(whole) else \
        [rt.sim.layouts.get(name), serial_layout]
    idx = None
    for layout in layouts:
        idx = piece_index(tuple(whole), layout, None if rt.serial else rt.rank, tuple(shape))
        if idx is not None:
            break
    if idx is None:
        raise rt.err(op, f"fills {list(shape)} for {name!r}, whose serial value is {list(whole)}, and no layout "
                         "says which piece this rank holds")
    return value + 0.5 * uniform01(stream_key(rt.sim.seed, "constant", name), idx)


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
