"""``distc shard CAPTURE_FOLDER``: MAIN given as a ``distc capture`` folder.

The folder's manifest names distc's inputs (the script's stage-0 ``before_partition`` and
``startup_after_remove`` of every rank) and what the script asked of Paddle.  Options the user did
not give are taken from it: ``--stage``, the sharding mesh dim (``--mesh-dims``/``--axis``),
``--amp``, the ranks (``--ranks``: those captured, unless ``--rank``/``--all-ranks`` is given) and,
with ``--startup-out``, ``--startup`` (each rank's own startup program).  A rank asked for by
``--rank``/``--ranks`` that the folder does not hold is an error naming the ranks it holds.
``distc report FOLDER`` takes the same defaults.
"""

from __future__ import annotations

import os

from .. import cmdline
from ..cmdline import ParameterSource


def capture_defaults(main_file: str, opts: dict) -> tuple[str, dict]:
    """``(MAIN, opts)`` with a capture folder resolved; anything else is returned as it is."""
    if main_file == "-" or not os.path.isdir(main_file):  # (capture_files.is_capture, not imported by a plain run)
        return main_file, opts
    from ..capture.folder import read_manifest, shard_options
    from .capture_files import not_captured
    from ..syntax.diagnostics import DiagnosticError
    from .shard_ranks import format_ranks

    man = read_manifest(main_file)
    captured = set(man["ranks"])
    missing = first_missing(opts, captured)
    if missing is not None:
        raise not_captured(main_file, captured, missing)
    ctx = cmdline.get_current_context(silent=True)

    def given(name: str) -> bool:
        src = ctx.get_parameter_source(name) if ctx is not None else None
        return src not in (None, ParameterSource.DEFAULT)

    implied = shard_options(man)
    out = dict(opts)
    if not given("stage"):
        out["stage"] = int(man.get("stage") or 0)
    if out["stage"] and not given("axis") and not given("mesh_dims") and "--axis" in implied:
        out["axis"] = implied[implied.index("--axis") + 1]
        if "--mesh-dims" in implied:
            out["mesh_dims"] = implied[implied.index("--mesh-dims") + 1]
    if not given("amp") and "--amp" in implied:
        out["amp"] = True
    if out.get("startup_out") is not None and out.get("startup") is None:
        out["startup"] = os.path.join(main_file, man["inputs"]["startup"])
        every = sorted({r for m in man.get("meshes") or () for r in m["process_ids"]} - captured)
        if out.get("all_ranks") and every:  # each rank's startup program is its own capture
            raise DiagnosticError(f"--all-ranks with --startup-out needs every rank's startup program: rank {every[0]} "
                                  f"was not captured (the folder holds ranks {format_ranks(sorted(captured))}); "
                                  "give --ranks, or capture every rank", filename=main_file)
    if out.get("rank") is None and not out.get("all_ranks") and out.get("rank_list") is None:
        out["rank_list"] = format_ranks(man["ranks"])
    first = man["ranks"][0] if out.get("rank") is None else out["rank"]
    return os.path.join(main_file, man["inputs"]["main"].replace("{rank}", str(first))), out


def first_missing(opts: dict, captured: set[int]) -> int | None:
    """The first rank ``--rank``/``--ranks`` asks for that is not in ``captured`` (each range is
    walked only until a rank outside ``captured``: ``--ranks 0-99999999999`` costs nothing)."""
    from .shard_ranks import parse_ranks

    if opts.get("rank") is not None:
        return None if opts["rank"] in captured or opts["rank"] < 0 else opts["rank"]  # < 0: a usage error later
    for rg in parse_ranks(opts["rank_list"]) if opts.get("rank_list") is not None else ():
        for r in rg:
            if r not in captured:
                return r
    return None
