"""``distc verify SERIAL --ranks PATTERN``: prove that per-rank programs compute the serial step.

SERIAL is the global-view program (before partition, or a one-reshard program); PATTERN names the
per-rank programs (after reshard, still dist-typed) with ``{rank}``.  Every rank of SERIAL's meshes
is simulated with numpy on the same seeded inputs (:mod:`distc.analysis.simulate.step`).
Exit 0: equal within the tolerance; 1: a divergence (or bad input); 3: an op without a kernel;
4: not provable (the files do not say something the proof needs, e.g. the group of a collective
whose ring no file names: :mod:`distc.analysis.simulate.groups`); 2: usage.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Callable, Mapping

from .. import cmdline
from ..analysis.cost import program_ranks
from ..analysis.simulate.proof import (
    is_one_reshard, program_layouts, verify_reshard_step, verify_startup, verify_step,
)
from ..analysis.simulate.step import StepReport, is_comm
from ..driver import err_console, load, program_option, reporting, warn_unknown_ops
from ..ir.core import Program
from ..ir.types import DistTensorType
from ..syntax.diagnostics import DiagnosticError

EXIT_NO_KERNEL = 3
EXIT_NOT_PROVABLE = 4


def _at(prog: Program, op, message: str) -> DiagnosticError:
    loc = op.loc if op is not None and op.loc else (None, None)
    return DiagnosticError(message, loc[0], loc[1], filename=prog.filename)


def check_serial(prog: Program, need_dist: bool = True) -> None:
    """A global-view program: dist-typed, no communication (that belongs to rank programs)."""
    for op in prog.walk():
        if is_comm(op):
            raise _at(prog, op, f"SERIAL is already lowered: '{op.name}' communicates; give the global-view "
                                "program (before partition, or the program with dist_op.reshard)")
    if need_dist and not any(isinstance(r.type, DistTensorType) for op in prog.walk() for r in op.results):
        raise _at(prog, prog.ops[0] if prog.ops else None,
                  "SERIAL has no dist types: it does not say how its values are laid out over ranks")


def check_rank(prog: Program, rank: int) -> None:
    """A per-rank program still declares its layouts (dist types), i.e. before dist-to-dense."""
    if not any(isinstance(r.type, DistTensorType) for op in prog.walk() for r in op.results):
        first = next((op for op in prog.ops if op.results), prog.ops[0] if prog.ops else None)
        raise _at(prog, first, f"the program of rank {rank} is dense (no dist types): verify needs the "
                               "per-rank programs after reshard, before dist-to-dense, which declare their layouts")


def load_ranks(pattern: str, ranks: list[int]) -> dict[int, Program]:
    progs = {}
    for r in ranks:
        progs[r] = load(pattern.replace("{rank}", str(r)))
        check_rank(progs[r], r)
    return progs


def run_verify(serial: Program, progs: Mapping[int, Program], *, seed: int, rtol: float, atol: float,
               label: str = "verify", layouts: Mapping | None = None, mains: Mapping | None = None,
               rings: Mapping | None = None) -> StepReport:
    """The proof (a step, a one-reshard program, or startup programs when ``layouts`` are given,
    with the main rank programs ``mains``) with a progress bar over ranks and ops when stderr is a
    terminal.  ``rings``: each rank's ring table (rank -> ring id -> group), when known."""
    total = len(serial.ops) + sum(len(p.ops) for p in progs.values())
    if layouts is not None:
        fn: Callable = functools.partial(verify_startup, layouts=layouts, mains=mains)
    elif is_one_reshard(serial):
        fn = verify_reshard_step
    else:
        fn = functools.partial(verify_step, rank_rings=rings) if rings else verify_step
    if not sys.stderr.isatty():
        return fn(serial, progs, seed=seed, rtol=rtol, atol=atol)
    from rich.progress import Progress

    with Progress(console=err_console(), transient=True) as bar:
        task = bar.add_task(f"{label}: serial + {len(progs)} ranks", total=total)
        step: Callable[[int], None] = lambda n: bar.advance(task, n)  # noqa: E731
        return fn(serial, progs, seed=seed, rtol=rtol, atol=atol, progress=step)


def report_out(reports: list[tuple[str, StepReport]], as_json: bool, err: bool = False,
               warnings: list[str] = ()) -> int:
    """Print the reports (text or one JSON document) and return the exit status: the worst one."""
    status = max((r.status for _, r in reports), key=lambda s: (s == 1, s == EXIT_NO_KERNEL, s == EXIT_NOT_PROVABLE, s))
    if as_json:
        doc = {name: r.as_dict() for name, r in reports}
        doc["exit"] = status
        doc["status"] = {0: "equal", 1: "diverged", EXIT_NO_KERNEL: "no-kernel",
                         EXIT_NOT_PROVABLE: "not-provable"}.get(status, "error")
        doc["warnings"] = list(warnings)
        cmdline.echo(json.dumps(doc, indent=2, sort_keys=True), err=err)
    else:
        for name, r in reports:
            cmdline.echo(f"{name}: {r.summary()}", err=err)
            for n in r.notes:
                cmdline.echo(f"  note: {n}", err=err)
    return status


def _pattern(ctx, param, value):
    if value is not None and "{rank}" not in value:
        raise cmdline.BadParameter("must contain {rank}, e.g. out/main.r{rank}.ir")
    return value


@cmdline.command("verify")
@cmdline.argument("serial", metavar="SERIAL")
@cmdline.option("--ranks", "pattern", default=None, callback=_pattern,
                help="the per-rank programs, a path with {rank} (e.g. out/main.r{rank}.ir); required unless "
                     "SERIAL is a distc capture folder (then without it: Paddle's own captured programs)")
@cmdline.option("--startup", default=None, help="the serial startup program, verified against --startup-ranks "
                "(with {rank}: each rank's own, e.g. a pipeline stage's)")
@cmdline.option("--startup-ranks", default=None, callback=_pattern, help="the per-rank startup programs ({rank})")
@cmdline.option("--seed", type=int, default=0, show_default=True, help="seed of the random inputs")
@cmdline.option("--rtol", type=cmdline.FloatRange(min=0), default=1e-6, show_default=True, help="relative tolerance")
@cmdline.option("--atol", type=cmdline.FloatRange(min=0), default=1e-8, show_default=True, help="absolute tolerance")
@cmdline.option("--json", "as_json", is_flag=True, help="the report as JSON on stdout")
@program_option("SERIAL's K-th program, when its file holds several, e.g. a GLOG log (1 = first)")
def command(serial: str, pattern: str, startup: str | None, startup_ranks: str | None, seed: int,
            rtol: float, atol: float, as_json: bool, program: int | None) -> None:
    """Prove that the per-rank programs compute the serial (global-view) training step.

    SERIAL is the global-view program (before partition, or a one-reshard program); each rank's
    program is read from PATTERN with {rank} replaced, for every rank of SERIAL's meshes.
    SERIAL may be a `distc capture` folder: its input program (with --ranks: distc's programs,
    --startup defaulting to each rank's captured startup program), or without --ranks Paddle's own
    captured programs of the script's stage, main and startup.

    Exit 0 equal, 1 divergence (rank, op, file:line:col, errors) or bad input (located),
    2 usage, 3 an op without a kernel (which op, where), 4 not provable (what the files do not
    say, where: e.g. which sub-mesh a collective's ring is, when no file names it)."""
    from .capture_files import is_capture

    folder = is_capture(serial)
    if pattern is None and not folder:
        raise cmdline.UsageError("Missing option '--ranks' (needed unless SERIAL is a distc capture folder)")
    if (startup is None) != (startup_ranks is None) and not (folder and startup is None):
        raise cmdline.UsageError("--startup and --startup-ranks go together")
    with reporting() as diags:
        note, loaded = None, {}
        if folder:
            from .capture_files import verify_files

            def ranks_of(path: str) -> list[int]:
                if path not in loaded:
                    loaded[path] = load(path, program)
                return program_ranks(loaded[path])

            serial, pattern, startup, startup_ranks, note = verify_files(serial, pattern, startup, startup_ranks,
                                                                         ranks_of)
        sprog = loaded.get(serial) or load(serial, program)
        warn_unknown_ops(sprog, diags, note=None)
        check_serial(sprog)
        ranks = program_ranks(sprog)
        progs = load_ranks(pattern, ranks)
        reports = [("main", run_verify(sprog, progs, seed=seed, rtol=rtol, atol=atol))]
        if note:
            reports[0][1].notes.insert(0, f"verified {note}")
        if startup is not None:
            sprogs = {r: load(startup_ranks.replace("{rank}", str(r))) for r in ranks}
            # a {rank} pattern: each rank's own serial startup program (Paddle's startup_after_remove
            # is per pipeline stage); ranks whose serial file is the same one are proven together
            groups: dict[str, list[int]] = {}
            for r in ranks:
                groups.setdefault(startup.replace("{rank}", str(r)), []).append(r)
            for path, rs in groups.items():
                st = load(path)
                check_serial(st, need_dist=False)
                label = "startup" if len(groups) == 1 else f"startup ({path}, ranks {rs})"
                reports.append((label, run_verify(st, {r: sprogs[r] for r in rs}, seed=seed, rtol=rtol, atol=atol,
                                                  label="startup", layouts=program_layouts(progs), mains=progs)))
        status = report_out(reports, as_json, warnings=diags.warnings)
    sys.exit(status)


def verify_built(serial: Program, build: Callable[[int], tuple[str, str | None]], *,
                 startup: Program | Mapping[int, Program] | None = None,
                 names: Callable[[int], str] = lambda r: f"<rank {r}>", seed: int = 0, rtol: float = 1e-6,
                 atol: float = 1e-8, rings: Mapping[int, Mapping] | None = None) -> int:
    """``shard --verify`` / ``reshard --verify``: ``build(rank)`` gives a rank's printed program
    (and startup program); each is re-read (so reports point into the printed text) and proven
    against ``serial``; ``rings`` (rank -> ring id -> group, filled by the builds) tells the proof
    the groups the builder gave ring ids the programs' op meshes do not name.  The report goes to
    stderr; returns the exit status."""
    from ..syntax.parser import parse

    check_serial(serial)
    progs, sprogs = {}, {}
    for r in program_ranks(serial):
        text, stext = build(r)
        progs[r] = parse(text, names(r))
        if stext is not None:
            sprogs[r] = parse(stext, names(r) + " (startup)")
    reports = [("verify", run_verify(serial, progs, seed=seed, rtol=rtol, atol=atol, rings=rings))]
    if isinstance(startup, Program):
        reports.append(("verify startup", run_verify(startup, sprogs, seed=seed, rtol=rtol, atol=atol,
                                                     label="startup", layouts=program_layouts(progs), mains=progs)))
    elif startup:  # rank -> its own serial startup program (a pipeline stage's)
        for r, st in sorted(startup.items()):
            reports.append((f"verify startup (rank {r})", run_verify(st, {r: sprogs[r]}, seed=seed, rtol=rtol,
                                                                     atol=atol, label="startup",
                                                                     layouts=program_layouts(progs), mains=progs)))
    return report_out(reports, False, err=True)
