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

from ..dialects import ops
from ..ir.core import Program
from ..ir.dist import ProcessMesh
from ..syntax.diagnostics import DiagnosticError
from .base import REGISTRY, ModulePass

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
                    vpp_degree: int = 2) -> tuple[list[ModulePass], list[ModulePass]]:
    """(passes on the rank's dist program, passes on its dense program) after remove-other-rank."""
    if mode not in MODES:
        raise DiagnosticError(f"unknown pipeline schedule {mode!r} (known: {', '.join(MODES)})")
    dist: list[ModulePass] = [REGISTRY["gradient-merge"](k_steps=micro_batches)]  # type: ignore[call-arg]
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
