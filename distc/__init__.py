"""distc: a compiler for PaddlePaddle's distributed PIR programs (read, rewrite, print).

Layers, bottom-up (each imports only from itself and below; ``tests/test_layers.py``):
``ir`` (programs, types, dist attributes, builder) -> ``syntax`` (parser, printer) ->
``dialects`` (Paddle's op names, collectives, optimizer table, SPMD rules) -> ``analysis``
(verifier, cost, memory, simulator, diff) -> ``passes`` (one file a pass; ``passes.paddle_api`` the
one op builder) -> ``pipeline`` (the library's shard pipeline) -> ``driver`` -> ``commands`` / ``cli``.

This module is the library's face: ``distc.parse``, ``distc.print_program`` and ``distc.shard``
(:func:`distc.pipeline.shard`; ``shard_ranks``, ``ShardOptions``, ``ShardPipeline`` with it),
the pipeline imported when first used, so that reading and printing programs costs no passes.
"""

from __future__ import annotations

__version__ = "0.1.0"  # the one place the version is written (pyproject reads it from here)

from .ir.core import Block, BlockArgument, Operation, OpResult, Program, Region, Value
from .syntax.diagnostics import DiagnosticError
from .syntax.parser import parse
from .syntax.printer import print_program

_PIPELINE = ("RankResult", "ShardOptions", "ShardPipeline", "ShardResult", "shard", "shard_ranks")

__all__ = [
    "Block", "BlockArgument", "DiagnosticError", "Operation", "OpResult", "Program", "Region", "Value",
    "parse", "print_program", "__version__", *_PIPELINE,
]


def __getattr__(name: str):
    if name in _PIPELINE:
        from . import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'distc' has no attribute {name!r}")
