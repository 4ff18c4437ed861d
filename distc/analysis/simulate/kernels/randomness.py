"""Randomness that compares: a counter-based draw (splitmix64 of a stream key and the element's
*global* index), so a rank that holds a piece of a tensor draws exactly the numbers the serial
program draws for the same elements, whatever the layout, with work proportional to the piece.

* the stream key of a dropout is the simulation seed, the op's ``seed`` attribute and the op's
  ordinal among the ops of its name in its program (the k-th dropout of the serial program and
  the k-th dropout of every rank program are the same stream: partition and reshard keep the
  forward ops in order);
* the stream key of a random initializer (:mod:`.init`) is the seed, the op's ``seed`` and the
  name of the parameter or state it initializes;
* the global index of a rank's element is found from the layout of the value (its dist type,
  else the layout the simulator was given for the name): a Shard piece has its own indices, a
  Replicate or Partial one the whole tensor's (so a mask applied to partial pieces is the mask of
  their sum: dropout is linear in its input).

``dropout(x, seed_tensor, p)`` -> (out, mask): keep where u >= p; ``upscale_in_train`` scales the
kept values by 1/(1-p) in training, ``downgrade_in_infer`` scales by (1-p) at inference
(``is_test``); ``dropout_grad(mask, out_grad, p)`` applies the same mask and scale.
This is a model of "the same random numbers", not Paddle's generator (Philox on GPU, mt19937 on
CPU): a program is proven for every mask the draw could give, not for Paddle's particular one."""

from __future__ import annotations

import zlib

import numpy as np

from ..layout import shard_index
from ..registry import kernel
from ..values import attr, operand_or_attr
from ....ir.dist import TensorDistAttr
from ....ir.types import DistTensorType

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def stream_key(*parts) -> int:
    """A 64-bit key from ints and strings (stable across processes: crc32, not hash())."""
    k = 0x243F6A8885A308D3
    for p in parts:
        v = zlib.crc32(p.encode()) if isinstance(p, str) else int(p) & 0xFFFFFFFFFFFFFFFF
        k = ((k ^ v) * 0x100000001B3 + 0x9E3779B9) & 0xFFFFFFFFFFFFFFFF
    return k


def uniform01(key: int, index: np.ndarray) -> np.ndarray:
    """Uniform numbers in [0, 1), one per global index (splitmix64 of ``key`` and the index)."""
    with np.errstate(over="ignore"):
        z = np.asarray(index, dtype=np.uint64) * _GOLDEN + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def normal(key: int, index: np.ndarray) -> np.ndarray:
    """Standard normal numbers, one per global index (Box-Muller of two counter streams)."""
    idx = np.asarray(index, dtype=np.uint64)
    u1 = uniform01(key, idx * np.uint64(2))
    u2 = uniform01(key, idx * np.uint64(2) + np.uint64(1))
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)


def global_index(shape: tuple[int, ...], region: tuple[slice, ...] | None = None) -> np.ndarray:
    """The flat (C-order) global indices of ``region`` (slices per axis) of a tensor of ``shape``."""
    shape = tuple(int(s) for s in shape)
    region = region or tuple(slice(0, n) for n in shape)
    out = np.zeros((), dtype=np.uint64)
    stride = 1
    for ax in range(len(shape) - 1, -1, -1):
        sl = region[ax]
        r = np.arange(sl.start, sl.stop, dtype=np.uint64) * np.uint64(stride)
        out = out + r.reshape([-1] + [1] * (len(shape) - 1 - ax))
        stride *= shape[ax]
    return np.broadcast_to(out, tuple(sl.stop - sl.start for sl in region)).copy() if shape else np.zeros((), np.uint64)


def piece_index(shape: tuple[int, ...], layout: TensorDistAttr | None, rank: int | None,
                local: tuple[int, ...]) -> np.ndarray | None:
    """The global indices of a rank's piece of shape ``local`` of a tensor of global ``shape``
    under ``layout`` (None: the whole tensor); None when the layout does not give that piece."""
    if tuple(local) == tuple(shape):
        return global_index(shape)
    if layout is None or rank is None or rank not in layout.mesh.process_ids:
        return None
    region = shard_index(layout, tuple(shape), rank)
    if tuple(s.stop - s.start for s in region) != tuple(local):
        return None
    return global_index(shape, region)


def value_index(rt, op, v, local: tuple[int, ...], layout: TensorDistAttr | None = None) -> np.ndarray:
    """Global indices of this rank's value ``v`` (of local shape ``local``), from its dist type
    (or ``layout``); in the serial view, the whole tensor's."""
    t = v.type
    shape = tuple(getattr(t, "shape", ()) or ())
    if rt.serial or not shape or any(d < 0 for d in shape):
        return global_index(local)
    lay = t.dist if isinstance(t, DistTensorType) else layout
    idx = piece_index(shape, lay, rt.rank, local)
    if idx is None:
        raise rt.err(op, f"cannot tell which elements of the global {list(shape)} this rank's local "
                         f"{list(local)} holds (no layout gives that piece)")
    return idx


def _p(vals, op) -> float:
    p = operand_or_attr(vals, 2, op, "p", 0.5)
    return float(p)


@kernel("pd_op.dropout")
def dropout(rt, op, vals):  # (x, seed_tensor, p) -> (out, mask)
    x = np.asarray(vals[0])
    p = _p(vals, op)
    mode = str(attr(op, "mode", "upscale_in_train"))
    if bool(attr(op, "is_test", False)):
        out = x.copy() if mode == "upscale_in_train" else x * (1.0 - p)
        return [out, np.ones(x.shape, dtype=np.int64)]
    seed = vals[1]
    seed_v = int(np.asarray(seed).reshape(-1)[0]) if seed is not None else int(attr(op, "seed", 0) or 0)
    key = stream_key(rt.sim.seed, "dropout", rt.ordinal(op), seed_v)
    keep = uniform01(key, value_index(rt, op, op.operand(0), x.shape)) >= p
    scale = 1.0 / (1.0 - p) if mode == "upscale_in_train" and p < 1.0 else 1.0
    out = np.where(keep, x * scale, 0.0) if p < 1.0 else np.zeros_like(x, dtype=np.float64)
    return [out, keep.astype(np.int64)]


@kernel("pd_op.dropout_grad")
def dropout_grad(rt, op, vals):  # (mask, out_grad, p)
    mask, g = np.asarray(vals[0]), np.asarray(vals[1])
    p = _p(vals, op)
    mode = str(attr(op, "mode", "upscale_in_train"))
    if bool(attr(op, "is_test", False)):
        return [g.copy() if mode == "upscale_in_train" else g * (1.0 - p)]
    scale = 1.0 / (1.0 - p) if mode == "upscale_in_train" and p < 1.0 else 1.0
    return [np.where(mask != 0, g * scale, 0.0)]
