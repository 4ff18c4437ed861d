"""``pipeline-fthenb{micro_batches=N}``: Paddle 3.3.1's FThenB schedule (``pipeline_fthenb.py``) on a
rank's dense program: three job programs (``forward``, ``backward``, ``optimizer``) and the jobs
``forward 0..N-1``, ``backward 0..N-1``, ``optimizer 0``.  Also ``gradient-merge-jobs``: the same
split with Paddle's gradient-merge job names (``forward``, ``backward``, ``optimize``) and order
(``forward i``, ``backward i`` for each micro-batch, then ``optimize 0``), what the engine does for
``strategy.gradient_merge`` without a pipeline schedule."""

from __future__ import annotations


from ..ir.core import Program
from ..ir.records import record
from .base import ModulePass, PassContext, register
from .pipeline_jobs import JobPlan, Splitter, forward_complete_op_role, overlap_send_recv, region_assigner, \
    send_stream_of_ring


def split_three(prog: Program, names: tuple[str, str, str]) -> dict[str, Program]:
    """Paddle's ``_split_program_into_forward_backward_optimize`` (it changes ``prog`` too: send/recv
    streams, completed op roles)."""
    overlap_send_recv(prog, send_stream_of_ring, "recv_stream")
    forward_complete_op_role(prog)
    fwd, bwd, opt = names
    return Splitter(prog, list(names), region_assigner({0: fwd, 1: bwd, 2: opt}),
                    plain_names=lambda t: t == bwd).run()


@register
@record
class PipelineFThenBPass(ModulePass):
    name = "pipeline-fthenb"
    description = "FThenB schedule: forward, backward and optimizer job programs (Paddle's pipeline_scheduler_FThenB)"

    micro_batches: int = 1

    def apply(self, prog: Program, ctx: PassContext) -> None:
        n = self.micro_batches
        plan = JobPlan("FThenB", split_three(prog, ("forward", "backward", "optimizer")))
        plan.jobs = [("forward", i) for i in range(n)] + [("backward", i) for i in range(n)] + [("optimizer", 0)]
        ctx.stats.job_plan = plan
        ctx.notes.append(f"pipeline-fthenb: {len(plan.jobs)} jobs of {len(plan.programs)} job programs")


@register
@record
class GradientMergeJobsPass(ModulePass):
    name = "gradient-merge-jobs"
    description = "the job programs of gradient merge without a pipeline schedule (forward, backward, optimize)"

    k_steps: int = 1

    def apply(self, prog: Program, ctx: PassContext) -> None:
        plan = JobPlan("GM", split_three(prog, ("forward", "backward", "optimize")))
        plan.jobs = [j for i in range(self.k_steps) for j in (("forward", i), ("backward", i))] + [("optimize", 0)]
        ctx.stats.job_plan = plan
        ctx.notes.append(f"gradient-merge-jobs: {len(plan.jobs)} jobs of {len(plan.programs)} job programs")
