"""The inputs of a fused ZeRO-1 rank program (``distc shard --tensor-fusion``) as Paddle's startup
program leaves them: one flat buffer a ``%kwarg_fused@-A-B-...`` holding the rank's pieces of its
parameters (each padded, :mod:`distc.dialects.fusion`), the parameters themselves views of it, the
rank's shard (``%kwarg_shard@fused@-...``) a view of that, each ``slice@NAME`` parameter a view of
the shard; the ``slice@NAME_moment1_0``... states cut the same way from the serial states, the
beta powers as they are.  So the update of a ``slice@`` piece reaches the shard, the all-gather of
the shards the buffer, and the buffer the parameters: what the step leaves in each parameter is
what Paddle's aliasing leaves there, and is proven against the serial update.

The layout is read from the program: the buffers' names and lengths (their keyword arguments),
the parameters' local shapes, the padding (the alignment that makes the padded sizes fill the
buffer), the rank's shard (the ``view_slice`` that cuts it from a gradient buffer a ``reduce_scatter``
scatters)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...dialects import ops
from ...dialects.fusion import FUSED, SHARD, SLICE, buffer_names, padded, piece_of
from ...ir.core import Program
from .values import attr, np_dtype


def _align(numels: list[int], size: int, degree: int, nbytes: int) -> int:
    """Elements per alignment unit whose padded sizes fill ``size``."""
    # Paddle pads to (256 // dtype size * degree) *bytes*: that over the dtype size in elements
    for a in (256 // nbytes * degree // nbytes, 256 // nbytes * degree, 256 // nbytes, 1):
        if a > 0 and sum(padded(n, a) for n in numels) == size:
            return a
    return 1


def param_types(prog: Program) -> dict:
    """name -> type of each parameter of the buffers: its ``builtin.parameter``, or (stage 3,
    where the parameters are views of the gathered buffer) the ``view_shape`` of its range."""
    out = {str(attr(op, "parameter_name")): op.results[0].type for op in prog.block.ops if op.name == ops.PARAMETER}
    for a in prog.block.args:
        names = buffer_names(a.keyword or "")
        if not names or all(n in out for n in names):
            continue
        views = []
        for op, _ in a.uses:
            if op.name == "pd_op.view_slice" and op.results:
                shaped = [u for u, _ in op.results[0].uses if u.name == "pd_op.view_shape"]
                if shaped:
                    views.append((int(attr(op, "begin_idx", 0)), shaped[0].results[0].type))
        for n, (_, t) in zip(names, sorted(views, key=lambda x: x[0])):
            out.setdefault(n, t)
    return out


def _shard_index(prog: Program) -> dict[int, int]:
    """shard length -> the rank's place in its sharding group: where the ``view_slice`` of a
    gradient buffer a ``reduce_scatter`` scatters cuts the rank's shard (all buffers of a rank
    share the group; a parameter's view of a stage-3 buffer is no shard)."""
    out: dict[int, int] = {}
    for op in prog.walk():
        if op.name != "pd_op.reduce_scatter" or not op.results:
            continue
        n = int(np.prod(getattr(op.results[0].type, "shape", ()) or [0]))
        for u, _ in op.operand(0).uses:
            if u.name == "pd_op.view_slice":
                lo, hi = int(attr(u, "begin_idx", 0)), int(attr(u, "end_idx", 0))
                if n and hi - lo == n and lo % n == 0:
                    out.setdefault(n, lo // n)
    return out


def fused_layout(prog: Program, local: Callable) -> list[dict]:
    """Per buffer: name, parameter names, padded sizes, shard length, this rank's index."""
    kw = {a.keyword: a for a in prog.block.args if a.keyword}
    params = param_types(prog)
    out = []
    for key, arg in kw.items():
        names = buffer_names(key)
        shard_arg = kw.get(SHARD + key)
        if not names or shard_arg is None or any(n not in params for n in names) or \
                not getattr(arg.type, "shape", None) or not getattr(shard_arg.type, "shape", None):
            continue
        size, shard = int(arg.type.shape[0]), int(shard_arg.type.shape[0])
        degree = max(size // max(shard, 1), 1)
        t = params[names[0]]
        nbytes = {"f16": 2, "bf16": 2, "f64": 8}.get(getattr(t, "dtype", "f32"), 4)
        numels = [int(np.prod(local(params[n]))) for n in names]
        a = _align(numels, size, degree, nbytes)
        where = _shard_index(prog)
        index = where.get(shard, next(iter(where.values()), 0))
        out.append({"key": key, "names": names, "sizes": [padded(n, a) for n in numels], "size": size,
                    "shard": shard, "index": index, "mesh": getattr(getattr(arg.type, "dist", None), "mesh", None)})
    return out


def fused_inputs(prog: Program, rank: int, inputs: dict, piece: Callable, local: Callable) -> dict[str, np.ndarray]:
    """name -> array for every fused value of ``prog`` on ``rank`` (kwargs by keyword; the
    parameters of the buffers; ``slice@`` parameters and states), empty for other programs.
    ``piece(name, type)``: the rank's piece of a serial input by its type here."""
    out: dict[str, np.ndarray] = {}
    data = {str(attr(op, "name")): op.results[0].type for op in prog.block.ops if op.name == ops.DATA}
    params = param_types(prog)
    for b in fused_layout(prog, local):
        if b["mesh"] is not None and rank not in b["mesh"].process_ids:  # another pipeline stage's (or expert's)
            continue
        t0 = params[b["names"][0]]
        dt = np_dtype(getattr(t0, "dtype", "f32"))
        buf = np.zeros(b["size"], dtype=dt)
        offsets = np.cumsum([0] + b["sizes"][:-1])
        for k, n in enumerate(b["names"]):
            x = np.asarray(piece(n, params[n]), dtype=dt).reshape(-1)
            buf[offsets[k]:offsets[k] + x.size] = x
            out[n] = buf[offsets[k]:offsets[k] + x.size].reshape(local(params[n]))
        out[b["key"]] = buf
        lo = b["index"] * b["shard"]
        if not any(op.name == ops.PARAMETER and str(attr(op, "parameter_name")) in b["names"] for op in prog.block.ops):
            # stage 3: the rank holds its shard only; the rest of the buffer is what the
            # all-gather brings (NaN until then: a program that reads it first diverges)
            buf[:lo] = np.nan
            buf[lo + b["shard"]:] = np.nan
        out[SHARD + b["key"]] = buf[lo:lo + b["shard"]]
        for k, n in enumerate(b["names"]):
            where = piece_of(b["sizes"], b["shard"], b["index"], k)
            if where is None:
                continue
            out[SLICE + n] = buf[where[0]:where[1]]
            for s, st in data.items():  # this piece's states, cut from the serial ones alike
                if not s.startswith(SLICE + n + "_") or s[len(SLICE):] not in inputs:
                    continue
                serial = s[len(SLICE):]
                if "pow_acc" in serial:
                    out[s] = np.asarray(inputs[serial], dtype=dt).reshape(tuple(st.shape)).copy()
                    continue
                sb = np.zeros(b["size"], dtype=dt)
                y = np.asarray(piece(serial, params[n]), dtype=dt).reshape(-1)
                sb[offsets[k]:offsets[k] + y.size] = y
                out[s] = sb[where[0]:where[1]].copy()
    return out


def is_fused(prog: Program) -> bool:
    return any(a.keyword and a.keyword.startswith(FUSED) for a in prog.block.args)


def slice_piece(prog: Program, rank: int, name: str, value: np.ndarray) -> np.ndarray | None:
    """What rank ``rank``'s ``slice@`` copy of the serial value ``name`` (a parameter's state, or
    the parameter) holds of ``value``: its piece, padded as in the buffer (None: not fused here)."""
    from .layout import expected_piece
    from .values import local_shape

    params = param_types(prog)
    local = lambda t: local_shape(t, rank)  # noqa: E731
    for b in fused_layout(prog, local):
        if b["mesh"] is not None and rank not in b["mesh"].process_ids:  # another pipeline stage's (or expert's)
            continue
        for k, n in enumerate(b["names"]):
            if name != n and not name.startswith(n + "_"):
                continue
            where = piece_of(b["sizes"], b["shard"], b["index"], k)
            if where is None:
                return None
            if "pow_acc" in name:
                return np.asarray(value)
            t = params[n]
            x = np.asarray(value)
            if x.shape == tuple(t.shape) and not t.dist.is_replicated():
                x = expected_piece(x, t.dist, rank)
            buf = np.zeros(b["size"], dtype=x.dtype)
            off = int(np.sum(b["sizes"][:k]))
            buf[off:off + x.size] = x.reshape(-1)
            return buf[where[0]:where[1]]
    return None


def in_buffer(prog: Program, name: str) -> bool:
    """``name`` is a parameter of one of ``prog``'s fused buffers, or an optimizer state of one."""
    return any(name == n or name.startswith(n + "_") for a in prog.block.args for n in buffer_names(a.keyword or ""))
