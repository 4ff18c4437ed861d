"""Files holding several programs (GLOG logs, ``print(program)`` output, the pass manager's IR
printing, ``reshard --all-ranks`` output) and CRLF files.

A program opens at a line ending in ``{`` (or ``{ // comment``; perhaps after a banner such as ``IR after lowering = ``)
whose next line that is not blank or a ``//`` comment is an op line, a block header or a ``}``.
It ends at a ``}`` line in column 0 (Paddle indents everything inside a program) after which the
next such line is not an op line, a block header or a ``}`` (a region closed in column 0 by a
hand-indented dump is followed by more ops).  Any text may stand between programs (log lines,
IR-printing banners): it belongs to the next program's head, text after the last program to its
tail, so printing the programs one after the other gives the file back byte for byte."""

from __future__ import annotations

from .. import regex
from ..regex import LazyPattern

_NON_TRIVIA = regex.compile(r"^[ \t]*(?!//)\S", regex.M)
# a line ending in '{' (or '{ // comment': '{ // Kernel Dialect'), not an op line (a region op)
_OPENER = regex.compile(r"^(?![ \t]*\()[^{\n]*\{[ \t]*(?://[^\n]*)?$", regex.M)
_OPISH = regex.compile(r'[ \t]*(?:\([^()\n]*\) = "|\^|\})')
_COLUMN0_CLOSE = LazyPattern(r"\n\}")  # (a regex finds it 4x faster than str.find: '}' is on every line)


def normalize_newlines(text: str) -> tuple[str, str]:
    """``(text with LF line ends, the file's line end)``: a file whose every line ends in CRLF is
    read as LF and printed back with CRLF."""
    if "\r" in text and "\r\n" in text and text.count("\n") == text.count("\r\n"):  # ('\r': one memchr)
        return text.replace("\r\n", "\n"), "\r\n"
    return text, "\n"


def _next_content(text: str, pos: int) -> int:
    """Offset of the next line from ``pos`` that is not blank or a ``//`` comment (-1: none)."""
    m = _NON_TRIVIA.search(text, pos)
    if m is None:
        return -1
    return text.rfind("\n", 0, m.start()) + 1


def _opener(text: str, pos: int, end: int) -> int:
    """Start of the first line in ``[pos, end)`` that opens a program (-1: none)."""
    while True:
        m = _OPENER.search(text, pos, end)
        if m is None:
            return -1
        k = _next_content(text, m.end())
        if k >= 0 and _OPISH.match(text, k):
            return m.start()
        pos = m.end() + 1


def _close(text: str, a: int, end: int) -> int:
    """Offset just after the ``}`` line that closes the program opened at ``a`` (-1: none)."""
    pos = text.find("\n", a, end)
    search = _COLUMN0_CLOSE.search
    while pos >= 0:
        m = search(text, pos, end)
        if m is None:
            return -1
        k = m.start()
        e = text.find("\n", k + 1, end)
        e = end if e < 0 else e
        pos = e
        if text[k + 2:e].strip(" \t"):
            continue  # '}' followed by more on its line ('} else {'): not a program's end
        c = _next_content(text, e)
        if c < 0 or c >= end or not _OPISH.match(text, c):
            return min(e + 1, end)
        if e >= end:
            return -1
    return -1


def program_spans(text: str, cores: list | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each program in ``text`` (one span for an ordinary file);
    ``cores``, if given, gets each span's :func:`program_core` (found on the way)."""
    spans: list[tuple[int, int]] = []
    n = len(text)
    start = 0
    core = (0, n)
    a = _opener(text, 0, n)
    while a >= 0:
        b = _close(text, a, n)
        core = (a, n if b < 0 else b)
        if b < 0:
            break  # no closing line: this program runs to the end (and fails there, located)
        a = _opener(text, b, n)
        if a < 0:
            break  # only log text after it: the last program's tail
        spans.append((start, b))
        if cores is not None:
            cores.append(core)
        core = (b, n)
        start = b
    spans.append((start, n))
    if cores is not None:
        cores.append(core)
    return spans


def program_core(text: str, s: int, e: int) -> tuple[int, int]:
    """Within the span ``[s, e)``: the start of its program's opening line and the end of its
    closing line (the text around them is log text, kept as the program's head and tail)."""
    a = _opener(text, s, e)
    if a < 0:
        return s, e
    b = _close(text, a, e)
    return a, e if b < 0 else b


def span_lines(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """1-based first and last line of each span."""
    out = []
    line = 1
    prev = 0
    for s, e in spans:
        line += text.count("\n", prev, s)
        last = line + text.count("\n", s, e) - (1 if e > s and text[e - 1] == "\n" else 0)
        out.append((line, last))
        prev = s
    return out
