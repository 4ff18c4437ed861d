"""Parsing PIR text into a :class:`~distc.ir.Program`.

Two paths build the same IR through one :class:`Builder`:

* the **fast path** reads ordinary op lines with one regular expression and parses the type lists
  and attribute dictionaries through caches (a real dump repeats a few dozen type spellings and
  dist attributes thousands of times); anything it has not seen before is parsed by the grammar's
  ``type_list``/``attr`` rules;
* the **full path** parses the whole text with the Lark grammar.  It runs whenever the fast path
  meets a line it does not know, and it produces every error message, so diagnostics always
  come from the grammar, with exact lines and columns.

``tests/test_parser_paths.py`` checks that both paths give identical IR.
"""

from __future__ import annotations

import re

from ...ir.core import Program
from ...ir.style import Style
from ..diagnostics import DiagnosticError
from .fast import FastParser, _Fallback
from .full import FullParser
from .names import Builder

__all__ = ["Builder", "FastParser", "FullParser", "detect_style", "parse"]

_FAST: FastParser | None = None


def parse(text: str, filename: str | None = None, *, fast: bool = True, progress=None) -> Program:
    """Parse PIR text.  Errors raise :class:`DiagnosticError` located in ``filename``.

    ``progress``, if given, is called now and then with the number of characters read."""
    global _FAST
    prog = None
    if fast:
        if _FAST is None:
            _FAST = FastParser()
        try:
            prog = _FAST.parse(text, filename, progress)
        except (_Fallback, DiagnosticError, Exception):  # noqa: BLE001 - the grammar decides
            prog = None
    if prog is None:
        try:
            prog = FullParser().parse(text, filename)
        except DiagnosticError as e:
            raise e.located(filename, text) from None
    prog.style = detect_style(text, prog)
    return prog


def detect_style(text: str, prog: Program) -> Style:
    s = Style()
    head = text[:200_000]
    s.typed_attrs = any(t in head for t in ("(Int32)", "(Int64)", "(pd_op.", "(Float)", "(Double)", "(Bool)"))
    if "builtin.tensor<" in head:
        s.tensor_prefix = "builtin.tensor"
    elif "pd_op.tensor<" in head:
        s.tensor_prefix = "pd_op.tensor"
    has_dist = "pd_dist.tensor<" in head
    s.placements = ("placements:[" in head) if has_dist else not s.typed_attrs
    s.chunk_id = (",chunk_id:" in head) if "op_dist_attr:{" in head else not s.typed_attrs
    if has_dist and "process_ids:" not in head.split("pd_dist.tensor<", 1)[1][:300]:
        s.dist_form = "nopids"
    s.double_fill = "(Float)" not in head or "(Double)" in head
    sorted_ok = True
    canonical = True
    n = 0
    for op in prog.walk():
        keys = list(op.attrs)
        if sorted_ok and keys != sorted(keys):
            sorted_ok = False
        for r in op.results:
            if r.name is not None and r.name.isdigit():
                if r.name != str(n):
                    canonical = False
                n += 1
            elif r.name is not None and not _NAMED.fullmatch(r.name):
                canonical = False
    s.sorted_attrs = sorted_ok
    s.renumber = canonical
    for op in prog.block.ops:
        if op.indent is not None:
            s.indent = op.indent or "    "
            break
    return s


_NAMED = re.compile(r"[A-Za-z_][\w.@]*")
