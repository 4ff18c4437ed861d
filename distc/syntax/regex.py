"""Regular expressions compiled before the run: ``re``'s compiler is Python code, and compiling the
parser's patterns on import was ~7 ms of every ``distc shard``'s start-up (importing ``re``, with
``enum`` and its parser and compiler, ~4 ms more).

:func:`compile` gives what ``re.compile`` gives (``==``: the same pattern text, flags and SRE code),
made by ``_sre.compile`` -- the C engine ``re.compile`` itself ends in -- from the compiled form kept
in :mod:`distc.syntax.regex_table`, when the table holds the pattern with those flags and was
written for this engine (``_sre.MAGIC``, its code size, the byte order); else (a pattern not in the
table, another Python) by ``re.compile``.  :class:`LazyPattern` compiles where first used.

The table holds every pattern kept at the top level (or in a dict, list or tuple there) of the
modules a ``distc shard`` run imports; :func:`table_source` writes it from the modules loaded::

    python -c 'import distc.cli, distc.commands.shard, distc.pipeline.shard; from distc.syntax import regex
    print(regex.table_source(), end="")' > distc/syntax/regex_table.py

``tests/test_regex.py`` holds the file to that and each entry to ``re.compile``, and a shard run to
importing no ``re``.  A pattern that is not in the table works as before, compiled by ``re``.
"""

from __future__ import annotations

import _sre
import sys

from .regex_table import PATTERNS, SRE

# re's flag values (re.M, re.S: the same in every Python 3)
M = MULTILINE = 8
S = DOTALL = 16

_USABLE = SRE == (_sre.MAGIC, _sre.CODESIZE, sys.byteorder)


def compile(pattern: str, flags: int = 0):  # noqa: A001 - re.compile's name and meaning
    """``re.compile(pattern, flags)``: from the table without compiling, when it holds the pattern."""
    entry = PATTERNS.get(pattern) if _USABLE else None
    if entry is None or entry[0] != flags:
        import re

        return re.compile(pattern, flags)
    _, final, code, groups, groupindex, indexgroup = entry
    return _sre.compile(pattern, final, memoryview(code).cast("I").tolist(), groups, dict(groupindex), indexgroup)


class LazyPattern:
    """A regular expression compiled where it is first used: the parser's patterns for what an
    ordinary dump never holds (deep nesting, long number lists, value lists of thousands, joined
    lines ...).  From its first use on it is the compiled pattern's methods (instance attributes:
    no lookup through here again; two threads using it first both compile it, to the same)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str):
        rx = compile(*self._args)
        for k in ("match", "fullmatch", "search", "finditer", "findall", "sub", "split", "pattern", "flags"):
            setattr(self, k, getattr(rx, k))
        return getattr(rx, name)


def found_patterns() -> dict[str, int]:
    """Every pattern (text -> flags as given) kept at the top level of the loaded modules of distc
    (or in a dict, list or tuple there): compiled ones and :class:`LazyPattern` ones."""
    import re
    from re import _parser

    found: dict[str, int] = {}
    for name in sorted(m for m in sys.modules if m == "distc" or m.startswith("distc.")):
        for v in list(vars(sys.modules[name]).values()):
            for x in (v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else (v,)):
                if isinstance(x, LazyPattern):
                    found.setdefault(*x._args)
                elif isinstance(x, re.Pattern) and isinstance(x.pattern, str):  # flags given: not those it adds
                    found.setdefault(x.pattern, x.flags & ~_parser.parse(x.pattern, 0).state.flags)
    return found


def table_source() -> str:
    """The text of :mod:`distc.syntax.regex_table`: each of :func:`found_patterns` as ``re`` compiles
    it (what ``re._compiler.compile`` hands ``_sre.compile``), the SRE code as bytes."""
    from array import array
    from re import _compiler, _parser

    doc = sys.modules[f"{__package__}.regex_table"].__doc__
    out = [f'"""{doc}"""', "", "# fmt: off", "",
           f"SRE = {(_sre.MAGIC, _sre.CODESIZE, sys.byteorder)!r}", "", "PATTERNS = {"]
    for pattern, flags in sorted(found_patterns().items()):
        p = _parser.parse(pattern, flags)
        code = array("I", _compiler._code(p, flags)).tobytes()
        index = [None] * p.state.groups
        for k, i in p.state.groupdict.items():
            index[i] = k
        entry = (flags, flags | p.state.flags, code, p.state.groups - 1, dict(p.state.groupdict), tuple(index))
        out.append(f"    {pattern!r}: {entry!r},")
    return "\n".join([*out, "}"]) + "\n"
