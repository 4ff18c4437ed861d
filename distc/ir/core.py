"""The IR: a program is a block of operations; operations own regions of blocks; values keep
use-def chains.  Operations, blocks and values are mutable and compared by identity; types and
attributes are immutable values.

This module is where the rest of distc takes the IR's classes from; each is defined in the module
of its concept: :mod:`.operation` (an op, its operands, results, attributes and source line),
:mod:`.block` (blocks and regions: ordered op lists), :mod:`.program` (the program, its walks, the
printer hook), :mod:`.values` (values and their uses).

Every operation remembers the source line it was parsed from.  As long as nothing about the
operation (or the types of its operands) changes, the printer emits that line as it was, so
untouched parts of a program print back byte for byte and fast.
"""

from __future__ import annotations

from .block import Block, Region
from .operation import _ABSENT, Operation
from .program import Program, set_printer
from .values import BlockArgument, OpResult, Value

__all__ = ["Block", "BlockArgument", "Operation", "OpResult", "Program", "Region", "Value", "set_printer", "_ABSENT"]
