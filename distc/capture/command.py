"""``distc capture [OPTIONS] -- python train.py ARGS`` (also ``python -m distc.capture``)."""

from __future__ import annotations

import json
import shlex
import sys

from .. import cmdline
from ..driver import err_console, reporting

EPILOG = """\b
Writes the folder (default ./capture), per rank R (S: the script's ZeRO stage):
  s0.rR.before_partition.ir      distc's MAIN (the script's stage-0 program)
  s0.rR.startup_after_remove.ir  distc's --startup
  sS.rR.after_reshard.ir, dense.ir, startup_final.ir, before_partition.ir, ...
                                 Paddle's own programs for the script as written (golden files)
  sS.rR.jobs.json, sS.rR.job.TYPE.ir   the job list and programs (pipeline schedule, gradient merge)
  sS.rR.error.txt                Paddle's refusal, where Paddle fails after distc's inputs were taken
  manifest.json                  Paddle's version, mesh, stage, strategy, every file and its rank
Each rank runs in its own process with the command's interpreter (PADDLE_TRAINER_ID=R,
PADDLE_TRAINERS_NUM=world size, PYTHONHASHSEED=0 unless set), stopped once Paddle's engine has
prepared the program (the script's DistModel.train() or first step): no device, no communication.
Exit status: 0 written; 1 the script or Paddle failed on a rank before distc's inputs existed, a
Paddle version other than 3.3.1, a crash or a timeout (nothing written); 2 usage.
"""


@cmdline.command("capture", epilog=EPILOG,
                 context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False,
                                   "help_option_names": ["-h", "--help"], "max_content_width": 100})
@cmdline.argument("cmd", nargs=-1, type=cmdline.UNPROCESSED, metavar="-- PYTHON SCRIPT [ARGS]...")
@cmdline.option("-o", "--out", default="capture", show_default=True,
                help="the folder to write (an earlier capture there is replaced whole)")
@cmdline.option("--ranks", "rank_list", default=None, metavar="LIST",
                help="ranks to capture, e.g. 0-3,6  [default: every rank of the program's meshes]")
@cmdline.option("--world-size", type=cmdline.IntRange(min=1), default=None,
                help="PADDLE_TRAINERS_NUM  [default: the program's largest process id + 1]")
@cmdline.option("--mode", type=cmdline.Choice(["train", "eval", "predict"]), default="train", show_default=True,
                help="the engine mode whose programs are taken")
@cmdline.option("-j", "--jobs", type=cmdline.IntRange(min=1), default=None,
                help="processes at a time  [default: the machine's cores]")
@cmdline.option("--timeout", type=cmdline.FloatRange(min=1), default=900, show_default=True,
                help="seconds one rank's process may take")
@cmdline.option("--all-snapshots", is_flag=True,
                help="also every other program Paddle passes through (startup.before, after_remove, ...)")
@cmdline.option("--quiet", "-q", is_flag=True, help="no summary on stderr")
@cmdline.option("--json", "as_json", is_flag=True, help="the manifest's summary as one line of JSON on stdout")
def command(cmd: tuple[str, ...], out: str, rank_list: str | None, world_size: int | None, mode: str,
            jobs: int | None, timeout: float, all_snapshots: bool, quiet: bool, as_json: bool) -> None:
    """Run a Paddle auto-parallel training script once per rank, on this machine's CPU, and keep
    distc's inputs and Paddle's own programs for every rank in one folder.

    The script is the user's own, unmodified: it builds a model (dist.shard_tensor /
    shard_layer), an optimizer (dist.shard_optimizer), calls dist.to_static and trains.  Its
    interpreter needs paddlepaddle==3.3.1; distc itself never imports Paddle."""
    from ..commands.shard_ranks import default_jobs, parse_ranks
    from .run import UsageProblem, split_command
    from .session import capture

    with reporting() as diags:
        try:
            command_ = split_command(list(cmd))
        except UsageProblem as e:
            raise cmdline.UsageError(str(e)) from None
        ranks = None
        if rank_list is not None:
            ranks = sorted({r for rg in parse_ranks(rank_list) for r in rg})
            if len(ranks) > 4096:
                raise cmdline.BadParameter(f"{rank_list!r}: over 4096 ranks (one process each)", param_hint="--ranks")
        if world_size is not None and ranks and max(ranks) >= world_size:
            raise cmdline.BadParameter(f"rank {max(ranks)} is not below the world size {world_size}",
                                       param_hint="--ranks")
        progress = _progress if sys.stderr.isatty() and not quiet else None
        doc = capture(command_, out, ranks=ranks, world=world_size, mode=mode, jobs=jobs or default_jobs(),
                      timeout=timeout, all_snapshots=all_snapshots, progress=progress, warn=diags.warn)
        if as_json:
            print(json.dumps(summary(doc, out), separators=(",", ":")))
        elif not quiet:
            _print_summary(doc, out)


def _progress(run, done: int, total: int) -> None:
    what = "stage-0 form" if run.stage0 else "as written"
    err_console().print(f"  [{done}/{total}] rank {run.rank} ({what}): {run.status}", markup=False)


def summary(doc: dict, out: str) -> dict:
    errors = {r: x["message"] for r, x in doc["rank_results"].items() if x["status"] != "ok"}
    return {"command": "capture", "status": "ok", "folder": out, "paddle": doc["paddle"], "stage": doc["stage"],
            "ranks": doc["ranks"], "world_size": doc["world_size"], "meshes": doc["meshes"],
            "files": len(doc["files"]), "paddle_errors": errors, "seconds": doc["seconds"],
            "next": next_commands(doc, out)}


def next_commands(doc: dict, out: str) -> list[str]:
    """``distc shard`` on the folder (its inputs, every captured rank, the script's stage ...),
    ``distc diff`` against Paddle's program of the first rank, and ``distc verify`` of distc's
    programs (every rank's: where the folder holds only some ranks, their programs are made for
    the proof, which needs them all)."""
    q = shlex.quote
    r0 = doc["ranks"][0]
    cmds = ["mkdir -p out", f"distc shard {q(out)} -o 'out/main.r{{rank}}.ir' --startup-out 'out/startup.r{{rank}}.ir'"]
    golden = f"{out}/{doc['paddle_results']['after_reshard']}".replace("{rank}", str(r0))
    if golden.rsplit("/", 1)[-1] in doc["files"]:
        cmds.append(f"distc diff {q(out)} out/main.r{r0}.ir")
    every = sorted({r for m in doc.get("meshes") or () for r in m["process_ids"]})
    if set(every) <= set(doc["ranks"]):
        cmds.append(f"distc verify {q(out)} --ranks 'out/main.r{{rank}}.ir' --startup-ranks 'out/startup.r{{rank}}.ir'")
    else:
        cmds += [f"distc shard {q(out)} --all-ranks -q -o 'out/all.r{{rank}}.ir'",
                 f"distc verify {q(out)} --ranks 'out/all.r{{rank}}.ir'"]
    return cmds


def _fmt_ranks(ranks: list[int]) -> str:
    from ..commands.shard_ranks import format_ranks

    return format_ranks(ranks)


def _print_summary(doc: dict, out: str) -> None:
    con = err_console()
    meshes = ", ".join(_nested(m) for m in doc["meshes"][:4]) + (" ..." if len(doc["meshes"]) > 4 else "")
    stage = doc["stage"]
    zero = f"ZeRO stage {stage} ({doc['shard_fn']} over {doc['sharding_mesh_dim']})" if stage else "ZeRO stage 0"
    con.print(f"captured {doc['script']} with Paddle "
              f"{doc['paddle']}: {zero}, mesh{'es' * (len(doc['meshes']) > 1)} {meshes}, ranks {_fmt_ranks(doc['ranks'])} of world size "
              f"{doc['world_size']}, {len(doc['files'])} files in {out}/ ({doc['seconds']} s)", markup=False)
    errs = {r: x for r, x in doc["rank_results"].items() if x["status"] != "ok"}
    if errs:
        con.print(f"Paddle refused the script's stage {stage} on ranks {', '.join(errs)}: "
                  f"{next(iter(errs.values()))['message']}", markup=False)
    con.print("next:", markup=False)
    for c in next_commands(doc, out):
        con.print("  " + c, markup=False)


def _nested(m: dict) -> str:
    ids, shape = m["process_ids"], m["shape"]

    def rec(off: int, dims: list[int]):
        if len(dims) == 1:
            return ids[off:off + dims[0]]
        step = 1
        for d in dims[1:]:
            step *= d
        return [rec(off + i * step, dims[1:]) for i in range(dims[0])]

    return json.dumps(rec(0, shape), separators=(",", ":"))
