"""Whole-step proof: the serial (global-view) program and every rank's program run on the same
seeded inputs; what a step leaves behind is compared.

* Inputs (``pd_op.data`` by ``name``, ``builtin.parameter`` by ``parameter_name``) get seeded
  random values at their global shape (:func:`make_inputs`); each rank takes its piece by the
  layout its own program declares.  Integer inputs stay in range of what consumes them
  (embedding rows, cross-entropy classes); moments are non-negative, beta powers in (0.5, 1),
  the learning rate small.
* What a step leaves behind (:func:`step_state`): every named input after the in-place updates
  of the program (``adamw_``, ``assign_out_``, ... ; the in-place map below) and every
  ``builtin.shadow_output``/``set_parameter``.  A rank's value is checked against its piece of
  the serial value by the layout of its type (partial: the ranks' pieces must reduce to it).
* The first divergence is located: ops of the rank program are paired with the serial ops of
  the same name in order (names whose counts differ are not paired); the earliest forward or
  optimizer op (``op_role`` 0 or 2) whose result is not its piece is reported; else the op that
  produced the first wrong final value.  Backward values are not traced piece by piece (Paddle
  scales local gradients before their reduction).
"""

from __future__ import annotations

import re
import zlib
from typing import Mapping

import numpy as np

from ...ir.records import field, record
from .coverage import Missing, summary as missing_summary
from .layout import expected_piece, layout_groups
from .values import SimulationError, attr, np_dtype
from ...dialects import ops
from ...dialects.collectives import base_name, collective_kind
from ...dialects.optimizers import inplace_map
from ...ir.core import Operation, Program, Value
from ...ir.dist import TensorDistAttr
from ...ir.types import DistTensorType

def is_comm(op: Operation) -> bool:
    """A collective of either era, or point-to-point communication."""
    return collective_kind(op.name) is not None or base_name(op.name) in ("p_send", "p_recv")


def input_name(op: Operation) -> str | None:
    if op.name == ops.DATA:
        return attr(op, "name")
    if op.name == ops.PARAMETER:
        return attr(op, "parameter_name")
    return None


def step_state(prog: Program) -> dict[str, Value]:
    """``name -> Value``: each named input's value after the step's in-place updates, and each
    output (``shadow_output`` by ``output_name``, ``set_parameter`` by ``parameter_name``)."""
    version: dict[Value, str] = {}
    out: dict[str, Value] = {}
    for op in prog.ops:
        n = input_name(op)
        if n is not None:
            version[op.results[0]] = n
            out[n] = op.results[0]
            continue
        if op.name in (ops.SHADOW_OUTPUT, ops.SET_PARAMETER) and op.operand(0) is not None:
            out[str(attr(op, "output_name") or attr(op, "parameter_name"))] = op.operand(0)
            continue
        for ri, oi in inplace_map(op).items():
            v = op.operand(oi) if oi < op.num_operands else None
            if v is not None and v in version and ri < op.num_results:
                version[op.results[ri]] = version[v]
                out[version[v]] = op.results[ri]
    return out


# ------------------------------------------------------------------------------------ inputs
_PASS = ("unsqueeze", "squeeze", "reshape", "slice", "cast", "assign", "shard_tensor", "reshard",
         "transpose", "concat", "split", "split_with_num", "flatten", "combine", "expand", "share_data")


def _int_bound(v: Value) -> int | None:
    """The exclusive upper bound an integer value must respect: the rows of the embedding or the
    classes of the cross entropy that (through shape ops) consume it."""
    bound = None
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        for op, idx in list(x.uses):
            base = op.name.split(".", 1)[-1].rstrip("_")
            b = None
            if base in ("embedding", "embedding_grad") and idx == 0 and op.num_operands > 1:
                b = op.operand(1).type.shape[0]
            elif base in ("cross_entropy_with_softmax", "cross_entropy_with_softmax_grad") and \
                    not bool(attr(op, "soft_label", False)):
                logits = op.operand(0 if base == "cross_entropy_with_softmax" else 1)
                if x is not logits:
                    shape = logits.type.shape
                    b = shape[int(attr(op, "axis", -1))]
            elif base in _PASS:
                todo.extend(op.results)
            if b is not None and b > 0:
                bound = b if bound is None else min(bound, b)
    return bound


_NONNEGATIVE = ("mean_square", "inf_norm", "avg_squared")


def make_inputs(prog: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random global values for every named input of ``prog`` (one generator per name,
    so a value does not depend on which other inputs exist)."""
    out: dict[str, np.ndarray] = {}
    for op in prog.ops:
        name = input_name(op)
        if name is None or name in out:
            continue
        t = op.results[0].type
        shape = tuple(getattr(t, "shape", ()) or ())
        if any(d < 0 for d in shape):
            raise SimulationError(f"input {name!r} has a dynamic shape {list(shape)}", None, op)
        dt = np_dtype(getattr(t, "dtype", "float32"))
        rng = np.random.default_rng([seed, zlib.crc32(str(name).encode())])
        low = str(name).lower()
        if dt.kind in "iu":
            hi = _int_bound(op.results[0]) or 8
            out[name] = rng.integers(0, hi, size=shape).astype(np.int64)
        elif dt.kind == "b":
            out[name] = rng.integers(0, 2, size=shape).astype(bool)
        elif "pow_acc" in low:
            out[name] = rng.uniform(0.5, 0.95, size=shape)
        elif "learning_rate" in low or low.startswith("lr"):
            out[name] = rng.uniform(1e-3, 1e-2, size=shape)
        elif "moment2" in low:
            out[name] = np.abs(rng.standard_normal(shape)) * 0.1
        elif any(k in low for k in _NONNEGATIVE) or re.search(r"_moment_\d+$", low):
            # second moments of the other optimizers (RMSProp's mean_square, Adamax's inf_norm,
            # Adadelta's averages, Adagrad's moment): never negative in training
            out[name] = np.abs(rng.standard_normal(shape)) * 0.1 + 0.1
        elif "mean_grad" in low:  # RMSProp (centered): mean_grad^2 <= mean_square
            out[name] = rng.standard_normal(shape) * 0.02
        else:
            out[name] = rng.standard_normal(shape) * 0.5
    return out


# ------------------------------------------------------------------------------------ report
@record
class Divergence:
    rank: int | None
    op: Operation | None
    message: str
    value: str = ""
    abs_err: float = 0.0
    rel_err: float = 0.0
    filename: str | None = None

    def where(self) -> str:
        loc = self.op.loc if self.op is not None and self.op.loc else None
        f = self.filename or "<input>"
        return f"{f}:{loc[0]}:{loc[1]}" if loc else f

    def as_dict(self) -> dict:
        loc = self.op.loc if self.op is not None and self.op.loc else (None, None)
        return {"rank": self.rank, "op": self.op.name if self.op else None, "file": self.filename,
                "line": loc[0], "col": loc[1], "value": self.value, "message": self.message,
                "max_abs_error": self.abs_err, "max_rel_error": self.rel_err}


@record
class StepReport:
    ranks: list[int]
    rtol: float
    atol: float
    tensors: int = 0          # (value, rank) pairs compared
    elements: int = 0         # numbers compared
    max_abs: float = 0.0
    max_rel: float = 0.0
    ops: int = 0              # ops simulated, serial and ranks
    divergence: Divergence | None = None
    missing: list[Missing] = field(default_factory=list)  # op names without a kernel (nothing simulated)
    notes: list[str] = field(default_factory=list)
    # what the programs do not say and the proof needs (a collective's group): not provable
    undecided: Divergence | None = None
    # what the programs do not say and the proof took from all of them (a ring's group): also notes
    assumed: list[str] = field(default_factory=list)

    @property
    def status(self) -> int:
        """0 equal, 1 divergence, 3 ops without a kernel, 4 not provable (the files do not say
        what the proof needs: :attr:`undecided`)."""
        return 3 if self.missing else 1 if self.divergence else 4 if self.undecided else 0

    def as_dict(self) -> dict:
        out = {"status": ["equal", "diverged", None, "no-kernel", "not-provable"][self.status], "exit": self.status,
               "ranks": self.ranks, "values_compared": self.tensors, "elements_compared": self.elements,
               "max_abs_error": self.max_abs, "max_rel_error": self.max_rel, "rtol": self.rtol,
               "atol": self.atol, "ops_simulated": self.ops,
               "divergence": self.divergence.as_dict() if self.divergence else None,
               "no_kernel": [m.as_dict() for m in self.missing] or None}
        if self.undecided is not None:  # (rank, op, file, line, col, message: what the files do not say)
            out["not_provable"] = self.undecided.as_dict()
        if self.assumed:
            out["assumed"] = list(self.assumed)
        return out

    def summary(self) -> str:
        stats = (f"{self.tensors} values ({self.elements} numbers) compared on ranks {self.ranks}, "
                 f"largest error abs {self.max_abs:.3g} rel {self.max_rel:.3g} (rtol {self.rtol:g}, atol {self.atol:g})")
        if self.missing:
            return missing_summary(self.missing)
        if self.undecided and not self.divergence:
            d = self.undecided
            at = f"{d.where()}: " + (f"rank {d.rank}, " if d.rank is not None else "") + \
                (f"'{d.op.name}': " if d.op is not None else "")
            return f"not provable: {at}{d.message}\n  (the proof cannot go on without it: nothing compared)"
        if self.divergence:
            d = self.divergence
            head = f"{d.where()}: DIVERGED" + (f" on rank {d.rank}" if d.rank is not None else "")
            if d.op is not None:
                head += f" at '{d.op.name}'"
            lines = [head + f": {d.message}"]
            if d.value:
                lines.append(f"  value {d.value}: max abs error {d.abs_err:.3g}, max rel error {d.rel_err:.3g}")
            lines.append("  " + stats)
            return "\n".join(lines)
        return "EQUAL: " + stats


class Compare:
    """Checks rank values against pieces of serial values and keeps the statistics."""

    def __init__(self, report: StepReport) -> None:
        self.r = report

    def close(self, got, want) -> tuple[bool, float, float]:
        """Whether ``got`` is ``want`` within the tolerances (numpy's allclose), and the largest
        absolute and relative errors (one pass over the arrays)."""
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            return False, float("inf"), float("inf")
        self.r.tensors += 1
        self.r.elements += int(got.size)
        if got.size == 0:
            return True, 0.0, 0.0
        if got.dtype == bool or want.dtype == bool:
            bad = float(np.count_nonzero(got != want))
            ok, a, rel = bad == 0, bad, bad
        else:
            g, w = got.astype(np.float64, copy=False), want.astype(np.float64, copy=False)
            d = np.abs(g - w)
            aw = np.abs(w)
            a, rel = float(d.max()), float((d / np.maximum(aw, 1e-300)).max())
            ok = bool((d <= self.r.atol + self.r.rtol * aw).all()) or \
                bool(np.allclose(g, w, rtol=self.r.rtol, atol=self.r.atol))  # infinities of one sign
        self.r.max_abs = max(self.r.max_abs, a)
        self.r.max_rel = max(self.r.max_rel, rel)
        return ok, a, rel

    def value(self, want: np.ndarray, found: Mapping[int, tuple[Value, object]],
              layout: TensorDistAttr | None = None) -> tuple[int, float, float, str] | None:
        """``found``: rank -> (its Value, its local array).  The first rank (and errors) whose
        piece is wrong, or None.  A dense-typed value is taken as ``layout`` (else whole)."""
        partial: dict = {}
        for r in sorted(found):
            v, x = found[r]
            if x is None or not isinstance(x, np.ndarray):
                continue
            t = v.type
            if isinstance(t, DistTensorType):
                d = t.dist
                if r not in d.mesh.process_ids:
                    continue
                if d.partial:
                    partial.setdefault(d, {})[r] = x
                    continue
                piece = expected_piece(want, d, r) if d.dims_mapping and tuple(want.shape) == tuple(t.shape) else want
            elif layout is not None and not layout.partial:
                if r not in layout.mesh.process_ids:
                    continue
                piece = expected_piece(want, layout, r)
            else:
                piece = want
            ok, a, rel = self.close(x, piece)
            if not ok:
                msg = f"local shape {list(np.shape(x))}, expected {list(piece.shape)}" if np.shape(x) != piece.shape else ""
                return r, a, rel, msg
        for d, pieces in partial.items():
            if set(pieces) != set(d.mesh.process_ids):
                continue
            for ranks, got, piece, bad_shape in layout_groups(pieces, want, d):
                if bad_shape:
                    r, shape = bad_shape[0]
                    return r, float("inf"), float("inf"), f"local shape {list(shape)}, expected {list(piece.shape)}"
                self.r.tensors += len(ranks) - 1
                ok, a, rel = self.close(got, piece)
                if not ok:
                    return ranks[0], a, rel, f"the pieces of ranks {ranks} reduce to a wrong value"
        return None


