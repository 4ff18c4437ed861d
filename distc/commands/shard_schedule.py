"""``distc shard`` with a pipeline schedule or gradient merge (``--pp-schedule``, ``--acc-steps``):
the usage checks, each rank's job-program and job-list outputs, the job lists in the summary and in
``--json``, and ``--verify``'s proof of the whole pipelined step (every rank's jobs in schedule
order against the serial step over the global batch) and of the startup programs."""

from __future__ import annotations

from .. import cmdline
from ..driver import check_pattern, err_console
from ..ir.core import Program
from ..pipeline import RankResult, ShardPipeline
from .shard_ranks import RankTargets, format_ranks

SCHEDULES = ("FThenB", "1F1B", "VPP", "Eager1F1B", "ZBH1")


def check_usage(pp_schedule: str | None, acc_steps: int, vpp_degree: int | None, job_out: str | None,
                job_list: str | None, paddle: bool, annotate_only: bool, many: bool, output: str | None) -> None:
    """Usage errors (exit 2) of the schedule options, before any work."""
    scheduled = pp_schedule is not None or acc_steps > 1
    for opt, v in (("--job-out", job_out), ("--job-list", job_list)):
        if v is not None and not scheduled:
            raise cmdline.UsageError(f"{opt} writes job programs of a schedule: give --pp-schedule or --acc-steps K > 1")
    if vpp_degree is not None and pp_schedule != "VPP":
        raise cmdline.UsageError("--vpp-degree is the number of chunks a stage of --pp-schedule VPP")
    if paddle and acc_steps <= 1:
        raise cmdline.UsageError("--paddle gives Paddle's gradient merge (its clip sees the sum of the micro-batch "
                                 "gradients): it needs --acc-steps K > 1")
    if annotate_only and scheduled:
        raise cmdline.UsageError("--annotate-only stops before the schedule (--pp-schedule, --acc-steps)")
    several = "--all-ranks or --ranks"
    if job_out is not None:
        if job_out == "-" or "{job}" not in job_out:
            raise cmdline.UsageError("--job-out names one file a job program: put {job} in it, e.g. "
                                     "--job-out 'out/r{rank}.{job}.ir'")
        check_pattern(job_out, "--job-out", many, several, extra=("{job}",))
    check_pattern(job_list, "--job-list", many, several)
    for opt, v in (("--job-out", job_out), ("--job-list", job_list)):
        if many and v is not None and "{rank}" not in v:
            raise cmdline.UsageError(f"several ranks write one file each: give {opt} a pattern with {{rank}}, "
                                     f"e.g. {opt} 'out/r{{rank}}.{'{job}.ir' if opt == '--job-out' else 'jobs.txt'}'")
    if job_list == "-" and output in (None, "-"):
        raise cmdline.UsageError("the program and the job list cannot both go to stdout: give -o a file")


def add_targets(out, t: RankTargets, rank: int, pipe: ShardPipeline, job_out: str | None,
                job_list: str | None) -> RankTargets:
    """``t`` with the rank's job programs (every job type of the schedule) and job list planned."""
    o = pipe.options
    if job_out is not None:
        from ..passes.pipeline_schedule import job_types

        for job in job_types(o.pp_schedule or "GM", o.vpp_degree):
            t.jobs[job] = out.add("--job-out", job_out.replace("{rank}", str(rank)).replace("{job}", job))
    if job_list is not None:
        t.job_list = out.add("--job-list", job_list.replace("{rank}", str(rank)))
    return t


def json_fields(pipe: ShardPipeline) -> dict:
    o = pipe.options
    return {"schedule": o.pp_schedule or "GM", "micro_batches": o.acc_steps,
            **({"vpp_degree": o.vpp_degree} if o.pp_schedule == "VPP" else {}),
            "gradient_merge": "paddle" if o.paddle_merge else "average before the clip"}


def rank_json(res: RankResult) -> dict:
    if res.plan is None:
        return {}
    return {"jobs": [[t, m] for t, m in res.plan.jobs], "job_programs": list(res.plan.programs)}


def job_summary(pipe: ShardPipeline, results: dict[int, RankResult]) -> None:
    """Each rank's job list in schedule order on stderr (ranks with the same list share a line)."""
    o = pipe.options
    groups: dict[tuple, list[int]] = {}
    for r, res in sorted(results.items()):
        if res.plan is not None:
            groups.setdefault((tuple(res.plan.jobs), len(res.plan.programs), pipe.pp_stage(r)), []).append(r)
    con = err_console()
    name = o.pp_schedule or "gradient merge"
    for (jobs, programs, (stage, stages)), ranks in groups.items():
        who = f"rank{'s' * (len(ranks) > 1)} {format_ranks(ranks)}"
        where = f" (pipeline stage {stage} of {stages})" if stages > 1 else ""
        con.print(f"{name}, {o.acc_steps} micro-batches, {who}{where}: {len(jobs)} jobs of {programs} job programs: "
                  + ", ".join(f"{t} {m}" for t, m in jobs), markup=False)


def prove(pipe: ShardPipeline, serial: Program, names) -> tuple[int, dict]:
    """``--verify`` with a schedule: every rank built (on a copy of the shared state), the whole
    pipelined step proven against ``serial`` (MAIN as given), each startup program against its
    input.  The reports go to stderr; (the exit status, the ``--json`` part)."""
    from ..pipeline.schedule import prove_step
    from ..syntax.parser import parse
    from .verify import check_serial, report_out, run_verify

    check_serial(serial)
    results = {r: pipe.lower(r, copy=True) for r in pipe.ranks()}
    st = pipe.startup
    sprogs = {r: parse(res.startup_text, names(r) + " (startup)") for r, res in results.items()
              if res.startup_text is not None}
    reports = [("verify (the whole pipelined step)", prove_step(serial, results, pipe.options, startups=sprogs))]
    if st is not None:
        layouts: dict = {}
        for _, res in sorted(results.items()):
            for n, d in (res.layouts or {}).items():
                layouts.setdefault(n, d)
        # tensor fusion: each rank's slice@ states against their piece (the buffers' layout: its dist program)
        mains = {r: res.fused_dist for r, res in results.items() if res.fused_dist is not None} or None
        if isinstance(st, Program):
            reports.append(("verify startup", run_verify(st.clone(), sprogs, seed=0, rtol=1e-6, atol=1e-8,
                                                         label="startup", layouts=layouts, mains=mains)))
        else:  # per-rank serial startup programs (a pipeline stage's): each rank against its own
            for r, sp in sorted(st.items()):
                reports.append((f"verify startup (rank {r})", run_verify(sp.clone(), {r: sprogs[r]}, seed=0, rtol=1e-6,
                                                                         atol=1e-8, label="startup", layouts=layouts,
                                                                         mains=mains)))
    status = report_out(reports, False, err=True)
    return status, {name: rep.as_dict() for name, rep in reports}
