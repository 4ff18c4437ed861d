"""What a report shows, computed by the shard pipeline: per-rank memory (the chosen stage, and
stages 0-3), every rank's collectives and who sends what to whom, the decisions and warnings.

A thin adapter over the shard pipeline (:class:`distc.pipeline.ShardPipeline`): MAIN is parsed and
sharded once (shard-optimizer, partition), then each rank's reshard, and shard-optimizer at the
other stages, run in forked workers from that state; only plain figures come back.  Everything
else (charts, page, ``--json``) reads :class:`ReportData` alone.
"""

from __future__ import annotations

import re

from ...analysis.memory import activations_of, memory_of, optimizer_operands, saved_activations
from ...ir.records import field, record

STAGES = (0, 1, 2, 3)


@record
class Options:
    stage: int = 1
    amp: bool = False
    axis: str | None = None
    mesh_dims: tuple[str, ...] = ()
    ranks: list[int] | None = None  # None: every rank of the program's meshes
    jobs: int | None = None
    program: int | None = None


@record
class ReportData:
    """Plain figures (ints, strings, lists, dicts): the page and ``--json`` both come from these."""

    main: str
    command: str
    stage: int
    axis: int | None
    ranks: list[int]
    memory: dict[int, dict[int, dict[str, int]]]  # stage -> rank -> part -> bytes
    stage_notes: dict[int, str]  # stage -> what to know about its figures (2 = 1, not computed ...)
    collectives: dict[int, list[dict]]  # rank -> [{kind, group, count, bytes_sent}]
    traffic: dict[int, dict[int, int]]  # from rank -> to rank -> bytes
    pipeline: list[str]
    decisions: list[str]
    warnings: list[str]
    schedules: dict[str, dict[int, list]] = field(default_factory=dict)  # name -> rank -> [Job]
    bubbles: dict[str, float] = field(default_factory=dict)  # name -> the bubble its cost model gave

    def bubble(self, name: str) -> float:
        """A schedule's bubble: the one ``distc schedule`` computed (it knows the waits
        inside jobs), else from the jobs' times."""
        from .charts import bubble_fraction

        return self.bubbles.get(name, bubble_fraction(self.schedules[name]))

    def bytes_sent(self, rank: int) -> int:
        return sum(g["bytes_sent"] for g in self.collectives[rank])

    def groups(self) -> list[dict]:
        """Collectives per (kind, group) over all ranks: ops a rank runs, bytes the group's ranks send."""
        agg: dict[tuple, dict] = {}
        for r in self.ranks:
            for g in self.collectives[r]:
                key = (g["kind"], tuple(g["group"]))
                a = agg.setdefault(key, {"kind": g["kind"], "group": list(g["group"]), "count": 0,
                                         "bytes_sent": 0, "ranks": []})
                a["count"] = max(a["count"], g["count"])
                a["bytes_sent"] += g["bytes_sent"]
                a["ranks"].append(r)
        return [agg[k] for k in sorted(agg)]

    def to_json(self) -> dict:
        """The ``--json`` summary (the figures the page shows)."""
        def mem(m: dict[str, int]) -> dict[str, int]:
            return {**m, "total": m["parameters"] + m["gradients"] + m["optimizer_states"]}

        return {
            "command": "report", "main": self.main, "stage": self.stage, "sharding_axis": self.axis,
            "pipeline": self.pipeline, "decisions": self.decisions, "warnings": self.warnings,
            "ranks": {str(r): {"rank": r, "collectives": sum(g["count"] for g in self.collectives[r]),
                               "bytes_sent": self.bytes_sent(r), "by_group": self.collectives[r],
                               "memory": mem(self.memory[self.stage][r]),
                               "sent_to": {str(d): b for d, b in sorted(self.traffic.get(r, {}).items())}}
                      for r in self.ranks},
            "stages": {str(s): {"note": self.stage_notes.get(s, ""),
                                "ranks": {str(r): mem(m) for r, m in sorted(per.items())}}
                       for s, per in sorted(self.memory.items())},
            "groups": [{k: v for k, v in g.items() if k != "ranks"} for g in self.groups()],
            "schedules": {name: {"bubble_fraction": round(self.bubble(name), 6),
                                 "ranks": {str(r): [[j.job, j.micro_batch, j.start, j.end] for j in jobs]
                                           for r, jobs in sorted(s.items())}}
                          for name, s in self.schedules.items()},
            "command_line": self.command,
        }


def _memory(operands, acts: list, ranks: list[int]) -> dict[int, dict[str, int]]:
    out = {}
    for r in ranks:
        m = memory_of(operands, r)
        out[r] = {"parameters": m.params, "gradients": m.grads, "optimizer_states": m.states,
                  "activations": activations_of(acts, r)}
    return out


def _rank_work(pipe, rank: int) -> dict:
    """In a forked worker: lower the shared (sharded, partitioned) program for ``rank`` in place;
    the figures from the reshard pass's collective records."""
    from ...analysis.cost import sent_to

    res = pipe.lower(rank, copy=False)
    to: dict[int, int] = {}
    for c in res.collectives or []:
        for dst, b in sent_to(c).items():
            to[dst] = to.get(dst, 0) + b
    groups = [{"kind": kind, "group": list(group), **t} for (kind, group), t in res.totals(by_group=True).items()]
    return {"groups": groups, "to": to, "notes": res.notes}


def _options(opts: Options, stage: int, annotate_only: bool = False):
    from ...pipeline import ShardOptions

    return ShardOptions(stage=stage, axis=opts.axis, mesh_dims=opts.mesh_dims, amp=opts.amp,
                        annotate_only=annotate_only)


def _stage_work(pipe, stage: int, opts: Options, ranks: list[int], acts: list) -> dict:
    """In a forked worker: shard-optimizer at another stage, memory per rank (or why not)."""
    from ...pipeline import ShardPipeline
    from ...syntax.diagnostics import DiagnosticError

    try:
        other = ShardPipeline(pipe.program, _options(opts, stage, annotate_only=True), sources=pipe.ctx.sources)
        after = other.prepare().after
    except DiagnosticError as e:
        return {"error": e.message}
    return {"memory": _memory(after, acts, ranks)}


def _main_work(pipe, opts: Options, ranks: list[int], acts: list) -> dict:
    """In a forked worker: the chosen stage, shared passes once, then each rank in its own worker."""
    from ...driver import WorkerFailed
    from ...workers import fork_each
    from ..shard_ranks import default_jobs

    n0 = len(pipe.diagnostics)
    sh = pipe.prepare()
    try:
        per = fork_each(ranks, lambda r: _rank_work(pipe, r), opts.jobs or default_jobs())
    except WorkerFailed as e:
        return {"failed": (e.item, e.message, e.code, e.doc)}
    return {"before": _memory(sh.before, acts, ranks), "after": _memory(sh.after, acts, ranks),
            "axis": sh.ctx.stats.sharding_axis, "ran": sh.ran, "notes": sh.notes, "ranks": per,
            "warnings": pipe.diagnostics.warnings[n0:]}


def collect(main_file: str, opts: Options, command: str, diags) -> ReportData:
    """Run the shard pipeline on MAIN for every rank asked and the other stages: the figures.

    MAIN is parsed once; one worker takes the chosen stage (the shared passes, then a worker per
    rank), others shard-optimizer at the other stages, from the same parsed program."""
    from ...driver import WorkerFailed, load_kept
    from ...workers import fork_each
    from ...pipeline import ShardPipeline
    from ..shard_ranks import default_jobs, select_ranks

    sources: dict[str, str] = {}
    prog = load_kept(main_file, sources, opts.program)
    name = prog.filename or main_file
    pipe = ShardPipeline(prog, _options(opts, opts.stage), sources=sources, diagnostics=diags)
    pipe.warn_unknown_ops()
    ranks = select_ranks(pipe.ranks(), None if opts.ranks is None else [range(r, r + 1) for r in opts.ranks],
                         name)
    pipe.check_main()
    acts = saved_activations(prog)
    others = sorted({1 if s == 2 else s for s in STAGES} - {0, 1 if opts.stage == 2 else opts.stage})

    def work(item: tuple[str, int]) -> dict:
        kind, s = item
        if kind == "stage":
            return _stage_work(pipe, s, opts, ranks, acts)
        return _main_work(pipe, opts, ranks, acts)

    done = fork_each([("main", opts.stage)] + [("stage", s) for s in others], work, opts.jobs or default_jobs())
    main = done[("main", opts.stage)]
    if "failed" in main:
        item, message, code, doc = main["failed"]
        head = f"distc report: rank {item} failed; no page written"
        raise WorkerFailed(item, head + "\n" + message, code, {**(doc or {}), "rank": item})
    diags.items.extend(main["warnings"])  # the worker printed them
    memory = {0: main["before"], opts.stage: main["after"]}
    notes = {2: "stage 2 = stage 1: Paddle's static mode keeps gradients whole (its stage-2 programs are its "
                "stage-1 programs)"}
    for s in others:
        res = done[("stage", s)]
        if "error" in res:
            notes[s] = f"not computed: {res['error']}"
        else:
            memory[s] = res["memory"]
    if 1 in memory or 2 in memory:
        memory[2] = memory[1] = memory.get(1, memory.get(2))  # type: ignore[assignment]
    per = main["ranks"]
    rank_notes: dict[str, list[int]] = {}  # a note several ranks made alike: once, naming them
    for r in ranks:
        for n in per[r]["notes"]:
            rank_notes.setdefault(re.sub(rf"\brank {r}\b", "this rank", n), []).append(r)
    return ReportData(
        main=name, command=command, stage=opts.stage, axis=main["axis"], ranks=ranks,
        memory={s: memory[s] for s in sorted(memory)}, stage_notes=notes,
        collectives={r: per[r]["groups"] for r in ranks}, traffic={r: per[r]["to"] for r in ranks},
        pipeline=[*main["ran"], "reshard{rank=R} for every rank"],
        decisions=list(dict.fromkeys(main["notes"])) + [
            n if len(rs) == len(ranks) else f"{n} (rank{'s' * (len(rs) > 1)} {', '.join(map(str, rs))})"
            for n, rs in rank_notes.items()],
        warnings=diags.warnings)
