"""CLI commands that drive a whole pipeline (``reshard``, ``shard``, ``verify``), each in its own
module, imported only when that command runs (so ``verify``'s numpy costs ``shard`` nothing)."""

from __future__ import annotations

import importlib

# command name (= module name) -> the first sentence of its help: `distc --help` lists the commands
# from here, importing none (verify's would bring numpy; tests/test_cli.py holds each to its command)
SUMMARY = {
    "reshard": "Lower dist_op.reshard ops for a rank as Paddle 3.3.1 does, or explore one reshard.",
    "shard": "ZeRO-shard the optimizer of MAIN (and of its startup program) at parity with Paddle 3.3.1.",
    "verify": "Prove that the per-rank programs compute the serial (global-view) training step.",
    "diff": "Compare programs A and B op by op (- is stdin); exit 0 same, 1 different or bad input, 2 usage.",
    "report": "Write one HTML page showing how MAIN shards: memory per rank, traffic between ranks, collectives "
              "per group, schedules, decisions and warnings.",
    "capture": "Run a Paddle auto-parallel training script once per rank, on this machine's CPU, and keep distc's "
               "inputs and Paddle's own programs for every rank in one folder.",
    "schedule": "Compare pipeline schedules on a modelled clock: step time, bubble, peak activations.",
}
NAMES = tuple(SUMMARY)
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
