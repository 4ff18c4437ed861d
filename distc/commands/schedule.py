"""``distc schedule``: a pipeline schedule (or gradient merge) for every rank of a program placed
on pipeline stages — Paddle's job programs and job list, the whole-step proof, the cost.

    distc schedule MAIN --pp-schedule 1F1B --acc-steps 4 --all-ranks -o 'out/r{rank}.{job}.ir'

MAIN is the program Paddle dumps before ``apply_partition_pass`` (stage 0, as ``distc shard``
takes it); ``--stage 1`` shards the optimizer first.  Each rank: partition, reshard,
remove-other-rank, gradient-merge (``--acc-steps``), dist-to-dense, the scheduler pass.  stdout
(or ``--jobs-out``) gets each rank's job list; ``-o`` with ``{rank}`` and ``{job}`` each job
program; ``--verify`` runs the whole pipelined step and compares it with the serial step over the
global batch; ``--cost`` models each rank's timeline and the bubble (``--json``: the timelines as
``distc report --schedule`` reads them)."""

from __future__ import annotations

import click

from ..driver import check_pattern, err_console, load, reporting, warn_unknown_ops
from ..outputs import Outputs

MODES = ("FThenB", "1F1B", "VPP", "Eager1F1B", "ZBH1", "GM")


@click.command("schedule")
@click.argument("main_file", metavar="MAIN")
@click.option("--pp-schedule", "mode", type=click.Choice(MODES), default="1F1B", show_default=True,
              help="Paddle's strategy.pipeline.schedule_mode (GM: strategy.gradient_merge alone); Eager1F1B and "
              "ZBH1 are distc's (Paddle 3.3.1 refuses them)")
@click.option("--acc-steps", type=click.IntRange(min=1), required=True,
              help="accumulate_steps (k_steps for GM): micro-batches a step")
@click.option("--vpp-degree", type=click.IntRange(min=2), default=2, show_default=True, help="chunks a stage (VPP)")
@click.option("--stage", type=click.IntRange(0, 1), default=0, show_default=True, help="ZeRO stage (1: shard-optimizer first)")
@click.option("--mesh-dims", default="", help="names of the mesh dims, e.g. dp,mp (for --stage 1)")
@click.option("--rank", type=int, default=None, help="the rank  [default: 0]")
@click.option("--all-ranks", is_flag=True, help="every rank of the program")
@click.option("-o", "--output", default=None, help="each job program: a pattern with {job} (and {rank} with --all-ranks)")
@click.option("--jobs-out", default=None, help="the job list (default stdout; {rank} with --all-ranks)")
@click.option("--paddle", is_flag=True, help="Paddle's gradient merge as it is: the global-norm clip sees the sum of "
              "the micro-batch gradients (distc's default averages them before the clip: the global batch's step)")
@click.option("--verify", "prove", is_flag=True, help="run the whole pipelined step and compare it with the serial step")
@click.option("--cost", is_flag=True, help="each rank's modelled timeline and the bubble")
@click.option("--flops", type=float, default=1e9, show_default=True, help="--cost: FLOP/s of a device")
@click.option("--bandwidth", type=float, default=25e9, show_default=True, help="--cost: bytes/s between two ranks")
@click.option("--json", "as_json", is_flag=True, help="the summary as one line of JSON on stderr")
@click.option("--quiet", "-q", is_flag=True, help="no summary on stderr")
def command(main_file: str, mode: str, acc_steps: int, vpp_degree: int, stage: int, mesh_dims: str, rank: int | None,
            all_ranks: bool, output: str | None, jobs_out: str | None, paddle: bool, prove: bool, cost: bool,
            flops: float, bandwidth: float, as_json: bool, quiet: bool) -> None:
    """Job programs and job lists of a pipeline schedule, proven and costed."""
    import json
    import sys

    from ..analysis.cost import program_ranks, require_rank
    from ..passes import load_passes
    from ..passes.base import REGISTRY, PassContext, PassManager
    from ..passes.pipeline_schedule import build_schedules, rank_jobs
    from ..syntax.diagnostics import DiagnosticError

    with reporting(), Outputs(inputs=[main_file]) as out:
        if rank is not None and all_ranks:
            raise click.UsageError("--rank and --all-ranks exclude each other")
        if output is not None and "{job}" not in output:
            raise click.UsageError("-o names one file a job program: put {job} in it, e.g. 'out/r{rank}.{job}.ir'")
        if all_ranks:  # (one rank: a {rank} in a pattern is that rank)
            check_pattern(output.replace("{job}", "job") if output else None, "-o", True)
            check_pattern(jobs_out, "--jobs-out", True)
        load_passes()
        prog = load(main_file)
        warn_unknown_ops(prog)
        ranks = program_ranks(prog) if all_ranks else [0 if rank is None else rank]
        for r in ranks:
            require_rank(prog, r)
        if stage == 1:
            dims = tuple(d.strip() for d in mesh_dims.split(",") if d.strip())
            PassManager([REGISTRY["shard-optimizer"](stage=1, axis="", mesh_dims=dims, amp=False)],  # type: ignore[call-arg]
                        verify_each=False).run(prog, PassContext())
        every = program_ranks(prog) if (prove or cost) else ranks  # a step, or its timeline, needs every rank
        try:
            built = build_schedules(prog, every, mode, acc_steps, vpp_degree=vpp_degree, paddle=paddle,
                                    keep_dist_text=False)
        except DiagnosticError as e:
            e.notes.append(f"while building the {mode} schedule")
            raise
        jobs_text = {r: built[r].plan.job_list_text() for r in ranks}
        planned = []
        for r in ranks:
            b = built[r]
            if output is not None:
                for t, p in b.plan.programs.items():
                    planned.append((out.add("-o", output.replace("{rank}", str(r)).replace("{job}", t)), str(p)))
            jt = out.add("--jobs-out", jobs_out.replace("{rank}", str(r))) if jobs_out is not None else None
            if jt is not None:
                planned.append((jt, jobs_text[r]))
        doc: dict = {"command": "schedule", "schedule": mode, "micro_batches": acc_steps, "zero_stage": stage,
                     "ranks": {str(r): {"jobs": [list(j) for j in built[r].plan.jobs],
                                        "job_programs": list(built[r].plan.programs), "notes": built[r].ctx.notes}
                               for r in ranks}}
        status = 0
        if prove:
            from ..analysis.simulate.jobs import verify_pipeline

            serial = load(main_file)
            rep = verify_pipeline(serial, {r: rank_jobs(b) for r, b in built.items()}, acc_steps, paddle_merge=paddle)
            doc["verify"] = rep.as_dict()
            status = rep.status
            if not as_json:
                err_console().print("verify: " + rep.summary(), markup=False)
        if cost:
            from ..analysis.schedule_cost import CostModel, timeline

            try:
                tl = timeline(mode, {r: b.plan.jobs for r, b in built.items()},
                              {r: b.plan.programs for r, b in built.items()},
                              {r: rank_jobs(b).rings for r, b in built.items()},
                              CostModel(flops=flops, bandwidth=bandwidth))
            except ValueError as e:
                raise DiagnosticError(str(e), filename=main_file) from None
            doc["cost"] = tl.as_json()
            doc["timelines"] = {mode: doc["cost"]["timeline"]}
            if not as_json and not quiet:
                _cost_table(tl)
        for t, text in planned:
            out.write(t, text)
        out.commit()
        if jobs_out is None and not as_json:
            for r in ranks:
                sys.stdout.write((f"# rank {r}\n" if len(ranks) > 1 else "") + jobs_text[r])
        if as_json:
            sys.stderr.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")
        elif not quiet and not cost:
            err_console().print(f"{mode}, {acc_steps} micro-batches: " + ", ".join(
                f"rank {r}: {len(built[r].plan.jobs)} jobs of {len(built[r].plan.programs)} programs" for r in ranks),
                markup=False)
    if status:
        sys.exit(status)


def _cost_table(tl) -> None:
    from rich.table import Table

    t = Table(title=f"{tl.schedule}: modelled step {tl.makespan * 1e3:.3f} ms, bubble {tl.bubble() * 100:.1f}%")
    for col in ("rank", "jobs", "busy (ms)", "idle (ms)", "bubble"):
        t.add_column(col, justify="right")
    for r, js in sorted(tl.ranks.items()):
        busy = tl.busy(r)
        t.add_row(str(r), str(len(js)), f"{busy * 1e3:.3f}", f"{(tl.makespan - busy) * 1e3:.3f}",
                  f"{tl.bubble(r) * 100:.1f}%")
    err_console().print(t)
