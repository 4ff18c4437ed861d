"""Op lines of the PIR text: the regular expressions that read them (the whole line, its head of
value names, region headers, closing lines, trivia), :func:`op_match`, which reads a line's
parts without the regex's backtracking, and :func:`tail_spans`, where its tail splits (attributes,
input types, output types: what the parser reads and the printer copies, :func:`attr_source`)."""

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
    as the greedy groups would (:func:`tail_spans`)."""
    if end is None:
        end = len(text)
    m = _OP_HEAD.match(text, pos, end)
    return None if m is None else op_tail(text, m, end)


def op_tail(text: str, m: re.Match, end: int) -> tuple | None:
    """:func:`op_match` of a line whose head ``m`` read (up to ``end``)."""
    h = m.end()
    s = tail_spans(text, h, end)
    if s is None:
        return None
    k, j, a = s
    return (*m.groups(), text[h:k], text[k + 5:j], None if a < 0 else text[a:end].rstrip(" \t"))


def tail_spans(text: str, h: int, end: int) -> tuple[int, int, int] | None:
    """Where the tail of an op line (from ``h``, after its head's ``{``, up to ``end``) splits, as
    the greedy groups of ``_OP`` split it: ``(k, j, a)`` with the attributes ``text[h:k]`` (``k``:
    the ``} : (`` after them), the input types ``text[k + 5:j]`` (``j``: the ``) ->`` after them)
    and the output types from ``a`` (-1: none printed); None where the tail is of no such form.
    The last ``} : (`` and the last ``) ->`` after it are tried first: almost always the ones."""
    k = text.rfind("} : (", h, end)
    while k >= 0:
        j = text.rfind(") ->", k + 5, end)
        while j >= 0:
            a = j + 4
            if a == end:
                return k, j, -1
            c = text[a]
            if c == " ":
                return k, j, a + 1
            if not text[a:end].strip(" \t"):
                return k, j, -1
            j = text.rfind(") ->", k + 5, j + 3)
        k = text.rfind("} : (", h, k + 4)
    return None


def attr_source(src: str) -> str:
    """The attribute text (inside the braces) of an op line the fast path read (``op_match(src)[5]``,
    without slicing its types): what the printer copies and an unread op's attributes are read from.
    Its head matched ``_OP_HEAD``, so it is found without the regex (~5,000 machine instructions
    a call): the results hold no ')' (the first one closes them, before ``= "``), the name no
    quote, the operands no ')' (the first after the name's closing quote closes them, before ``{``)."""
    q = src.find('"', src.find(') = "') + 5)
    h = src.find(")", q + 1) + 3
    return src[h:tail_spans(src, h, len(src))[0]]  # type: ignore[index]


_REGION_OP = regex.compile(
    r'([ \t]*)\(([^()]*)\) = "([^"]+)"(?: \[id:(\d+)\])? \(([^()=]*)\) \{(.*)\} -> (.*?) \{[ \t]*'
)
_CLOSE = regex.compile(r"[ \t]*\}[ \t]*")
_ELSE = regex.compile(r"[ \t]*\} else \{[ \t]*")
_TRIVIA = regex.compile(r"[ \t]*(//.*)?")
_NON_TRIVIA = regex.compile(r"^[ \t]*(?!//)\S", regex.M)
