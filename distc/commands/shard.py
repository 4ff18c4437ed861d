"""``distc shard``: ZeRO (stage 1) of a distributed main program, and of its startup program,
end to end as Paddle 3.3.1's auto-parallel engine does it.

Pipeline (each step a pass; ``--explain`` prints them and what they decided):

    shard-optimizer{stage,axis,mesh_dims}     retype optimizer states, update op dist attrs
    [--annotate-only stops here]
    partition                                 dist_op.reshard where layouts differ
    reshard{rank}                             reshards -> collectives for one rank
    [--dense:] remove-other-rank{rank}, dist-to-dense{rank}

``--startup`` additionally runs ``shard-startup`` on the startup program (initialise each sharded
state at its global shape, slice this rank's piece, lower to dense).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from ..analysis.cost import collectives_in, program_ranks, require_rank
from ..analysis.memory import MemoryReport, OptimizerOperands, human, memory_of, optimizer_operands
from ..driver import (check_pattern, err_console, load, program_option, read_text, reporting, warn,
                      warn_unknown_ops)
from ..ir.core import Program
from ..ir.dist import ranks_text
from ..outputs import Outputs
from ..passes.base import ModulePass, PassContext, PassManager
from ..syntax.diagnostics import DiagnosticError
from .shard_inputs import check_main, check_sharding_degree, check_startup
from .shard_ranks import check_many, format_ranks, parse_ranks, rank_summary, run_ranks, select_ranks


def _run(passes: list[ModulePass], prog: Program, ctx: PassContext, path: str, verify_each: bool = False,
         final_verify: bool = False) -> None:
    from ..analysis.verify import verify

    pm = PassManager(passes, verify_each=verify_each)
    try:
        pm.run(prog, ctx)
        if final_verify and not verify_each:
            verify(prog)
    except DiagnosticError as e:
        src = None
        if path != "-":
            try:
                src = read_text(path)
            except DiagnosticError:
                src = None
        raise e.located(prog.filename or path, src) from None


def _reshard_pass(rank: int) -> ModulePass:
    from ..passes import load_passes
    from ..passes.base import REGISTRY

    load_passes()
    cls = REGISTRY.get("reshard")
    if cls is None:
        raise DiagnosticError("the 'reshard' pass (dist_op.reshard -> collectives) is not available in "
                              "this build of distc; use --annotate-only, or `distc opt -p partition`")
    return cls(rank=rank)  # type: ignore[call-arg]


def _summary(before: MemoryReport, after: MemoryReport, colls: list | None, stage: int,
             axis, rank: int) -> None:
    from rich.table import Table

    con = err_console()
    if colls is not None:
        t = Table(title=f"collectives inserted (rank {rank})")
        t.add_column("kind")
        t.add_column("group")
        t.add_column("count", justify="right")
        t.add_column("bytes sent by this rank", justify="right")
        agg: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for c in colls:
            agg.setdefault((c.kind, c.ranks), []).append(c.moved)
        for (kind, group), sizes in sorted(agg.items()):
            t.add_row(kind, ranks_text(group), str(len(sizes)),
                      f"{sum(sizes)} B" if sum(sizes) < 1024 else f"{human(sum(sizes))} ({sum(sizes)} B)")
        if not agg:
            t.add_row("(none)", "", "0", "0")
        con.print(t)
    m = Table(title=f"per-rank memory, rank {rank} (stage {stage}"
              + (" = stage 1, as in Paddle's static mode" if stage == 2 else "")
              + (f", sharding mesh dim {axis}" if axis is not None else "") + ")")
    for col in ("", "before", "after", "saved"):
        m.add_column(col, justify="right" if col else "left")
    for label, b, a in (("parameters", before.params, after.params), ("gradients", before.grads, after.grads),
                        ("optimizer states", before.states, after.states),
                        ("total", before.total, after.total)):
        m.add_row(label, human(b), human(a), human(b - a))
    con.print(m)
    saved = before.states - after.states
    pct = f" ({100 * saved / before.states:.1f}% of optimizer states)" if before.states else ""
    if stage == 3:
        saved = before.total - after.total
        pct = f" ({100 * saved / before.total:.1f}%: parameters, gradients and optimizer states)" \
            if before.total else ""
    con.print(f"ZeRO-{stage} saving on rank {rank}: {saved} bytes = {human(saved)}{pct}; "
              f"total per rank {before.total} -> {after.total} bytes", markup=False)


@click.command("shard")
@click.argument("main_file", metavar="MAIN")
@click.option("-o", "--output", default=None, help="output file (default stdout); with several ranks a "
              "pattern with {rank}, e.g. 'out/main.r{rank}.ir'")
@click.option("--stage", type=click.IntRange(0, 3), default=1, show_default=True,
              help="ZeRO stage: 1 shards optimizer states, 2 = 1 (as Paddle's static mode), 3 shards "
              "parameters too, 0 is plain data parallel")
@click.option("--amp", is_flag=True, help="Paddle's AMP optimizer path: gradients resharded to the ZeRO "
              "layout before the global-norm clip (taken by itself when the program shows AMP)")
@click.option("--axis", default=None, help="sharding mesh dim, by index or name (see --mesh-dims); "
              "default: Paddle's rule (0, or the last dim a parameter is replicated on)")
@click.option("--mesh-dims", default="", help="names of the mesh dims, e.g. dp,mp (PIR text does not print them)")
@click.option("--rank", type=int, default=None, help="the rank to lower for  [default: 0]")
@click.option("--all-ranks", is_flag=True, help="every rank of the program's meshes, one output file each "
              "(the rank-independent passes run once)")
@click.option("--ranks", "rank_list", default=None, metavar="LIST",
              help="these ranks, e.g. 0-3,6 (like --all-ranks, for a subset)")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="worker processes for several ranks  [default: the machine's cores]")
@click.option("--annotate-only", is_flag=True, help="stop after shard-optimizer (no reshards, no collectives)")
@click.option("--dense", is_flag=True, help="go on to the per-rank dense program (remove-other-rank, dist-to-dense)")
@click.option("--startup", default=None, help="the startup program to shard as well")
@click.option("--startup-out", default=None, help="where the sharded startup program goes ({rank} as for -o)")
@click.option("--explain", is_flag=True, help="print the passes run and what they decided on stderr")
@click.option("--quiet", "-q", is_flag=True, help="no summary on stderr")
@click.option("--verify-each", is_flag=True, help="run the verifier after every pass (default: once, at the end)")
@click.option("--verify", "prove", is_flag=True, help="build every rank's program (and startup program) and "
              "prove them against MAIN with the simulator (see distc verify); nothing is written if they differ")
@click.option("--json", "as_json", is_flag=True,
              help="the summary (collectives, bytes and memory per rank, decisions) as one line of JSON on stderr")
@program_option("MAIN's K-th program, when its file holds several, e.g. a GLOG log (1 = first)")
def command(main_file: str, output: str | None, stage: int, amp: bool, axis: str | None, mesh_dims: str, rank: int | None,
            all_ranks: bool, rank_list: str | None, jobs: int | None, annotate_only: bool, dense: bool,
            startup: str | None, startup_out: str | None, explain: bool, quiet: bool, verify_each: bool,
            prove: bool, as_json: bool, program: int | None) -> None:
    """ZeRO-shard the optimizer of MAIN (and of its startup program) at parity with Paddle 3.3.1.

    MAIN is the dist-typed training program Paddle dumps just before apply_partition_pass (its
    optimizer ops included); --startup takes the 'startup_after_remove' dump.  The rank's program
    goes to stdout (or -o), the summary to stderr."""
    from ..passes import load_passes

    with reporting(), Outputs(inputs=[main_file]) as out:
        if (startup is None) != (startup_out is None):
            raise click.UsageError("--startup and --startup-out go together")
        if annotate_only and dense:
            raise click.UsageError("--annotate-only and --dense exclude each other")
        if stage == 0 and axis is not None:
            raise click.UsageError("--axis chooses the mesh dim ZeRO shards over; --stage 0 shards nothing")
        if rank is not None and rank < 0:
            raise click.BadParameter("--rank must be 0 or more")
        many = all_ranks or rank_list is not None
        wanted = parse_ranks(rank_list) if rank_list is not None else None
        check_pattern(output, "-o", many, "--all-ranks or --ranks")
        check_pattern(startup_out, "--startup-out", many, "--all-ranks or --ranks")
        if startup is not None and "{rank}" in startup:  # per-rank startup inputs (pipeline stages)
            check_pattern(startup, "--startup", True)
        if many:
            check_many(rank, all_ranks, rank_list, output, startup_out)
        else:
            if output in (None, "-") and startup_out == "-":
                raise click.UsageError("the main and the startup program cannot both go to stdout")
            targets = (out.add("-o", output or "-"), out.add("--startup-out", startup_out))
        load_passes()
        dims = tuple(d.strip() for d in mesh_dims.split(",") if d.strip())
        prog = load(main_file, program)
        warn_unknown_ops(prog)
        known = program_ranks(prog)
        if many:
            ranks = select_ranks(known, wanted, prog.filename)
            # every output planned (checked, and against every input) before any work
            targets = {r: (out.add("-o", output.replace("{rank}", str(r))),
                           out.add("--startup-out", startup_out.replace("{rank}", str(r))) if startup_out else None)
                       for r in ranks}
        else:
            rank = 0 if rank is None else rank
            require_rank(prog, rank, known=known)
        for r in ranks if many else [rank]:
            out.add_input(startup_path(startup, r))
        check_main(prog, prog.filename or main_file, stage, warn)
        sprogs = _check_startups(startup, prog, ranks if many else [rank], warn) if startup is not None else {}
        if prove:
            _prove(main_file, startup, stage, amp, axis, dims, output if many else None, program, sprogs)
        sh = _prepare(prog, main_file, startup, stage, amp, axis, dims, annotate_only, verify_each)
        sh.sprogs = sprogs
        if stage >= 1:
            check_sharding_degree(prog, sh.ctx.stats.sharding_axis, dims, prog.filename or main_file, warn)
        if many:
            results = run_ranks(sh, ranks, jobs, out, targets,
                                lambda r: _lower(sh, r, annotate_only, dense, verify_each))
            if explain and not as_json:
                _explain(sh, results)
            if as_json:
                summary_json(sh, stage, {r: {
                    "rank": r, "collectives": x["collectives"], "bytes_sent": x["bytes_sent"],
                    "memory": {"before": {"optimizer_states": x["states_before"], "total": x["memory_before"]},
                               "after": {"optimizer_states": x["states_after"], "total": x["memory_after"]}},
                    "saved": x["memory_before"] - x["memory_after"]} for r, x in results.items()},
                    [n for x in results.values() for n in x["notes"]])
            elif not quiet:
                rank_summary(results, stage, sh.ctx.stats.sharding_axis)
            return
        assert rank is not None
        res = _lower(sh, rank, annotate_only, dense, verify_each)
        # everything is computed before anything is written: both outputs, or neither
        out.write(targets[0], res.text)
        if res.startup_text is not None:
            out.write(targets[1], res.startup_text)
        out.commit()
        if explain and not as_json:
            _explain(sh, {rank: res})
        if as_json:
            summary_json(sh, stage, {rank: _rank_json(sh, rank, res)}, res.notes, res.ran)
        elif not quiet:
            _summary(memory_of(sh.before, rank), memory_of(sh.after, rank), res.colls, stage,
                     sh.ctx.stats.sharding_axis, rank)


def _rank_json(sh, rank: int, res) -> dict:
    before, after = memory_of(sh.before, rank), memory_of(sh.after, rank)
    kinds: dict[tuple, dict] = {}
    for c in res.colls or []:
        k = kinds.setdefault((c.kind, c.ranks), {"kind": c.kind, "group": list(c.ranks), "count": 0, "bytes_sent": 0})
        k["count"] += 1
        k["bytes_sent"] += c.moved
    mem = {name: {"parameters": m.params, "gradients": m.grads, "optimizer_states": m.states, "total": m.total}
           for name, m in (("before", before), ("after", after))}
    return {"rank": rank, "collectives": None if res.colls is None else len(res.colls),
            "bytes_sent": None if res.colls is None else sum(c.moved for c in res.colls),
            "by_group": [kinds[k] for k in sorted(kinds)], "memory": mem, "saved": before.total - after.total}


def summary_json(sh, stage: int, ranks: dict, notes: list[str], ran: list[str] = ()) -> None:
    """``--json``: one line on stderr, the last one distc prints."""
    import json
    import sys

    from ..driver import WARNINGS

    doc = {"command": "shard", "stage": stage, "sharding_axis": sh.ctx.stats.sharding_axis,
           "pipeline": list(sh.ran) + list(ran), "decisions": list(sh.notes) + list(dict.fromkeys(notes)),
           "warnings": list(WARNINGS),
           "ranks": {str(r): x for r, x in sorted(ranks.items())}}
    sys.stderr.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")


@dataclass
class _Shared:
    """The rank-independent part of ``distc shard``: what every rank starts from."""

    main_file: str
    prog: Program
    ctx: PassContext
    before: OptimizerOperands
    after: OptimizerOperands
    layouts: dict
    ran: list[str]
    startup: str | None = None
    sprog: Program | None = None
    notes: list[str] = field(default_factory=list)  # what the shared passes noted
    param_layouts: dict = field(default_factory=dict)  # parameters (stage 3 reshards them in startup)
    sprogs: dict = field(default_factory=dict)  # rank -> its own startup program (--startup with {rank})
    owners: dict = field(default_factory=dict)  # name -> ranks holding it (startup values of other ranks dropped)


@dataclass
class RankResult:
    text: str
    startup_text: str | None
    colls: list | None
    notes: list[str]
    ran: list[str]
    extra: dict = field(default_factory=dict)


def _prepare(prog: Program, main_file: str, startup: str | None, stage: int, amp: bool, axis: str | None,
             dims: tuple[str, ...], annotate_only: bool, verify_each: bool) -> _Shared:
    """Shard-optimizer and partition (and parse the startup program): the rank-independent work."""
    from ..passes.base import REGISTRY
    from ..passes.shard_startup import persistable_layouts, persistable_ranks

    sh = _Shared(main_file, prog, PassContext(), optimizer_operands(prog), [], {}, [], startup)
    if stage >= 1:
        p = REGISTRY["shard-optimizer"](stage=stage, axis=axis or "", mesh_dims=dims, amp=amp)  # type: ignore[call-arg]
        _run([p], prog, sh.ctx, main_file, verify_each, final_verify=annotate_only)
        sh.ran.append(p.spec())
    sh.after = optimizer_operands(prog)
    sh.layouts = persistable_layouts(prog)
    sh.param_layouts = persistable_layouts(prog, params=True)
    sh.owners = persistable_ranks(prog)
    if not annotate_only:
        _run([REGISTRY["partition"]()], prog, sh.ctx, main_file, verify_each)
        sh.ran.append("partition")
    if startup is not None and "{rank}" not in startup:
        sh.sprog = load(startup)
    sh.notes = list(sh.ctx.notes)
    return sh


def startup_path(startup: str | None, rank: int) -> str | None:
    """``--startup`` for one rank: a ``{rank}`` pattern names each rank's own startup program."""
    return startup.replace("{rank}", str(rank)) if startup is not None else None


def _check_startups(startup: str, prog: Program, ranks: list[int], warn) -> dict[int, Program]:
    """Check that the startup program initialises what each rank reads (the same warning for
    several ranks is said once, naming them); with a ``{rank}`` pattern, each rank's own startup
    program, returned (rank -> program)."""
    import re

    per_rank = "{rank}" in startup
    sprogs = {r: load(str(startup_path(startup, r))) for r in (ranks if per_rank else ranks[:1])}
    seen: dict[str, list[int]] = {}
    for sprog in sprogs.values():
        warn_unknown_ops(sprog)
    for r in ranks:
        sprog = sprogs[r if per_rank else ranks[0]]
        path = str(startup_path(startup, r))
        try:
            check_startup(prog, sprog, sprog.filename or path, lambda m, r=r: seen.setdefault(
                re.sub(rf"\brank {r} reads\b", "{who} read", m), []).append(r), rank=r)
        except DiagnosticError as e:
            raise e.located(path, read_text(path)) from None
    for m, rs in seen.items():
        warn(m.replace("{who}", f"rank{'s' * (len(rs) > 1)} {format_ranks(rs)}"))
    return sprogs if per_rank else {}


def _lower(sh: _Shared, rank: int, annotate_only: bool, dense: bool, verify_each: bool) -> RankResult:
    """One rank's part, from the shared state (which it changes: a forked worker's own copy)."""
    from ..passes.base import REGISTRY
    from ..passes.shard_startup import shard_startup

    prog, ctx = sh.prog, sh.ctx
    notes0 = len(ctx.notes)
    ran: list[str] = []
    colls = None
    if annotate_only:
        pass
    else:
        passes = [_reshard_pass(rank)]
        if dense:
            passes += [REGISTRY["remove-other-rank"](rank=rank), REGISTRY["dist-to-dense"](rank=rank)]  # type: ignore[call-arg]
        _run(passes[:1], prog, ctx, sh.main_file, verify_each, final_verify=not dense)
        colls = [c for c in collectives_in(prog, rank) if c.runs]
        if dense:
            _run(passes[1:], prog, ctx, sh.main_file, verify_each, final_verify=True)
        ran += [p.spec() for p in passes]
    text = str(prog)
    startup_text = None
    sprog = sh.sprogs.get(rank, sh.sprog)
    if sprog is not None:
        path = str(startup_path(sh.startup, rank))
        try:
            shard_startup(sprog, sh.layouts, rank, ctx, params=sh.param_layouts, owners=sh.owners)
        except DiagnosticError as e:
            raise e.located(sprog.filename or path, read_text(path)) from None
        ran.append(f"shard-startup{{rank={rank}}} (on {path})")
        startup_text = str(sprog)
    return RankResult(text, startup_text, colls, ctx.notes[notes0:], ran)


def _explain(sh: _Shared, results: dict) -> None:
    """The passes run and what they decided; ranks that did alike share one block."""
    import re

    con = err_console()

    def part(res) -> tuple[list[str], list[str]]:  # a RankResult, or a worker's summary dict
        return (res["ran"], res["notes"]) if isinstance(res, dict) else (res.ran, res.notes)

    several = len(results) > 1
    groups: dict[tuple, list[int]] = {}
    for r, res in sorted(results.items()):
        ran, notes = part(res)
        if several:  # the rank option is the rank itself (and left out for rank 0)
            ran = [re.sub(r"rank=\d+,?", "", x).replace(",}", "}").replace("{}", "") for x in ran]
            notes = [re.sub(rf"\brank {r}\b", "this rank", n) for n in notes]
        groups.setdefault((tuple(ran), tuple(notes)), []).append(r)
    for (ran, notes), ranks in groups.items():
        prefix = f"rank{'s' * (len(ranks) > 1)} {format_ranks(ranks)}: " if several else ""
        con.print(prefix + "pipeline: " + (", ".join(sh.ran + list(ran)) or "(nothing: stage 0, annotate only)"),
                  markup=False)
        for n in ([] if several else sh.notes) + list(notes):
            con.print("  " + n, markup=False)
    if several and sh.notes:
        con.print("every rank:", markup=False)
        for n in sh.notes:
            con.print("  " + n, markup=False)


def _prove(main_file: str, startup: str | None, stage: int, amp: bool, axis: str | None, dims: tuple[str, ...],
           pattern: str | None, program: int | None = None, sprogs: dict | None = None) -> None:
    """``--verify``: every rank's program from a fresh copy of MAIN, proven against MAIN."""
    import sys

    from .verify import verify_built

    serial = load(main_file, program)
    sh = _prepare(load(main_file, program), main_file, startup, stage, amp, axis, dims, False, False)

    def build(rank: int) -> tuple[str, str | None]:
        one = _Shared(sh.main_file, sh.prog.clone(), PassContext(), sh.before, sh.after, sh.layouts, [], sh.startup,
                      sh.sprog.clone() if sh.sprog is not None else None)
        one.param_layouts, one.owners = sh.param_layouts, sh.owners
        one.sprogs = {rank: sprogs[rank].clone()} if sprogs else {}
        res = _lower(one, rank, False, False, False)
        return res.text, res.startup_text

    names = (lambda r: pattern.replace("{rank}", str(r))) if pattern and "{rank}" in pattern else \
        (lambda r: f"<rank {r} of {main_file}>")
    # per-rank startup inputs (--startup with {rank}): each rank's is proven against its own input
    serial_startup = {r: p.clone() for r, p in sprogs.items()} if sprogs else load(startup) if startup else None
    status = verify_built(serial, build, startup=serial_startup, names=names)
    if status:
        sys.exit(status)
