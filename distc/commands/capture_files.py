"""``distc verify CAPTURE_FOLDER`` and ``distc diff CAPTURE_FOLDER``: the files of a ``distc capture``
folder the commands take in its place (``distc shard`` and ``distc report`` take one too:
:mod:`.shard_capture`).

* ``verify CAP --ranks P``: SERIAL is the folder's input (the script's stage-0 ``before_partition``,
  what ``distc shard CAP`` lowered); with ``--startup-ranks``, ``--startup`` is each rank's own
  captured startup program.
* ``verify CAP`` alone proves Paddle's own programs of the script's stage: SERIAL its
  ``before_partition``, the ranks its ``after_reshard``, and its startup programs where captured
  (``startup_after_remove`` -> ``startup_final``).
* ``diff CAP FILE`` (either side): Paddle's program of the script's stage for FILE's rank
  (``--rank``, else FILE's name, else the first captured rank), ``dense`` when FILE is dense, else
  ``after_reshard``.

A rank the folder does not hold, or holds only Paddle's refusal of (``sS.rR.error.txt``), is a
located error naming what the folder does hold.
"""

from __future__ import annotations

import os

from ..syntax.diagnostics import DiagnosticError


def is_capture(path: str) -> bool:
    return path != "-" and os.path.isdir(path)


def not_captured(folder: str, ranks, rank: int, need: str = "") -> DiagnosticError:
    """The error for a rank the folder does not hold (``need``: what asked for it)."""
    from .shard_ranks import format_ranks

    return DiagnosticError(f"rank {rank} was not captured: the folder holds ranks {format_ranks(sorted(ranks))} "
                           f"(`distc capture --ranks {rank} ...` adds it){need}", filename=folder)


def manifest(folder: str) -> dict:
    from ..capture.folder import read_manifest

    return read_manifest(folder)


def captured_file(folder: str, man: dict, pattern: str, rank: int, what: str) -> str:
    """``folder/pattern`` for ``rank``; a located error if the folder lacks it: the rank was not
    captured, or Paddle refused the stage there (its message), or the snapshot was not printed."""
    name = pattern.replace("{rank}", str(rank))
    path = os.path.join(folder, name)
    if os.path.isfile(path):
        return path
    if rank not in set(man.get("ranks") or ()):
        raise not_captured(folder, man.get("ranks") or (), rank, f"; {what} needs it")
    res = (man.get("rank_results") or {}).get(str(rank)) or {}
    if res.get("status") == "paddle-error" and name.startswith(f"s{res.get('stage')}."):
        raise DiagnosticError(f"Paddle refused the script's stage {res.get('stage')} on rank {rank} "
                              f"({res.get('message')}; s{res.get('stage')}.r{rank}.error.txt): no {name} to "
                              f"compare with; `distc shard {folder} --all-ranks -o 'out/main.r{{rank}}.ir'` then "
                              f"`distc verify {folder} --ranks 'out/main.r{{rank}}.ir'` proves distc's program",
                              filename=folder)
    raise DiagnosticError(f"holds no {name} ({what})", filename=folder)


def verify_files(folder: str, pattern: str | None, startup: str | None, startup_ranks: str | None,
                 ranks_of) -> tuple[str, str, str | None, str | None, str | None]:
    """``(SERIAL, rank pattern, startup, startup pattern, note)`` for ``verify FOLDER``;
    ``ranks_of(path)``: the ranks of a serial program (checked captured before any rank is read)."""
    man = manifest(folder)
    first = (man.get("ranks") or [0])[0]
    stage = int(man.get("stage") or 0)
    note = None
    if pattern is None:  # Paddle's own programs of the script's stage
        res = man.get("paddle_results") or {}
        serial = captured_file(folder, man, res.get("before_partition", ""), first, "SERIAL")
        pattern = os.path.join(folder, res.get("after_reshard", ""))
        for r in ranks_of(serial):
            captured_file(folder, man, res.get("after_reshard", ""), r, "verify of Paddle's programs")
        if startup is None and startup_ranks is None and all(
                os.path.isfile(os.path.join(folder, res.get(k, "").replace("{rank}", str(r))))
                for r in ranks_of(serial) for k in ("startup_after_remove", "startup_final")):
            startup = os.path.join(folder, res["startup_after_remove"])
            startup_ranks = os.path.join(folder, res["startup_final"])
        note = (f"Paddle's own programs of the script's stage {stage}: {pattern} against {serial}"
                + (f", startup {startup_ranks} against {startup}" if startup else ""))
        return serial, pattern, startup, startup_ranks, note
    inputs = man.get("inputs") or {}
    serial = captured_file(folder, man, inputs.get("main", ""), first, "SERIAL")
    if startup_ranks is not None and startup is None:  # each rank's own captured startup program
        for r in ranks_of(serial):
            captured_file(folder, man, inputs.get("startup", ""), r, "--startup-ranks")
        startup = os.path.join(folder, inputs["startup"])
    return serial, pattern, startup, startup_ranks, note


def diff_file(folder: str, rank: int | None, other_dense: bool) -> str:
    """The file of ``folder`` that ``distc diff FOLDER FILE`` compares with FILE (of ``rank``)."""
    man = manifest(folder)
    r = rank if rank is not None else (man.get("ranks") or [0])[0]
    res = man.get("paddle_results") or {}
    what = "dense" if other_dense else "after_reshard"
    return captured_file(folder, man, res.get(what, ""), r, f"diff against Paddle's {what} program")
