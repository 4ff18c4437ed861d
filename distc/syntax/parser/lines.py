"""Op lines of the PIR text: the regular expressions that read them (the whole line, its head of
value names, region headers, closing lines, trivia) and :func:`op_match`, which reads a line's
parts without the regex's backtracking."""

from __future__ import annotations

from .. import regex
from ..regex import LazyPattern
from .names import VALUE, VALUE_OR_NULL

TYPE_CHECKING = False
if TYPE_CHECKING:  # (annotations only: a run imports no re, distc.syntax.regex)
    import re

_OP = LazyPattern(
    r'([ \t]*)\(([^()]*)\) = "([^"]+)"(?: \[id:(\d+)\])? \(([^()=]*)\) \{(.*)\} : \((.*)\) ->(?: (.*?))?[ \t]*',
    regex.S,  # an op line may hold raw newlines inside strings (joined lines)
)
_V, _VN = VALUE, VALUE_OR_NULL
# the result and operand lists are read here, checked: one way to match, possessive (*+: no
# backtracking state kept per item; a list of 800,000 results took 30x its size in the regex
# engine's stack otherwise)
_OP_HEAD = regex.compile(rf'([ \t]*)\(((?:{_V}(?:, {_V})*+)?)\) = "([^"]+)"(?: \[id:(\d+)\])? '
                         rf'\(((?:{_VN}(?:, {_VN})*+)?)\) \{{')


def op_match(text: str, pos: int = 0, end: int | None = None) -> tuple | None:
    """``_OP.fullmatch(text, pos, end).groups()`` (or ``None``) without the regex's backtracking
    over the whole line: the head is read by a regex (it has one way to match), the attributes
    end at the last ``} : (`` and the input types at the last ``) ->`` after which the rest fits,
    as the greedy groups would."""
    if end is None:
        end = len(text)
    m = _OP_HEAD.match(text, pos, end)
    return None if m is None else op_tail(text, m, end)


def op_tail(text: str, m: re.Match, end: int) -> tuple | None:
    """:func:`op_match` of a line whose head ``m`` read (up to ``end``)."""
    h = m.end()
    k = text.rfind("} : (", h, end)
    while k >= 0:
        j = text.rfind(") ->", k + 5, end)
        while j >= 0:
            a = j + 4
            if a == end:
                return (*m.groups(), text[h:k], text[k + 5:j], None)
            c = text[a]
            if c == " ":
                return (*m.groups(), text[h:k], text[k + 5:j], text[a + 1:end].rstrip(" \t"))
            if not text[a:end].strip(" \t"):
                return (*m.groups(), text[h:k], text[k + 5:j], None)
            j = text.rfind(") ->", k + 5, j + 3)
        k = text.rfind("} : (", h, k + 4)
    return None


_REGION_OP = regex.compile(
    r'([ \t]*)\(([^()]*)\) = "([^"]+)"(?: \[id:(\d+)\])? \(([^()=]*)\) \{(.*)\} -> (.*?) \{[ \t]*'
)
_CLOSE = regex.compile(r"[ \t]*\}[ \t]*")
_ELSE = regex.compile(r"[ \t]*\} else \{[ \t]*")
_TRIVIA = regex.compile(r"[ \t]*(//.*)?")
_NON_TRIVIA = regex.compile(r"^[ \t]*(?!//)\S", regex.M)
