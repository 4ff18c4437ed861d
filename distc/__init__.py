"""distc: a compiler for PaddlePaddle's distributed PIR programs (read, rewrite, print).

Layers, bottom-up (each imports only from itself and below; ``tests/test_layers.py``):
``ir`` (programs, types, dist attributes, builder) -> ``syntax`` (parser, printer) ->
``dialects`` (Paddle's op names, collectives, optimizer table, SPMD rules) -> ``analysis``
(verifier, cost, memory, simulator, diff) -> ``passes`` (one file a pass; ``passes.paddle_api`` the
one op builder) -> ``commands`` / ``cli`` / ``driver``.
"""

from __future__ import annotations

__version__ = "0.1.0"  # the one place the version is written (pyproject reads it from here)

from .ir.core import Block, BlockArgument, Operation, OpResult, Program, Region, Value
from .syntax.diagnostics import DiagnosticError
from .syntax.parser import parse
from .syntax.printer import print_program

__all__ = [
    "Block", "BlockArgument", "DiagnosticError", "Operation", "OpResult", "Program", "Region", "Value",
    "parse", "print_program", "__version__",
]
