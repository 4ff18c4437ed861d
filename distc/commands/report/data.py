"""What a report shows, computed by the shard pipeline: per-rank memory (the chosen stage, and
stages 0-3), every rank's collectives and who sends what to whom, the decisions and warnings.

A thin adapter over the steps of ``distc shard`` (:mod:`distc.commands.shard`): MAIN is parsed and
sharded once (shard-optimizer, partition), then each rank's reshard, and shard-optimizer at the
other stages, run in forked workers from that state; only plain figures come back.  Everything
else (charts, page, ``--json``) reads :class:`ReportData` alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...analysis.memory import activations_of, memory_of, optimizer_operands, saved_activations

STAGES = (0, 1, 2, 3)


@dataclass
class Options:
    stage: int = 1
    amp: bool = False
    axis: str | None = None
    mesh_dims: tuple[str, ...] = ()
    ranks: list[int] | None = None  # None: every rank of the program's meshes
    jobs: int | None = None
    program: int | None = None


@dataclass
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
        from .charts import bubble_fraction

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
            "schedules": {name: {"bubble_fraction": round(bubble_fraction(s), 6),
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


def _rank_work(sh, rank: int) -> dict:
    """In a forked worker: lower the shared (sharded, partitioned) program for ``rank``."""
    from ...analysis.cost import collectives_in, sent_to
    from ..shard import _reshard_pass, _run

    ctx = sh.ctx
    n0 = len(ctx.notes)
    _run([_reshard_pass(rank)], sh.prog, ctx, sh.main_file)
    alloc = ctx.stats.ring_allocator
    rings = {rid: key for key, rid in alloc.groups.items()} if alloc is not None else None
    groups: dict[tuple, dict] = {}
    to: dict[int, int] = {}
    for c in collectives_in(sh.prog, rank, rings):
        if not c.runs:
            continue
        g = groups.setdefault((c.kind, c.ranks), {"kind": c.kind, "group": list(c.ranks), "count": 0, "bytes_sent": 0})
        g["count"] += 1
        g["bytes_sent"] += c.moved
        for dst, b in sent_to(c).items():
            to[dst] = to.get(dst, 0) + b
    return {"groups": [groups[k] for k in sorted(groups)], "to": to, "notes": ctx.notes[n0:]}


def _stage_work(prog, main_file: str, stage: int, opts: Options, ranks: list[int], acts: list) -> dict:
    """In a forked worker: shard-optimizer at another stage, memory per rank (or why not)."""
    from ...passes.base import REGISTRY, PassContext
    from ...syntax.diagnostics import DiagnosticError
    from ..shard import _run

    try:
        p = REGISTRY["shard-optimizer"](stage=stage, axis=opts.axis or "", mesh_dims=opts.mesh_dims, amp=opts.amp)
        _run([p], prog, PassContext(), main_file)
    except DiagnosticError as e:
        return {"error": e.message}
    return {"memory": _memory(optimizer_operands(prog), acts, ranks)}


def _main_work(prog, main_file: str, opts: Options, ranks: list[int], acts: list, warn, warnings: list[str]) -> dict:
    """In a forked worker: the chosen stage, shared passes once, then each rank in its own worker."""
    from ...driver import WorkerFailed, fork_each
    from ..shard import _prepare
    from ..shard_inputs import check_sharding_degree
    from ..shard_ranks import default_jobs

    n0 = len(warnings)
    sh = _prepare(prog, main_file, None, opts.stage, opts.amp, opts.axis, opts.mesh_dims, False, False)
    if opts.stage >= 1:
        check_sharding_degree(prog, sh.ctx.stats.sharding_axis, opts.mesh_dims, prog.filename or main_file, warn)
    try:
        per = fork_each(ranks, lambda r: _rank_work(sh, r), opts.jobs or default_jobs())
    except WorkerFailed as e:
        return {"failed": (e.item, e.message, e.code, e.doc)}
    return {"before": _memory(sh.before, acts, ranks), "after": _memory(sh.after, acts, ranks),
            "axis": sh.ctx.stats.sharding_axis, "ran": sh.ran, "notes": sh.notes, "ranks": per,
            "warnings": warnings[n0:]}


def collect(main_file: str, opts: Options, command: str, warn, warnings: list[str]) -> ReportData:
    """Run the shard pipeline on MAIN for every rank asked and the other stages: the figures.

    MAIN is parsed once; one worker takes the chosen stage (the shared passes, then a worker per
    rank), others shard-optimizer at the other stages, from the same parsed program."""
    from ...analysis.cost import program_ranks
    from ...driver import WorkerFailed, fork_each, load, warn_unknown_ops
    from ...passes import load_passes
    from ..shard_inputs import check_main
    from ..shard_ranks import default_jobs, select_ranks

    load_passes()
    prog = load(main_file, opts.program)
    name = prog.filename or main_file
    warn_unknown_ops(prog)
    ranks = select_ranks(program_ranks(prog), None if opts.ranks is None else [range(r, r + 1) for r in opts.ranks],
                         name)
    check_main(prog, name, opts.stage, warn)
    acts = saved_activations(prog)
    others = sorted({1 if s == 2 else s for s in STAGES} - {0, 1 if opts.stage == 2 else opts.stage})

    def work(item: tuple[str, int]) -> dict:
        kind, s = item
        if kind == "stage":
            return _stage_work(prog, main_file, s, opts, ranks, acts)
        return _main_work(prog, main_file, opts, ranks, acts, warn, warnings)

    done = fork_each([("main", opts.stage)] + [("stage", s) for s in others], work, opts.jobs or default_jobs())
    main = done[("main", opts.stage)]
    if "failed" in main:
        item, message, code, doc = main["failed"]
        head = f"distc report: rank {item} failed; no page written"
        raise WorkerFailed(item, head + "\n" + message, code, {**(doc or {}), "rank": item})
    warnings.extend(main["warnings"])  # the worker printed them
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
        warnings=list(warnings))
