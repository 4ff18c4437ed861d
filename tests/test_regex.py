"""distc.syntax.regex: patterns made from their compiled form (distc.syntax.regex_table) are the
patterns ``re.compile`` makes, the table is what ``table_source`` writes, and anything else
compiles with ``re`` as before."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from distc.syntax import regex, regex_table

ROOT = Path(__file__).resolve().parent.parent

# the command of distc.syntax.regex's docstring
WRITE = ("import distc.cli, distc.commands.shard, distc.pipeline.shard; from distc.syntax import regex\n"
         'print(regex.table_source(), end="")')


def test_the_table_is_what_table_source_writes():
    """The file is the generator's output for the modules a shard run imports (rewrite it with the
    docstring's command after changing a pattern); a table for another SRE engine is not used."""
    assert WRITE.replace("\n", "\n    ") in regex.__doc__
    r = subprocess.run([sys.executable, "-c", WRITE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    if regex._USABLE:
        assert r.stdout == Path(regex_table.__file__).read_text(), (
            "distc/syntax/regex_table.py is stale: rewrite it with the command in distc.syntax.regex's docstring")
    else:  # (another Python: the table written for 3.11's engine is left alone, re compiles)
        assert regex_table.SRE != (regex._sre.MAGIC, regex._sre.CODESIZE, sys.byteorder)
    assert len(regex_table.PATTERNS) >= 30


@pytest.mark.parametrize("pattern", sorted(regex_table.PATTERNS))
def test_each_entry_is_what_re_compiles(pattern):
    """``==`` of two patterns compares their text, flags and SRE code; groups and names too."""
    flags = regex_table.PATTERNS[pattern][0]
    got, want = regex.compile(pattern, flags), re.compile(pattern, flags)
    assert got == want and hash(got) == hash(want)
    assert (got.groups, dict(got.groupindex), got.flags) == (want.groups, dict(want.groupindex), want.flags)
    if regex._USABLE:
        assert got is not want  # (made from the table, not re's cache)
    lazy = regex.LazyPattern(pattern, flags)
    assert lazy.pattern == pattern and lazy.flags == want.flags


def test_patterns_made_from_the_table_match():
    """A pattern from the table finds what re's does (named groups, flags given, a possessive run)."""
    for p, text in [(r"^[ \t]*(?!//)\S", "  // c\n  x\n"), (r'"[^"\\\n]*+"', 'a:"b",c:"d"'),
                    (r"Shard\(dim=(\d+)\)|Replicate\(\)|Partial\(reduce_type=([A-Z]+)\)", "Replicate(),Shard(dim=1)")]:
        flags = regex_table.PATTERNS[p][0]
        assert p in regex_table.PATTERNS
        a, b = regex.compile(p, flags), re.compile(p, flags)
        assert [m.span() + m.groups() for m in a.finditer(text)] == [m.span() + m.groups() for m in b.finditer(text)]
        assert a.sub("-", text) == b.sub("-", text) and a.split(text) == b.split(text)


def test_what_the_table_lacks_compiles_with_re(monkeypatch):
    """A pattern not in the table, one with other flags, or any with a table for another engine:
    ``re.compile``'s pattern itself."""
    p = next(iter(regex_table.PATTERNS))
    assert regex.compile(r"(?P<n>a+)b", 0) is re.compile(r"(?P<n>a+)b")
    other = regex_table.PATTERNS[p][0] ^ re.I
    assert regex.compile(p, other) is re.compile(p, other)
    monkeypatch.setattr(regex, "_USABLE", False)
    assert regex.compile(p, regex_table.PATTERNS[p][0]) is re.compile(p, regex_table.PATTERNS[p][0])


def test_flags_are_re_flags():
    assert (regex.M, regex.S, regex.MULTILINE, regex.DOTALL) == (re.M, re.S, re.M, re.S)
