"""Proof of a one-reshard program: a random global tensor, the lowered program run on every rank,
every destination rank's final value checked against its piece of the destination layout."""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from ...ir.records import field, record
from .layout import check_layout
from .scheduler import simulate_ranks
from .values import ABSENT, SimulationError, attr, np_dtype
from ...ir.core import Program, Value
from ...ir.dist import TensorDistAttr, layout_name
from ...ir.types import DistTensorType
from ...dialects import ops


def final_value(prog: Program, rank: int, values: Mapping, dst: TensorDistAttr | None) -> Value | None:
    """The rank's result of a one-reshard program: the last unused result computed on the rank,
    preferring one whose type has the destination layout."""
    fallback = None
    for op in reversed(prog.ops):
        for r in op.results:
            if r.uses or dict.get(values, r, ABSENT) is ABSENT or not isinstance(dict.get(values, r), np.ndarray):
                continue
            if dst is not None and isinstance(r.type, DistTensorType) and r.type.dist.paddle_equal(dst):
                return r
            if fallback is None:
                fallback = r
    return fallback


@record
class ReshardReport:
    """What :func:`verify_reshard` found."""

    src: TensorDistAttr | None
    dst: TensorDistAttr | None
    shape: tuple[int, ...]
    ranks: list[int]
    checked: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: dict[int, list[str]] = field(default_factory=dict)
    error: str | None = None  # the simulation failed (deadlock, bad shapes...)

    @property
    def ok(self) -> bool:
        return not self.problems and self.error is None

    def summary(self) -> str:
        head = (f"{layout_name(self.src, True) if self.src else '?'} -> {layout_name(self.dst, True) if self.dst else '?'}, "
                f"shape {list(self.shape)}")
        if self.ok:
            return f"OK {head}: ranks {self.checked} hold the destination layout"
        lines = [f"FAIL {head}"]
        if self.error:
            lines.append("  simulation: " + self.error)
        lines.extend("  " + p for p in self.problems)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _reshard_attrs(prog: Program) -> tuple[TensorDistAttr | None, tuple[int, ...] | None, str | None, str]:
    src = None
    shape = None
    name = None
    dtype = "float32"
    for op in prog.ops:
        if op.name == ops.DATA and name is None:
            name = attr(op, "name")
            t = op.results[0].type
            if hasattr(t, "shape"):
                shape = tuple(t.shape)
            dtype = str(getattr(t, "dtype", dtype))
        if op.name == ops.SHARD_TENSOR and src is None:
            t = op.results[0].type
            if isinstance(t, DistTensorType):
                src = t.dist
                shape = tuple(t.shape)
    return src, shape, name, dtype


def random_global(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """The proof's global input, exact in ``dtype``: multiples of 1/8 of magnitude < 12 for
    floats (exact down to bfloat16), integers in [-8, 8] for integer dtypes (an integer tensor
    with fractions would be truncated when the rank reads it), True/False for bool."""
    rng = np.random.default_rng([seed, 12345])
    dt = np_dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(-8, 9, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    return np.round(rng.standard_normal(shape) * 8) / 8 + rng.integers(-3, 4, size=shape)


def _infer_dst(programs: Mapping[int, Program]) -> TensorDistAttr | None:
    for rank, prog in sorted(programs.items()):
        for op in reversed(prog.ops):
            if op.name == ops.RESHARD:
                t = op.results[0].type
                if isinstance(t, DistTensorType):
                    return t.dist
    for rank, prog in sorted(programs.items()):
        op = prog.ops[-1] if prog.ops else None
        if op is not None and op.results and isinstance(op.results[0].type, DistTensorType):
            d = op.results[0].type.dist
            if rank in d.mesh.process_ids:
                return d
    return None


def verify_reshard(programs_by_rank: Mapping[int, Program], *, dst: TensorDistAttr | None = None,
                   before: Program | None = None, seed: int = 0, global_value: np.ndarray | None = None,
                   rings: Mapping[int, Iterable[int]] | None = None, rtol: float = 1e-7,
                   atol: float = 1e-7, strict_rings: bool = False) -> ReshardReport:
    """Prove (for one random input) that a lowered one-reshard program is correct on every rank.

    ``programs_by_rank`` holds the lowered program of every rank of the source and destination
    meshes.  The destination layout is ``dst``, else read from ``before`` (the program with the
    ``dist_op.reshard``), else inferred from the lowered programs.  The final value of every
    rank of the destination mesh must be its piece of the global tensor (partial destination:
    the pieces must reduce to it).
    """
    progs = dict(programs_by_rank)
    any_prog = progs[min(progs)]
    src, shape, name, dtype = _reshard_attrs(any_prog)
    if dst is None and before is not None:
        for op in before.ops:
            if op.name == ops.RESHARD and isinstance(op.results[0].type, DistTensorType):
                dst = op.results[0].type.dist
    if dst is None:
        dst = _infer_dst(progs)
    report = ReshardReport(src, dst, tuple(shape or ()), sorted(progs))
    if dst is None or shape is None or name is None:
        report.error = "cannot tell the input, its shape or the destination layout"
        return report
    need = set(dst.mesh.process_ids) | (set(src.mesh.process_ids) if src else set())
    missing = sorted(need - set(progs))
    if missing:
        report.error = f"no lowered program for ranks {missing}"
        return report
    if global_value is None:
        global_value = random_global(shape, dtype, seed)
    try:
        res = simulate_ranks(progs, {name: global_value}, seed=seed, rings=rings, strict_rings=strict_rings)
    except SimulationError as e:
        report.error = str(e)
        return report
    pieces = {}
    for r in dst.mesh.process_ids:
        v = final_value(progs[r], r, res[r], dst)
        if v is None:
            report.problems.append(f"rank {r}: no result value")
            continue
        if not (isinstance(v.type, DistTensorType) and v.type.dist.paddle_equal(dst)):
            report.notes.setdefault(r, []).append(f"the final value's type is {v.type}, not the destination layout")
        pieces[r] = res[r].get_value(v)
        report.checked.append(r)
    report.notes.update({r: [*report.notes.get(r, []), *res[r].notes] for r in res if res[r].notes})
    if len(pieces) == len(dst.mesh.process_ids):
        report.problems.extend(check_layout(pieces, np.asarray(global_value), dst,
                                            rtol=rtol, atol=atol))
    return report
