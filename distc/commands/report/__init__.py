"""``distc report MAIN -o report.html``: one self-contained page of a sharding -- memory per rank
(the chosen ZeRO stage, and stages 0-3 side by side), who sends what to whom (a rank x rank heat
map, collectives per group and kind), pipeline schedules where given, the decisions, warnings and
the command that made it.

:mod:`.data` runs the shard pipeline and returns plain figures, :mod:`.charts` draws them (pygal,
SVG), :mod:`.page` fills the Jinja2 templates.  ``distc diff A B --html`` uses the same charts
and templates (:mod:`.diff_page`).
"""

from __future__ import annotations

from ... import cmdline
from ...driver import err_console, program_option, reporting

EPILOG = """\b
Examples:
  distc report samples/llama_dp2mp2_adamw.ir -o report.html
  distc report main.ir --stage 3 --mesh-dims dp,mp -o zero3.html --json
  distc schedule pp.ir --acc-steps 8 --pp-schedule FThenB,1F1B,ZBH1 --json 2> sched.json
  distc report pp.ir --schedule sched.json -o pp.html
\b
The page is one HTML file (inline SVG charts, no script, nothing fetched): open it from disk or
from a CI artifact.  --json prints the figures it shows as one line on stderr.
"""


@cmdline.command("report", epilog=EPILOG)
@cmdline.argument("main_file", metavar="MAIN")  # or a `distc capture` folder, as for distc shard
@cmdline.option("-o", "--output", required=True, help="the HTML page to write (- for stdout)")
@cmdline.option("--stage", type=cmdline.IntRange(0, 3), default=1, show_default=True,
                help="the ZeRO stage to report (stages 0-3 are also shown side by side)")
@cmdline.option("--amp", is_flag=True, help="Paddle's AMP optimizer path (as for distc shard)")
@cmdline.option("--axis", default=None, help="sharding mesh dim, by index or name (as for distc shard)")
@cmdline.option("--mesh-dims", default="", help="names of the mesh dims, e.g. dp,mp")
@cmdline.option("--ranks", "rank_list", default=None, metavar="LIST",
                help="only these ranks, e.g. 0-3,6  [default: every rank of the program's meshes]")
@cmdline.option("-j", "--jobs", type=cmdline.IntRange(min=1), default=None,
                help="worker processes  [default: the machine's cores]")
@cmdline.option("--schedule", "schedule_files", multiple=True, metavar="FILE",
                help="pipeline schedules to draw (repeatable): JSON {name: {rank: [[job, micro_batch, start, end], "
                     "...]}}, or a `distc schedule --json` line")
@cmdline.option("--json", "as_json", is_flag=True, help="the page's figures as one line of JSON on stderr")
@cmdline.option("-q", "--quiet", is_flag=True, help="no summary line on stderr")
@program_option("MAIN's K-th program, when its file holds several (1 = first)")
def command(main_file: str, output: str, stage: int, amp: bool, axis: str | None, mesh_dims: str,
            rank_list: str | None, jobs: int | None, schedule_files: tuple[str, ...], as_json: bool, quiet: bool,
            program: int | None) -> None:
    """Write one HTML page showing how MAIN shards: memory per rank, traffic between ranks,
    collectives per group, schedules, decisions and warnings.  MAIN may be a `distc capture`
    folder: its input, and its stage, mesh dim, AMP and ranks for the options not given."""
    import json
    import sys

    from ..shard_ranks import parse_ranks
    from .data import Options, collect
    from .page import report_page

    from ...outputs import Outputs
    from ..shard_capture import capture_defaults

    with reporting():
        main_file, o = capture_defaults(main_file, dict(stage=stage, amp=amp, axis=axis, mesh_dims=mesh_dims,
                                                        rank_list=rank_list))
    stage, amp, axis, mesh_dims, rank_list = (o[k] for k in ("stage", "amp", "axis", "mesh_dims", "rank_list"))
    if stage == 0 and axis is not None:
        raise cmdline.UsageError("--axis chooses the mesh dim ZeRO shards over; --stage 0 shards nothing")
    with reporting() as diags, Outputs(inputs=[main_file, *schedule_files]) as out:
        wanted = parse_ranks(rank_list) if rank_list is not None else None
        target = out.add("-o", output)  # checked before any work
        schedules, bubbles = {}, {}
        for f in schedule_files:
            got, bub = read_schedules(f)
            schedules.update(got)
            bubbles.update(bub)
        opts = Options(stage=stage, amp=amp, axis=axis, mesh_dims=tuple(d.strip() for d in mesh_dims.split(",") if d.strip()),
                       ranks=None if wanted is None else sorted({r for rg in wanted for r in rg}), jobs=jobs,
                       program=program)
        data = collect(main_file, opts, command_line(), diags)
        data.schedules, data.bubbles = schedules, bubbles
        page = report_page(data)
        out.write(target, page)
        out.commit()
        if as_json:
            sys.stderr.write(json.dumps({**data.to_json(), "output": output, "bytes": len(page.encode())},
                                        separators=(",", ":")) + "\n")
        elif not quiet:
            err_console().print(f"wrote {output}: {len(page.encode()) // 1024} KiB, {len(data.ranks)} ranks, stage "
                                f"{data.stage}, {len(data.groups())} communication groups, "
                                f"{len(data.decisions)} decisions, {len(data.warnings)} warnings", markup=False)


def command_line() -> str:
    """The command that made the page, as typed (the process's arguments when it is ``distc``;
    else, e.g. under a test runner, rebuilt from the parsed options)."""
    import os
    import shlex
    import sys

    ctx = cmdline.get_current_context()
    if os.path.basename(sys.argv[0]) in ("distc", "__main__.py") and ctx.info_name in sys.argv[1:]:
        return shlex.join(["distc", *sys.argv[1:]])
    args = ["distc", ctx.info_name]
    for p in ctx.command.params:
        v = ctx.params.get(p.name)
        if isinstance(p, cmdline.Argument):
            args.append(str(v))
        elif v not in (None, False, "", p.default):
            args += [p.opts[-1]] + ([] if v is True else [str(v)])
    return shlex.join(args)


def read_schedules(path: str) -> tuple[dict, dict]:
    """``--schedule FILE``: ``{name: {rank: [[job, micro_batch, start, end(, idle)], ...]}}`` from
    JSON, or a whole ``distc schedule --json`` line (its ``timelines``, and each schedule's bubble,
    which counts the waits inside jobs); a located error if it is neither.  (schedules, bubbles)"""
    import json

    from ...driver import read_text
    from ...syntax.diagnostics import DiagnosticError
    from .charts import Job

    text = read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise DiagnosticError(f"not JSON: {e.msg}", e.lineno, e.colno, filename=path, source=text) from None
    bubbles: dict[str, float] = {}
    if isinstance(doc, dict) and isinstance(doc.get("timelines"), dict):
        rows = doc.get("schedules")
        for name, row in (rows.items() if isinstance(rows, dict) else ()):
            if isinstance(row, dict) and isinstance(row.get("bubble"), (int, float)) and name in doc["timelines"]:
                bubbles[str(name)] = float(row["bubble"])
        doc = doc["timelines"]
    out: dict = {}
    try:
        for name, ranks in doc.items():
            out[str(name)] = {int(r): [Job(str(j[0]), int(j[1]), float(j[2]), float(j[3]),
                                           float(j[4]) if len(j) > 4 else 0.0) for j in jobs]
                              for r, jobs in ranks.items()}
            for r, jobs in out[str(name)].items():
                bad = [j for j in jobs if j.end < j.start or j.idle < 0 or j.idle > j.end - j.start]
                if bad:
                    raise ValueError(f"rank {r}: job {bad[0].job} {bad[0].micro_batch} ends before it starts "
                                     "or waits longer than it lasts")
    except (AttributeError, TypeError, ValueError, IndexError, KeyError) as e:
        raise DiagnosticError("expected {schedule name: {rank: [[job, micro_batch, start, end], ...]}} (or "
                              "`distc schedule --json` output)" + (f": {e}" if isinstance(e, ValueError) and
                                                                          str(e).startswith("rank") else ""),
                              filename=path) from None
    return out, bubbles
