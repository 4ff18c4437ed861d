"""``distc schedule``: which pipeline schedule to pick — every schedule built for every rank of one
program (through the shard pipeline, as ``distc shard --pp-schedule`` builds it) and compared on
a modelled clock: the step, the bubble (overall and per pipeline stage), the activations a stage
holds at its peak.

    distc schedule MAIN --acc-steps 8                      # FThenB, 1F1B, Eager1F1B, ZBH1
    distc schedule MAIN VPP_MAIN --acc-steps 8             # ... and VPP on the model placed in chunks
    distc schedule MAIN --acc-steps 8 --pp-schedule 1F1B,ZBH1 --json 2> sched.json
    distc report MAIN --schedule sched.json -o pp.html     # the timelines drawn

It writes no program: ``distc shard MAIN --pp-schedule S --acc-steps K --job-out ...`` does, and
``--verify`` there proves the whole pipelined step."""

from __future__ import annotations

from .. import cmdline
from ..driver import err_console, load_kept, reporting
from ..pipeline import ShardOptions, ShardPipeline
from ..syntax.diagnostics import DiagnosticError, Diagnostics
from .shard_schedule import SCHEDULES


def _schedules(ctx, param, value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    got = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in got if s not in SCHEDULES]
    if bad or not got:
        raise cmdline.BadParameter(f"{bad[0] if bad else value!r}: schedules are {', '.join(SCHEDULES)} "
                                   "(comma-separated)")
    return tuple(dict.fromkeys(got))


@cmdline.command("schedule")
@cmdline.argument("main_files", metavar="MAIN...", nargs=-1, required=True)
@cmdline.option("--acc-steps", type=cmdline.IntRange(min=1), required=True,
                help="micro-batches a step (Paddle's accumulate_steps)")
@cmdline.option("--pp-schedule", "modes", default=None, callback=_schedules, metavar="LIST",
                help="the schedules to compare, comma-separated (FThenB, 1F1B, VPP, Eager1F1B, ZBH1)  [default: VPP for "
                "a MAIN whose layers are placed in chunks, the others for any other MAIN]")
@cmdline.option("--vpp-degree", type=cmdline.IntRange(min=2), default=2, show_default=True, help="chunks a stage (VPP)")
@cmdline.option("--stage", type=cmdline.IntRange(0, 3), default=0, show_default=True, help="ZeRO stage (as distc shard)")
@cmdline.option("--mesh-dims", default="", help="names of the mesh dims, e.g. dp,mp (as distc shard)")
@cmdline.option("--flops", type=cmdline.FloatRange(min=0, min_open=True), default=1e9, show_default=True,
                help="FLOP/s of a device (compute time of a job from its ops' FLOPs)")
@cmdline.option("--bandwidth", type=cmdline.FloatRange(min=0, min_open=True), default=25e9, show_default=True,
                help="bytes/s between two ranks (send/recv and collectives)")
@cmdline.option("--json", "as_json", is_flag=True, help="the comparison and every timeline as one line of JSON on stderr "
                "(what distc report --schedule draws)")
@cmdline.option("--quiet", "-q", is_flag=True, help="no table on stderr")
def command(main_files: tuple[str, ...], acc_steps: int, modes: tuple[str, ...] | None, vpp_degree: int, stage: int,
            mesh_dims: str, flops: float, bandwidth: float, as_json: bool, quiet: bool) -> None:
    """Compare pipeline schedules on a modelled clock: step time, bubble, peak activations.

    MAIN is what distc shard takes (Paddle's program before apply_partition_pass, layers placed on
    pipeline stage meshes); several MAINs are compared in one table (e.g. a model and the same
    model placed in VPP chunks).  Each schedule is built for every rank as `distc shard
    --pp-schedule S --acc-steps K` builds it; one that cannot be built (too few micro-batches, a
    schedule that cannot finish) is named with the reason."""
    import json
    import os
    import sys

    from ..passes.pipeline_schedule import has_chunks

    with reporting() as shown:
        sources: dict[str, str] = {}
        progs = {f: load_kept(f, sources) for f in dict.fromkeys(main_files)}
        diags = Diagnostics()  # (printed below: no program is written, so not how gradient merge clips)
        dims = tuple(d.strip() for d in mesh_dims.split(",") if d.strip())
        todo = [(f, m) for f, prog in progs.items()
                for m in (modes or (("VPP",) if has_chunks(prog) else tuple(x for x in SCHEDULES if x != "VPP")))]
        names = [m if [x for _, x in todo].count(m) == 1 else f"{m} ({os.path.basename(f)})" for f, m in todo]
        rows: dict[str, dict] = {}
        timelines: dict[str, dict] = {}
        warned: set[str] = set()
        for (f, mode), name in zip(todo, names):
            opts = ShardOptions(stage=stage, mesh_dims=dims, pp_schedule=mode, acc_steps=acc_steps,
                                vpp_degree=vpp_degree, dense=True)
            try:  # (the warnings of each input once)
                rows[name], timelines[name] = _one(progs[f], opts, sources, Diagnostics() if f in warned else diags,
                                                   flops, bandwidth, f)
            except DiagnosticError as e:
                if len(todo) == 1:
                    raise
                rows[name] = {"error": e.message}
            warned.add(f)
            rows[name]["program"] = f
        if all("error" in r for r in rows.values()):
            raise DiagnosticError("no schedule could be built: " + "; ".join(f"{m}: {r['error']}"
                                                                          for m, r in rows.items()),
                                  filename=main_files[0])
        for w in diags.items:
            if not (isinstance(w, DiagnosticError) and w.message.startswith("gradient merge over")):
                shown.warn(w)
        if as_json:
            doc = {"command": "schedule", "micro_batches": acc_steps, "flops": flops, "bandwidth": bandwidth,
                   "schedules": rows, "timelines": timelines, "warnings": diags.warnings}
            sys.stderr.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")
        elif not quiet:
            _table(rows, acc_steps)


def _one(prog, opts: ShardOptions, sources, diags, flops: float, bandwidth: float, main_file: str):
    """One schedule on every rank: (its row, its timeline as distc report --schedule reads it)."""
    from ..pipeline.schedule import peak_activations, schedule_timeline

    pipe = ShardPipeline(prog.clone(), opts, sources=sources, diagnostics=diags)
    pipe.check_main()
    results = pipe.run()
    tl = schedule_timeline(results, flops=flops, bandwidth=bandwidth, filename=main_file)
    stages: dict[int, list[int]] = {}
    for r in results:
        stages.setdefault(pipe.pp_stage(r)[0], []).append(r)
    row = {"step": tl.makespan, "bubble": tl.bubble(),
           "bubble_per_stage": [sum(tl.bubble(r) for r in rs) / len(rs) for _, rs in sorted(stages.items())],
           "jobs_per_rank": max(len(x.plan.jobs) for x in results.values()),
           "peak_activations": max(peak_activations(x.plan.jobs, opts.vpp_degree if opts.pp_schedule == "VPP" else 1)
                                   for x in results.values())}
    return row, tl.as_json()["timeline"]


def _table(rows: dict[str, dict], k: int) -> None:
    from rich.table import Table

    t = Table(title=f"pipeline schedules, {k} micro-batches (modelled)")
    for col in ("schedule", "step (ms)", "bubble", "bubble per stage", "peak activations", "jobs a rank"):
        t.add_column(col, justify="left" if col == "schedule" else "right")
    for mode, r in rows.items():
        if "error" not in r:
            t.add_row(mode, f"{r['step'] * 1e3:.2f}", f"{r['bubble'] * 100:.1f}%",
                  " / ".join(f"{b * 100:.1f}%" for b in r["bubble_per_stage"]),
                  f"{r['peak_activations']:g} micro-batches", str(r["jobs_per_rank"]))
    con = err_console()
    con.print(t)
    for mode, r in rows.items():
        if "error" in r:
            con.print(f"{mode}: not built: {r['error']}", markup=False)
