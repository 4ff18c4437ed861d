"""``distc shard CAPTURE_FOLDER``: MAIN given as a ``distc capture`` folder.

The folder's manifest names distc's inputs (the script's stage-0 ``before_partition`` and
``startup_after_remove`` of every rank) and what the script asked of Paddle.  Options the user did
not give are taken from it: ``--stage``, the sharding mesh dim (``--mesh-dims``/``--axis``),
``--amp``, the ranks (``--ranks``: those captured, unless ``--rank``/``--all-ranks`` is given) and,
with ``--startup-out``, ``--startup`` (each rank's own startup program).
"""

from __future__ import annotations

import os

import click
from click.core import ParameterSource


def capture_defaults(main_file: str, opts: dict) -> tuple[str, dict]:
    """``(MAIN, opts)`` with a capture folder resolved; anything else is returned as it is."""
    if main_file == "-" or not os.path.isdir(main_file):
        return main_file, opts
    from ..capture.folder import read_manifest, shard_options
    from .shard_ranks import format_ranks

    man = read_manifest(main_file)
    ctx = click.get_current_context(silent=True)

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
    if out.get("rank") is None and not out.get("all_ranks") and out.get("rank_list") is None:
        out["rank_list"] = format_ranks(man["ranks"])
    first = man["ranks"][0] if out.get("rank") is None else out["rank"]
    return os.path.join(main_file, man["inputs"]["main"].replace("{rank}", str(first))), out
