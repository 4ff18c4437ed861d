"""CLI commands that drive a whole pipeline (``reshard``, ``shard``, ``verify``), each in its own
module, imported only when that command runs (so ``verify``'s numpy costs ``shard`` nothing)."""

from __future__ import annotations

import importlib

NAMES = ("reshard", "shard", "verify", "diff", "report", "capture", "schedule")  # command name = module name
ELSEWHERE = {"capture": "distc.capture.command"}  # commands whose module is not in this package


def load(name: str):
    """The click command ``name``, or None (not a pipeline command, or not written yet)."""
    if name not in NAMES:
        return None
    module = ELSEWHERE.get(name, f"{__name__}.{name}")
    try:
        if name == "capture":
            return importlib.import_module("distc.capture.command").command
        return importlib.import_module(f"{__name__}.{name}").command
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        return None
