"""Files holding several programs (GLOG logs, ``reshard --all-ranks`` output: a program, ``// ...``
lines, another program) and CRLF files.

A program ends at a ``}`` line in column 0 (Paddle indents everything inside a program) when the
next line that is not blank or a ``//`` comment opens another program (``{`` at its end, perhaps
after a banner such as ``IR after lowering = ``).  The lines between two programs belong to the
second one's head, trailing lines to the last one's tail, so printing the programs one after the
other gives the file back byte for byte."""

from __future__ import annotations

import re

_NON_TRIVIA = re.compile(r"^[ \t]*(?!//)\S", re.M)


def normalize_newlines(text: str) -> tuple[str, str]:
    """``(text with LF line ends, the file's line end)``: a file whose every line ends in CRLF is
    read as LF and printed back with CRLF."""
    if "\r\n" in text and text.count("\n") == text.count("\r\n"):
        return text.replace("\r\n", "\n"), "\r\n"
    return text, "\n"


def opens_program(line: str) -> bool:
    s = line.rstrip(" \t")
    return s.endswith("{") and "{" not in s[:-1] and "(" not in s[:-1]


def program_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each program in ``text`` (one span for an ordinary file)."""
    spans: list[tuple[int, int]] = []
    start = 0
    pos = 0
    n = len(text)
    while True:
        k = text.find("\n}", pos)
        if k < 0:
            break
        e = text.find("\n", k + 1)
        e = n if e < 0 else e
        pos = e
        if text[k + 2:e].strip(" \t"):
            continue  # '}' followed by more on its line: not a program's end
        m = _NON_TRIVIA.search(text, e)
        if m is None:
            break  # only trivia after it: the last program
        line_end = text.find("\n", m.start())
        if not opens_program(text[m.start():n if line_end < 0 else line_end]):
            continue
        spans.append((start, e + 1))
        start = e + 1
    spans.append((start, n))
    return spans


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
