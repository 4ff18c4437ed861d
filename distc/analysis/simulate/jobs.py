"""A whole pipelined step: every rank runs its job programs in its schedule order, micro-batch by
micro-batch, in lockstep with the others (collectives matched by group and order, send/recv by
peer), and the result is checked against the serial step over the global batch.

A rank's values live in two scopes, as in Paddle's executor: the persistable ones (parameters,
optimizer states, gradient-merge accumulators, the learning rate) in one scope that every job
reads and updates in place, the others (a micro-batch's data, the values one job hands to a
later one through ``%kwarg_*``/``builtin.shadow_output``) in the scope of their micro-batch.
A schedule that cannot finish is reported as the deadlock it is: which ranks wait in which job.

The serial reference runs the global-view program's forward and backward on each micro-batch,
averages the gradients (the gradient of the mean loss over the global batch) and makes one
optimizer step with them (global-norm clip included)."""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

from ...ir.records import field, record
from .layout import expected_piece
from .runner import RankRunner
from .scheduler import Simulator
from .step import Compare, Divergence, StepReport, input_name, make_inputs, step_state
from .values import ABSENT, NoKernel, RankValues, SimulationError, np_dtype
from ...dialects import ops
from ...dialects.grads import grad_operand, params_grads
from ...dialects.optimizers import inplace_map
from ...ir.core import Program, Value
from ...ir.dist import TensorDistAttr
from ...ir import attrs as A


@record
class RankJobs:
    """One rank's pipelined step: its job programs, jobs in order, ring id -> group (its own
    numbering), the layout of every named value (to cut its initial pieces), and which names
    are persistable."""

    programs: dict[str, Program]
    jobs: list[tuple[str, int]]
    rings: dict[int, tuple[int, ...]]
    layouts: dict[str, TensorDistAttr]
    initial: dict[str, np.ndarray] = field(default_factory=dict)  # persistable name -> local value
    micro: list[dict[str, np.ndarray]] = field(default_factory=list)  # per micro-batch: data name -> value
    fused_from: Program | None = None  # tensor fusion: the rank's dist program (its buffers' layout)
    views: list = field(default_factory=list)  # and: the buffers and the values that are views of them


def _persistable_arg(a) -> bool:
    p = a.attrs.get("persistable")
    return isinstance(p, A.BoolAttr) and p.value


def _names(prog: Program) -> dict[Value, str]:
    """Value -> the name it carries: kwargs, data/parameters, results of in-place updates of them."""
    out: dict[Value, str] = {a: a.keyword for a in prog.block.args if a.keyword is not None}
    for op in prog.ops:
        n = input_name(op)
        if n is not None:
            out[op.results[0]] = n
            continue
        for ri, oi in inplace_map(op).items():
            v = op.operand(oi) if oi < op.num_operands else None
            if v is not None and v in out and ri < op.num_results:
                out[op.results[ri]] = out[v]
    return out


class JobRunner(RankRunner):
    def __init__(self, sim: "JobSimulator", rank: int, rj: RankJobs) -> None:
        super().__init__(sim, rank, next(iter(rj.programs.values())))
        self.rj = rj
        self.persist: dict[str, np.ndarray] = dict(rj.initial)
        for v in rj.views:  # an in-place update of a buffer view writes into the buffer (RankRunner.run_ops)
            self.views.add(id(v))
            self.keep.append(v)
        self.scopes: list[dict[str, np.ndarray]] = [dict(m) for m in rj.micro]
        self.mb = 0
        self.job = ""

    def input(self, op, key):
        if key in self.scopes[self.mb]:
            x = self.scopes[self.mb][key]
        elif key in self.persist:
            x = self.persist[key]
        else:
            raise self.err(op, f"job {self.job} {self.mb}: no value named {key!r} on this rank")
        t = op.results[0].type
        # (copy=False: a buffer view stays the view, so an in-place update reaches the buffer)
        return np.asarray(x).astype(np_dtype(t.dtype), copy=False) if hasattr(t, "dtype") else x

    def run(self) -> Iterator:
        for job, mb in self.rj.jobs:
            prog = self.rj.programs.get(job)
            if prog is None:
                raise SimulationError(f"the job list names {job!r}, which has no job program", self.rank)
            if mb >= len(self.scopes):
                raise SimulationError(f"job {job} {mb}: micro-batch {mb} of {len(self.scopes)}", self.rank)
            self.prog, self.mb, self.job = prog, mb, job
            self.env = RankValues(self.rank, prog)
            for a in prog.block.args:
                if a.keyword is None:
                    continue
                scope = self.persist if _persistable_arg(a) else self.scopes[mb]
                if a.keyword not in scope:
                    raise SimulationError(f"job {job} {mb} reads %kwarg_{a.keyword}, which no earlier job of "
                                          f"micro-batch {mb} made", self.rank)
                dict.__setitem__(self.env, a, scope[a.keyword])
            yield from self.run_ops(prog.ops, self.sim.progress)
            self._keep(prog)
        return

    def _keep(self, prog: Program) -> None:
        env = self.env
        for v, name in _names(prog).items():
            x = dict.get(env, v, ABSENT)
            if x is ABSENT or x is None:
                continue
            if name in self.persist:
                self.persist[name] = x
        for op in prog.ops:
            if op.name == ops.SHADOW_OUTPUT and op.operand(0) is not None:
                x = dict.get(env, op.operand(0), ABSENT)
                name = op.attr("output_name")
                if x is not ABSENT and isinstance(name, A.StrAttr):
                    (self.persist if name.value in self.persist else self.scopes[self.mb])[name.value] = x


class JobSimulator(Simulator):
    def __init__(self, ranks: Mapping[int, RankJobs], seed: int = 0) -> None:
        super().__init__({r: next(iter(rj.programs.values())) for r, rj in ranks.items()}, {}, seed, None,
                         False, False)
        self.ranks = dict(ranks)

    def make_runner(self, rank: int, prog: Program) -> RankRunner:
        return JobRunner(self, rank, self.ranks[rank])

    def group_of(self, op, rank, ring):
        g = self.ranks[rank].rings.get(int(ring)) if ring is not None else None
        if g is None:
            raise SimulationError(f"ring_id {ring} is no group of rank {rank}", rank, op)
        return tuple(sorted(g))

    def ring_group(self, rank: int, ring):
        return self.ranks[rank].rings.get(int(ring)) if ring is not None and rank in self.ranks else None

    def p2p_partner(self, ring, peer, rank):
        g = self.ranks[rank].rings.get(int(ring)) if ring is not None else None
        if g is None or peer >= len(g):
            return None
        return g[peer]


def run_jobs(ranks: Mapping[int, RankJobs], seed: int = 0) -> dict[int, dict[str, np.ndarray]]:
    """Every rank's persistable values after its jobs.  A rank that cannot go on raises
    SimulationError; a deadlock says which job of which micro-batch each waiting rank is in."""
    sim = JobSimulator(ranks, seed)
    try:
        sim.run()
    except NoKernel:
        raise
    except SimulationError as e:
        runners = getattr(sim, "runners", {})
        where = [f"rank {r} in job {rr.job} {rr.mb}" for r, rr in sorted(runners.items()) if rr.job]
        msg = e.message + (" (" + "; ".join(where) + ")" if where and "deadlock" in e.message else "")
        if e.rank is not None and e.rank in runners and "deadlock" not in e.message:
            rr = runners[e.rank]
            msg = f"job {rr.job} {rr.mb}: " + msg
        raise SimulationError(msg, e.rank, e.op) from None
    return {r: rr.persist for r, rr in sim.runners.items()}  # type: ignore[attr-defined]


def verify_pipeline(serial: Program, ranks: Mapping[int, RankJobs], k: int, *, seed: int = 0, rtol: float = 1e-6,
                    atol: float = 1e-8, paddle_merge: bool = False) -> StepReport:
    """The whole pipelined step of ``ranks`` against the serial step over ``k`` micro-batches
    (``paddle_merge``: against Paddle's gradient merge, which clips the sum of the gradients).
    Every rank's persistable values after its jobs are checked against its piece of the serial
    ones; the gradient-merge accumulators must be zero again.  ``ranks``' ``initial`` holds what
    the caller sets (the accumulators); the inputs are cut here."""
    report = StepReport(sorted(ranks), rtol, atol)
    persist, micro = micro_inputs(serial, k, seed)
    for r, rj in ranks.items():
        rj.initial.update({n: piece(x, rj.layouts.get(n), r) for n, x in persist.items() if n in rj.layouts})
        rj.micro = [{n: piece(x, rj.layouts.get(n), r) for n, x in m.items() if n in rj.layouts} for m in micro]
        if rj.fused_from is not None:
            from .fused_inputs import fused_inputs
            from .values import local_shape

            fused = fused_inputs(rj.fused_from, r, persist, lambda n, t, r=r: _piece_of(persist[n], t, r),
                                 lambda t, r=r: local_shape(t, r))
            rj.initial.update(fused)
            rj.views = list(fused.values())
    grads = [g for _, g in params_grads(serial)]
    updates = [op.operand(grad_operand(op)) for op in serial.ops if grad_operand(op) is not None] \
        if paddle_merge else None
    try:
        want = serial_step(serial, persist, micro, grads, seed, updates)
    except SimulationError as e:
        report.divergence = Divergence(None, e.op, "the serial program: " + e.message, filename=serial.filename)
        return report
    try:
        got = run_jobs(ranks, seed)
    except NoKernel as e:
        report.no_kernel = Divergence(e.rank, e.op, e.message)
        return report
    except SimulationError as e:
        report.divergence = Divergence(e.rank, e.op, e.message)
        return report
    cmp = Compare(report)
    for name, w in want.items():
        if not isinstance(w, np.ndarray) or name not in persist:
            continue
        for r in sorted(ranks):
            if name not in got[r] or name not in ranks[r].layouts:
                continue
            exp = piece(w, ranks[r].layouts[name], r)
            ok, a, rel = cmp.close(got[r][name], exp)
            if not ok and report.divergence is None:
                report.divergence = Divergence(r, None, f"{name} after the step is not its piece of the serial "
                                                        "value", name, a, rel)
    _fused_states(cmp, report, want, persist, ranks, got)
    for r in sorted(ranks):
        for name, x in got[r].items():
            if name.endswith("@GRAD@MERGE") and np.any(np.asarray(x) != 0) and report.divergence is None:
                report.divergence = Divergence(r, None, f"{name} is not reset to zero after the step", name)
    return report


def _piece_of(x, t, rank: int) -> np.ndarray:
    """The rank's piece of the serial value ``x`` by its dist type ``t`` here."""
    from ...ir.types import DistTensorType

    x = np.asarray(x)
    if isinstance(t, DistTensorType) and x.shape == tuple(t.shape) and not t.dist.partial and \
            not t.dist.is_replicated():
        return expected_piece(x, t.dist, rank)
    return x


def _fused_states(cmp: Compare, report: StepReport, want, persist, ranks: Mapping[int, RankJobs], got) -> None:
    """Tensor fusion: each rank's ``slice@`` states (and parameter pieces) after the step against
    their piece of the serial value."""
    from ...dialects.fusion import SLICE
    from .fused_inputs import slice_piece

    for name, w in want.items():
        if not isinstance(w, np.ndarray) or name not in persist:
            continue
        for r in sorted(ranks):
            prog = ranks[r].fused_from
            if prog is None or SLICE + name not in got[r]:
                continue
            exp = slice_piece(prog, r, name, w)
            if exp is None:
                continue
            ok, a, rel = cmp.close(got[r][SLICE + name], exp)
            if not ok and report.divergence is None:
                report.divergence = Divergence(r, None, f"{SLICE}{name} after the step is not its piece of the "
                                                        f"serial {name}", SLICE + name, a, rel)


# ------------------------------------------------------------------------------ inputs, serial
def micro_inputs(serial: Program, k: int, seed: int = 0) -> tuple[dict[str, np.ndarray], list[dict[str, np.ndarray]]]:
    """Global values: (persistable inputs, one dict of data inputs per micro-batch)."""
    base = make_inputs(serial, seed)
    data = [n for op in serial.ops if op.name == ops.DATA and not _persistable_op(op)
            for n in [input_name(op)] if n is not None]
    micro = [{n: make_inputs(serial, seed + 1000 * (i + 1))[n] for n in data} for i in range(k)]
    return {n: x for n, x in base.items() if n not in data}, micro


def _persistable_op(op) -> bool:
    p = op.attr("persistable")
    return isinstance(p, A.ArrayAttr) and bool(p.elements) and isinstance(p.elements[0], A.BoolAttr) \
        and p.elements[0].value


def serial_step(serial: Program, persist: Mapping[str, np.ndarray], micro: list[Mapping[str, np.ndarray]],
                grads: list[Value], seed: int = 0, updates: list[Value] | None = None) -> dict[str, np.ndarray]:
    """The serial step over the global batch: the gradients of each micro-batch averaged, then
    one update; name -> value after the step.  ``updates`` (the gradient operands of the
    optimizer ops): Paddle's gradient merge instead — the gradients summed, clipped as a sum, and
    only the update's operand averaged."""
    from .scheduler import simulate_serial

    runs = [simulate_serial(serial, {**persist, **m}, seed=seed) for m in micro]
    k = len(micro)
    over = {g: np.sum([np.asarray(r.get_value(g), dtype=np.float64) for r in runs], axis=0) / (1 if updates else k)
            for g in grads}
    sim = _OverrideSimulator(serial, {**persist, **micro[0]}, seed, over, {u: 1.0 / k for u in updates or ()})
    sv = sim.run()[0]
    return {n: sv.get_value(v) for n, v in step_state(serial).items()}


class _OverrideRunner(RankRunner):
    def set(self, op, outs) -> None:
        over, scale = self.sim.overrides, self.sim.scale  # type: ignore[attr-defined]
        outs = [over[r] if r in over else np.asarray(x) * scale[r] if r in scale else x for r, x in zip(op.results, outs)]
        super().set(op, outs)


class _OverrideSimulator(Simulator):
    def __init__(self, serial: Program, inputs, seed: int, overrides: dict, scale: dict) -> None:
        super().__init__({0: serial}, inputs, seed, None, True, False, serial=True)
        self.overrides, self.scale = overrides, scale

    def make_runner(self, rank: int, prog: Program) -> RankRunner:
        return _OverrideRunner(self, rank, prog)


def piece(x: np.ndarray, layout: TensorDistAttr | None, rank: int) -> np.ndarray:
    if layout is None or layout.partial or not layout.dims_mapping:
        return np.asarray(x)
    return expected_piece(np.asarray(x), layout, rank)
