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


import click

from ..analysis.cost import collectives_in
from ..analysis.memory import MemoryReport, human, optimizer_memory
from ..driver import err_console, load, read_text, reporting, write_output, check_output
from ..ir.core import Program
from ..passes.base import ModulePass, PassContext, PassManager
from ..syntax.diagnostics import DiagnosticError

def _ranks_of(prog: Program) -> list[int]:
    """Every process id of every mesh in the program."""
    out: set[int] = set()
    for op in prog.walk():
        d = op.dist_attr
        if d is not None:
            out |= set(d.mesh.process_ids)
        for r in op.results:
            rd = r.dist_attr
            if rd is not None:
                out |= set(rd.mesh.process_ids)
    return sorted(out)


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
            t.add_row(kind, "[" + ",".join(map(str, group)) + "]", str(len(sizes)),
                      f"{sum(sizes)} B" if sum(sizes) < 1024 else f"{human(sum(sizes))} ({sum(sizes)} B)")
        if not agg:
            t.add_row("(none)", "", "0", "0")
        con.print(t)
    m = Table(title=f"per-rank memory, rank {rank} (stage {stage}"
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
    con.print(f"ZeRO-{stage} saving on rank {rank}: {saved} bytes = {human(saved)}{pct}; "
              f"total per rank {before.total} -> {after.total} bytes", markup=False)


@click.command("shard")
@click.argument("main_file", metavar="MAIN")
@click.option("-o", "--output", default=None, help="output file (default stdout)")
@click.option("--stage", type=click.IntRange(0, 1), default=1, show_default=True,
              help="ZeRO stage: 1 shards optimizer states, 0 is plain data parallel")
@click.option("--axis", default=None, help="sharding mesh dim, by index or name (see --mesh-dims); "
              "default: Paddle's rule (0, or the last dim a parameter is replicated on)")
@click.option("--mesh-dims", default="", help="names of the mesh dims, e.g. dp,mp (PIR text does not print them)")
@click.option("--rank", type=int, default=0, show_default=True, help="the rank to lower for")
@click.option("--annotate-only", is_flag=True, help="stop after shard-optimizer (no reshards, no collectives)")
@click.option("--dense", is_flag=True, help="go on to the per-rank dense program (remove-other-rank, dist-to-dense)")
@click.option("--startup", default=None, help="the startup program to shard as well")
@click.option("--startup-out", default=None, help="where the sharded startup program goes")
@click.option("--explain", is_flag=True, help="print the passes run and what they decided on stderr")
@click.option("--quiet", "-q", is_flag=True, help="no summary on stderr")
@click.option("--verify-each", is_flag=True, help="run the verifier after every pass (default: once, at the end)")
def command(main_file: str, output: str | None, stage: int, axis: str | None, mesh_dims: str, rank: int,
            annotate_only: bool, dense: bool, startup: str | None, startup_out: str | None, explain: bool,
            quiet: bool, verify_each: bool) -> None:
    """ZeRO-shard the optimizer of MAIN (and of its startup program) at parity with Paddle 3.3.1."""
    from ..passes import load_passes
    from ..passes.base import REGISTRY
    from ..passes.shard_startup import persistable_layouts, shard_startup

    with reporting():
        if (startup is None) != (startup_out is None):
            raise click.UsageError("--startup and --startup-out go together")
        if annotate_only and dense:
            raise click.UsageError("--annotate-only and --dense exclude each other")
        if stage == 0 and axis is not None:
            raise click.UsageError("--axis chooses the mesh dim ZeRO shards over; --stage 0 shards nothing")
        if rank < 0:
            raise click.BadParameter("--rank must be 0 or more")
        if output in (None, "-") and startup_out == "-":
            raise click.UsageError("the main and the startup program cannot both go to stdout")
        if output is not None and output == startup_out:
            raise click.UsageError("-o and --startup-out name the same file")
        check_output(output)
        check_output(startup_out)
        load_passes()
        dims = tuple(d.strip() for d in mesh_dims.split(",") if d.strip())
        prog = load(main_file)
        ranks = _ranks_of(prog)
        if ranks and rank not in ranks:
            raise DiagnosticError(f"rank {rank} is in none of the program's meshes (ranks "
                                  f"{', '.join(map(str, ranks))})", filename=prog.filename)
        ctx = PassContext()
        ran: list[str] = []

        def run(passes: list[ModulePass], last: bool = False) -> None:
            _run(passes, prog, ctx, main_file, verify_each, final_verify=last)
            ran.extend(p.spec() for p in passes)

        before = optimizer_memory(prog, rank)
        if stage >= 1:
            run([REGISTRY["shard-optimizer"](stage=stage, axis=axis or "", mesh_dims=dims)],  # type: ignore[call-arg]
                last=annotate_only)
        after = optimizer_memory(prog, rank)
        layouts = persistable_layouts(prog)
        colls = None
        if not annotate_only:
            run([REGISTRY["partition"](), _reshard_pass(rank)], last=not dense)
            colls = [c for c in collectives_in(prog, rank) if c.runs]
            if dense:
                run([REGISTRY["remove-other-rank"](rank=rank), REGISTRY["dist-to-dense"](rank=rank)],  # type: ignore[call-arg]
                    last=True)
        text = str(prog)
        startup_text = None
        if startup is not None:
            sprog = load(startup)
            try:
                shard_startup(sprog, layouts, rank, ctx)
            except DiagnosticError as e:
                raise e.located(sprog.filename or startup, read_text(startup)) from None
            ran.append(f"shard-startup{{rank={rank}}} (on {startup})")
            startup_text = str(sprog)
        # everything is computed before anything is written (and each file is written whole)
        write_output(output, text)
        if startup_text is not None:
            write_output(startup_out, startup_text)
        if explain:
            con = err_console()
            con.print("pipeline: " + (", ".join(ran) or "(nothing: stage 0, annotate only)"), markup=False)
            for n in ctx.notes:
                con.print("  " + n, markup=False)
        if not quiet:
            _summary(before, after, colls, stage, ctx.stats.get("sharding_axis"), rank)
