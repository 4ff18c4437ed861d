"""``capture(...)``: the user's command for every rank, checked, into one capture folder.

1. The first rank runs the script as written.  Its ``before_partition`` program names the meshes:
   the ranks to capture (default: all of them) and the world size (default: the largest process id
   + 1; the first rank runs again if it was started with another).  Its ``dist.shard_optimizer``
   call names the ZeRO stage.
2. The other ranks run the script as written; at stages 1-3 every rank also runs the script's
   stage-0 form (no shard function), whose ``before_partition`` and ``startup_after_remove`` are
   distc's inputs.  ``jobs`` processes at a time.
3. A rank with no stage-0 ``before_partition`` (the script failed before Paddle's passes, Paddle
   is missing or of another version, a crash, a timeout) fails the capture: its error, nothing
   written.  Paddle's refusals after that point are results (``error.txt``), with a warning.
"""

from __future__ import annotations

import os
import time

from ..syntax.diagnostics import DiagnosticError
from .folder import FORMAT, INPUTS, RESULTS, Folder, name
from .run import Command, RankRun, failure, run_many

PROBE_WORLD = 8  # PADDLE_TRAINERS_NUM of the first run when neither --world-size nor --ranks says


def capture(cmd: Command, out: str, ranks: list[int] | None = None, world: int | None = None,
            mode: str = "train", jobs: int = 2, timeout: float = 900.0, all_snapshots: bool = False,
            progress=None, warn=None) -> dict:
    """Capture ``cmd`` into the folder ``out``; the manifest written.  ``progress(run, done, total)``
    after each process, ``warn(text)`` for Paddle's refusals."""
    t0 = time.perf_counter()
    folder = Folder(out)
    try:
        doc = _capture(cmd, folder, ranks, world, mode, jobs, timeout, all_snapshots, progress, warn)
        doc["seconds"] = round(time.perf_counter() - t0, 1)
        folder.commit(doc)
        return doc
    except BaseException:
        folder.discard()
        raise


def _capture(cmd, folder, ranks, world, mode, jobs, timeout, all_snapshots, progress, warn) -> dict:
    first = min(ranks) if ranks else 0
    w0 = world or (max(ranks) + 1 if ranks else PROBE_WORLD)
    probe = run_many(cmd, [(first, False)], w0, mode, folder.work, timeout, 1, progress)[0]
    _fatal(probe, cmd.script)
    stage = probe.result.get("stage") or 0
    if probe.status == "ok" or probe.has("before_partition"):
        known = _program_ranks(probe.path("before_partition"))
    elif stage == 0:
        raise failure(probe, "the script failed", cmd.script)
    else:  # the script's stage fails before before_partition: its stage-0 form may still run
        p0 = run_many(cmd, [(first, True)], w0, mode, folder.work, timeout, 1, progress)[0]
        _fatal(p0, cmd.script)
        if not p0.has("before_partition"):
            raise failure(probe, "the script failed (at stage 0 too)", cmd.script)
        known = _program_ranks(p0.path("before_partition"))
    if ranks:
        missing = [r for r in ranks if r not in known]
        if missing:
            raise DiagnosticError(f"rank {missing[0]} is in none of the program's meshes (ranks "
                                  f"{', '.join(map(str, known))})", filename=cmd.script)
    ranks = sorted(ranks or known)
    world = world or max(known) + 1
    todo = [(r, False) for r in ranks if not (r == first and world == w0)]
    todo += [(r, True) for r in ranks] if stage else []
    runs = {(probe.rank, False): probe} if world == w0 else {}
    for r in run_many(cmd, todo, world, mode, folder.work, timeout, jobs, progress):
        runs[(r.rank, r.stage0)] = r
    for r in runs.values():
        _fatal(r, cmd.script)
    for r in ranks:
        given = runs[(r, False)]
        inputs = runs[(r, True)] if stage else given
        if not inputs.has("before_partition"):
            if inputs is given or not given.has("before_partition"):
                raise failure(given, "the script failed", cmd.script)
            raise failure(inputs, "the script's stage-0 form (dist.shard_optimizer without its shard "
                          "function: distc's input) failed", cmd.script)
    stages = {runs[(r, False)].result.get("stage") for r in ranks} - {None}
    if len(stages) > 1:
        raise DiagnosticError(f"the ranks ran different ZeRO stages ({sorted(stages)}): the script must "
                              "build the same program on every rank", filename=cmd.script)
    per_rank = {}
    for r in ranks:
        given = runs[(r, False)]
        inputs = runs[(r, True)] if stage else given
        per_rank[str(r)] = _add_rank(folder, given, inputs, stage, all_snapshots)
    if warn is not None:
        _warn_refusals(per_rank, cmd.script, warn)
    head = runs[(ranks[0], False)].result
    doc = {
        "format": FORMAT,
        "command": cmd.given, "script": cmd.script, "cwd": os.getcwd(), "python": head.get("python"), "paddle": head.get("paddle"),
        "mode": mode, "world_size": world, "ranks": ranks,
        "stage": stage, "shard_fn": head.get("shard_fn"), "sharding_mesh_dim": head.get("sharding_mesh_dim"),
        "mesh_dim_names": head.get("mesh_dim_names"), "param_mesh_dims": head.get("param_mesh_dims"),
        "optimizer": head.get("optimizer"), "strategy": head.get("strategy"),
        "meshes": _meshes(os.path.join(folder.tmp, name(0, ranks[0], "before_partition"))),
        "inputs": {"main": name(0, "{rank}", "before_partition"),
                   "startup": name(0, "{rank}", "startup_after_remove")},
        "paddle_results": {s: name(stage, "{rank}", s) for s in RESULTS},
        "rank_results": per_rank,
    }
    return doc


def _fatal(run: RankRun, script: str) -> None:
    """Statuses that stop the whole capture at once (no use running the other ranks)."""
    st = run.status
    if st == "version":
        raise DiagnosticError(run.result["message"], filename=script)
    if st == "no-paddle":
        raise DiagnosticError(f"PaddlePaddle is not installed for the command's interpreter "
                              f"({run.result.get('message')}): capture runs the script with it, so it needs "
                              "paddlepaddle==3.3.1 (pip install paddlepaddle==3.3.1)", filename=script)
    if st == "no-engine":
        raise failure(run, "no program", script)
    if st == "interrupted":
        raise KeyboardInterrupt


def _add_rank(folder: Folder, given: RankRun, inputs: RankRun, stage: int, all_snapshots: bool) -> dict:
    """Copy one rank's files into the folder; its entry for the manifest."""
    r = given.rank
    files = []

    def put(run: RankRun, snap: str, role: str) -> None:
        dest = name(0 if run.stage0 else stage, r, snap)
        if run.has(snap) and dest not in folder.files:
            folder.add(run.path(snap), dest, rank=r, stage=0 if run.stage0 else stage, snapshot=snap, role=role)
            files.append(dest)

    for s in INPUTS:
        put(inputs, s, "input")
    keep = given.result.get("snapshots", ()) if all_snapshots else RESULTS
    for s in keep:
        put(given, s, "paddle")
    if all_snapshots and inputs is not given:
        for s in inputs.result.get("snapshots", ()):
            put(inputs, s, "paddle")
    entry: dict = {"status": "ok", "seconds": given.result.get("seconds")}
    for run in ([inputs, given] if inputs is not given else [given]):
        st = 0 if run.stage0 else stage
        if run.jobs() and (run is given or all_snapshots):  # a schedule: the plan, its programs, dist_final
            put(run, "dist_final", "paddle")
            folder.add_text(name(st, r, "jobs", "txt"), "".join(f"{j['type']} {j['micro_batch_id']}\n"
                                                                for j in run.jobs()),
                            rank=r, stage=st, role="paddle", snapshot="jobs")
            files.append(name(st, r, "jobs", "txt"))
            for t in run.job_types():
                src = os.path.join(run.folder, f"job.{t}.ir")
                if os.path.exists(src):
                    put_name = name(st, r, f"job.{t}")
                    folder.add(src, put_name, rank=r, stage=st, snapshot=f"job.{t}", role="paddle")
                    files.append(put_name)
        if run.status != "ok":
            msg = run.message()
            folder.add_text(name(st, r, "error", "txt"), msg + "\n", rank=r, stage=st, role="paddle-error")
            files.append(name(st, r, "error", "txt"))
            entry = {"status": "paddle-error", "stage": st, "message": msg, "where": run.result.get("where")}
    entry["files"] = files
    return entry


def _warn_refusals(per_rank: dict, script: str, warn) -> None:
    """One warning per distinct refusal (stage, message), naming its ranks."""
    from ..commands.shard_ranks import format_ranks

    groups: dict[tuple, list[int]] = {}
    for r, x in per_rank.items():
        if x["status"] != "ok":
            groups.setdefault((x["stage"], x["message"]), []).append(int(r))
    for (st, msg), rs in groups.items():
        warn(f"{script}: warning: Paddle refuses the script at stage {st} on rank{'s' * (len(rs) > 1)} "
             f"{format_ranks(rs)}: {msg} (kept as s{st}.r{{rank}}.error.txt; distc's inputs were captured)")


def _program_ranks(path: str) -> list[int]:
    from ..analysis.cost import program_ranks

    return program_ranks(_parse(path))


def _meshes(path: str) -> list[dict]:
    """The program's meshes (each once, in the order first used)."""
    from ..ir.types import DistTensorType

    prog = _parse(path)
    seen: dict = {}
    for op in prog.walk():
        cands = [op.dist_attr.mesh] if op.dist_attr is not None else []
        cands += [v.type.dist.mesh for v in op.results if isinstance(v.type, DistTensorType)]
        for m in cands:
            seen.setdefault((m.shape, m.process_ids), m)
    return [{"shape": list(m.shape), "process_ids": list(m.process_ids), "dim_names": list(m.dim_names)}
            for m in seen.values()]


def _parse(path: str):
    from ..syntax.parser import parse

    with open(path, encoding="utf-8") as f:
        return parse(f.read(), path)
