"""The fused ops Paddle's passes emit:

* ``fused_linear_param_grad_add(x, dout, dweight, dbias)`` -> (dweight_out, dbias_out) (the
  ``fused_linear_param_grad_add_pass``): ``dweight + x^T dout`` over every leading axis (x and
  dout flattened to matrices), ``dbias + sum(dout)`` with ``has_bias``; an absent accumulator is
  zero;
* ``coalesce_tensor_(inputs)`` -> (outputs, fused_output) (tensor fusion): the outputs are the
  inputs (``copy_data``) or the constant (``set_constant``), the fused output their flattened
  concatenation, each input's part padded to the alignment the fused output's length implies
  (``align_size`` bytes, else the CPU's 4096 or a GPU's 256).  The outputs alias the fused
  buffer in Paddle; like every in-place write, later writes into the buffer are not replayed on
  the outputs;
* ``fused_dropout_add(x, y, seed_tensor, p)`` -> (out, seed_offset) and its gradient: dropout of x
  plus y, with the counter-based mask of :mod:`.randomness` (seed_offset keeps the stream, so
  the gradient draws the same mask).
``share_data_`` is a copy (:mod:`.structural`)."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ..values import attr, int_list, np_dtype
from .randomness import stream_key, uniform01, value_index


@kernel("pd_op.fused_linear_param_grad_add")
def fused_linear_param_grad_add(rt, op, vals):
    x, dout = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1], dtype=np.float64)
    dweight, dbias = vals[2], vals[3] if len(vals) > 3 else None
    k, n = x.shape[-1], dout.shape[-1]
    dw = x.reshape(-1, k).T @ dout.reshape(-1, n)
    if dweight is not None:
        dw = np.asarray(dweight, dtype=np.float64) + dw
    db = None
    if bool(attr(op, "has_bias", True)):
        db = dout.reshape(-1, n).sum(0)
        if dbias is not None:
            db = np.asarray(dbias, dtype=np.float64) + db
    return [dw, db][: op.num_results]


def _alignment(numels: list[int], total: int | None, op) -> int:
    """Elements per alignment unit: the one whose padded lengths add up to the fused length."""
    size = int(attr(op, "size_of_dtype", 4) or 4)
    if size <= 0:  # -1: the dtype's own size (Paddle's default)
        size = {"float16": 2, "bfloat16": 2, "float64": 8}.get(str(attr(op, "dtype", "float32")), 4)
    align = int(attr(op, "align_size", -1) or -1)
    if not bool(attr(op, "use_align", True)):
        return 1
    cands = ([align // size] if align > 0 else []) + [4096 // size, 256 // size, 1024 // size, 1]
    for a in cands:
        a = max(a, 1)
        if total is None or sum(-(-n // a) * a if n else a for n in numels) == total:
            return a
    return 1


@kernel("pd_op.coalesce_tensor", "pd_op.coalesce_tensor_")
def coalesce_tensor(rt, op, vals):
    xs = [np.asarray(a, dtype=np.float64) for a in vals[0]]
    dtype = np_dtype(str(attr(op, "dtype", "float32")))
    t = op.results[1].type if op.num_results > 1 else None
    total = None
    want = rt.local_shape(t) if t is not None and hasattr(t, "shape") else None
    if want is not None and len(want) == 1 and want[0] >= 0:
        total = int(want[0])
    align = _alignment([a.size for a in xs], total, op)
    if bool(attr(op, "copy_data", False)):
        outs = [a.copy() for a in xs]
    elif bool(attr(op, "set_constant", False)):
        outs = [np.full(a.shape, float(attr(op, "constant", 0.0))) for a in xs]
    else:
        outs = [np.zeros(a.shape) for a in xs]
    parts = []
    for a in outs:
        n = a.size
        pad = (-(-n // align) * align if n else align) - n
        parts += [a.reshape(-1), np.zeros(pad)]
    fused = np.concatenate(parts) if parts else np.zeros((0,))
    if total is not None and fused.size != total:
        raise rt.err(op, f"the inputs ({sum(a.size for a in xs)} elements) do not fill the fused output of "
                         f"{total} under any alignment")
    return [[o.astype(dtype) for o in outs], fused.astype(dtype)]


def _mask(rt, op, seed_v: int, ordinal: int, v, shape, p: float):
    key = stream_key(rt.sim.seed, "dropout", ordinal, seed_v)
    return uniform01(key, value_index(rt, op, v, shape)) >= p


@kernel("pd_op.fused_dropout_add")
def fused_dropout_add(rt, op, vals):  # (x, y, seed_tensor, p) -> (out, seed_offset)
    x, y = np.asarray(vals[0], dtype=np.float64), np.asarray(vals[1], dtype=np.float64)
    p = float(np.asarray(vals[3]).reshape(-1)[0]) if len(vals) > 3 and vals[3] is not None else float(attr(op, "p", 0.5))
    mode = str(attr(op, "mode", "upscale_in_train"))
    seed_v = int(np.asarray(vals[2]).reshape(-1)[0]) if vals[2] is not None else int(attr(op, "seed", 0) or 0)
    ordinal = rt.ordinal(op)
    offset = np.array([seed_v, ordinal], dtype=np.int64)
    if bool(attr(op, "is_test", False)):
        return [(x if mode == "upscale_in_train" else x * (1 - p)) + y, offset]
    keep = _mask(rt, op, seed_v, ordinal, op.operand(0), x.shape, p)
    scale = 1.0 / (1.0 - p) if mode == "upscale_in_train" and p < 1 else 1.0
    return [np.where(keep, x * scale, 0.0) + y, offset]


@kernel("pd_op.fused_dropout_add_grad")
def fused_dropout_add_grad(rt, op, vals):  # (seed_offset, out_grad) -> (x_grad, y_grad)
    so, g = int_list(vals[0]), np.asarray(vals[1], dtype=np.float64)
    p = float(attr(op, "p", 0.5)) if len(vals) < 3 or vals[2] is None else float(np.asarray(vals[2]).reshape(-1)[0])
    mode = str(attr(op, "mode", "upscale_in_train"))
    if bool(attr(op, "is_test", False)):
        return [g if mode == "upscale_in_train" else g * (1 - p), g.copy()]
    keep = _mask(rt, op, so[0], so[1], op.operand(1), g.shape, p)
    scale = 1.0 / (1.0 - p) if mode == "upscale_in_train" and p < 1 else 1.0
    return [np.where(keep, g * scale, 0.0), g.copy()]
