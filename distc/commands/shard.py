"""``distc shard``: ZeRO (stages 0-3) of a distributed main program, and of its startup program,
end to end as Paddle 3.3.1's auto-parallel engine does it.

The work is the library's shard pipeline (:mod:`distc.pipeline.shard`: its passes, what is done
once and what per rank); this command reads the inputs, calls it, writes the outputs (all or
none) and prints the summary (``--explain``: the passes run and what they decided; ``--json``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .. import cmdline
from ..driver import check_pattern, collector_off, load_kept, program_option, reporting
from ..ir.core import Program
from ..outputs import Outputs
from ..pipeline import RankResult, ShardOptions, ShardPipeline
from . import shard_schedule as sched
from .shard_ranks import RankTargets, check_many, parse_ranks, run_ranks, select_ranks


@cmdline.command("shard")
@cmdline.argument("main_file", metavar="MAIN")
@cmdline.option("-o", "--output", default=None, help="output file (default stdout); with several ranks a "
                "pattern with {rank}, e.g. 'out/main.r{rank}.ir'")
@cmdline.option("--stage", type=cmdline.IntRange(0, 3), default=1, show_default=True,
                help="ZeRO stage: 1 shards optimizer states, 2 = 1 (as Paddle's static mode), 3 shards "
                "parameters too, 0 is plain data parallel")
@cmdline.option("--amp", is_flag=True, help="Paddle's AMP optimizer path: gradients resharded to the ZeRO "
                "layout before the global-norm clip (taken by itself when the program shows AMP)")
@cmdline.option("--axis", default=None, help="sharding mesh dim, by index or name (see --mesh-dims); "
                "default: Paddle's rule (0, or the last dim a parameter is replicated on)")
@cmdline.option("--mesh-dims", default="", help="names of the mesh dims, e.g. dp,mp (PIR text does not print them)")
@cmdline.option("--rank", type=int, default=None, help="the rank to lower for  [default: 0]")
@cmdline.option("--all-ranks", is_flag=True, help="every rank of the program's meshes, one output file each "
                "(the rank-independent passes run once)")
@cmdline.option("--ranks", "rank_list", default=None, metavar="LIST",
                help="these ranks, e.g. 0-3,6 (like --all-ranks, for a subset)")
@cmdline.option("-j", "--jobs", type=cmdline.IntRange(min=1), default=None,
                help="worker processes for several ranks  [default: the machine's cores, and no more than "
                "free memory holds: about 9x the program's size each]")
@cmdline.option("--moe-all-to-all", is_flag=True, help="lower n-d shard-to-shard reshards on one mesh dim through "
                "one all-to-all on its 1-D sub-mesh, as Paddle does under FLAGS_enable_moe_utils=true")
@cmdline.option("--tensor-fusion", is_flag=True, help="ZeRO-1 with tensor fusion, as Paddle's "
                "strategy.sharding.enable_tensor_fusion: gradients and parameters in buffers, one reduce-scatter "
                "and all-gather a buffer, each parameter's update on the rank(s) owning it (per rank); with --stage 3 "
                "the rank keeps its shard of each buffer and gathers the buffer before the forward")
@cmdline.option("--overlap", is_flag=True, help="with --tensor-fusion: strategy.sharding.enable_overlap")
@cmdline.option("--comm-buffer-size", "comm_buffer_mb", type=cmdline.FloatRange(min=0), default=None, metavar="MB",
                help="with --tensor-fusion: strategy.sharding.comm_buffer_size_MB (0: a buffer a parameter)  [default: 256]")
@cmdline.option("--release-gradients", is_flag=True, help="with --tensor-fusion: strategy.sharding.release_gradients")
@cmdline.option("--annotate-only", is_flag=True, help="stop after shard-optimizer (no reshards, no collectives)")
@cmdline.option("--dense", is_flag=True, help="go on to the per-rank dense program (remove-other-rank, dist-to-dense)")
@cmdline.option("--pp-schedule", type=cmdline.Choice(sched.SCHEDULES), default=None,
                help="a pipeline schedule (Paddle's strategy.pipeline.schedule_mode; Eager1F1B and ZBH1 are distc's, "
                "Paddle 3.3.1 refuses them): gradient merge over --acc-steps micro-batches, each rank's dense program "
                "split into job programs (--job-out) run in the rank's job order (--job-list); the rank's program (-o) "
                "is Paddle's final dist program (dist_final), with --dense its dense program")
@cmdline.option("--acc-steps", type=cmdline.IntRange(min=1), default=1, show_default=True,
                help="micro-batches a step (Paddle's accumulate_steps); above 1 without --pp-schedule: gradient merge "
                "alone (strategy.gradient_merge, k_steps)")
@cmdline.option("--vpp-degree", type=cmdline.IntRange(min=2), default=None, help="chunks a stage (--pp-schedule VPP)  "
                "[default: 2]")
@cmdline.option("--job-out", default=None, metavar="PATTERN",
                help="each job program of the schedule: {job} is replaced by the job type (forward, backward, optimizer; "
                "1F1B adds recv_forward, send_backward; VPP has them per chunk: forward0, backward1 ...; ZBH1 "
                "backward_b, backward_w; gradient merge alone: optimize), {rank} by the rank (with --all-ranks/--ranks), "
                "e.g. 'out/r{rank}.{job}.ir'")
@cmdline.option("--job-list", default=None, metavar="PATTERN",
                help="the job list in schedule order, one 'type micro_batch' a line as Paddle's plan.job_list() ({rank} "
                "as for -o; '-': stdout)")
@cmdline.option("--paddle", is_flag=True, help="with --acc-steps: Paddle's gradient merge as it is, whose clip sees the "
                "sum of the micro-batch gradients (a step unlike the global batch's whenever the clip acts; distc's "
                "default averages them before the clip)")
@cmdline.option("--startup", default=None, help="the startup program to shard as well")
@cmdline.option("--startup-out", default=None, help="where the sharded startup program goes ({rank} as for -o)")
@cmdline.option("--explain", is_flag=True, help="print the passes run and what they decided on stderr")
@cmdline.option("--quiet", "-q", is_flag=True, help="no summary on stderr")
@cmdline.option("--verify-each", is_flag=True, help="run the verifier after every pass (default: once, at the end)")
@cmdline.option("--verify", "prove", is_flag=True, help="build every rank's program (and startup program) and "
                "prove them against MAIN with the simulator (see distc verify) before writing: EQUAL writes the "
                "outputs (exit 0); DIVERGED writes nothing (exit 1); not provable (ops without a kernel, all "
                "listed: exit 3; what the programs do not say: exit 4) writes the outputs unproven and says so")
@cmdline.option("--json", "as_json", is_flag=True,
                help="the summary (collectives, bytes and memory per rank, decisions) as one line of JSON on stderr")
@program_option("MAIN's K-th program, when its file holds several, e.g. a GLOG log (1 = first)")
@collector_off()  # (a big program's objects live to the end: no collector rescanning them)
def command(main_file: str, output: str | None, stage: int, amp: bool, axis: str | None, mesh_dims: str, rank: int | None,
            all_ranks: bool, rank_list: str | None, jobs: int | None, moe_all_to_all: bool, tensor_fusion: bool,
            overlap: bool, comm_buffer_mb: float | None, release_gradients: bool, annotate_only: bool, dense: bool,
            pp_schedule: str | None, acc_steps: int, vpp_degree: int | None, job_out: str | None,
            job_list: str | None, paddle: bool,
            startup: str | None, startup_out: str | None, explain: bool, quiet: bool, verify_each: bool,
            prove: bool, as_json: bool, program: int | None) -> None:
    """ZeRO-shard the optimizer of MAIN (and of its startup program) at parity with Paddle 3.3.1.

    MAIN is the dist-typed training program Paddle dumps just before apply_partition_pass (its
    optimizer ops included); --startup takes the 'startup_after_remove' dump.  MAIN may be a
    `distc capture` folder: its inputs, and its stage, mesh dim, AMP, ranks and per-rank startup
    programs for the options not given.  The rank's program
    goes to stdout (or -o), the summary to stderr.

    With --pp-schedule (FThenB, 1F1B, VPP, Eager1F1B, ZBH1) and --acc-steps K, or --acc-steps K
    alone (gradient merge), each rank's program is split into job programs (--job-out
    'out/r{rank}.{job}.ir') and a job list (--job-list), as Paddle's pipeline passes do; --verify
    then proves the whole pipelined step against the serial step over the global batch."""
    o = dict(stage=stage, amp=amp, axis=axis, mesh_dims=mesh_dims, startup=startup, startup_out=startup_out,
             rank=rank, all_ranks=all_ranks, rank_list=rank_list)
    if main_file != "-" and os.path.isdir(main_file):  # MAIN is a `distc capture` folder (its module only then)
        from .shard_capture import capture_defaults

        with reporting():
            main_file, o = capture_defaults(main_file, o)
    stage, amp, axis, mesh_dims, startup, rank_list = (o[k] for k in ("stage", "amp", "axis", "mesh_dims",
                                                                      "startup", "rank_list"))
    with reporting() as diags, Outputs(inputs=[main_file]) as out:
        if (startup is None) != (startup_out is None):
            raise cmdline.UsageError("--startup and --startup-out go together")
        if annotate_only and dense:
            raise cmdline.UsageError("--annotate-only and --dense exclude each other")
        if stage == 0 and axis is not None:
            raise cmdline.UsageError("--axis chooses the mesh dim ZeRO shards over; --stage 0 shards nothing")
        if not tensor_fusion and (overlap or release_gradients or comm_buffer_mb is not None):
            raise cmdline.UsageError("--overlap, --comm-buffer-size and --release-gradients go with --tensor-fusion")
        if comm_buffer_mb is not None and abs(comm_buffer_mb) == float("inf"):  # (an internal error, exit 70)
            raise cmdline.UsageError(f"--comm-buffer-size {comm_buffer_mb}: a buffer size is a finite number of MB")
        if tensor_fusion and stage == 0:
            raise cmdline.UsageError("--tensor-fusion shards: ZeRO-1 (Paddle's ShardingStage1) or --stage 3 (distc's)")
        if rank is not None and rank < 0:
            raise cmdline.BadParameter("--rank must be 0 or more")
        many = all_ranks or rank_list is not None
        sched.check_usage(pp_schedule, acc_steps, vpp_degree, job_out, job_list, paddle, annotate_only, many, output)
        wanted = parse_ranks(rank_list) if rank_list is not None else None
        check_pattern(output, "-o", many, "--all-ranks or --ranks")
        check_pattern(startup_out, "--startup-out", many, "--all-ranks or --ranks")
        if startup is not None and "{rank}" in startup:  # per-rank startup inputs (pipeline stages)
            check_pattern(startup, "--startup", True)
        if many:
            check_many(rank, all_ranks, rank_list, output, startup_out)
        else:
            if output in (None, "-") and startup_out == "-":
                raise cmdline.UsageError("the main and the startup program cannot both go to stdout")
            one = RankTargets(out.add("-o", output or "-"), out.add("--startup-out", startup_out))
        dims = tuple(d.strip() for d in mesh_dims.split(",") if d.strip())
        opts = ShardOptions(stage=stage, axis=axis, mesh_dims=dims, amp=amp, annotate_only=annotate_only,
                            dense=dense, verify_each=verify_each, moe_all_to_all=moe_all_to_all,
                            tensor_fusion=tensor_fusion, overlap=overlap,
                            comm_buffer_mb=256 if comm_buffer_mb is None else comm_buffer_mb,
                            release_gradients=release_gradients,
                            pp_schedule=pp_schedule, acc_steps=acc_steps, vpp_degree=vpp_degree or 2,
                            paddle_merge=paddle)
        if prove and dense and not opts.scheduled:  # (dense types hold no layout to prove against)
            raise cmdline.UsageError("--verify proves the rank programs after reshard, which declare their layouts; "
                                     "--dense programs do not: drop --dense (the dense program is that one with "
                                     "the other ranks' ops removed and local types)")
        sources: dict[str, str] = {}
        pipe = ShardPipeline(load_kept(main_file, sources, program), opts, sources=sources,
                             diagnostics=diags, values_checked=True,  # (load_kept checked MAIN's values)
                             memory=as_json or not quiet)  # (the summary's memory table: not under -q)
        prog = pipe.program
        pipe.warn_unknown_ops()
        if many:
            ranks = select_ranks(pipe.ranks(), wanted, prog.filename)
            # every output planned (checked, and against every input) before any work
            targets = {r: sched.add_targets(out, RankTargets(
                out.add("-o", output.replace("{rank}", str(r))),
                out.add("--startup-out", startup_out.replace("{rank}", str(r))) if startup_out else None),
                r, pipe, job_out, job_list) for r in ranks}
        else:
            rank = 0 if rank is None else rank
            pipe.require_rank(rank)
            ranks = [rank]
            sched.add_targets(out, one, rank, pipe, job_out, job_list)
        for r in ranks:
            out.add_input(startup_path(startup, r))
        pipe.check_main()
        if startup is not None:
            pipe.startup = _load_startups(startup, ranks, pipe.ctx.sources)
            pipe.check_startups(ranks)
        serial = prog.clone() if prove else None  # MAIN as given, for the proof
        # MAIN as given, for the unfused ZeRO-1 the fusion summary compares with
        plain = prog.clone() if tensor_fusion and not quiet and not annotate_only else None
        pipe.prepare()
        proof: dict = {}
        # several ranks, no schedule: proven from the programs the workers built, before the commit
        # (one rank is lowered in this process, in place: the others are built first, from copies)
        after = serial is not None and many and not opts.scheduled and len(ranks) > 1
        unproven = _prove(pipe, serial, output if many else None, main_file, proof) \
            if serial is not None and not after else 0
        extra = {**(sched.json_fields(pipe) if opts.scheduled else {}), **({"verify": proof} if proof else {})}
        if many:
            status: list[int] = []
            check = (lambda built: status.append(_prove(pipe, serial, output, main_file, proof, built))) \
                if after else None  # type: ignore[arg-type]
            result = run_ranks(pipe, ranks, jobs, out, targets, before_commit=check,
                               records=explain or as_json or not quiet)  # (-q: the records shown nowhere)
            unproven = status[0] if status else unproven
            if explain or as_json or not quiet:  # (the summary's module only for a summary)
                from . import shard_report as report
            if explain and not as_json:
                report.explain(pipe, result.ranks)
            if as_json:
                # each rank as `--rank R --json` gives it (parameters, gradients, by_group), in rank order
                report.summary_json(pipe, stage, {r: {**report.rank_json(x), **sched.rank_json(x)}
                                                  for r, x in sorted(result.items())},
                                    [n for _, x in sorted(result.items()) for n in x.notes],
                                    fusion=_fusion(plain, ranks, opts, result.ranks), extra=extra)
            elif not quiet:
                report.rank_summary(result.ranks, stage, result.sharding_axis)
                _fusion(plain, ranks, opts, result.ranks, show=True)
                if opts.scheduled:
                    sched.job_summary(pipe, result.ranks)
            _unproven_exit(unproven, [pat.replace("{rank}", str(r)) for pat in (output, startup_out) if pat
                                      for r in ranks])
            return
        assert rank is not None
        res = pipe.lower(rank, copy=False)
        # everything is computed before anything is written: every output, or none
        one.write(out, res)
        out.commit()
        if explain or as_json or not quiet:
            from . import shard_report as report
        if explain and not as_json:
            report.explain(pipe, {rank: res})
        if as_json:
            report.summary_json(pipe, stage, {rank: {**report.rank_json(res), **sched.rank_json(res)}}, res.notes,
                                res.ran, fusion=_fusion(plain, [rank], opts, {rank: res}), extra=extra)
        elif not quiet:
            report.summary(res, stage, pipe.ctx.stats.sharding_axis)
            _fusion(plain, [rank], opts, {rank: res}, show=True)
            if opts.scheduled:
                sched.job_summary(pipe, {rank: res})
        written = [output or "-"] + ([startup_out] if startup_out else [])
        _unproven_exit(unproven, ["stdout" if o == "-" else o for o in written])


def _load_startups(startup: str, ranks: list[int], sources: dict[str, str]) -> Program | dict[int, Program]:
    """``--startup``: one program for every rank, or with ``{rank}`` each rank's own."""
    if "{rank}" not in startup:
        return load_kept(startup, sources)
    return {r: load_kept(str(startup_path(startup, r)), sources) for r in ranks}


def _fusion(plain: Program | None, ranks: list[int], opts: ShardOptions, results: dict, show: bool = False):
    """Tensor fusion's summary (``show``: printed; else its ``--json`` part, or None)."""
    if plain is None:
        return None
    from .shard_fusion import print_summary, summary_json as fusion_json, unfused

    base = unfused(plain, ranks, opts)
    if show:
        print_summary(results, base, opts.stage)
        return None
    return fusion_json(results, base, opts.stage)


def startup_path(startup: str | None, rank: int) -> str | None:
    """``--startup`` for one rank: a ``{rank}`` pattern names each rank's own startup program."""
    return startup.replace("{rank}", str(rank)) if startup is not None else None


def _prove(pipe: ShardPipeline, serial: Program, pattern: str | None, main_file: str, doc: dict,
           built: Mapping[int, RankResult] | None = None) -> int:
    """``--verify``: every rank's program (and startup program) — those in ``built`` (the workers'
    results, with their texts) as they are, the others built from the shared state on a copy —
    proven against MAIN (``serial``, taken before the passes) by the simulator; with a schedule,
    the whole pipelined step (``doc``: the reports, for ``--json``)."""
    import sys

    from .verify import verify_built

    rings: dict[int, dict] = {}  # each rank's ring table (fused ZeRO collectives carry the whole mesh)

    def build(rank: int) -> tuple[str, str | None]:
        res = built[rank] if built is not None and rank in built else pipe.lower(rank, copy=True)
        rings[rank] = res.rings or {}
        return res.text, res.startup_text  # type: ignore[return-value]

    names = (lambda r: pattern.replace("{rank}", str(r))) if pattern and "{rank}" in pattern else \
        (lambda r: f"<rank {r} of {main_file}>")
    if pipe.options.scheduled:
        status, got = sched.prove(pipe, serial, names)
        doc.update(got)
        if status == 1:
            cmdline.echo("verify: DIVERGED: nothing written", err=True)
            sys.exit(status)
        return status
    # per-rank startup inputs (--startup with {rank}): each rank's is proven against its own input
    st = pipe.startup
    serial_startup = None if st is None else st.clone() if isinstance(st, Program) else \
        {r: p.clone() for r, p in st.items()}
    status = verify_built(serial, build, startup=serial_startup, names=names, rings=rings)
    if status == 1:
        cmdline.echo("verify: DIVERGED: nothing written", err=True)
        sys.exit(status)
    return status


def _unproven_exit(status: int, written: list[str]) -> None:
    """``--verify`` could not prove the programs (ops without a kernel: 3; what the programs do not
    say: 4): the outputs were written unproven; say so and exit with the status."""
    if status:
        import sys

        shown = ", ".join(written[:4]) + (f" and {len(written) - 4} more" if len(written) > 4 else "")
        why = "ops without a kernel, listed above" if status == 3 else "not provable, said above"
        cmdline.echo(f"verify: not proven ({why}): outputs written unproven: {shown}", err=True)
        sys.exit(status)
