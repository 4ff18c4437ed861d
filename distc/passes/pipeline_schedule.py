"""Choosing a scheduler pass by Paddle's strategy names, and a rank's pipeline stage.

``schedule_passes(mode, ...)`` gives the passes that follow ``remove-other-rank`` for
``strategy.pipeline`` (``schedule_mode`` FThenB, 1F1B, VPP, Eager1F1B, ZBH1 with
``accumulate_steps``) or ``strategy.gradient_merge`` alone (mode ``GM``): gradient merge on the
dist program, then the dense program, then the job programs (the plan goes to
``ctx.stats.job_plan``); ``job_types(mode)`` names the job programs before any is made.
``stage_of(prog, rank)`` finds the stage meshes (the meshes of the parameters, ordered by their
first process id) and so a rank's stage, as Paddle's ``rank // (world / pp_degree)`` does for
meshes laid out in order.  ``rank_jobs`` is what a whole-step proof runs of a rank's plan.  The
shard pipeline (:mod:`distc.pipeline.shard`) runs these passes after partition and reshard.
"""

from __future__ import annotations

from ..dialects import ops
from ..ir.core import Program
from ..ir.dist import ProcessMesh
from ..syntax.diagnostics import DiagnosticError
from .base import ModulePass
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


def has_chunks(prog: Program) -> bool:
    """Whether the program's layers are placed in VPP chunks (an op of chunk 1 or more)."""
    for op in prog.block.ops:
        d = op.dist_attr
        if d is not None and d.chunk_id is not None and d.chunk_id > 0:
            return True
    return False


def stage_ranks(prog: Program, mode: str | None, micro_batches: int, ctx, vpp_degree: int = 2) -> list[tuple[int, ...]]:
    """The process ids of each stage mesh.  A schedule that needs more micro-batches than given
    (1F1B, ZBH1, VPP of a program placed in chunks: one a stage; Eager1F1B: 2 P - 1, stage 0's
    warm-up; Paddle asserts it for 1F1B and VPP) is the scheduler's error, raised here, before any
    rank's work, at the line of the parameter that makes the stage count P (the first on the last
    stage mesh to appear), located by ``ctx``.  ``vpp_degree``: VPP's chunks a stage (--vpp-degree)."""
    meshes = stage_meshes(prog)
    need = 2 * len(meshes) - 1 if mode == "Eager1F1B" else len(meshes)
    if (mode in ("1F1B", "ZBH1", "VPP", "Eager1F1B") and micro_batches < need
            and (mode != "VPP" or has_chunks(prog))):
        from .pipeline_1f1b import jobs_1f1b
        from .pipeline_vpp import jobs_vpp
        from .pipeline_zero_bubble import jobs_eager_1f1b, jobs_zbh1

        jobs = {"1F1B": jobs_1f1b, "ZBH1": jobs_zbh1, "Eager1F1B": jobs_eager_1f1b,
                "VPP": lambda n, p, s: jobs_vpp(n, p, s, vpp_degree)}[mode]
        try:
            jobs(micro_batches, len(meshes), 0)
        except DiagnosticError as e:
            raise ctx.located(_at_last_stage(prog, len(meshes), e.message), prog.filename) from None
    return [tuple(m.process_ids) for m in meshes]


def _at_last_stage(prog: Program, stages: int, message: str) -> DiagnosticError:
    """``message`` at the first parameter of the last stage mesh to appear in ``prog``."""
    seen: list[tuple[int, ...]] = []
    for op in prog.block.ops:
        d = op.results[0].dist_attr if op.name == ops.PARAMETER and op.results else None
        if d is not None and tuple(d.mesh.process_ids) not in seen:
            seen.append(tuple(d.mesh.process_ids))
            if len(seen) == stages and op.loc is not None:
                shown = ", ".join(str(list(ids)) for ids in seen[:8]) + (", ..." if stages > 8 else "")
                return DiagnosticError(message, op.loc[0], op.loc[1], notes=[
                    f"{stages} stages: the meshes of the parameters ({shown} as they appear); this parameter's "
                    f"is the last to appear (--acc-steps sets the micro-batches)"])
    return DiagnosticError(message)


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
    from .check_chunk_id import CheckChunkIdPass
    from .dist_to_dense import DistToDensePass
    from .gradient_merge import GradientMergePass
    from .pipeline_1f1b import Pipeline1F1BPass
    from .pipeline_fthenb import GradientMergeJobsPass, PipelineFThenBPass
    from .pipeline_vpp import PipelineVPPPass
    from .pipeline_zero_bubble import PipelineEager1F1BPass, PipelineZBH1Pass

    if mode not in MODES:
        raise DiagnosticError(f"unknown pipeline schedule {mode!r} (known: {', '.join(MODES)})")
    dist: list[ModulePass] = [GradientMergePass(k_steps=micro_batches, paddle=paddle)]
    if mode == "VPP":
        dist.append(CheckChunkIdPass())
    dense: list[ModulePass] = [DistToDensePass(rank=rank)]
    kw = dict(micro_batches=micro_batches, pp_degree=pp_degree, pp_stage=pp_stage)
    if mode == "GM":
        dense.append(GradientMergeJobsPass(k_steps=micro_batches))
    elif mode == "FThenB":
        dense.append(PipelineFThenBPass(micro_batches=micro_batches))
    elif mode == "VPP":
        dense.append(PipelineVPPPass(vpp_degree=vpp_degree, **kw))
    else:
        dense.append({"1F1B": Pipeline1F1BPass, "Eager1F1B": PipelineEager1F1BPass, "ZBH1": PipelineZBH1Pass}[mode](**kw))
    return dist, dense


def job_types(mode: str, vpp_degree: int = 2) -> list[str]:
    """The job programs a schedule splits every rank's dense program into (each rank has all
    of them), in Paddle's ``plan.job_types()`` order: what ``{job}`` of an output pattern takes."""
    from .pipeline_1f1b import TYPES
    from .pipeline_vpp import vpp_types

    if mode == "1F1B":
        return list(TYPES)
    if mode == "VPP":
        return vpp_types(vpp_degree)
    if mode == "ZBH1":
        return ["forward", "backward", "backward_b", "backward_w", "optimizer"]
    return ["forward", "backward", "optimize" if mode == "GM" else "optimizer"]


def input_layouts(prog: Program) -> dict:
    """name -> TensorDistAttr of each data and parameter of a rank's dist program (a whole-step
    proof cuts each rank's initial pieces by them)."""
    from ..ir import attrs as A
    from ..ir.types import DistTensorType

    out = {}
    for op in prog.block.ops:
        key = "name" if op.name == ops.DATA else "parameter_name" if op.name == ops.PARAMETER else None
        n = op.attr(key) if key is not None else None
        if isinstance(n, A.StrAttr) and op.results and isinstance(op.results[0].type, DistTensorType):
            out[n.value] = op.results[0].type.dist
    return out


def rank_jobs(plan: JobPlan, rings: dict, layouts: dict):
    """What :func:`distc.analysis.simulate.jobs.verify_pipeline` runs for a rank: its job plan,
    ``rings`` (ring id -> group, the rank's numbering) and ``layouts`` (:func:`input_layouts`);
    its gradient-merge accumulators start at zero."""
    import numpy as np

    from ..analysis.simulate.jobs import RankJobs

    rj = RankJobs(plan.programs, plan.jobs, dict(rings), layouts)
    for p in plan.programs.values():
        for a in p.block.args:
            if a.keyword is not None and a.keyword.endswith("@GRAD@MERGE"):
                rj.initial[a.keyword] = np.zeros(a.type.shape)  # type: ignore[union-attr]
    return rj
