"""Choosing a scheduler pass by Paddle's strategy names, and a rank's pipeline stage.

``schedule_passes(mode, ...)`` gives the passes that follow ``remove-other-rank`` for
``strategy.pipeline`` (``schedule_mode`` FThenB, 1F1B, VPP, Eager1F1B, ZBH1 with
``accumulate_steps``) or ``strategy.gradient_merge`` alone (mode ``GM``): gradient merge on the
dist program, then the dense program, then the job programs (the plan goes to
``ctx.stats.job_plan``). ``stages(prog)`` finds the stage meshes (the meshes of the parameters,
ordered by their first process id) and so a rank's stage, as Paddle's
``rank // (world / pp_degree)`` does for meshes laid out in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dialects import ops
from ..ir.core import Program
from ..ir.dist import ProcessMesh
from ..syntax.diagnostics import DiagnosticError
from .base import REGISTRY, ModulePass, PassContext, PassManager
from .pipeline_jobs import JobPlan

MODES = ("FThenB", "1F1B", "VPP", "Eager1F1B", "ZBH1", "GM")
PADDLE_MODES = ("FThenB", "1F1B", "VPP")  # what Paddle 3.3.1's pipeline_pass accepts


def stage_meshes(prog: Program) -> list[ProcessMesh]:
    found: dict[tuple[int, ...], ProcessMesh] = {}
    for op in prog.block.ops:
        if op.name == ops.PARAMETER and op.results:
            d = op.results[0].dist_attr
            if d is not None:
                found.setdefault(tuple(d.mesh.process_ids), d.mesh)
    return [found[k] for k in sorted(found, key=lambda k: (min(k), k))]


def stage_of(prog: Program, rank: int) -> tuple[int, int]:
    """(the rank's pipeline stage, the number of stages)."""
    meshes = stage_meshes(prog)
    for i, m in enumerate(meshes):
        if rank in m.process_ids:
            return i, len(meshes)
    raise DiagnosticError(f"rank {rank} holds no parameter of the program: no pipeline stage "
                          f"(stage meshes {[list(m.process_ids) for m in meshes]})")


def schedule_passes(mode: str, micro_batches: int, rank: int, pp_stage: int, pp_degree: int,
                    vpp_degree: int = 2, paddle: bool = False) -> tuple[list[ModulePass], list[ModulePass]]:
    """(passes on the rank's dist program, passes on its dense program) after remove-other-rank.
    ``paddle``: Paddle's gradient merge as it is (see ``gradient-merge``)."""
    if mode not in MODES:
        raise DiagnosticError(f"unknown pipeline schedule {mode!r} (known: {', '.join(MODES)})")
    dist: list[ModulePass] = [REGISTRY["gradient-merge"](k_steps=micro_batches, paddle=paddle)]  # type: ignore[call-arg]
    if mode == "VPP" and "check-chunk-id" in REGISTRY:
        dist.append(REGISTRY["check-chunk-id"]())
    dense: list[ModulePass] = [REGISTRY["dist-to-dense"](rank=rank)]  # type: ignore[call-arg]
    kw = dict(micro_batches=micro_batches, pp_degree=pp_degree, pp_stage=pp_stage)
    if mode == "GM":
        dense.append(REGISTRY["gradient-merge-jobs"](k_steps=micro_batches))  # type: ignore[call-arg]
    elif mode == "FThenB":
        dense.append(REGISTRY["pipeline-fthenb"](micro_batches=micro_batches))  # type: ignore[call-arg]
    else:
        name = {"1F1B": "pipeline-1f1b", "VPP": "pipeline-vpp", "Eager1F1B": "pipeline-eager-1f1b",
                "ZBH1": "pipeline-zbh1"}[mode]
        if name not in REGISTRY:
            raise DiagnosticError(f"the {mode} schedule is not available in this build of distc")
        if mode == "VPP":
            kw["vpp_degree"] = vpp_degree
        dense.append(REGISTRY[name](**kw))  # type: ignore[call-arg]
    return dist, dense


@dataclass
class RankSchedule:
    """One rank's schedule: its dist program after gradient merge (Paddle's final dist program),
    its dense program, the job plan, and what a whole-step proof needs of the build."""

    rank: int
    dist_text: str
    dense: Program
    plan: JobPlan
    ctx: PassContext
    layouts: dict  # name -> TensorDistAttr of each data/parameter in the rank's dist program


def build_schedule(prog: Program, rank: int, mode: str, micro_batches: int, *, vpp_degree: int = 2,
                   paddle: bool = False, keep_dist_text: bool = True, partitioned: set[str] | None = None
                   ) -> RankSchedule:
    """``prog`` (the global program, optimizer annotated; changed in place: pass a clone) through
    partition, reshard, remove-other-rank, gradient merge, dist-to-dense and the scheduler.
    ``partitioned``: ``prog`` is already partitioned (:func:`build_schedules`), and these are the
    parameters whose gradients it resharded in the backward before."""
    from ..analysis.simulate.step import input_name
    from ..dialects.grads import resharded_in_backward
    from ..ir.types import DistTensorType

    ctx = PassContext()
    ctx.stats.resharded_grads = resharded_in_backward(prog) if partitioned is None else set(partitioned)
    pp_stage, pp_degree = stage_of(prog, rank)
    dist, dense = schedule_passes(mode, micro_batches, rank, pp_stage, pp_degree, vpp_degree, paddle)
    first = [] if partitioned is not None else [REGISTRY["partition"]()]
    PassManager(first + [REGISTRY["reshard"](rank=rank),  # type: ignore[call-arg]
                         REGISTRY["remove-other-rank"](rank=rank)] + dist, verify_each=False).run(prog, ctx)  # type: ignore[call-arg]
    layouts = {}
    for op in prog.block.ops:
        n = input_name(op)
        if n is not None and op.results and isinstance(op.results[0].type, DistTensorType):
            layouts[n] = op.results[0].type.dist
    text = str(prog) if keep_dist_text else ""
    PassManager(dense, verify_each=False).run(prog, ctx)
    return RankSchedule(rank, text, prog, ctx.stats.job_plan, ctx, layouts)


def build_schedules(prog: Program, ranks, mode: str, micro_batches: int, **kw) -> dict[int, RankSchedule]:
    """:func:`build_schedule` for several ranks, the partition run once (``prog`` is changed)."""
    from ..dialects.grads import resharded_in_backward

    resharded = resharded_in_backward(prog)
    PassManager([REGISTRY["partition"]()], verify_each=False).run(prog, PassContext())
    return {r: build_schedule(prog.clone(), r, mode, micro_batches, partitioned=resharded, **kw) for r in ranks}


def rank_jobs(rs: RankSchedule):
    """What :func:`distc.analysis.simulate.jobs.verify_pipeline` runs for the rank (its
    gradient-merge accumulators start at zero)."""
    import numpy as np

    from ..analysis.simulate.jobs import RankJobs

    rings = {v: k for k, v in rs.ctx.rings.groups.items()}
    rj = RankJobs(rs.plan.programs, rs.plan.jobs, rings, rs.layouts)
    for p in rs.plan.programs.values():
        for a in p.block.args:
            if a.keyword is not None and a.keyword.endswith("@GRAD@MERGE"):
                rj.initial[a.keyword] = np.zeros(a.type.shape)  # type: ignore[union-attr]
    return rj
