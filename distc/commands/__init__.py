"""CLI commands that drive a whole pipeline (``reshard``, ``shard``), each in its own module."""

from __future__ import annotations

import importlib

COMMANDS = []
for _name in ("reshard", "shard", "verify"):
    try:
        COMMANDS.append(importlib.import_module(f"{__name__}.{_name}").command)
    except ModuleNotFoundError as _e:  # a command not written yet
        if _e.name != f"{__name__}.{_name}":
            raise
