"""Parsing PIR text into a :class:`~distc.ir.Program`.

Two paths build the same IR through one :class:`Builder`:

* the **fast path** reads ordinary op lines with one regular expression and parses the type lists
  and attribute dictionaries through caches (a real dump repeats a few dozen type spellings and
  dist attributes thousands of times; the caches live for one call: one file, all its programs,
  and no call sees another's); anything it has not seen before is parsed by the grammar's
  ``type_list``/``attr`` rules;
* the **full path** parses the whole text with the Lark grammar.  It runs whenever the fast path
  meets a line it does not know, and it produces every error message, so diagnostics always
  come from the grammar, with exact lines and columns.

``tests/test_parser_paths.py`` checks that both paths give identical IR.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from collections.abc import Iterator

from ...ir.core import Program
from ...ir.style import Style
from .. import regex
from ..diagnostics import DiagnosticError
from ..regex import LazyPattern
from .fast import FastParser, _Fallback, _Resume
from .leaves import Refused, check_nesting
from .full import FullParser
from .names import Builder
from .programs import _opener, normalize_newlines, program_core, program_spans, span_lines

__all__ = ["Builder", "FastParser", "FullParser", "collector_off", "detect_style", "parse", "parse_program",
           "parse_programs"]


def parse(text: str, filename: str | None = None, *, fast: bool = True, progress=None) -> Program:
    """Parse PIR text holding one program.  Errors raise :class:`DiagnosticError` located in
    ``filename`` (a file of several programs is one: it lists them; see :func:`parse_program`).

    ``progress``, if given, is called now and then with the number of characters read."""
    text, newline = normalize_newlines(text)
    if fast:  # (an ordinary dump: its one program found while the fast path reads it)
        prog = _parse_one(text, filename, fast, progress, newline, whole=lambda: _one_program(text))
        if prog is not None:
            return prog
    cores: list = []
    spans = program_spans(text, cores)
    if len(spans) > 1:
        raise _several(text, spans, filename)
    return _parse_span(text, 0, len(text), filename, fast, newline, progress, core=cores[0])


def _one_program(text: str) -> bool:
    """Whether :func:`parse` reads ``text`` as one program spanning it all (one span, from its
    opening line to its closing one: no log text around)."""
    cores: list = []
    return len(program_spans(text, cores)) == 1 and cores[0] == (0, len(text)) and "{" in text


def parse_programs(text: str, filename: str | None = None, *, fast: bool = True) -> list[Program]:
    """Every program of a file (GLOG logs hold several); printed one after the other they give
    the text back."""
    text, newline = normalize_newlines(text)
    spans = program_spans(text)
    return _spans_parsed(text, spans, filename, fast, newline)


def parse_program(text: str, filename: str | None = None, index: int | None = None, *, fast: bool = True,
                  progress=None) -> Program:
    """The program a command works on: the only one, or the ``index``-th (1-based, ``--program K``)."""
    if index is None:
        return parse(text, filename, fast=fast, progress=progress)
    text, newline = normalize_newlines(text)
    spans = program_spans(text)
    if not 1 <= index <= len(spans):
        raise DiagnosticError(f"--program {index}: the file holds {len(spans)} program(s)", filename=filename,
                              notes=_listing(text, spans))
    return _parse_span(text, *spans[index - 1], filename, fast, newline, progress)


def _several(text: str, spans, filename) -> DiagnosticError:
    line = text.count("\n", 0, program_core(text, *spans[1])[0]) + 1
    e = DiagnosticError(f"this file holds {len(spans)} programs; choose one with --program K", line, 1,
                        notes=_listing(text, spans))
    return e.located(filename, text)


def _listing(text: str, spans) -> list[str]:
    cores = [program_core(text, s, e) for s, e in spans]
    return [f"program {k}: lines {a}-{b}" for k, (a, b) in enumerate(span_lines(text, cores), 1)]


def _parse_span(text: str, s: int, e: int, filename, fast: bool, newline: str, progress=None,
                lines_before: int | None = None, fast_parser: FastParser | None = None,
                core: tuple[int, int] | None = None) -> Program:
    """The program in ``text[s:e]`` (the log text before its opening line becomes its head, the
    text after its closing line its tail), located in the whole file: its line numbers are
    shifted by the lines before it (``lines_before``: the count up to ``s``, if known; ``core``:
    the span's :func:`program_core`, if known)."""
    a, b = core if core is not None else program_core(text, s, e)
    if a == s and text.find("{", s, e) < 0:
        raise DiagnosticError("no PIR program here: a program is a line ending in '{', its ops and a '}' line",
                              text.count("\n", 0, s) + 1, 1, filename=filename, source=text)
    if a == 0 and b == len(text):
        return _parse_one(text, filename, fast, progress, newline, fast_parser)
    if lines_before is None:
        lines_before = text.count("\n", 0, s)
    off = lines_before + text.count("\n", s, a)
    try:
        prog = _parse_one(text[a:b], filename, fast, progress, newline, fast_parser)
    except DiagnosticError as err:
        if err.line is not None:
            err.line += off
            err.source = text
        raise
    if off:
        for op in prog.walk():
            if op.loc is not None:
                op.loc = (op.loc[0] + off, op.loc[1])
    prog.head = text[s:a] + prog.head
    prog.tail += text[b:e]
    return prog


def _spans_parsed(text: str, spans, filename, fast: bool, newline: str) -> list[Program]:
    out = []
    lines = 0
    prev = 0
    fp = FastParser()  # one set of caches for the file's programs (a log repeats their types)
    for s, e in spans:
        lines += text.count("\n", prev, s)
        prev = s
        out.append(_parse_span(text, s, e, filename, fast, newline, lines_before=lines, fast_parser=fp))
    return out


@contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off while a big program is built (a parse, ``distc shard``):
    it leaves almost no cyclic garbage, and with the collector on every 700 new ops, results and
    lists rescan the young objects, and now and then all of the program (a fifth of a parse of
    mlp680).  Back on afterwards, if it was on (a library user's process is left as it was).

    What was built meanwhile goes to the oldest generation at once (``gc.freeze()`` then
    ``gc.unfreeze()``: two list splices): else the collector's first run after it is back on
    scans every object of the program as young (a tenth of mlp680's parse + print, 0.16 s CPU of
    mlp256's one-rank ``distc shard``, at its very end).  They stay collectable, by the full
    collections.  Not when the process holds frozen objects of its own (they stay frozen)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _parse_one(text: str, filename, fast: bool, progress, newline: str,
               fast_parser: FastParser | None = None, whole=None) -> Program | None:
    """The program ``text`` holds (all of it: no log text around); with ``whole``, None where
    ``whole()`` says it is not that (called only where the fast path did not find it so)."""
    with collector_off():
        return _parse_one_body(text, filename, fast, progress, newline, fast_parser, whole)


def _parse_one_body(text: str, filename, fast: bool, progress, newline: str,
                    fast_parser: FastParser | None, whole=None) -> Program | None:
    prog = None
    facts = None
    if fast:
        try:
            fp = fast_parser or FastParser()
            try:  # (with ``whole``: read as one program by the fast path, or found one now; else the caller's way)
                prog = fp.parse(text, filename, progress)
            except Exception:
                if whole is not None and not whole():
                    return None
                raise
            if whole is not None and not (fp.whole and _opener(text, 0, len(text)) == 0) and not whole():
                return None
            facts = fp.facts
        except _Resume as r:  # the grammar reads on from the line the fast path does not know
            try:
                try:
                    check_nesting(text[r.offset:])  # (what the grammar reads: it starts on a line)
                except Refused as e:
                    e.line += r.line
                    raise
                prog = FullParser().resume(text, r)
            except DiagnosticError as e:
                raise e.located(filename, text) from None
            except Exception:  # noqa: BLE001 - the grammar reads the whole text instead
                prog = None
        except Refused as e:  # what no program holds: said at once, the grammar would say it slowly
            raise e.located(filename, text) from None
        except (_Fallback, DiagnosticError, Exception):  # noqa: BLE001 - the grammar decides
            prog = None
    if prog is None:
        try:
            prog = FullParser().parse(check_nesting(text), filename)
        except DiagnosticError as e:
            raise e.located(filename, text) from None
    prog.style = detect_style(text, prog, facts)
    prog.style.newline = newline
    return prog


def detect_style(text: str, prog: Program, facts: tuple[bool, bool] | None = None) -> Style:
    """The print style of ``text``, parsed as ``prog`` (attribute texts the parser left unread
    are not read: their parse knows whether any has its keys out of order).  ``facts``: the
    numbering and key order (``renumber``, ``sorted_attrs``) as the fast path found them while
    reading (:attr:`FastParser.facts`), else they are found here, walking the program."""
    s = Style()
    h = min(len(text), _HEAD)  # (what the first 200,000 characters hold: found in the text, no copy)
    s.typed_attrs = _TYPED.search(text, 0, h) is not None
    if text.find("builtin.tensor<", 0, h) >= 0:
        s.tensor_prefix = "builtin.tensor"
    elif text.find("pd_op.tensor<", 0, h) >= 0:
        s.tensor_prefix = "pd_op.tensor"
    d = text.find("pd_dist.tensor<", 0, h)
    has_dist = d >= 0
    s.placements = (text.find("placements:[", 0, h) >= 0) if has_dist else not s.typed_attrs
    s.chunk_id = (text.find(",chunk_id:", 0, h) >= 0) if text.find("op_dist_attr:{", 0, h) >= 0 else not s.typed_attrs
    if has_dist and text.find("process_ids:", d + 15, min(d + 315, h)) < 0:
        s.dist_form = "nopids"
    s.double_fill = not s.typed_attrs or text.find("(Float)", 0, h) < 0 or text.find("(Double)", 0, h) >= 0
    if facts is not None:
        s.renumber, s.sorted_attrs = facts
    else:
        s.renumber, s.sorted_attrs = _numbering(prog)
    for op in prog.block.ops:
        if op.indent is not None:
            s.indent = op.indent or "    "
            break
    return s


def _numbering(prog: Program) -> tuple[bool, bool]:
    """Whether the numbered results of ``prog`` are %0, %1, ... in order (the others plain
    names), and whether the keys of every attribute dict are sorted."""
    sorted_ok = True
    canonical = True  # the numbered results are %0, %1, ... in order, the others plain names
    n = 0
    seen: set[int] = set()  # attribute dicts are shared between ops read alike: each checked once
    for op in prog.walk():
        attrs = op._attrs
        if attrs is None:
            if op._reader.unsorted:
                sorted_ok = False
        elif sorted_ok and id(attrs) not in seen:
            seen.add(id(attrs))
            keys = list(attrs)
            if keys != sorted(keys):
                sorted_ok = False
        if canonical:
            for r in op.results:
                name = r.name
                if name is None:
                    continue
                if name.isdigit():
                    if name != str(n):
                        canonical = False
                        break
                    n += 1
                elif not _NAMED.fullmatch(name):
                    canonical = False
                    break
        elif not sorted_ok:
            break
    return canonical, sorted_ok


_NAMED = LazyPattern(r"[A-Za-z_][\w.@]*")
_HEAD = 200_000  # the print style is found in a program's first characters
_TYPED = regex.compile(r"\((?:Int32\)|Int64\)|pd_op\.|Float\)|Double\)|Bool\))")  # typed attribute values: (Int32)1
