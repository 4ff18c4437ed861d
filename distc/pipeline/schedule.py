"""What a shard run with a pipeline schedule (or gradient merge) gives beyond the rank programs:
the proof of the whole pipelined step and the modelled timeline of each rank's jobs.

* :func:`prove_step` -- every rank runs its job programs in its schedule order, micro-batch by
  micro-batch (send/recv and collectives matched across ranks), against the serial step over the
  global batch (:func:`distc.analysis.simulate.jobs.verify_pipeline`);
* :func:`schedule_timeline` -- each rank's jobs on a modelled clock and the bubble
  (:func:`distc.analysis.schedule_cost.timeline`).

Both take the :class:`~distc.pipeline.results.RankResult` of every rank of the program (each with
its job plan: ``shard_ranks(..., pp_schedule=..., acc_steps=...)``), not detached ones.
"""

from __future__ import annotations

from typing import Mapping

from ..analysis.cost import program_ranks
from ..ir.core import Program
from ..syntax.diagnostics import DiagnosticError
from .results import RankResult
from .shard import ShardOptions


def _every_rank(results: Mapping[int, RankResult], ranks: list[int], what: str) -> None:
    missing = [r for r in ranks if r not in results]
    if missing:
        raise ValueError(f"{what} needs every rank of the program; missing {missing}")
    bad = [r for r in ranks if results[r].plan is None or not all(results[r].plan.programs.values())]
    if bad:
        raise ValueError(f"{what} needs each rank's job programs (a run with a schedule, results not detached); "
                         f"rank {bad[0]} has none")


def startup_accumulators(startup: Program) -> dict:
    """The gradient-merge accumulators a rank's (dense) startup program makes, by name: what its
    pipelined step starts from."""
    from ..analysis.simulate.scheduler import simulate_serial
    from ..dialects import ops
    from ..ir import attrs as A

    named = {}
    for op in startup.block.ops:
        name = op.attr("output_name") if op.name == ops.SHADOW_OUTPUT else None
        if isinstance(name, A.StrAttr) and name.value.endswith("@GRAD@MERGE"):
            named[name.value] = op.operand(0)
    if not named:
        return {}
    values = simulate_serial(startup, {}, shapes_from_types=True)
    return {n: values.get_value(v) for n, v in named.items()}


def prove_step(serial: Program, results: Mapping[int, RankResult], options: ShardOptions, *, seed: int = 0,
               rtol: float = 1e-6, atol: float = 1e-8, startups: Mapping[int, Program] | None = None):
    """The whole pipelined step of ``results`` (every rank of ``serial``'s meshes) against the
    serial step of ``serial`` (the global program as given, before any pass) over
    ``options.acc_steps`` micro-batches; with ``options.paddle_merge``, against Paddle's gradient
    merge rule (the clip sees the sum).  The gradient-merge accumulators start as each rank's
    startup program in ``startups`` makes them (one it lacks is an error of the step), else at
    zero.  A :class:`~distc.analysis.simulate.step.StepReport`."""
    from ..analysis.simulate.jobs import verify_pipeline
    from ..passes.pipeline_schedule import rank_jobs

    ranks = program_ranks(serial)
    _every_rank(results, ranks, "the whole-step proof")
    jobs = {r: rank_jobs(results[r].plan, results[r].rings or {}, results[r].layouts or {}) for r in ranks}
    for r in ranks:  # tensor fusion: the buffers and their views, as the startup program leaves them
        jobs[r].fused_from = results[r].fused_dist
    made = set()
    for r, sp in (startups or {}).items():
        if r in jobs:
            jobs[r].initial = startup_accumulators(sp)
            made.add(len(jobs[r].initial))
    report = verify_pipeline(serial, jobs, options.acc_steps, seed=seed, rtol=rtol, atol=atol,
                             paddle_merge=options.paddle_merge)
    if made:
        report.notes.append("the gradient-merge accumulators start as the ranks' startup programs make them "
                            f"({' or '.join(map(str, sorted(made)))} a rank)")
    return report


def schedule_timeline(results: Mapping[int, RankResult], *, flops: float = 1e9, bandwidth: float = 25e9,
                      filename: str | None = None):
    """Each rank's jobs on a modelled clock (compute from op FLOPs at ``flops``, send/recv and
    collectives from bytes at ``bandwidth``): a :class:`~distc.analysis.schedule_cost.Timeline`
    (makespan, per-rank busy time, bubble).  A schedule whose send/recv do not pair up is a
    located error in ``filename``."""
    from ..analysis.schedule_cost import CostModel, timeline

    ranks = sorted(results)
    _every_rank(results, ranks, "the timeline")
    first = results[ranks[0]].plan
    try:
        return timeline(first.schedule, {r: results[r].plan.jobs for r in ranks},
                        {r: results[r].plan.programs for r in ranks}, {r: results[r].rings or {} for r in ranks},
                        CostModel(flops=flops, bandwidth=bandwidth))
    except ValueError as e:
        raise DiagnosticError(str(e), filename=filename) from None


def peak_activations(jobs: list[tuple[str, int]], chunks: int = 1) -> float:
    """The most micro-batches' activations a rank holds at once in the job order ``jobs``: a
    micro-batch's (chunk's) forward keeps them until its last backward job (ZBH1's weight-gradient
    job included: it reads them too); with ``chunks`` (VPP) each chunk holds 1/chunks of them."""
    import re

    last: dict[tuple[str, int], int] = {}
    for i, (t, m) in enumerate(jobs):
        if t.startswith("backward"):
            last[(re.sub(r"^backward(_[bw])?", "", t), m)] = i
    held, peak = 0, 0
    for i, (t, m) in enumerate(jobs):
        if t.startswith("forward"):
            held += 1
            peak = max(peak, held)
        elif t.startswith("backward") and last.get((re.sub(r"^backward(_[bw])?", "", t), m)) == i:
            held -= 1
    return peak / chunks
